//! Instructions a PostgreSQL backend executes per statement, counted by callgrind: a measure of
//! the server's work that does not move with the machine's load, as rates on a shared 2-core
//! machine do (±15 % between rounds).
//!
//! The server runs under `valgrind --tool=callgrind`, which writes one count per process when it
//! exits. pgbench runs a script over one connection twice, `short` and `long` times; the
//! difference between the two backends' counts, divided by the difference in statements, is the
//! cost of one statement with the connection's start and end taken out. A Rust client's run is
//! counted the same way ([`Counter::per_statement_of`]).

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Statements in the short and the long run of each script.
const SHORT: u64 = 200;
const LONG: u64 = 1_200;

/// Where callgrind writes, and the wrapper that starts `postgres` under it.
pub struct Counter {
    dir: PathBuf,
}

impl Counter {
    /// A fresh directory under `parent` with the wrapper script for `postgres` in it, readable
    /// and writable by `owner` (the user the server runs as) when given.
    pub fn new(parent: &Path, postgres: &Path, owner: Option<&str>) -> Counter {
        let dir = parent.join("callgrind");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("callgrind dir");
        let script = format!(
            "#!/bin/sh\nexec valgrind --tool=callgrind --trace-children=yes --dump-instr=no \
             --callgrind-out-file={}/backend.%p {} \"$@\"\n",
            dir.display(),
            postgres.display()
        );
        let wrapper = dir.join("postgres-under-callgrind");
        std::fs::write(&wrapper, script).expect("write wrapper");
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
            .expect("make the wrapper executable");
        if let Some(owner) = owner {
            let ok = Command::new("chown")
                .arg("-R")
                .arg(format!("{owner}:"))
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chown the callgrind dir to {owner}");
        }
        Counter { dir }
    }

    /// The executable to start instead of `postgres`.
    pub fn wrapper(&self) -> PathBuf {
        self.dir.join("postgres-under-callgrind")
    }

    /// Instructions per statement of `script`: `pgbench` with `args` (connection, defines,
    /// database) over one connection, `LONG` and `SHORT` times.
    pub fn per_statement(&self, pgbench: &Path, args: &[String], script: &Path) -> f64 {
        let short = self.backend_total(pgbench, args, script, SHORT);
        let long = self.backend_total(pgbench, args, script, LONG);
        (long as f64 - short as f64) / (LONG - SHORT) as f64
    }

    /// The instruction count of the backend that ran `script` `n` times: the largest count
    /// written by the processes that ended with this run (pgbench's first connection, which
    /// only reads the server's settings, is the other).
    fn backend_total(&self, pgbench: &Path, args: &[String], script: &Path, n: u64) -> u64 {
        let before = self.outputs();
        let out = Command::new(pgbench)
            .args(["-n", "-M", "prepared", "-c", "1", "-t"])
            .arg(n.to_string())
            .arg("-f")
            .arg(script)
            .args(args)
            .output()
            .expect("run pgbench");
        assert!(
            out.status.success(),
            "pgbench {} failed: {}{}",
            script.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // Each backend writes its count as it exits, shortly after pgbench disconnects.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let wanted = if Instant::now() > deadline { 1 } else { 2 };
            if let Some(n) = self.take_count(&before, wanted) {
                return n;
            }
            assert!(
                Instant::now() < deadline,
                "no callgrind count for {}",
                script.display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Instructions per statement of what `run(n)` sends over one connection of its own: `n`
    /// statements, then it disconnects. For a client other than pgbench, such as the handler's
    /// own driver with its prepared statements and binary formats.
    pub async fn per_statement_of<F, Fut>(&self, run: F) -> f64
    where
        F: Fn(u64) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let short = self.total_after(run(SHORT)).await;
        let long = self.total_after(run(LONG)).await;
        (long as f64 - short as f64) / (LONG - SHORT) as f64
    }

    /// The instruction count of the one backend that ends with `run`.
    async fn total_after(&self, run: impl std::future::Future<Output = ()>) -> u64 {
        let before = self.outputs();
        run.await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(n) = self.take_count(&before, 1) {
                return n;
            }
            assert!(
                Instant::now() < deadline,
                "no callgrind count for the client's run"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The largest count written since `before`, once at least `wanted` processes have finished
    /// writing theirs (their files are then removed); `None` until then.
    fn take_count(&self, before: &HashSet<PathBuf>, wanted: usize) -> Option<u64> {
        let new: Vec<PathBuf> = self.outputs().difference(before).cloned().collect();
        let totals: Vec<u64> = new.iter().filter_map(|p| total(p)).collect();
        if totals.len() < wanted.max(1) {
            return None;
        }
        for p in &new {
            let _ = std::fs::remove_file(p);
        }
        totals.into_iter().max()
    }

    fn outputs(&self) -> HashSet<PathBuf> {
        std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("backend."))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The `totals:` line of a finished callgrind output; `None` while it is still being written.
fn total(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("totals:"))
        .and_then(|v| v.trim().parse().ok())
}
