//! End to end: the compiled `webhook` function under the cargo-lambda emulator, driven by
//! `cargo lambda invoke --data-file events/…` and by plain HTTP to the function-URL endpoint,
//! against the harness's PostgreSQL.

use crate::support;

use std::path::PathBuf;

use support::emulator::Emulator;
use support::TestDb;

/// The sample events re-signed now (the committed ones carry a fixed timestamp).
fn fresh_events() -> (PathBuf, Vec<serde_json::Value>) {
    let dir = std::env::temp_dir().join(format!("hookclaim-events-{:08x}", fastrand::u32(..)));
    let root = env!("CARGO_MANIFEST_DIR");
    let run = |args: &[&str]| {
        let out = std::process::Command::new("python3")
            .arg(format!("{root}/scripts/events.py"))
            .args(args)
            .output()
            .expect("python3 scripts/events.py");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    run(&["--now", "--out", dir.to_str().unwrap()]);
    let manifest = serde_json::from_slice(&run(&["--manifest"])).expect("manifest is JSON");
    (dir, manifest)
}

fn expected_status(entry: &serde_json::Value) -> Option<u16> {
    entry["expected"]
        .as_str()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[tokio::test]
async fn every_sample_event_gets_its_expected_status_through_the_emulator() {
    let db = TestDb::empty().await;
    let mut env = support::local_env();
    env.insert("DATABASE_URL".into(), db.url.clone());
    let (dir, manifest) = fresh_events();

    let mut emu = Emulator::start();
    emu.run_function("webhook", env!("CARGO_BIN_EXE_webhook"), &env);

    let mut checked = 0;
    for entry in &manifest {
        if entry["function"] != "webhook" {
            continue;
        }
        let file = entry["file"].as_str().unwrap();
        // Blocking calls are fine here: the functions run in their own processes.
        let answer = emu.invoke("webhook", &dir.join(file));
        let status = answer["statusCode"].as_u64().unwrap_or(0) as u16;
        assert_eq!(Some(status), expected_status(entry), "{file}: {answer}");
        checked += 1;
    }
    assert!(
        checked >= 20,
        "only {checked} webhook events in the manifest"
    );
    assert!(
        emu.is_running("webhook"),
        "one process served every invocation"
    );

    // The same function over plain HTTP (function URL): the redelivery of a processed GitHub
    // delivery, then a request with no signature.
    let github: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("github-redelivery.json")).unwrap())
            .unwrap();
    let headers: Vec<(String, String)> = github["headers"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("x-") || *k == "content-type")
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let body = github["body"].as_str().unwrap().as_bytes();
    let path = "/lambda-url/webhook/webhooks/github";
    let dup = emu.http("POST", path, &headers, body);
    let unsigned = emu.http("POST", path, &[("content-type", "application/json")], b"{}");
    assert_eq!(dup.0, 200, "{dup:?}");
    assert!(dup.1.contains(r#""status":"duplicate""#), "{dup:?}");
    assert_eq!(unsigned.0, 401, "{unsigned:?}");

    // One JSON log line per delivery, and the deliveries were stored done.
    let logs = emu.logs("webhook");
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["message"] == "delivery")
        .collect();
    assert_eq!(lines.len(), checked + 2, "one line per delivery:\n{logs}");
    // Secret hygiene: no test secret in the function's output, in any encoding we know of.
    let local = support::local_env();
    let secrets: std::collections::BTreeMap<String, serde_json::Value> =
        serde_json::from_str(&local["HOOKCLAIM_SECRETS"]).unwrap();
    for value in secrets.values() {
        for secret in value
            .as_array()
            .cloned()
            .unwrap_or_else(|| vec![value.clone()])
        {
            let secret = secret.as_str().unwrap();
            assert!(
                !logs.contains(secret),
                "a secret appears in the function's logs"
            );
            assert!(
                !logs.contains(&hex::encode(secret)),
                "a secret appears hex-encoded"
            );
        }
    }
    // The whole log also goes to the test output, which scripts/test scans once more.
    println!("{logs}");
    let c = db.client().await;
    let done = support::count(
        &c,
        "SELECT count(*) FROM hookclaim_deliveries WHERE status = 'done'",
    )
    .await;
    assert!(done >= 1, "{done} deliveries done");

    // The retention function, as its own process under the same emulator: every retention
    // event, each against the samples' table. The scheduled events are normal runs; the replay of
    // the (done) Stripe sample is refused without `force`, with its error type.
    let mut retention_env = support::local_env();
    retention_env.insert("DATABASE_URL".into(), db.url.clone());
    retention_env.remove("HOOKCLAIM_SECRETS");
    emu.run_function("retention", env!("CARGO_BIN_EXE_retention"), &retention_env);
    let mut retention_checked = 0;
    for entry in &manifest {
        if entry["function"] != "retention" {
            continue;
        }
        let file = entry["file"].as_str().unwrap();
        // The fields the samples' table (scripts/events.py) expects in the report, or the
        // error type it expects instead.
        let expected = entry["report"]
            .as_object()
            .unwrap_or_else(|| panic!("no expected report for {file}"));
        if let Some(error_type) = expected.get("errorType").and_then(|t| t.as_str()) {
            let err = emu.try_invoke("retention", &dir.join(file)).unwrap_err();
            assert!(err.contains(error_type), "{file}: {err}");
            retention_checked += 1;
            continue;
        }
        let report = emu.invoke("retention", &dir.join(file));
        for (path, value) in expected {
            let pointer = format!("/{}", path.replace('.', "/"));
            assert_eq!(
                report.pointer(&pointer),
                Some(value),
                "{file} {path}: {report}"
            );
        }
        assert!(report.get("phase_errors").is_none(), "{file}: {report}");
        retention_checked += 1;
    }
    assert_eq!(retention_checked, 8);
    assert!(emu.is_running("retention"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every provider handshake in the samples, through the compiled function under the emulator:
/// the exact status, content type and body each provider requires, nothing stored, and the
/// Twitch revocation logged and counted under its own outcome. Also the delivery whose id
/// header is not ASCII: refused with its reason.
#[tokio::test]
async fn every_handshake_gets_the_exact_answer_its_provider_requires() {
    let db = TestDb::empty().await;
    let mut env = support::local_env();
    env.insert("DATABASE_URL".into(), db.url.clone());
    let (dir, manifest) = fresh_events();

    let mut emu = Emulator::start();
    emu.run_function("webhook", env!("CARGO_BIN_EXE_webhook"), &env);

    let mut handshakes = 0;
    for entry in manifest.iter().filter(|e| e.get("handshake").is_some()) {
        let file = entry["file"].as_str().unwrap();
        let want = &entry["handshake"];
        let answer = emu.invoke("webhook", &dir.join(file));
        let status = answer["statusCode"].as_u64().unwrap_or(0);
        let content_type = answer["headers"]["content-type"].as_str();
        let body = answer["body"].as_str().unwrap_or_default();
        println!("{file:34} {status} {content_type:?} {body}");
        assert_eq!(status, want["status"].as_u64().unwrap(), "{file}: {answer}");
        assert_eq!(
            content_type,
            want["content_type"].as_str(),
            "{file}: {answer}"
        );
        if want["content_type"] == "application/json" {
            let got: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
            let expected: serde_json::Value =
                serde_json::from_str(want["body"].as_str().unwrap()).unwrap();
            assert_eq!(got, expected, "{file}");
        } else {
            assert_eq!(body, want["body"].as_str().unwrap(), "{file}");
        }
        handshakes += 1;
    }
    assert_eq!(
        handshakes, 8,
        "every provider's handshake is in the samples"
    );

    // Meta's GET over plain HTTP to the function URL too, and a GET that is no handshake.
    let (status, body) = emu.http(
        "GET",
        "/lambda-url/webhook/webhooks/meta?hub.mode=subscribe&hub.challenge=42&hub.verify_token=hookclaim-meta-verify-token",
        &[],
        b"",
    );
    assert_eq!((status, body.as_str()), (200, "42"));
    let (status, _) = emu.http("GET", "/lambda-url/webhook/webhooks/meta", &[], b"");
    assert_eq!(status, 405, "GET is for the subscription handshake alone");
    let (status, _) = emu.http(
        "GET",
        "/lambda-url/webhook/webhooks/slack?hub.mode=subscribe",
        &[],
        b"",
    );
    assert_eq!(status, 405, "and only for Meta sources");

    // A signed delivery whose id header is not ASCII: 400, with the reason.
    let answer = emu.invoke("webhook", &dir.join("gitlab-non-ascii-id.json"));
    assert_eq!(answer["statusCode"], 400, "{answer}");
    let body: serde_json::Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["status"], "bad_request", "{answer}");
    assert_eq!(
        body["error"], "delivery id header idempotency-key is not visible ASCII",
        "{answer}"
    );

    // Handshakes are never stored as deliveries.
    let c = db.client().await;
    let stored: i64 = c
        .query_one("SELECT count(*) FROM hookclaim_deliveries", &[])
        .await
        .map(|r| r.get(0))
        .unwrap_or(0);
    assert_eq!(stored, 0, "nothing stored for handshakes");

    // One log line (and EMF count) per handshake; the revocation under `revoked`, with a warning.
    let logs = emu.logs("webhook");
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let outcome = |o: &str| {
        lines
            .iter()
            .filter(|v| v["message"] == "delivery" && v["outcome"] == o)
            .count()
    };
    assert_eq!(outcome("handshake"), 6 + 1, "{logs}");
    assert_eq!(outcome("handshake_refused"), 1, "{logs}");
    assert_eq!(outcome("revoked"), 1, "{logs}");
    assert!(
        logs.contains("Twitch revoked an EventSub subscription"),
        "{logs}"
    );
    println!("{logs}");
    let _ = std::fs::remove_dir_all(&dir);
}
