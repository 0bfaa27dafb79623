//! AWS's Lambda Runtime Interface Emulator (RIE), the runtime `sam local invoke` runs in its
//! container, from the SAM CLI package in target/venv: one execution environment running a
//! compiled function as its bootstrap, invoked over the RIE's HTTP endpoint. Unlike the
//! cargo-lambda emulator it enforces the function's timeout and reports the init phase and each
//! invocation (START, END, REPORT lines) as Lambda does.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const INSTALL_HINT: &str =
    "the RIE ships in the SAM CLI package: scripts/test installs it into target/venv";

/// A running RIE and the function under it. Killed on drop.
pub struct Rie {
    port: u16,
    child: Child,
    log: PathBuf,
}

/// The RIE executable for this machine's architecture, from the SAM CLI in target/venv.
pub fn executable() -> PathBuf {
    let arch = match std::env::consts::ARCH {
        "aarch64" => "arm64",
        other => other,
    };
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/venv/lib");
    let found = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|python| {
            python
                .path()
                .join("site-packages/samcli/local/rapid")
                .join(format!("aws-lambda-rie-{arch}"))
        })
        .find(|rie| rie.exists());
    found.unwrap_or_else(|| {
        panic!(
            "no aws-lambda-rie-{arch} under {}: {INSTALL_HINT}",
            lib.display()
        )
    })
}

impl Rie {
    /// Starts the RIE with `exe` as the bootstrap, the function's environment `env`, and a
    /// timeout of `timeout_secs`, as `sam local invoke` would from the template.
    pub fn start(exe: &Path, env: &BTreeMap<String, String>, timeout_secs: u32) -> Rie {
        let port = super::free_port();
        let api = super::free_port();
        let log = std::env::temp_dir().join(format!("hookclaim-rie-{:08x}.log", fastrand::u32(..)));
        let file = std::fs::File::create(&log).expect("RIE log file");
        let child = Command::new(executable())
            .arg("--runtime-interface-emulator-address")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--runtime-api-address")
            .arg(format!("127.0.0.1:{api}"))
            .arg(exe)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env)
            .env("AWS_LAMBDA_FUNCTION_NAME", "WebhookFunction")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_TIMEOUT", timeout_secs.to_string())
            .env("AWS_REGION", "us-east-1")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the RIE: {e}\n{INSTALL_HINT}"));
        let rie = Rie { port, child, log };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the RIE did not listen on {port}:\n{}",
                rie.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        rie
    }

    /// Invokes the function with `event`: the RIE's HTTP status and the answer's body.
    pub fn invoke(&self, event: &serde_json::Value) -> (u16, String) {
        let body = event.to_string();
        let mut sock = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect RIE");
        sock.set_read_timeout(Some(Duration::from_secs(120))).ok();
        let head = format!(
            "POST /2015-03-31/functions/function/invocations HTTP/1.1\r\nhost: 127.0.0.1\r\n\
             connection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        sock.write_all(head.as_bytes()).expect("send");
        sock.write_all(body.as_bytes()).expect("send body");
        super::emulator::read_answer(&mut sock)
    }

    /// Invokes the function with an API Gateway event and returns the HTTP answer in it:
    /// (status, parsed JSON body, headers).
    pub fn deliver(
        &self,
        event: &serde_json::Value,
    ) -> (u16, serde_json::Value, serde_json::Value) {
        let (rie_status, body) = self.invoke(event);
        assert_eq!(rie_status, 200, "the RIE answered {rie_status}: {body}");
        let answer: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        let status = answer["statusCode"].as_u64().unwrap_or(0) as u16;
        let inner = serde_json::from_str(answer["body"].as_str().unwrap_or("null"))
            .unwrap_or(serde_json::Value::Null);
        (status, inner, answer["headers"].clone())
    }

    /// Everything the RIE and the function have printed so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The lines of the invocation with request id `id`: from its START line through its
    /// REPORT line, waiting (up to 5 s) for the REPORT, which the RIE writes after answering.
    pub fn invocation_lines(&self, id: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let logs = self.logs();
            let lines: Vec<String> = logs
                .lines()
                .skip_while(|l| !l.starts_with(&format!("START RequestId: {id}")))
                .collect::<Vec<_>>()
                .into_iter()
                .scan(false, |done, l| {
                    if *done {
                        return None;
                    }
                    *done = l.starts_with(&format!("REPORT RequestId: {id}"));
                    Some(l.to_string())
                })
                .collect();
            if lines.last().is_some_and(|l| l.starts_with("REPORT")) || Instant::now() > deadline {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The request ids of every invocation so far, in order (from the RIE's START lines).
    pub fn request_ids(&self) -> Vec<String> {
        self.logs()
            .lines()
            .filter_map(|l| l.strip_prefix("START RequestId: "))
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect()
    }

    /// The function's delivery lines so far, parsed.
    pub fn delivery_lines(&self) -> Vec<serde_json::Value> {
        self.logs()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["message"] == "delivery")
            .collect()
    }
}

impl Drop for Rie {
    fn drop(&mut self) {
        // The RIE kills its bootstrap when it is terminated; SIGKILL would leave it running.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
