//! A local AWS endpoint for the tests: moto's server, started once per test binary, with its
//! request recorder on so that a test can count the calls the code under test made.
//!
//! Starting it also points this process's AWS settings at it, through the standard variables
//! only (`AWS_ENDPOINT_URL`, `AWS_REGION`, dummy static credentials), exactly as a local run
//! would. Environment variables are process-wide and the tests of one binary run on parallel
//! threads, so they are set once, inside the one-time start; every test calls [`server`] first
//! and uses secret names of its own. If moto is not installed the test fails with the install
//! hint: it never skips.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine as _;

const INSTALL_HINT: &str = "moto's server is required for the AWS tests: `pip install \
\"moto[server]\"` (scripts/test installs it). It provides `moto_server` (or `python3 -m \
moto.server`).";

/// The region the tests run in.
pub const REGION: &str = "us-east-1";

/// The running moto server.
pub struct Moto {
    /// Its endpoint, `http://127.0.0.1:<port>`.
    pub url: String,
    recording: PathBuf,
    log: PathBuf,
}

static SERVER: OnceLock<Moto> = OnceLock::new();
static CHILD: Mutex<Option<Child>> = Mutex::new(None);

extern "C" fn stop_server() {
    if let Ok(mut child) = CHILD.lock() {
        if let Some(child) = child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The shared server, started on first use, with this process's AWS settings pointing at it.
pub fn server() -> &'static Moto {
    SERVER.get_or_init(start)
}

fn start() -> Moto {
    let dir = std::env::temp_dir().join(format!(
        "hookclaim-moto-{}-{:08x}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir).expect("create moto dir");
    let recording = dir.join("recording.jsonl");
    let log = dir.join("server.log");
    let port = super::free_port();
    let spawn = |program: &str, args: &[&str]| {
        let out = std::fs::File::create(&log).expect("moto log file");
        Command::new(program)
            .args(args)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            // Every request is appended to the recording as one JSON line.
            .env("MOTO_ENABLE_RECORDING", "True")
            .env("MOTO_RECORDER_FILEPATH", &recording)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
    };
    let child = spawn("moto_server", &[])
        .or_else(|_| spawn("python3", &["-m", "moto.server"]))
        .unwrap_or_else(|e| panic!("cannot start moto's server: {e}\n{INSTALL_HINT}"));
    *CHILD.lock().expect("moto child") = Some(child);
    unsafe {
        super::atexit(stop_server);
    }

    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        let exited = CHILD
            .lock()
            .expect("moto child")
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        if let Some(status) = exited {
            panic!(
                "moto's server exited ({status}):\n{}\n{INSTALL_HINT}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "moto's server did not listen on {port}:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let url = format!("http://127.0.0.1:{port}");
    // The standard settings, as a developer's shell would have them; nothing else. Set once,
    // before any test of this binary gets past `server()`.
    for (k, v) in [
        ("AWS_ENDPOINT_URL", url.as_str()),
        ("AWS_REGION", REGION),
        ("AWS_ACCESS_KEY_ID", "AKIAHOOKCLAIMTEST"),
        ("AWS_SECRET_ACCESS_KEY", "hookclaim-test-secret-key"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/nonexistent/hookclaim-test"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/hookclaim-test"),
    ] {
        std::env::set_var(k, v);
    }
    for k in [
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL_SECRETS_MANAGER",
        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    ] {
        std::env::remove_var(k);
    }
    Moto {
        url,
        recording,
        log,
    }
}

/// One request moto received.
#[derive(Debug, Clone)]
pub struct Call {
    /// The JSON protocol's operation, e.g. `secretsmanager.GetSecretValue` (empty if none).
    pub target: String,
    /// The request body as JSON (`Null` if it is not JSON).
    pub body: serde_json::Value,
}

impl Call {
    /// The secret the call names (`SecretId`, or `Name` for `CreateSecret`).
    pub fn secret(&self) -> Option<&str> {
        self.body["SecretId"]
            .as_str()
            .or_else(|| self.body["Name"].as_str())
    }
}

impl Moto {
    /// Every request the server has received so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        let text = std::fs::read_to_string(&self.recording).unwrap_or_default();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let entry: serde_json::Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("moto recording line is not JSON ({e}): {line}"));
                let target = entry["headers"]
                    .as_object()
                    .and_then(|h| {
                        h.iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case("x-amz-target"))
                            .and_then(|(_, v)| v.as_str())
                    })
                    .unwrap_or_default()
                    .to_string();
                let raw = entry["body"].as_str().unwrap_or_default();
                let bytes = if entry["body_encoded"].as_bool() == Some(true) {
                    base64::engine::general_purpose::STANDARD
                        .decode(raw)
                        .expect("recorded body is base64")
                } else {
                    raw.as_bytes().to_vec()
                };
                Call {
                    target,
                    body: serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
                }
            })
            .collect()
    }

    /// Calls of operation `target` naming secret `secret` (its name or an ARN containing it).
    pub fn count(&self, target: &str, secret: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.target == target && c.secret().is_some_and(|s| s.contains(secret)))
            .count()
    }

    /// Every call naming secret `secret`, whatever the operation.
    pub fn calls_naming(&self, secret: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.secret().is_some_and(|s| s.contains(secret)))
            .collect()
    }

    /// The server's own log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `GetSecretValue`'s operation name in the recording.
pub const GET_SECRET_VALUE: &str = "secretsmanager.GetSecretValue";

/// A secret name no other test uses.
pub fn unique_name(prefix: &str) -> String {
    format!("hookclaim-test/{prefix}-{:012x}", fastrand::u64(..) >> 16)
}

/// A Secrets Manager client made the way the code under test makes its own (aws-config).
pub async fn secrets_client() -> aws_sdk_secretsmanager::Client {
    server();
    let config = hookclaim::aws::config_loader().load().await;
    aws_sdk_secretsmanager::Client::new(&config)
}

/// Creates secret `name` holding `value`; returns its ARN.
pub async fn create_secret(name: &str, value: &str) -> String {
    let out = secrets_client()
        .await
        .create_secret()
        .name(name)
        .secret_string(value)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "CreateSecret {name}: {}",
                aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
            )
        });
    out.arn().expect("CreateSecret returns an ARN").to_string()
}

/// Stores `value` as the secret's new current version (a rotation).
pub async fn put_secret_value(secret_id: &str, value: &str) {
    secrets_client()
        .await
        .put_secret_value()
        .secret_id(secret_id)
        .secret_string(value)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "PutSecretValue {secret_id}: {}",
                aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
            )
        });
}

/// Deletes the secret at once, without a recovery window: reading it fails from now on, as
/// when Secrets Manager cannot be reached or the function's permission to read it is gone.
pub async fn delete_secret(secret_id: &str) {
    secrets_client()
        .await
        .delete_secret()
        .secret_id(secret_id)
        .force_delete_without_recovery(true)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "DeleteSecret {secret_id}: {}",
                aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
            )
        });
}
