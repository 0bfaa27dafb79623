//! Cold start and memory of the release binary, run as Lambda runs it: a process started
//! against a Lambda Runtime API (a small one served here on loopback), a throwaway PostgreSQL
//! (the test harness's) behind it.
//!
//! Measures, for `$HOOKCLAIM_BENCH_BOOTSTRAP` (default `target/lambda/webhook/bootstrap`, the
//! `cargo lambda build --release` output):
//! - time from process start to its first `GET /runtime/invocation/next` (the cold start: config,
//!   secrets, database connect and schema check all happen before it), and to its first answer;
//!   also with the database unreachable, to show what the connect costs, and the time to start
//!   and reap `/bin/true` as the machine's floor;
//! - VmRSS after the cold start, and VmHWM (peak RSS) after 10,000 new deliveries.
//!
//! Results go to `target/bench/coldstart.json`. Run through `scripts/bench`.

#[path = "../tests/it/support/mod.rs"]
mod support;

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

const STARTS: usize = 20;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let bootstrap = std::env::var_os("HOOKCLAIM_BENCH_BOOTSTRAP")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/target/lambda/webhook/bootstrap"
            ))
        });
    assert!(
        bootstrap.exists(),
        "{} is missing: run `cargo lambda build --release` (scripts/bench does)",
        bootstrap.display()
    );
    let deliveries: usize = common::env_or("HOOKCLAIM_BENCH_RSS_DELIVERIES", 10_000);
    let server = support::PgServer::start();
    let admin = support::connect(&server.url("postgres")).await;
    admin
        .batch_execute("CREATE DATABASE cold")
        .await
        .expect("create database");
    let url = server.url("cold");

    // The first start on an empty database applies the migrations; not counted.
    let first = start_once(&bootstrap, &url, true).await;
    eprintln!(
        "first start (migrations applied): next {:.1} ms, answer {:.1} ms",
        first.0, first.1
    );

    let floor = {
        let mut v = Vec::new();
        for _ in 0..STARTS {
            let t = Instant::now();
            let status = tokio::process::Command::new("true")
                .status()
                .await
                .expect("run true");
            assert!(status.success());
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        v
    };

    let mut to_next = Vec::new();
    let mut to_answer = Vec::new();
    for _ in 0..STARTS {
        let (n, a) = start_once(&bootstrap, &url, true).await;
        to_next.push(n);
        to_answer.push(a);
    }
    // Nothing listens on port 1 of loopback: the connect is refused at once, and the function
    // starts anyway (the first delivery would retry).
    let mut no_db = Vec::new();
    for _ in 0..STARTS {
        let (n, _) = start_once(&bootstrap, "postgres://postgres@127.0.0.1:1/cold", false).await;
        no_db.push(n);
    }
    eprintln!(
        "cold start: first GET /next p50 {:.1} ms, first answer p50 {:.1} ms; without a database {:.1} ms; spawn floor {:.1} ms",
        pct(&to_next, 0.5),
        pct(&to_answer, 0.5),
        pct(&no_db, 0.5),
        pct(&floor, 0.5)
    );

    let memory = memory_run(&bootstrap, &url, deliveries).await;
    eprintln!("memory: {memory}");

    let size = std::fs::metadata(&bootstrap).map(|m| m.len()).unwrap_or(0);
    common::write_json(
        "coldstart",
        &json!({
            "binary": bootstrap.display().to_string(),
            "binary_bytes": size,
            "starts": STARTS,
            "first_start_with_migrations_ms": {"to_first_next": first.0, "to_first_answer": first.1},
            "to_first_next_ms": summary(&to_next),
            "to_first_answer_ms": summary(&to_answer),
            "to_first_next_without_database_ms": summary(&no_db),
            "spawn_and_reap_true_ms": summary(&floor),
            "memory": memory,
        }),
    );
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let i = ((p * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[i]
}

fn summary(v: &[f64]) -> Value {
    json!({
        "min": pct(v, 0.0),
        "p50": pct(v, 0.5),
        "p90": pct(v, 0.9),
        "max": pct(v, 1.0),
    })
}

/// The function's environment, as Lambda sets it (JSON logging on), over `database_url`.
fn function_env(api_port: u16, database_url: &str) -> BTreeMap<String, String> {
    let mut env = support::local_env();
    env.insert("DATABASE_URL".into(), database_url.into());
    env.insert("HOOKCLAIM_PROCESSOR".into(), "store".into());
    for (k, v) in [
        ("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{api_port}")),
        ("AWS_LAMBDA_FUNCTION_NAME", "webhook".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128".into()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/webhook".into()),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "bench".into()),
        ("AWS_LAMBDA_LOG_FORMAT", "JSON".into()),
        ("AWS_LAMBDA_LOG_LEVEL", "INFO".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_DEFAULT_REGION", "us-east-1".into()),
        ("_HANDLER", "bootstrap".into()),
        ("TZ", ":UTC".into()),
    ] {
        env.insert(k.into(), v);
    }
    env
}

fn spawn_function(
    bootstrap: &std::path::Path,
    api_port: u16,
    database_url: &str,
) -> tokio::process::Child {
    let log = common::out_dir().join("coldstart-function.log");
    let file = std::fs::File::create(&log).expect("function log");
    tokio::process::Command::new(bootstrap)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(function_env(api_port, database_url))
        .stdout(file.try_clone().expect("log"))
        .stderr(file)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bootstrap.display()))
}

/// Starts the function, serves it one new delivery (when `serve`), and stops it. Returns
/// milliseconds from spawn to its first `GET /next` and to its first answer (NaN without one).
async fn start_once(bootstrap: &std::path::Path, database_url: &str, serve: bool) -> (f64, f64) {
    let api = Api::start(usize::from(serve)).await;
    let started = Instant::now();
    let mut child = spawn_function(bootstrap, api.port, database_url);
    if serve {
        let answered = tokio::time::timeout(Duration::from_secs(30), api.state.done.acquire())
            .await
            .expect("the function answered within 30 s");
        drop(answered);
    } else {
        while api.state.first_next.lock().expect("lock").is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no GET /next within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let _ = child.kill().await;
    let state = &api.state;
    assert_eq!(
        state.bad.load(Ordering::SeqCst),
        0,
        "the function answered badly: {:?}",
        state.problems.lock().expect("lock")
    );
    let at = |m: &Mutex<Option<Instant>>| {
        m.lock()
            .expect("lock")
            .map(|t| t.duration_since(started).as_secs_f64() * 1e3)
            .unwrap_or(f64::NAN)
    };
    (at(&state.first_next), at(&state.first_answer))
}

/// One long-lived function: RSS after the cold start, then peak RSS after `n` deliveries.
async fn memory_run(bootstrap: &std::path::Path, database_url: &str, n: usize) -> Value {
    let api = Api::start(0).await;
    let mut child = spawn_function(bootstrap, api.port, database_url);
    let pid = child.id().expect("pid");
    let waited = Instant::now();
    while api.state.first_next.lock().expect("lock").is_none() {
        assert!(waited.elapsed() < Duration::from_secs(30), "no GET /next");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let cold = status(pid);
    let started = Instant::now();
    api.state.events.add_permits(n);
    let done = tokio::time::timeout(
        Duration::from_secs(300),
        api.state.done.acquire_many(n as u32),
    )
    .await
    .expect("the deliveries finished within 5 minutes");
    drop(done);
    let secs = started.elapsed().as_secs_f64();
    let after = status(pid);
    let _ = child.kill().await;
    json!({
        "after_cold_start": cold,
        "deliveries": n,
        "after_deliveries": after,
        "deliveries_per_s_through_runtime_api": n as f64 / secs,
        "bad_answers": api.state.bad.load(Ordering::SeqCst),
    })
}

/// VmRSS and VmHWM of `pid`, in KiB.
fn status(pid: u32) -> Value {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    json!({"vm_rss_kib": kib("VmRSS:"), "vm_hwm_kib": kib("VmHWM:")})
}

// ---------------------------------------------------------------------------------------------
// A Lambda Runtime API, enough for one function process: GET next (long-polled), POST response
// and POST error. Each served invocation is a new delivery (an API Gateway v2 event).

struct State {
    /// One permit per invocation to hand out.
    events: Semaphore,
    /// One permit per answer received.
    done: Semaphore,
    first_next: Mutex<Option<Instant>>,
    first_answer: Mutex<Option<Instant>>,
    served: AtomicUsize,
    bad: AtomicUsize,
    problems: Mutex<Vec<String>>,
}

struct Api {
    port: u16,
    state: Arc<State>,
}

impl Api {
    async fn start(events: usize) -> Api {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind runtime API");
        let port = listener.local_addr().expect("address").port();
        let state = Arc::new(State {
            events: Semaphore::new(events),
            done: Semaphore::new(0),
            first_next: Mutex::new(None),
            first_answer: Mutex::new(None),
            served: AtomicUsize::new(0),
            bad: AtomicUsize::new(0),
            problems: Mutex::new(Vec::new()),
        });
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let _ = sock.set_nodelay(true);
                tokio::spawn(connection(sock, shared.clone()));
            }
        });
        Api { port, state }
    }
}

async fn connection(mut sock: TcpStream, state: Arc<State>) {
    let mut buf = Vec::new();
    loop {
        let Some((method, path, body)) = read_request(&mut sock, &mut buf).await else {
            return;
        };
        let reply = if method == "GET" && path.ends_with("/runtime/invocation/next") {
            {
                let mut first = state.first_next.lock().expect("lock");
                first.get_or_insert_with(Instant::now);
            }
            let Ok(permit) = state.events.acquire().await else {
                return;
            };
            permit.forget();
            let n = state.served.fetch_add(1, Ordering::SeqCst);
            let event = common::github_event(common::new_id());
            let deadline = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64 + 30_000)
                .unwrap_or(0);
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                 lambda-runtime-aws-request-id: 00000000-0000-4000-8000-{n:012}\r\n\
                 lambda-runtime-deadline-ms: {deadline}\r\n\
                 lambda-runtime-invoked-function-arn: arn:aws:lambda:us-east-1:123456789012:function:webhook\r\n\
                 lambda-runtime-trace-id: Root=1-67750000-0123456789abcdef01234567;Sampled=0\r\n\
                 content-length: {}\r\n\r\n{event}",
                event.len()
            )
        } else if method == "POST" {
            let text = String::from_utf8_lossy(&body);
            let ok = path.ends_with("/response")
                && text.contains("\"statusCode\":200")
                && text.contains("processed");
            if !ok {
                state.bad.fetch_add(1, Ordering::SeqCst);
                state.problems.lock().expect("lock").push(format!(
                    "{path}: {}",
                    text.chars().take(300).collect::<String>()
                ));
            }
            {
                let mut first = state.first_answer.lock().expect("lock");
                first.get_or_insert_with(Instant::now);
            }
            state.done.add_permits(1);
            "HTTP/1.1 202 Accepted\r\ncontent-type: application/json\r\ncontent-length: 16\r\n\r\n{\"status\":\"OK\"}"
                .to_string()
        } else {
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_string()
        };
        if sock.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Reads one HTTP/1.1 request (Content-Length or chunked body) from `sock`, keeping any bytes
/// of the next request in `buf`.
async fn read_request(
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(String, String, Vec<u8>)> {
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i;
        }
        fill(sock, buf).await?;
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    buf.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split_whitespace();
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let mut length = 0usize;
    let mut chunked = false;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let k = k.trim().to_ascii_lowercase();
        if k == "content-length" {
            length = v.trim().parse().ok()?;
        } else if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
            chunked = true;
        }
    }
    let body = if chunked {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = find(buf, b"\r\n") {
                    break i;
                }
                fill(sock, buf).await?;
            };
            let size_text = String::from_utf8_lossy(&buf[..line_end]).to_string();
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            buf.drain(..line_end + 2);
            while buf.len() < size + 2 {
                fill(sock, buf).await?;
            }
            body.extend_from_slice(&buf[..size]);
            buf.drain(..size + 2);
            if size == 0 {
                break;
            }
        }
        body
    } else {
        while buf.len() < length {
            fill(sock, buf).await?;
        }
        buf.drain(..length).collect()
    };
    Some((method, path, body))
}

async fn fill(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 16 * 1024];
    let n = sock.read(&mut chunk).await.ok()?;
    if n == 0 {
        return None;
    }
    buf.extend_from_slice(&chunk[..n]);
    Some(())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
