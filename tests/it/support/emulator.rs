//! The compiled functions under the cargo-lambda emulator (`cargo lambda watch
//! --only-lambda-apis`), each binary running as its own long-lived process, as in Lambda.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running emulator plus the function processes attached to it. Everything is killed on drop.
pub struct Emulator {
    /// Port the emulator's invoke and function-URL endpoints listen on (127.0.0.1).
    pub port: u16,
    watch: Child,
    functions: Vec<(String, Child, std::path::PathBuf)>,
}

const INSTALL_HINT: &str =
    "cargo-lambda is required for the end-to-end tests: `pip install cargo-lambda` (scripts/test installs it)";

impl Emulator {
    /// Starts the emulator on a free loopback port.
    pub fn start() -> Emulator {
        let port = super::free_port();
        let watch = Command::new("cargo")
            .args([
                "lambda",
                "watch",
                "--only-lambda-apis",
                "-A",
                "127.0.0.1",
                "-P",
            ])
            .arg(port.to_string())
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start cargo lambda watch: {e}\n{INSTALL_HINT}"));
        let emulator = Emulator {
            port,
            watch,
            functions: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "emulator did not listen on {port}\n{INSTALL_HINT}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        emulator
    }

    /// Runs compiled binary `exe` as function `name`, with `env`; its stdout and stderr go to a
    /// log file that [`Emulator::logs`] reads.
    pub fn run_function(&mut self, name: &str, exe: &str, env: &BTreeMap<String, String>) {
        let log =
            std::env::temp_dir().join(format!("hookclaim-{name}-{:08x}.log", fastrand::u32(..)));
        let file = std::fs::File::create(&log).expect("function log file");
        let child = Command::new(exe)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env)
            .env("AWS_LAMBDA_FUNCTION_NAME", name)
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env(
                "AWS_LAMBDA_RUNTIME_API",
                format!("http://127.0.0.1:{}/.rt/{name}", self.port),
            )
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {exe}: {e}"));
        self.functions.push((name.to_string(), child, log));
    }

    /// Everything function `name` has printed so far.
    pub fn logs(&self, name: &str) -> String {
        self.functions
            .iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, _, log)| std::fs::read_to_string(log).unwrap_or_default())
            .collect()
    }

    /// Whether function `name`'s process is still running (it never exits between invocations).
    pub fn is_running(&mut self, name: &str) -> bool {
        self.functions
            .iter_mut()
            .filter(|(n, _, _)| n == name)
            .all(|(_, child, _)| matches!(child.try_wait(), Ok(None)))
    }

    /// `cargo lambda invoke NAME --data-file FILE`: the function's JSON answer.
    pub fn invoke(&self, name: &str, data_file: &Path) -> serde_json::Value {
        match self.try_invoke(name, data_file) {
            Ok(answer) => answer,
            Err(error) => panic!("invoke {name} {}: {error}", data_file.display()),
        }
    }

    /// Like [`Emulator::invoke`], but a function error comes back as `Err` with what the
    /// emulator printed (the error type and message).
    pub fn try_invoke(&self, name: &str, data_file: &Path) -> Result<serde_json::Value, String> {
        let out = Command::new("cargo")
            .args(["lambda", "invoke", name, "-A", "127.0.0.1", "-P"])
            .arg(self.port.to_string())
            .arg("--data-file")
            .arg(data_file)
            .arg("--output-format")
            .arg("json")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap_or_else(|e| panic!("cargo lambda invoke: {e}\n{INSTALL_HINT}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!("{}{stdout}", String::from_utf8_lossy(&out.stderr)));
        }
        serde_json::from_str(stdout.trim())
            .map_err(|e| format!("invoke answer is not JSON ({e}): {stdout}"))
    }

    /// A plain HTTP request to the function-URL endpoint: (status, body).
    pub fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String) {
        let mut sock =
            std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect emulator");
        sock.set_read_timeout(Some(Duration::from_secs(30))).ok();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nconnection: close\r\ncontent-length: {}\r\n",
            self.port,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        sock.write_all(req.as_bytes()).expect("send");
        sock.write_all(body).expect("send body");
        read_answer(&mut sock)
    }
}

/// Reads an HTTP/1.1 answer to the end (the request said `connection: close`): its status and
/// its body, dechunked.
pub fn read_answer(sock: &mut std::net::TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    sock.read_to_end(&mut raw).expect("read the answer");
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, dechunk(&body))
}

/// Undoes chunked transfer encoding where an emulator used it.
pub fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some((size, after)) = rest.split_once("\r\n") else {
            return body.to_string();
        };
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_string();
        };
        if n == 0 {
            return out;
        }
        if after.len() < n {
            return body.to_string();
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        for (_, child, _) in &mut self.functions {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = self.watch.kill();
        let _ = self.watch.wait();
    }
}

/// The variables cargo sets for the test process (names, and prefixes ending in `_`).
const TEST_RUN_VARS: &[&str] = &[
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_PKG_",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_BIN_EXE_",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
];

/// Builds workspace package `package`'s binaries with the cargo running this test (same target
/// directory and configuration), in release (the deployed profile) or dev, and returns them by
/// name from the `compiler-artifact` messages. Such a package is a workspace member that
/// `cargo test` alone does not build, and an integration test only gets its own package's
/// binaries.
pub fn build_binaries(package: &str, bins: &[&str], release: bool) -> BTreeMap<String, PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(&cargo);
    build.args([
        "build",
        "--locked",
        "-p",
        package,
        "--bins",
        "--message-format=json",
    ]);
    if release {
        build.arg("--release");
    }
    // This process has the variables cargo sets for a test (CARGO_MANIFEST_DIR, CARGO_PKG_NAME,
    // ...). A build script that watches one of them (ring's watches CARGO_MANIFEST_DIR) would
    // find it changed since scripts/test's own build of the same thing and run again, rebuilding
    // everything above it: the nested build runs in the environment scripts/test's did.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if TEST_RUN_VARS
            .iter()
            .any(|v| name == *v || v.ends_with('_') && name.starts_with(v))
        {
            build.env_remove(&*name);
        }
    }
    let out = build
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo}: {e}"));
    assert!(
        out.status.success(),
        "building {package} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let built: BTreeMap<String, PathBuf> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter_map(|m| {
            let name = m["target"]["name"].as_str()?.to_string();
            Some((name, PathBuf::from(m["executable"].as_str()?)))
        })
        .collect();
    for name in bins {
        assert!(
            built.get(*name).is_some_and(|exe| exe.exists()),
            "cargo build reported no executable {name}: {built:?}"
        );
    }
    built
}
