//! A loopback HTTP/1.1 endpoint for the tests that call another service over HTTP (the forward
//! processor, HTTP destinations): it records every call and answers a fixed status.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

/// One call the endpoint received: its headers (lower-case names) and body.
#[derive(Debug, Clone)]
pub struct HttpCall {
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

/// Starts an endpoint on 127.0.0.1 that answers every call with `status`: its URL (path
/// `/hooks`) and the calls it received, in order.
pub async fn start(status: u16) -> (String, Arc<Mutex<Vec<HttpCall>>>) {
    start_with(status, &[]).await
}

/// [`start`], answering with `headers` too.
pub async fn start_with(
    status: u16,
    headers: &[(&str, &str)],
) -> (String, Arc<Mutex<Vec<HttpCall>>>) {
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks", listener.local_addr().unwrap());
    let calls = Arc::new(Mutex::new(Vec::new()));
    let recorded = calls.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let calls = recorded.clone();
            let extra = extra.clone();
            tokio::spawn(async move {
                while let Some((head, body)) = read_http(&mut sock).await {
                    let mut headers = http::HeaderMap::new();
                    for line in head.lines().skip(1) {
                        if let Some((k, v)) = line.split_once(':') {
                            headers.insert(
                                http::HeaderName::from_bytes(k.trim().to_lowercase().as_bytes())
                                    .unwrap(),
                                http::HeaderValue::from_str(v.trim()).unwrap(),
                            );
                        }
                    }
                    calls.lock().await.push(HttpCall { headers, body });
                    let reply = format!("HTTP/1.1 {status} X\r\n{extra}content-length: 0\r\n\r\n");
                    if sock.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, calls)
}

/// Reads one HTTP/1.1 message (head and a `content-length` body); `None` at the end of the
/// connection.
pub async fn read_http(sock: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let body_start = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = sock.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..body_start - 4]).to_string();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < body_start + len {
        let n = sock.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((head, buf[body_start..body_start + len].to_vec()))
}
