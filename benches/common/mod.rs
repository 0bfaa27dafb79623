//! Pieces the benchmark harnesses share: the deliveries they send (API Gateway HTTP API events
//! carrying GitHub-signed bodies), CPU accounting read from `/proc`, latency percentiles, and the
//! results directory.

#![allow(dead_code)]

pub mod callgrind;
pub mod proxy;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hmac::Mac as _;
use sha2::{Digest as _, Sha256};

/// The key the benchmark deliveries are signed with: the first of the two GitHub secrets in
/// `env.local.json`, so verification computes one HMAC per delivery, as with a single secret.
pub const GITHUB_KEY: &str = "hookclaim-github-next-secret";

/// Size of every delivery body, in bytes (a small real GitHub or Stripe event is 1 to 8 KB).
pub const BODY_BYTES: usize = 1024;

/// Ids of the rows that duplicate runs redeliver: `DUP_BASE + 1 ..= DUP_BASE + DUP_COUNT`. Same
/// length (19 digits) as the random ids of new deliveries.
pub const DUP_BASE: u64 = 1_000_000_000_000_000_000;
/// How many distinct deliveries the duplicate runs pick from.
pub const DUP_COUNT: u64 = 10_000;

/// A 63-bit random delivery id, in decimal: new for all practical purposes.
pub fn new_id() -> u64 {
    fastrand::u64(1..i64::MAX as u64)
}

/// A random id from the duplicate set.
pub fn dup_id() -> u64 {
    DUP_BASE + fastrand::u64(1..=DUP_COUNT)
}

/// A JSON body of exactly [`BODY_BYTES`] bytes with `order_id` where the licence example finds it.
pub fn body(order_id: u64) -> String {
    let head = format!(
        r#"{{"action":"completed","order_id":"{order_id}","repository":{{"full_name":"hookclaim/bench"}},"padding":""#
    );
    let tail = r#""}"#;
    let pad = BODY_BYTES.saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(pad))
}

/// `X-Hub-Signature-256` for `body`.
pub fn signature(body: &[u8]) -> String {
    let mut mac =
        hmac::Hmac::<Sha256>::new_from_slice(GITHUB_KEY.as_bytes()).expect("any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The API Gateway HTTP API (payload format 2.0) event for GitHub delivery `id` whose body names
/// order `id`, as the Lambda runtime hands it to the function: the bytes `lambda_http` parses.
pub fn github_event(id: u64) -> String {
    github_event_with_body(id, id)
}

/// [`github_event`] for delivery `id` with the body of order `order_id`.
pub fn github_event_with_body(id: u64, order_id: u64) -> String {
    let body = body(order_id);
    let sig = signature(body.as_bytes());
    let len = body.len();
    let body = serde_json::to_string(&body).expect("a string serialises");
    format!(
        r#"{{"version":"2.0","routeKey":"POST /webhooks/{{source}}","rawPath":"/webhooks/github","rawQueryString":"","headers":{{"accept":"*/*","content-length":"{len}","content-type":"application/json","host":"abc.execute-api.us-east-1.amazonaws.com","user-agent":"GitHub-Hookshot/bench","x-amzn-trace-id":"Root=1-67750000-0123456789abcdef01234567","x-forwarded-for":"192.0.2.10","x-forwarded-port":"443","x-forwarded-proto":"https","x-github-delivery":"{id}","x-github-event":"push","x-github-hook-id":"1","x-hub-signature-256":"{sig}"}},"requestContext":{{"accountId":"123456789012","apiId":"abc","domainName":"abc.execute-api.us-east-1.amazonaws.com","domainPrefix":"abc","http":{{"method":"POST","path":"/webhooks/github","protocol":"HTTP/1.1","sourceIp":"192.0.2.10","userAgent":"GitHub-Hookshot/bench"}},"requestId":"r{id}","routeKey":"POST /webhooks/{{source}}","stage":"$default","time":"01/Jan/2026:00:00:00 +0000","timeEpoch":1767225600000}},"pathParameters":{{"source":"github"}},"body":{body},"isBase64Encoded":false}}"#
    )
}

/// The headers the handler keeps with a GitHub delivery, as the JSON it stores (for pgbench).
pub fn kept_headers_json(id: u64) -> String {
    let body = body(id);
    serde_json::json!({
        "content-type": "application/json",
        "user-agent": "GitHub-Hookshot/bench",
        "x-github-delivery": id.to_string(),
        "x-github-event": "push",
        "x-hub-signature-256": signature(body.as_bytes()),
    })
    .to_string()
}

/// The kept headers of GitHub delivery `id`, as the handler keeps them.
pub fn kept_headers(id: u64) -> std::collections::BTreeMap<String, String> {
    serde_json::from_str(&kept_headers_json(id)).expect("kept headers are a map of strings")
}

/// GitHub delivery `id` with `body` (hashed to `sha`) and `headers`, as the handler claims it:
/// its id from the header, event type push, the key kept longer.
pub fn github_delivery<'a>(
    id: &'a str,
    body: &'a [u8],
    sha: &'a [u8],
    headers: &'a std::collections::BTreeMap<String, String>,
) -> hookclaim::store::NewDelivery<'a> {
    hookclaim::store::NewDelivery {
        source: "github",
        delivery_id: id,
        id_origin: hookclaim::verify::IdOrigin::Header,
        event_type: Some("push"),
        payload: body,
        payload_sha256: sha,
        headers,
        long_key_retention: true,
    }
}

/// The claimant of every benchmark claim by `owner`: a 90 s lease, 8 attempts.
pub fn claimant(owner: &str) -> hookclaim::store::Claimant<'_> {
    hookclaim::store::Claimant {
        owner,
        lease: Duration::from_secs(90),
        max_attempts: 8,
    }
}

/// The rest of a claim as the handler binds it with the claim of GitHub delivery 1 by `owner`
/// ([`github_delivery`], [`claimant`]): store-only when `finish_now`.
pub fn new_row(finish_now: bool, owner: &str) -> String {
    let headers = kept_headers(1);
    let body = body(1);
    let sha = Sha256::digest(body.as_bytes());
    let delivery = github_delivery("1", body.as_bytes(), &sha, &headers);
    hookclaim::store::new_row_literal(&delivery, claimant(owner), finish_now)
}

/// `\x…` hex text of SHA-256 of `bytes` (bytea input syntax).
pub fn sha256_bytea(bytes: &[u8]) -> String {
    format!("\\x{}", hex::encode(Sha256::digest(bytes)))
}

/// Latency summary of one set of samples.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Latency {
    /// Samples.
    pub n: usize,
    /// Median, microseconds.
    pub p50_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
    /// Largest, microseconds.
    pub max_us: f64,
    /// Mean, microseconds.
    pub mean_us: f64,
}

/// Summarises latencies given in nanoseconds (nearest-rank percentiles).
pub fn latency(mut ns: Vec<u64>) -> Latency {
    ns.sort_unstable();
    let n = ns.len();
    let rank = |p: f64| {
        if n == 0 {
            return 0.0;
        }
        let i = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
        ns[i] as f64 / 1e3
    };
    Latency {
        n,
        p50_us: rank(0.50),
        p99_us: rank(0.99),
        max_us: ns.last().map_or(0.0, |&v| v as f64 / 1e3),
        mean_us: if n == 0 {
            0.0
        } else {
            ns.iter().sum::<u64>() as f64 / n as f64 / 1e3
        },
    }
}

/// Linux reports process CPU times in clock ticks of `USER_HZ`, which is 100 on every
/// architecture Linux supports today.
const TICKS_PER_SEC: f64 = 100.0;

/// Fields of `/proc/<pid>/stat` after the command name: index 0 is field 3 (`state`).
fn stat_fields(pid: &str) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    Some(
        rest.split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

const PPID: usize = 1;
const UTIME: usize = 11;
const STIME: usize = 12;
const CUTIME: usize = 13;
const CSTIME: usize = 14;

/// CPU seconds used so far by: this process, its reaped children (pgbench runs), the PostgreSQL
/// cluster (the postmaster, its live children and those it reaped), and the whole machine.
#[derive(Debug, Clone, Copy)]
pub struct CpuSnap {
    at: Instant,
    this: f64,
    children: f64,
    server: f64,
    machine_busy: f64,
    machine_total: f64,
}

impl CpuSnap {
    /// Reads the counters now. `postmaster` is the cluster's postmaster pid.
    pub fn take(postmaster: u32) -> CpuSnap {
        let me = stat_fields("self").unwrap_or_default();
        let get = |f: &[u64], i: usize| f.get(i).copied().unwrap_or(0) as f64 / TICKS_PER_SEC;
        let pm = postmaster.to_string();
        let mut server = stat_fields(&pm)
            .map(|f| get(&f, UTIME) + get(&f, STIME) + get(&f, CUTIME) + get(&f, CSTIME))
            .unwrap_or(0.0);
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for entry in dir.flatten() {
                let name = entry.file_name();
                let Some(pid) = name
                    .to_str()
                    .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
                else {
                    continue;
                };
                if let Some(f) = stat_fields(pid) {
                    if f.get(PPID).copied() == Some(u64::from(postmaster)) {
                        server += get(&f, UTIME) + get(&f, STIME);
                    }
                }
            }
        }
        let (machine_busy, machine_total) = machine_cpu();
        CpuSnap {
            at: Instant::now(),
            this: get(&me, UTIME) + get(&me, STIME),
            children: get(&me, CUTIME) + get(&me, CSTIME),
            server,
            machine_busy,
            machine_total,
        }
    }

    /// What was used between `self` and `later`, as shares of one core (1.0 = one core busy).
    pub fn until(&self, later: &CpuSnap) -> CpuUse {
        let wall = later.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let total = (later.machine_total - self.machine_total).max(1e-9);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        CpuUse {
            wall_s: wall,
            bench_process: (later.this - self.this) / wall,
            pgbench: (later.children - self.children) / wall,
            server: (later.server - self.server) / wall,
            machine: (later.machine_busy - self.machine_busy) / total * cores,
        }
    }
}

/// The processes whose parent is `ppid`.
pub fn children_of(ppid: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if stat_fields(&pid.to_string()).and_then(|f| f.get(PPID).copied()) == Some(u64::from(ppid))
        {
            pids.push(pid);
        }
    }
    pids
}

/// Restricts every thread of `pid` to the CPUs in `cpus` (`taskset -a -p -c`); processes and
/// threads it starts later inherit that.
pub fn pin(pid: u32, cpus: &str) {
    let out = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &pid.to_string()])
        .output()
        .expect("run taskset (util-linux)");
    assert!(
        out.status.success(),
        "taskset {cpus} {pid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// CPU used over an interval, in cores (1.0 = one core fully busy; this machine has `nproc`).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CpuUse {
    /// Length of the interval.
    pub wall_s: f64,
    /// The benchmark process: the simulated execution environments (and their event sender).
    pub bench_process: f64,
    /// pgbench processes that ended in the interval.
    pub pgbench: f64,
    /// The PostgreSQL cluster.
    pub server: f64,
    /// Everything on the machine, including other users' work.
    pub machine: f64,
}

/// Busy and total jiffies of all CPUs, from `/proc/stat`.
fn machine_cpu() -> (f64, f64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return (0.0, 0.0);
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0.0))
        .collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0.0);
    // user nice system idle iowait irq softirq steal
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    (busy, busy + at(3) + at(4))
}

/// The postmaster of the cluster `client` is connected to (the parent of its backend).
pub async fn postmaster_pid(client: &tokio_postgres::Client) -> u32 {
    let backend: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("backend pid")
        .get(0);
    let f = stat_fields(&backend.to_string()).expect("backend is a local process");
    f[PPID] as u32
}

/// Where results go: `$HOOKCLAIM_BENCH_OUT`, or `target/bench`.
pub fn out_dir() -> PathBuf {
    let dir = std::env::var_os("HOOKCLAIM_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench")));
    std::fs::create_dir_all(&dir).expect("create the results directory");
    dir
}

/// Writes `value` as `<out_dir>/<name>.json`.
pub fn write_json(name: &str, value: &serde_json::Value) {
    let path = out_dir().join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(value).expect("results serialise");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    eprintln!("wrote {}", path.display());
}

/// A number from the environment, or `default`.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Points this process's stdout at /dev/null: the handler writes one JSON log line per delivery
/// there (as in Lambda, where stdout goes to the log agent), and a benchmark of millions of
/// deliveries must not keep them. Progress and results go to stderr and files.
pub fn silence_stdout() {
    use std::os::fd::AsRawFd as _;
    extern "C" {
        fn dup2(old: i32, new: i32) -> i32;
    }
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("open /dev/null");
    // SAFETY: dup2 on two valid descriptors; fd 1 is replaced atomically.
    let rc = unsafe { dup2(null.as_raw_fd(), 1) };
    assert!(rc == 1, "cannot redirect stdout");
}

/// Seconds as a `Duration`, for settings read from the environment.
pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// The directory of the PostgreSQL client tools (pgbench): next to `initdb` on PATH, or the
/// newest `/usr/lib/postgresql/*/bin`.
pub fn pg_tool(tool: &str) -> PathBuf {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(tool);
            if candidate.exists() {
                return candidate;
            }
        }
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let p = e.path().join("bin").join(tool);
            p.exists().then_some((v, p))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, p)| p)
        .unwrap_or_else(|| panic!("{tool} not found: install the PostgreSQL server package"))
}
