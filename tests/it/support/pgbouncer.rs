//! A PgBouncer in front of a test server, started by the harness in its own directory with its own
//! ini and userlist, on a loopback port, and stopped when dropped.
//!
//! It runs as the `postgres` user when the tests run as root (PgBouncer refuses root, as initdb
//! does). A missing binary fails the test loudly with the install hint: no test ever skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, is_root};

const INSTALL_HINT: &str = "pgbouncer was not found on PATH or in /usr/sbin. Install it \
(Debian/Ubuntu: `apt-get update && apt-get install -y pgbouncer`); scripts/test installs it when \
it is missing.";

/// How the pooler is set up.
#[derive(Debug, Clone)]
pub struct PoolerSettings {
    /// Server connections per database (`default_pool_size` and `max_db_connections`).
    pub pool_size: u32,
    /// `ignore_startup_parameters`: startup parameters accepted from clients and dropped.
    pub ignore_startup_parameters: Vec<&'static str>,
}

impl PoolerSettings {
    /// `pool_mode = transaction` with `pool_size` server connections per database, and nothing
    /// ignored: a client sending `options` is refused, as with PgBouncer's defaults.
    pub fn transaction(pool_size: u32) -> Self {
        PoolerSettings {
            pool_size,
            ignore_startup_parameters: Vec::new(),
        }
    }
}

/// A running PgBouncer.
pub struct PgBouncer {
    dir: PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The PostgreSQL server's port it pools connections to.
    pub upstream_port: u16,
    /// What it was started with.
    pub settings: PoolerSettings,
    pid: u32,
}

impl PgBouncer {
    /// Starts PgBouncer in transaction mode in front of the server on `upstream_port` (trust
    /// authentication on loopback, every database name passed through).
    pub fn start(upstream_port: u16, settings: PoolerSettings) -> PgBouncer {
        let bin = find_pgbouncer().unwrap_or_else(|| panic!("{INSTALL_HINT}"));
        let as_postgres = is_root();
        let dir = std::env::temp_dir().join(format!(
            "hookclaim-pgbouncer-{}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&dir).expect("create pgbouncer dir");
        let port = free_port();
        let ini = format!(
            "[databases]\n\
             * = host=127.0.0.1 port={upstream_port}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {userlist}\n\
             admin_users = postgres\n\
             pool_mode = transaction\n\
             default_pool_size = {pool}\n\
             max_db_connections = {pool}\n\
             min_pool_size = 0\n\
             reserve_pool_size = 0\n\
             max_client_conn = 2000\n\
             server_login_retry = 1\n\
             ignore_startup_parameters = {ignore}\n\
             logfile = {log}\n\
             pidfile = {pidfile}\n",
            userlist = dir.join("userlist.txt").display(),
            pool = settings.pool_size,
            ignore = settings.ignore_startup_parameters.join(","),
            log = dir.join("pgbouncer.log").display(),
            pidfile = dir.join("pgbouncer.pid").display(),
        );
        std::fs::write(dir.join("pgbouncer.ini"), ini).expect("write pgbouncer.ini");
        std::fs::write(dir.join("userlist.txt"), "\"postgres\" \"\"\n").expect("write userlist");
        if as_postgres {
            run(
                Command::new("chown").arg("-R").arg("postgres:").arg(&dir),
                "chown pgbouncer dir",
            );
        }
        let mut c = if as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&bin);
            c
        } else {
            Command::new(&bin)
        };
        c.arg("-d").arg(dir.join("pgbouncer.ini"));
        run(&mut c, "start pgbouncer");
        let pid = wait_for_pid(&dir.join("pgbouncer.pid"));
        let bouncer = PgBouncer {
            dir,
            port,
            upstream_port,
            settings,
            pid,
        };
        bouncer.wait_until_listening();
        bouncer
    }

    /// URL of database `db` through the pooler.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The pooler's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }

    /// The PgBouncer process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Runs `SHOW <what>` on the admin console (`SHOW POOLS`, `SHOW SERVERS`…), rows as
    /// column-name → value maps.
    pub async fn show(&self, what: &str) -> Vec<std::collections::BTreeMap<String, String>> {
        let admin = super::connect(&self.url("pgbouncer")).await;
        let messages = admin
            .simple_query(&format!("SHOW {what}"))
            .await
            .unwrap_or_else(|e| panic!("SHOW {what} on the pgbouncer console: {e}"));
        messages
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => Some(
                    row.columns()
                        .iter()
                        .enumerate()
                        .map(|(i, c)| {
                            (
                                c.name().to_string(),
                                row.get(i).unwrap_or_default().to_string(),
                            )
                        })
                        .collect(),
                ),
                _ => None,
            })
            .collect()
    }

    fn wait_until_listening(&self) {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "pgbouncer did not listen on 127.0.0.1:{} within 10 s:\n{}",
            self.port,
            self.log()
        );
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        // SIGINT: PgBouncer's safe shutdown would wait for clients; SIGTERM closes at once.
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end && Path::new(&format!("/proc/{}", self.pid)).exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// PgBouncer's binary: PATH first, then where Debian installs it.
fn find_pgbouncer() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("pgbouncer"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    })
}

fn wait_for_pid(pidfile: &Path) -> u32 {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if let Some(pid) = std::fs::read_to_string(pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = pidfile.with_file_name("pgbouncer.log");
    panic!(
        "pgbouncer wrote no pid file within 10 s:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn run(c: &mut Command, what: &str) {
    super::run_or_explain(c, what, INSTALL_HINT);
}

/// CPU time (user + system) a process and the children it has reaped have used, from
/// `/proc/<pid>/stat`; `None` once the process is gone.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime is field 14 (index 11 here).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks: u64 = fields.iter().sum();
    Some(Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64))
}

/// The parent process id from `/proc/<pid>/stat`.
pub fn parent_pid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// CPU time used so far by a PostgreSQL server: the postmaster, its live children (backends,
/// autovacuum, walwriter…) and the children that have exited.
pub fn server_cpu_time(postmaster: u32) -> Duration {
    let mut total = cpu_time(postmaster).unwrap_or_default();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if parent_pid(pid) == Some(postmaster) {
                total += own_cpu_time(pid).unwrap_or_default();
            }
        }
    }
    total
}

/// A process's own CPU time, without its reaped children.
fn own_cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let ticks: u64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse::<u64>().unwrap_or(0))
        .sum();
    Some(Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64))
}

fn clock_ticks() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}
