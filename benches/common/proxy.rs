//! A loopback TCP proxy in front of PostgreSQL that counts what the client asks: round trips
//! (each time the client speaks again after the server has answered), protocol-level requests
//! (`Sync` closing an extended-protocol batch, or a simple `Query`), and the text of every
//! statement the client parses, so a benchmark can use the handler's exact SQL.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy has seen since the last [`Proxy::reset`].
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Seen {
    /// Client turns: writes that follow an answer from the server.
    pub round_trips: u64,
    /// `Sync` messages plus simple `Query` messages: the requests that each wait for a
    /// `ReadyForQuery`.
    pub requests: u64,
    /// Statement texts in first-seen order (extended-protocol `Parse` and simple `Query`).
    pub statements: Vec<String>,
}

#[derive(Default)]
struct Counters {
    round_trips: AtomicU64,
    requests: AtomicU64,
    statements: Mutex<Vec<String>>,
}

/// A running proxy; it stops with the runtime.
pub struct Proxy {
    /// The port clients connect to (127.0.0.1).
    pub port: u16,
    counters: Arc<Counters>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards each connection to `upstream` on 127.0.0.1.
    pub async fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let counters = Arc::new(Counters::default());
        let shared = counters.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(forward(client, upstream, shared.clone()));
            }
        });
        Proxy { port, counters }
    }

    /// Forgets everything counted so far.
    pub fn reset(&self) {
        self.counters.round_trips.store(0, Ordering::SeqCst);
        self.counters.requests.store(0, Ordering::SeqCst);
        self.counters.statements.lock().expect("lock").clear();
    }

    /// What was counted since the last reset.
    pub fn seen(&self) -> Seen {
        Seen {
            round_trips: self.counters.round_trips.load(Ordering::SeqCst),
            requests: self.counters.requests.load(Ordering::SeqCst),
            statements: self.counters.statements.lock().expect("lock").clone(),
        }
    }
}

async fn forward(client: TcpStream, upstream: u16, counters: Arc<Counters>) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    // Set when the server has sent something since the client last wrote.
    let answered = Arc::new(AtomicBool::new(true));
    let answered_up = answered.clone();
    let up = async move {
        let mut parser = Frontend::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if answered_up.swap(false, Ordering::SeqCst) {
                counters.round_trips.fetch_add(1, Ordering::SeqCst);
            }
            parser.feed(&buf[..n], &counters);
            if server_tx.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_tx.shutdown().await;
    };
    let down = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match server_rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            // Marked before forwarding, so the client cannot have reacted to this answer yet.
            answered.store(true, Ordering::SeqCst);
            if client_tx.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = client_tx.shutdown().await;
    };
    tokio::join!(up, down);
}

/// Splits the client's byte stream into protocol messages.
#[derive(Default)]
struct Frontend {
    buf: Vec<u8>,
    started: bool,
}

/// Codes of the untyped messages a client may send before its startup message.
const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;

impl Frontend {
    fn feed(&mut self, bytes: &[u8], counters: &Counters) {
        self.buf.extend_from_slice(bytes);
        loop {
            if !self.started {
                // Untyped: Int32 length (including itself), Int32 code, ...
                let Some(len) = be32(&self.buf, 0) else {
                    return;
                };
                let len = len as usize;
                if self.buf.len() < len {
                    return;
                }
                let code = be32(&self.buf, 4).unwrap_or(0);
                self.started = code != SSL_REQUEST && code != GSSENC_REQUEST;
                self.buf.drain(..len);
                continue;
            }
            // Typed: Byte1 type, Int32 length (including itself, not the type), body.
            let Some(len) = be32(&self.buf, 1) else {
                return;
            };
            let total = 1 + len as usize;
            if self.buf.len() < total {
                return;
            }
            let kind = self.buf[0];
            let body = &self.buf[5..total];
            match kind {
                b'S' => {
                    counters.requests.fetch_add(1, Ordering::SeqCst);
                }
                b'Q' => {
                    counters.requests.fetch_add(1, Ordering::SeqCst);
                    record(counters, cstr(body, 0));
                }
                b'P' => {
                    // Parse: statement name, then the query text.
                    let name_end = body.iter().position(|&b| b == 0).unwrap_or(body.len());
                    record(counters, cstr(body, name_end + 1));
                }
                _ => {}
            }
            self.buf.drain(..total);
        }
    }
}

fn record(counters: &Counters, text: String) {
    let mut seen = counters.statements.lock().expect("lock");
    if !seen.contains(&text) {
        seen.push(text);
    }
}

fn be32(buf: &[u8], at: usize) -> Option<u32> {
    let b = buf.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn cstr(buf: &[u8], from: usize) -> String {
    let rest = buf.get(from..).unwrap_or_default();
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end]).into_owned()
}
