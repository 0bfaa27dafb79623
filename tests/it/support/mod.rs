//! Test harness: a throwaway PostgreSQL started from the local server binaries, a fresh
//! database per test, and helpers to build the handler over it.
//!
//! The server runs as the `postgres` user when the tests run as root (initdb refuses root).
//! `HOOKCLAIM_PG_BIN` names the server's bin directory (another major than the system's: how
//! `scripts/test` runs the ledger's tests on each supported version). If
//! `HOOKCLAIM_TEST_DATABASE_URL` names a server, tests create their databases there instead. If
//! neither works, the test fails loudly with the install hint: no test ever skips.

#![allow(dead_code)]

pub mod emulator;
pub mod endpoint;
pub mod ledger;
pub mod licences;
pub mod moto;
pub mod pgbouncer;
pub mod rie;
pub mod scripted;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hookclaim_verify::{Outgoing, Signed};
use tokio_postgres::{Client, NoTls};

/// Variable naming an existing server (admin URL) to use instead of starting one.
pub const TEST_URL_VAR: &str = "HOOKCLAIM_TEST_DATABASE_URL";

/// Variable naming the directory of the initdb, pg_ctl and postgres to start, instead of the
/// ones on PATH or under /usr/lib/postgresql.
pub const PG_BIN_VAR: &str = "HOOKCLAIM_PG_BIN";

const INSTALL_HINT: &str = "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found \
on PATH or under /usr/lib/postgresql/*/bin. Install them (Debian/Ubuntu: `apt-get install \
postgresql`), or point HOOKCLAIM_TEST_DATABASE_URL at a server the tests may create databases on.";

/// A PostgreSQL server the harness started, with its own data directory and port.
pub struct PgServer {
    bin: PathBuf,
    data: PathBuf,
    /// TCP port on 127.0.0.1.
    pub port: u16,
    as_postgres: bool,
    /// What `pg_ctl` starts instead of the `postgres` binary: a wrapper that runs it (under a
    /// profiler, say), or `None` for the binary itself.
    postgres: Option<PathBuf>,
}

impl PgServer {
    /// Starts a new private server (initdb + start). Panics with the install hint on failure.
    pub fn start() -> PgServer {
        Self::start_with(&[])
    }

    /// Starts a new private server with extra `-c name=value` settings.
    pub fn start_with(settings: &[&str]) -> PgServer {
        Self::start_as(settings, None)
    }

    /// Starts a new private server whose `postgres` is `wrapper`, an executable that runs
    /// [`PgServer::postgres_binary`] with the arguments it is given (under callgrind, for one).
    pub fn start_wrapped(settings: &[&str], wrapper: &Path) -> PgServer {
        Self::start_as(settings, Some(wrapper.to_path_buf()))
    }

    /// The server binary this harness runs.
    pub fn postgres_binary() -> PathBuf {
        find_bin_dir()
            .unwrap_or_else(|| panic!("{INSTALL_HINT}"))
            .join("postgres")
    }

    fn start_as(settings: &[&str], postgres: Option<PathBuf>) -> PgServer {
        let bin = find_bin_dir().unwrap_or_else(|| panic!("{INSTALL_HINT}"));
        let as_postgres = is_root();
        let data = std::env::temp_dir().join(format!(
            "hookclaim-pg-{}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&data).expect("create data dir");
        if as_postgres {
            run(
                Command::new("chown").arg("postgres:").arg(&data),
                "chown data dir",
            );
        }
        let server = PgServer {
            bin,
            data,
            port: free_port(),
            as_postgres,
            postgres,
        };
        let mut initdb = server.command("initdb");
        initdb
            .arg("-D")
            .arg(server.pgdata())
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .arg("--no-instructions");
        run(&mut initdb, "initdb");
        // fsync off is safe for a throwaway cluster whose machine does not crash; synchronous
        // commit stays on, because the fault tests stop the server in immediate mode and a
        // commit that was answered must survive that.
        let mut conf = String::from(
            "listen_addresses = '127.0.0.1'\nmax_connections = 300\nfsync = off\n\
             full_page_writes = off\nshared_buffers = 128MB\n\
             shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = all\n\
             log_min_messages = warning\nunix_socket_directories = ''\n",
        );
        for s in settings {
            conf.push_str(s);
            conf.push('\n');
        }
        conf.push_str(&format!("port = {}\n", server.port));
        let conf_path = server.pgdata().join("postgresql.auto.conf");
        std::fs::write(&conf_path, conf).expect("write postgresql.auto.conf");
        if as_postgres {
            run(
                Command::new("chown").arg("postgres:").arg(&conf_path),
                "chown conf",
            );
        }
        server.start_existing();
        server
    }

    fn pgdata(&self) -> PathBuf {
        self.data.join("pgdata")
    }

    fn command(&self, tool: &str) -> Command {
        let path = self.bin.join(tool);
        let mut c = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            // The tools look up their own path from the working directory, which the postgres
            // user may not be able to enter (a checkout under /root or another private directory).
            c.current_dir("/");
            c
        } else {
            Command::new(path)
        };
        // A server build unpacked outside the system's library path (HOOKCLAIM_PG_BIN) keeps its
        // libraries beside its bin directory.
        let lib = self.bin.join("../lib");
        if std::env::var_os(PG_BIN_VAR).is_some() && lib.is_dir() {
            let mut paths = vec![lib];
            if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
                paths.extend(std::env::split_paths(&old));
            }
            c.env(
                "LD_LIBRARY_PATH",
                std::env::join_paths(paths).expect("library path"),
            );
        }
        c
    }

    /// Starts the server on its existing data directory (after [`PgServer::stop_immediate`]).
    pub fn start_existing(&self) {
        let mut c = self.command("pg_ctl");
        c.arg("-D")
            .arg(self.pgdata())
            .arg("-l")
            .arg(self.data.join("server.log"));
        match &self.postgres {
            // A wrapped server (a profiler) starts much more slowly.
            Some(wrapper) => c.arg("-p").arg(wrapper).args(["-w", "-t", "300", "start"]),
            None => c.args(["-w", "-t", "30", "start"]),
        };
        run(&mut c, "pg_ctl start");
    }

    /// Stops the server abruptly, as a crash or failover would (`-m immediate`).
    pub fn stop_immediate(&self) {
        let mut c = self.command("pg_ctl");
        c.arg("-D")
            .arg(self.pgdata())
            .args(["-m", "immediate", "-w", "stop"]);
        run(&mut c, "pg_ctl stop");
    }

    /// URL of database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The server log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data.join("server.log")).unwrap_or_default()
    }
}

impl PgServer {
    /// Stops the server (if running) and deletes its data, ignoring failures: cleanup only.
    fn discard(&self) {
        self.stop_quietly();
        let _ = std::fs::remove_dir_all(&self.data);
    }

    /// Stops the server (if running), ignoring failures.
    fn stop_quietly(&self) {
        let mut c = self.command("pg_ctl");
        c.arg("-D")
            .arg(self.pgdata())
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = c.status();
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.discard();
    }
}

fn run(c: &mut Command, what: &str) {
    run_or_explain(c, what, INSTALL_HINT);
}

/// Runs `c` and panics unless it succeeds, with its output and `hint` on how to install it.
pub fn run_or_explain(c: &mut Command, what: &str, hint: &str) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {c:?}: {e}\n{hint}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether this process runs as root (the server then runs as the `postgres` user).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The directory holding initdb, pg_ctl and postgres: `HOOKCLAIM_PG_BIN` when it is set (and
/// then only it: a wrong directory is a failure, not a quiet fall back to another version), else
/// PATH, then the newest /usr/lib/postgresql/*/bin.
fn find_bin_dir() -> Option<PathBuf> {
    let has_all = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|t| dir.join(t).exists())
    };
    if let Some(dir) = std::env::var_os(PG_BIN_VAR).filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(
            has_all(&dir),
            "{PG_BIN_VAR}={} holds no initdb, pg_ctl and postgres",
            dir.display()
        );
        return Some(dir);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_all(&dir) {
                // Resolve symlinks so the server finds its share/ and lib/ directories.
                let real = std::fs::canonicalize(dir.join("initdb")).ok()?;
                return real.parent().map(Path::to_path_buf);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, dir)| has_all(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

extern "C" {
    fn atexit(cb: extern "C" fn()) -> std::os::raw::c_int;
}

static SHARED: OnceLock<Shared> = OnceLock::new();

enum Shared {
    Started(PgServer),
    External(String),
}

extern "C" fn stop_shared() {
    if let Some(Shared::Started(server)) = SHARED.get() {
        server.stop_quietly();
        // The shared server's data holds every test's database, tens of thousands of files:
        // deleting them can take longer than the tests did (a disk with online discard), so the
        // test binary's exit does not wait for it and a detached `rm` finishes it.
        let removed = Command::new("rm")
            .arg("-rf")
            .arg(&server.data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if removed.is_err() {
            let _ = std::fs::remove_dir_all(&server.data);
        }
    }
}

fn shared() -> &'static Shared {
    SHARED.get_or_init(|| match std::env::var(TEST_URL_VAR) {
        Ok(url) if !url.is_empty() => Shared::External(url),
        _ => {
            let server = PgServer::start();
            // The test harness exits through exit(), which runs atexit handlers: the shared
            // server stops with the test binary.
            unsafe {
                atexit(stop_shared);
            }
            Shared::Started(server)
        }
    })
}

/// URL of the admin database on the shared server.
pub fn admin_url() -> String {
    match shared() {
        Shared::Started(s) => s.url("postgres"),
        Shared::External(url) => url.clone(),
    }
}

/// Replaces the database name in a postgres:// URL.
fn with_db(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let slash = base
        .rfind('/')
        .filter(|&i| i > "postgres://".len())
        .unwrap_or(base.len());
    let mut out = format!("{}/{db}", &base[..slash]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// Connects and spawns the connection driver.
pub async fn connect(url: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// The one count that query `sql` returns.
pub async fn count(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// Terminates every other connection to `c`'s database, as a failover or an idle timeout would;
/// returns how many there were.
pub async fn terminate_other_backends(c: &Client) -> i64 {
    count(
        c,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .await
}

/// A fresh, empty database on the shared server.
pub struct TestDb {
    /// Its URL.
    pub url: String,
    /// Its name.
    pub name: String,
}

impl TestDb {
    /// Creates a fresh database with nothing in it.
    pub async fn empty() -> TestDb {
        let admin_url = tokio::task::spawn_blocking(admin_url)
            .await
            .expect("harness");
        let name = format!("t_{:016x}", fastrand::u64(..));
        let admin = connect(&admin_url).await;
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create test database");
        TestDb {
            url: with_db(&admin_url, &name),
            name,
        }
    }

    /// Creates a fresh database with hookclaim's schema applied.
    pub async fn migrated() -> TestDb {
        let db = Self::empty().await;
        let mut c = db.client().await;
        hookclaim::schema::migrate(&mut c).await.expect("migrate");
        db
    }

    /// A new connection to it.
    pub async fn client(&self) -> Client {
        connect(&self.url).await
    }
}

/// Polls `f` until it returns true or `limit` passes.
pub async fn eventually(limit: Duration, mut f: impl AsyncFnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The local configuration the sample events are signed for (`env.local.json`): the common
/// parameters plus the webhook function's own.
pub fn local_env() -> std::collections::BTreeMap<String, String> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/env.local.json"))
        .expect("read env.local.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("env.local.json is JSON");
    let mut env = std::collections::BTreeMap::new();
    for section in ["Parameters", "WebhookFunction"] {
        if let Some(obj) = v[section].as_object() {
            for (k, val) in obj {
                env.insert(k.clone(), val.as_str().unwrap_or_default().to_string());
            }
        }
    }
    env
}

/// The local configuration over database `url`, with `overrides` applied.
pub fn config(url: &str, overrides: &[(&str, &str)]) -> hookclaim::config::Config {
    let mut env = local_env();
    env.insert("DATABASE_URL".into(), url.into());
    for (k, v) in overrides {
        env.insert(k.to_string(), v.to_string());
    }
    hookclaim::config::Config::from_lookup(|k| env.get(k).cloned()).expect("test configuration")
}

/// The time the committed sample events were signed at (see scripts/events.py).
pub const EVENTS_SIGNED_AT: u64 = 1_767_225_600;

/// A clock 90 s after the samples were signed: originals and their redeliveries (signed 60 s
/// later) are both within tolerance.
pub fn events_clock() -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_secs(EVENTS_SIGNED_AT + 90)
}

/// A webhook handler over `url` (one simulated execution environment).
pub async fn webhook<P: hookclaim::processor::Processor>(
    url: &str,
    overrides: &[(&str, &str)],
    processor: P,
) -> hookclaim::webhook::Webhook<P> {
    let config = config(url, overrides);
    hookclaim::Webhook::from_config(&config, processor)
        .await
        .expect("webhook cold start")
        .with_clock(events_clock)
}

/// A retention function over `url` as it cold-starts when deployed (schema and processor setup
/// included), with the local configuration and `overrides`.
pub async fn retention<P: hookclaim::processor::Processor>(
    url: &str,
    overrides: &[(&str, &str)],
    processor: P,
) -> hookclaim::retention::Retention<P> {
    let config = config(url, overrides);
    hookclaim::Retention::from_config(&config, processor)
        .await
        .expect("retention cold start")
}

/// Loads `events/<name>.json` as the runtime would deliver it.
pub fn event(name: &str) -> lambda_http::Request {
    let path = format!("{}/events/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    lambda_http::request::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A response's status and parsed JSON body.
pub fn answer(resp: &lambda_http::Response<lambda_http::Body>) -> (u16, serde_json::Value) {
    let body: &[u8] = resp.body().as_ref();
    let json = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
    (resp.status().as_u16(), json)
}

/// The three event formats the function accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// API Gateway HTTP API, payload format 2.0.
    HttpApiV2,
    /// API Gateway REST API proxy integration (v1).
    RestV1,
    /// Lambda function URL.
    FunctionUrl,
}

/// Builds an event of `format` for `method path` with `headers` and `body`.
pub fn request(
    format: Format,
    method: &str,
    source: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    base64_body: bool,
) -> lambda_http::Request {
    use base64::Engine as _;
    let path = format!("/webhooks/{source}");
    let body_field = if base64_body {
        serde_json::json!(base64::engine::general_purpose::STANDARD.encode(body))
    } else {
        serde_json::json!(String::from_utf8(body.to_vec()).expect("text body"))
    };
    let hdrs: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
        .collect();
    let event = match format {
        Format::HttpApiV2 | Format::FunctionUrl => {
            let url = format == Format::FunctionUrl;
            let mut e = serde_json::json!({
                "version": "2.0",
                "routeKey": if url { "$default".to_string() } else { "POST /webhooks/{source}".to_string() },
                "rawPath": path,
                "rawQueryString": "",
                "headers": hdrs,
                "requestContext": {
                    "accountId": if url { "anonymous" } else { "123456789012" },
                    "apiId": "abc",
                    "domainName": if url { "abc.lambda-url.us-east-1.on.aws" } else { "abc.execute-api.us-east-1.amazonaws.com" },
                    "domainPrefix": "abc",
                    "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                             "sourceIp": "127.0.0.1", "userAgent": "test"},
                    "requestId": "req", "routeKey": "$default", "stage": "$default",
                    "time": "01/Jan/2026:00:00:00 +0000", "timeEpoch": 1767225600000u64
                },
                "body": body_field,
                "isBase64Encoded": base64_body
            });
            if !url {
                e["pathParameters"] = serde_json::json!({"source": source});
            }
            e
        }
        Format::RestV1 => serde_json::json!({
            "resource": "/webhooks/{source}",
            "path": path,
            "httpMethod": method,
            "headers": hdrs,
            "multiValueHeaders": headers.iter().map(|(k, v)| (k.to_string(), serde_json::json!([v]))).collect::<serde_json::Map<_, _>>(),
            "queryStringParameters": null,
            "multiValueQueryStringParameters": null,
            "pathParameters": {"source": source},
            "stageVariables": null,
            "requestContext": {
                "accountId": "123456789012", "resourceId": "r", "stage": "prod",
                "requestId": "req", "identity": {"sourceIp": "127.0.0.1"},
                "resourcePath": "/webhooks/{source}", "httpMethod": method,
                "apiId": "abc", "path": format!("/prod{path}")
            },
            "body": body_field,
            "isBase64Encoded": base64_body
        }),
    };
    lambda_http::request::from_str(&event.to_string()).expect("valid event")
}

/// The GitHub test secret from env.local.json (older of the rotated pair).
pub const GITHUB_SECRET: &str = "hookclaim-github-test-secret";

/// `request` signed as `provider` signs it (a preset's name, or `stripe`, `github`, `standard`)
/// with `secret`, written as the source's secret is configured: hookclaim-verify's signer, whose
/// output its own tests check against the providers' SDKs.
pub fn sign_as(provider: &str, secret: &str, request: &Outgoing<'_>) -> Signed {
    hookclaim_verify::sign_as(provider, secret, request)
        .unwrap_or_else(|e| panic!("sign as {provider}: {e}"))
}

/// `signed`'s headers as [`request`] takes them.
pub fn header_pairs(signed: &Signed) -> Vec<(&str, &str)> {
    signed
        .headers()
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect()
}

/// The value of header `name` that `signed` sends.
fn signed_header(signed: &Signed, name: &str) -> String {
    signed
        .header(name)
        .unwrap_or_else(|| panic!("the signer sends {name}"))
        .to_owned()
}

/// GitHub's headers for delivery `id` (event `push`) of `body`, signed with `secret`.
pub fn github_signed(secret: &str, id: &str, body: &[u8]) -> Signed {
    let request = Outgoing::new(body, EVENTS_SIGNED_AT as i64)
        .header("content-type", "application/json")
        .event_type("push")
        .id(id);
    sign_as("github", secret, &request)
}

/// GitHub's signature header value for `body` under `secret`.
pub fn github_signature(secret: &str, body: &[u8]) -> String {
    // The signature covers the body alone: the id the signer needs is not part of it.
    signed_header(&github_signed(secret, "-", body), "x-hub-signature-256")
}

/// A GitHub-signed request in `format` with delivery id `id`.
pub fn github_request(
    format: Format,
    id: &str,
    body: &[u8],
    base64_body: bool,
) -> lambda_http::Request {
    github_request_with_secret(GITHUB_SECRET, format, id, body, base64_body)
}

/// A GitHub-signed request in `format` with delivery id `id` and a body of its own
/// (`{"delivery": id}`): two deliveries of one sender carry different bodies, and a GitHub
/// source's replay guard answers the same signed body under another id as a duplicate.
pub fn github_delivery(format: Format, id: &str) -> lambda_http::Request {
    let body = serde_json::json!({ "delivery": id }).to_string();
    github_request(format, id, body.as_bytes(), false)
}

/// A GitHub request in `format` with delivery id `id`, signed with `secret`.
pub fn github_request_with_secret(
    secret: &str,
    format: Format,
    id: &str,
    body: &[u8],
    base64_body: bool,
) -> lambda_http::Request {
    let signed = github_signed(secret, id, body);
    request(
        format,
        "POST",
        "github",
        &header_pairs(&signed),
        body,
        base64_body,
    )
}

/// The Stripe test secret from env.local.json.
pub const STRIPE_SECRET: &str = "whsec_hookclaim_stripe_test";

/// Stripe's signature header value for `body` sent at `t` (seconds, signed as written, so a test
/// can send a malformed one), under `secret`.
pub fn stripe_signature(secret: &str, t: impl std::fmt::Display, body: &[u8]) -> String {
    let t = t.to_string();
    let signed = sign_as("stripe", secret, &Outgoing::new(body, 0).timestamp_text(&t));
    signed_header(&signed, "stripe-signature")
}

/// `req` as Lambda invokes it with its deadline `within` from now (the claim's lease is measured
/// from the deadline).
pub fn with_deadline(req: lambda_http::Request, within: Duration) -> lambda_http::Request {
    use lambda_http::RequestExt as _;
    let mut ctx = lambda_runtime::Context::default();
    ctx.deadline = (std::time::SystemTime::now() + within)
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    req.with_lambda_context(ctx)
}

/// Number of rows in the delivery table.
pub async fn delivery_count(c: &Client) -> i64 {
    c.query_one("SELECT count(*) FROM hookclaim_deliveries", &[])
        .await
        .expect("count")
        .get(0)
}

/// (status, attempt, last_error) of one delivery.
pub async fn row(c: &Client, source: &str, id: &str) -> Option<(String, i32, Option<String>)> {
    hookclaim::ledger::state(c, source, id)
        .await
        .expect("read state")
        .map(|s| (s.status, s.attempt, s.last_error))
}
