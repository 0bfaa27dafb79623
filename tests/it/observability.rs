//! What the functions print, as CloudWatch will read it: the compiled functions under the
//! cargo-lambda emulator, their logs parsed line by line.
//!
//! - Requests to invented source names cannot create metrics: whatever the path says, they are
//!   counted under one `source` value, `unknown`, and every log line stays under a fixed length.
//! - Every metric the template's alarms and dashboard read is emitted by the functions, with the
//!   same name, namespace and dimensions (`scripts/check-metrics.py` reads the template and
//!   these logs), the functions configured with the namespace the template gives them.
//! - `HOOKCLAIM_METRICS_NAMESPACE` names the namespace of every metric line of both functions;
//!   one CloudWatch would refuse stops the cold start, naming the setting.
//! - Each delivery line's level follows its outcome: a retry the sender is asked for is routine
//!   (INFO), a failed attempt a warning, a delivery given up on an error, whatever the status.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hookclaim::observe::{MAX_DELIVERY_LINE, MAX_REQUESTED_SOURCE, UNKNOWN_SOURCE};
use serde_json::Value;
use support::emulator::Emulator;
use support::TestDb;

/// The names configured in env.local.json, which an invented name must not hit by chance.
const CONFIGURED: &[&str] = &["stripe", "github", "svix", "polar", "acme"];

/// The local configuration over `db`, with the store-only processor.
fn env(db: &TestDb) -> BTreeMap<String, String> {
    let mut env = support::local_env();
    env.insert("DATABASE_URL".into(), db.url.clone());
    env
}

/// The JSON lines of a function's log (anything else it printed is left out).
fn json_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// An invented source name: path-safe characters, percent-encoded bytes now and then, from one
/// character to far beyond any cap.
fn invented_name(rng: &mut fastrand::Rng) -> String {
    const SAFE: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~";
    const ENCODED: &[&str] = &["%22", "%5C", "%00", "%0A", "%F0%9F%98%80", "%C3%A9", "%20"];
    let len = match rng.u8(..4) {
        0 => rng.usize(1..8),
        1 => rng.usize(8..65),
        2 => rng.usize(65..400),
        _ => rng.usize(400..1500),
    };
    loop {
        let mut name = String::new();
        while name.len() < len {
            if rng.u8(..10) == 0 {
                name.push_str(ENCODED[rng.usize(..ENCODED.len())]);
            } else {
                name.push(SAFE[rng.usize(..SAFE.len())] as char);
            }
        }
        if !CONFIGURED.contains(&name.as_str()) {
            return name;
        }
    }
}

#[tokio::test]
async fn a_thousand_requests_to_invented_sources_make_one_dimension_value_and_bounded_lines() {
    let db = TestDb::empty().await;
    let mut emu = Emulator::start();
    emu.run_function("webhook", env!("CARGO_BIN_EXE_webhook"), &env(&db));
    let mut rng = fastrand::Rng::with_seed(15);
    let long_header = "d".repeat(4000);

    let mut statuses = BTreeMap::new();
    for i in 0..1000 {
        let name = invented_name(&mut rng);
        let method = ["POST", "POST", "POST", "POST", "GET", "PUT"][rng.usize(..6)];
        let body = format!(
            r#"{{"id":"evt_{i}","type":"{}"}}"#,
            "x".repeat(rng.usize(..3000))
        );
        let (status, _) = emu.http(
            method,
            &format!("/lambda-url/webhook/webhooks/{name}"),
            &[
                ("content-type", "application/json"),
                ("x-github-delivery", &long_header),
                ("x-github-event", &long_header),
                ("stripe-signature", &long_header),
            ],
            body.as_bytes(),
        );
        *statuses.entry(status).or_insert(0) += 1;
    }
    println!("statuses: {statuses:?}");
    assert_eq!(
        statuses.keys().copied().collect::<Vec<u16>>(),
        [404, 405],
        "unknown sources are refused (405 first for other methods)"
    );

    let log = emu.logs("webhook");
    let deliveries: Vec<Value> = json_lines(&log)
        .into_iter()
        .filter(|v| v["message"] == "delivery")
        .collect();
    assert_eq!(deliveries.len(), 1000, "one line per request");
    let mut sources = BTreeSet::new();
    let mut outcomes = BTreeSet::new();
    let mut requested = BTreeSet::new();
    for line in &deliveries {
        // The dimension values CloudWatch reads: each dimension set's keys, from the line.
        for dimset in line["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
            .as_array()
            .unwrap()
        {
            for key in dimset.as_array().unwrap() {
                let key = key.as_str().unwrap();
                let value = line[key].as_str().unwrap().to_string();
                match key {
                    "source" => sources.insert(value),
                    "outcome" => outcomes.insert(value),
                    other => panic!("unexpected dimension {other}"),
                };
            }
        }
        let asked = line["requested_source"]
            .as_str()
            .expect("requested name logged");
        assert!(asked.len() <= MAX_REQUESTED_SOURCE, "{asked}");
        requested.insert(asked.to_string());
    }
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    println!(
        "{} delivery lines; source dimension values {sources:?}; outcome values {outcomes:?}; \
         {} distinct requested names logged; {} log lines in all, the longest {longest} bytes \
         (bound {MAX_DELIVERY_LINE})",
        deliveries.len(),
        requested.len(),
        log.lines().count(),
    );
    assert_eq!(sources, BTreeSet::from([UNKNOWN_SOURCE.to_string()]));
    assert_eq!(
        outcomes,
        BTreeSet::from([
            "method_not_allowed".to_string(),
            "unknown_source".to_string()
        ])
    );
    assert!(requested.len() > 900, "the names really were different");
    for line in log.lines() {
        assert!(
            line.len() < MAX_DELIVERY_LINE,
            "a log line of {} bytes: {line}",
            line.len()
        );
    }
}

/// POSTs a GitHub delivery to the webhook function under `emu`: its status and answer.
fn post(emu: &Emulator, id: &str, body: &str, secret: &str) -> (u16, String) {
    let signed = support::github_signed(secret, id, body.as_bytes());
    emu.http(
        "POST",
        "/lambda-url/webhook/webhooks/github",
        &support::header_pairs(&signed),
        body.as_bytes(),
    )
}

/// The stack name the template's namespaces are read for.
const STACK: &str = "hookclaim-test";

/// Runs scripts/check-metrics.py with `args` after the stack name: its status and output.
fn check_metrics(args: &[&Path]) -> (bool, String) {
    let out = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-metrics.py"))
        .args(["--stack-name", STACK])
        .args(args)
        .output()
        .expect("python3 scripts/check-metrics.py (needs PyYAML, which cfn-lint installs)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let errors = String::from_utf8_lossy(&out.stderr);
    (out.status.success(), format!("{text}{errors}"))
}

/// The namespace the template's functions emit under, for stack [`STACK`].
fn template_namespace() -> String {
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("template.yaml");
    let (ok, text) = check_metrics(&[Path::new("--namespace"), template.as_path()]);
    assert!(ok, "{text}");
    text.trim().to_string()
}

/// Every metric directive's namespace in `log`, with the metric names it declares.
fn metric_namespaces(log: &str) -> Vec<(String, Vec<String>)> {
    json_lines(log)
        .iter()
        .flat_map(|line| {
            line["_aws"]["CloudWatchMetrics"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|d| {
            let names = d["Metrics"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["Name"].as_str().unwrap().to_string())
                .collect();
            (d["Namespace"].as_str().unwrap().to_string(), names)
        })
        .collect()
}

/// What a function needs in its environment to reach moto's server as it would reach AWS.
fn aws_env(env: &mut BTreeMap<String, String>) {
    let moto = support::moto::server();
    for (k, v) in [
        ("AWS_ENDPOINT_URL", moto.url.as_str()),
        ("AWS_REGION", support::moto::REGION),
        ("AWS_ACCESS_KEY_ID", "AKIAHOOKCLAIMTEST"),
        ("AWS_SECRET_ACCESS_KEY", "hookclaim-test-secret-key"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/nonexistent/hookclaim-test"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/hookclaim-test"),
    ] {
        env.insert(k.into(), v.into());
    }
}

/// An endpoint that answers 400 to every call, on a runtime of its own: the calls to the
/// emulator block the test's.
fn refusing_endpoint() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let (url, _calls) = support::endpoint::start(400).await;
            tx.send(url).expect("send the URL");
            std::future::pending::<()>().await
        })
    });
    rx.recv().expect("the endpoint's URL")
}

/// Runs the functions with `env` through each outcome the alarms and the dashboard
/// read, and a scheduled retention run; returns each function's log by name. The outcomes:
/// processed, duplicate (also with another body, and a body re-sent under a new id), dead (the
/// forward processor's endpoint refuses it with 400), unauthorized, unavailable (the database
/// gone), failed and retry_later (a destination queue that does not exist, which is also a
/// destination fault).
async fn every_outcome(env: &BTreeMap<String, String>) -> Vec<(&'static str, String)> {
    let mut emu = Emulator::start();
    emu.run_function("webhook", env!("CARGO_BIN_EXE_webhook"), env);
    // The same function with its database gone, under an emulator of its own (the emulator
    // serves only the project's binary names): deliveries are answered 503 unavailable.
    let mut emu_down = Emulator::start();
    let mut down = env.clone();
    down.insert(
        "DATABASE_URL".into(),
        format!(
            "postgres://postgres@127.0.0.1:{}/gone",
            support::free_port()
        ),
    );
    down.insert("DATABASE_CONNECT_TIMEOUT_MS".into(), "500".into());
    emu_down.run_function("webhook", env!("CARGO_BIN_EXE_webhook"), &down);
    // And with the destinations processor, sending to a queue that does not exist.
    let mut emu_dest = Emulator::start();
    let mut dest = env.clone();
    aws_env(&mut dest);
    let missing = format!(
        "{}/123456789012/hc-obs-missing-{:08x}",
        support::moto::server().url,
        fastrand::u32(..)
    );
    dest.insert("HOOKCLAIM_PROCESSOR".into(), "destinations".into());
    dest.insert(
        "HOOKCLAIM_DESTINATIONS".into(),
        serde_json::json!({"github": [{"kind": "sqs", "queue_url": missing}]}).to_string(),
    );
    emu_dest.run_function("webhook", env!("CARGO_BIN_EXE_webhook"), &dest);
    // And with the forward processor, to an endpoint that refuses everything for good.
    let refusing = refusing_endpoint();
    let mut emu_refused = Emulator::start();
    let mut forward = env.clone();
    forward.insert("HOOKCLAIM_PROCESSOR".into(), "forward".into());
    forward.insert("FORWARD_URL".into(), refusing);
    emu_refused.run_function("webhook", env!("CARGO_BIN_EXE_webhook"), &forward);
    let mut retention_env = env.clone();
    retention_env.remove("HOOKCLAIM_SECRETS");
    emu.run_function("retention", env!("CARGO_BIN_EXE_retention"), &retention_env);

    let secret = support::GITHUB_SECRET;
    let order = r#"{"order_id":"metrics-order-1"}"#;
    let other_order = r#"{"order_id":"metrics-order-5"}"#;
    let cases = [
        (&emu, "m-1", order, secret, 200, "processed"),
        (&emu, "m-1", order, secret, 200, "duplicate"),
        // A payload mismatch: the id again with another signed body.
        (&emu, "m-1", other_order, secret, 200, "duplicate"),
        // A replayed body: the signed body again under a new id, answered by the replay guard.
        (&emu, "m-6", order, secret, 200, "duplicate"),
        (
            &emu_refused,
            "m-2",
            r#"{"no":"order"}"#,
            secret,
            200,
            "dead",
        ),
        (&emu, "m-3", order, "not-the-secret", 401, "unauthorized"),
        (&emu_down, "m-4", order, secret, 503, "unavailable"),
        (&emu_dest, "m-5", other_order, secret, 503, "failed"),
        (&emu_dest, "m-5", other_order, secret, 503, "retry_later"),
    ];
    for (emulator, id, body, secret, status, outcome) in cases {
        let (got, answer) = post(emulator, id, body, secret);
        assert_eq!(got, status, "{id}: {answer}");
        assert!(answer.contains(outcome), "{id}: {answer}");
    }
    // A scheduled retention run, as EventBridge Scheduler invokes it.
    let events = Path::new(env!("CARGO_MANIFEST_DIR")).join("events");
    let report = emu.invoke("retention", &events.join("retention-scheduler.json"));
    assert_eq!(report["command"], "run", "{report}");
    vec![
        ("webhook", emu.logs("webhook")),
        ("webhook-down", emu_down.logs("webhook")),
        ("retention", emu.logs("retention")),
        ("webhook-destinations", emu_dest.logs("webhook")),
        ("webhook-forward", emu_refused.logs("webhook")),
    ]
}

#[tokio::test]
async fn every_metric_the_template_watches_is_one_the_functions_emit() {
    let db = TestDb::empty().await;
    let mut env = env(&db);
    // As the template deploys them, for a stack of that name.
    let namespace = template_namespace();
    env.insert("HOOKCLAIM_METRICS_NAMESPACE".into(), namespace.clone());
    let outputs = every_outcome(&env).await;

    let dir = std::env::temp_dir().join(format!("hookclaim-metrics-{:08x}", fastrand::u32(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let mut logs = Vec::new();
    for (name, log) in outputs {
        let path = dir.join(format!("{name}.log"));
        std::fs::write(&path, log).unwrap();
        logs.push(path);
    }
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("template.yaml");
    let mut args: Vec<&Path> = vec![template.as_path()];
    args.extend(logs.iter().map(|p| p.as_path()));
    let (ok, text) = check_metrics(&args);
    println!("namespace {namespace} (stack {STACK})\n{text}");
    assert!(ok, "a watched metric is not emitted:\n{text}");
    assert!(text.contains("0 not emitted"), "{text}");
    // And the check does catch a metric nothing emits: without the retention function's log, its
    // metrics are reported missing.
    let (ok, text) = check_metrics(&args[..3]);
    assert!(!ok, "{text}");
    assert!(
        text.contains(&format!("MISSING  {namespace} completed {{command=run}}")),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn each_delivery_line_is_logged_at_the_level_of_its_outcome_not_its_status() {
    let db = TestDb::empty().await;
    let outputs = every_outcome(&env(&db)).await;
    let lines: Vec<Value> = outputs
        .iter()
        .flat_map(|(_, log)| json_lines(log))
        .collect();

    let mut levels = BTreeMap::new();
    for line in lines.iter().filter(|l| l["message"] == "delivery") {
        let outcome = line["outcome"].as_str().unwrap().to_string();
        let level = format!("{} {}", line["status"], line["level"].as_str().unwrap());
        levels
            .entry(outcome)
            .or_insert_with(BTreeSet::new)
            .insert(level);
    }
    println!("status and level of each outcome's delivery lines: {levels:?}");
    // A duplicate whose body is not the stored one (a payload mismatch, a body re-sent under a
    // new id) is worth a look: WARN, whatever its answer.
    let expected: BTreeMap<String, BTreeSet<String>> = [
        ("processed", "200 INFO"),
        ("duplicate", "200 INFO"),
        ("duplicate", "200 WARN"),
        ("retry_later", "503 INFO"),
        ("failed", "503 WARN"),
        ("unauthorized", "401 WARN"),
        ("dead", "200 ERROR"),
        ("unavailable", "503 ERROR"),
    ]
    .into_iter()
    .fold(BTreeMap::new(), |mut m, (o, l)| {
        m.entry(o.to_string())
            .or_insert_with(BTreeSet::new)
            .insert(l.to_string());
        m
    });
    assert_eq!(levels, expected);
    // And the two WARN duplicates are the ones counted as such.
    let flagged = |metric: &str| {
        lines
            .iter()
            .filter(|l| l["message"] == "delivery" && l[metric] == 1)
            .count()
    };
    assert_eq!(
        (flagged("payload_mismatches"), flagged("replayed_bodies")),
        (1, 1)
    );

    // The missing queue is a destination fault: an error line counting `destination_faults`,
    // once, for the one attempt that called it (the redelivery was not due).
    let faults: Vec<&Value> = lines
        .iter()
        .filter(|l| l["destination_faults"].is_number())
        .collect();
    println!("destination fault lines: {faults:?}");
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0]["level"], "ERROR");
    assert_eq!(faults[0]["destination_faults"], 1);
    assert!(faults[0]["destination"]
        .as_str()
        .unwrap()
        .starts_with("sqs:hc-obs-missing-"));
    assert_eq!(
        faults[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
        serde_json::json!([["destination"], []])
    );
}

#[tokio::test]
async fn the_metrics_namespace_setting_names_every_metric_line_of_both_functions() {
    const NAMESPACE: &str = "hookclaim/obs-stack";
    let db = TestDb::empty().await;
    let mut env = env(&db);
    env.insert("HOOKCLAIM_METRICS_NAMESPACE".into(), NAMESPACE.into());
    let mut emu = Emulator::start();
    emu.run_function("webhook", env!("CARGO_BIN_EXE_webhook"), &env);
    let mut retention_env = env.clone();
    retention_env.remove("HOOKCLAIM_SECRETS");
    emu.run_function("retention", env!("CARGO_BIN_EXE_retention"), &retention_env);

    let secret = support::GITHUB_SECRET;
    let order = r#"{"order_id":"namespace-order-1"}"#;
    assert_eq!(post(&emu, "ns-1", order, secret).0, 200);
    assert_eq!(post(&emu, "ns-2", order, "not-the-secret").0, 401);
    let events = Path::new(env!("CARGO_MANIFEST_DIR")).join("events");
    let report = emu.invoke("retention", &events.join("retention-scheduler.json"));
    assert_eq!(report["command"], "run", "{report}");

    let webhook = metric_namespaces(&emu.logs("webhook"));
    let retention = metric_namespaces(&emu.logs("retention"));
    println!("webhook metric lines: {webhook:?}\nretention metric lines: {retention:?}");
    assert_eq!(webhook.len(), 2, "one line per delivery");
    assert!(!retention.is_empty(), "the run's report");
    for (namespace, names) in webhook.iter().chain(&retention) {
        assert_eq!(namespace, NAMESPACE, "{names:?}");
    }
}

#[test]
fn a_namespace_cloudwatch_would_refuse_stops_the_cold_start_naming_the_setting() {
    for bad in ["AWS/Lambda", "hooks*", " hookclaim"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_webhook"))
            .env_clear()
            .envs(support::local_env())
            .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
            .env("HOOKCLAIM_METRICS_NAMESPACE", bad)
            .output()
            .expect("run the webhook binary");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        println!("HOOKCLAIM_METRICS_NAMESPACE={bad:?}: {}", printed.trim());
        assert!(!out.status.success(), "{bad:?}: {printed}");
        assert!(
            printed.contains("bad configuration")
                && printed.contains("HOOKCLAIM_METRICS_NAMESPACE: "),
            "{bad:?}: {printed}"
        );
    }
}
