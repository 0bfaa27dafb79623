//! Test harness: a throwaway PostgreSQL started from the local server binaries, a fresh
//! database per test, and helpers to build the handler over it.
//!
//! The server runs as the `postgres` user when the tests run as root (initdb refuses root). If
//! `HOOKCLAIM_TEST_DATABASE_URL` names a server, tests create their databases there instead. If
//! neither works, the test fails loudly with the install hint: no test ever skips.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls};

/// Variable naming an existing server (admin URL) to use instead of starting one.
pub const TEST_URL_VAR: &str = "HOOKCLAIM_TEST_DATABASE_URL";

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
}

impl PgServer {
    /// Starts a new private server (initdb + start). Panics with the install hint on failure.
    pub fn start() -> PgServer {
        Self::start_with(&[])
    }

    /// Starts a new private server with extra `-c name=value` settings.
    pub fn start_with(settings: &[&str]) -> PgServer {
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
        };
        let mut initdb = server.command("initdb");
        initdb
            .arg("-D")
            .arg(server.pgdata())
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .arg("--no-instructions");
        run(&mut initdb, "initdb");
        let mut conf = String::from(
            "listen_addresses = '127.0.0.1'\nmax_connections = 300\nfsync = off\n\
             synchronous_commit = off\nfull_page_writes = off\nshared_buffers = 128MB\n\
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
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// Starts the server on its existing data directory (after [`PgServer::stop_immediate`]).
    pub fn start_existing(&self) {
        let mut c = self.command("pg_ctl");
        c.arg("-D")
            .arg(self.pgdata())
            .arg("-l")
            .arg(self.data.join("server.log"))
            .args(["-w", "-t", "30", "start"]);
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

impl Drop for PgServer {
    fn drop(&mut self) {
        let mut c = self.command("pg_ctl");
        c.arg("-D")
            .arg(self.pgdata())
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = c.status();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

fn run(c: &mut Command, what: &str) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {c:?}: {e}\n{INSTALL_HINT}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The directory holding initdb, pg_ctl and postgres: PATH first, then the newest
/// /usr/lib/postgresql/*/bin.
fn find_bin_dir() -> Option<PathBuf> {
    let has_all = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|t| dir.join(t).exists())
    };
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
        let mut c = server.command("pg_ctl");
        c.arg("-D")
            .arg(server.pgdata())
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = c.status();
        let _ = std::fs::remove_dir_all(&server.data);
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
fn admin_url() -> String {
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
