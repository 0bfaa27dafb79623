//! The deployed build under AWS's own Runtime Interface Emulator (the runtime `sam local
//! invoke` runs in its container): the function's timeout as Lambda enforces it, the init phase,
//! and the request ids Lambda hands the function. The functions are the faulty processor's
//! (tests/fixtures/faulty) in the release profile hookclaim deploys, as in tests/it/deployed.rs,
//! against the harness's PostgreSQL.

use crate::support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use support::rie::Rie;
use support::{row, TestDb, GITHUB_SECRET};

/// The function's timeout in these tests: short, so the slow processor outlives it.
const TIMEOUT_SECS: u32 = 3;

/// The release build of the faulty processor's webhook function.
fn webhook_bootstrap() -> PathBuf {
    let mut bins =
        support::emulator::build_binaries("hookclaim-fixture-faulty", &["faulty-webhook"], true);
    bins.remove("faulty-webhook").expect("faulty-webhook built")
}

/// The local configuration over `db`, a failed attempt due again at once.
fn environment(db: &TestDb) -> BTreeMap<String, String> {
    let mut env = support::local_env();
    env.insert("DATABASE_URL".into(), db.url.clone());
    env.insert("RETRY_BASE_SECS".into(), "0".into());
    env.insert("RETRY_MAX_SECS".into(), "0".into());
    env
}

/// The sample GitHub event (an HTTP API v2 event) carrying delivery `id` with `body`, signed
/// with the test secret, under API Gateway request id `api_request_id`.
fn github_event(id: &str, body: &serde_json::Value, api_request_id: &str) -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/events/github.json");
    let mut event: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("events/github.json"))
            .expect("the sample is JSON");
    let body = body.to_string();
    let headers = &mut event["headers"];
    headers["x-github-delivery"] = id.into();
    headers["x-hub-signature-256"] =
        support::github_signature(GITHUB_SECRET, body.as_bytes()).into();
    headers["content-length"] = body.len().to_string().into();
    headers
        .as_object_mut()
        .expect("headers")
        .remove("x-hub-signature");
    event["body"] = body.into();
    event["requestContext"]["requestId"] = api_request_id.into();
    event
}

#[tokio::test]
async fn a_processor_outliving_the_timeout_answers_503_before_the_rie_ends_it_and_the_environment_goes_on(
) {
    let exe = webhook_bootstrap();
    let db = TestDb::empty().await;
    let rie = Rie::start(&exe, &environment(&db), TIMEOUT_SECS);
    let slow = serde_json::json!({"behaviour": "slow", "slow_secs": 30, "ref": "refs/heads/main"});

    let started = Instant::now();
    let (status, body, headers) = rie.deliver(&github_event("slow-1", &slow, "api-slow-1"));
    let took = started.elapsed();

    assert_eq!(status, 503, "{body}");
    assert!(headers.get("retry-after").is_some(), "{headers}");
    assert!(
        took < Duration::from_secs(TIMEOUT_SECS.into()),
        "answered after {took:?}, the timeout is {TIMEOUT_SECS} s"
    );
    let id = rie.request_ids().last().cloned().expect("a START line");
    let lines = rie.invocation_lines(&id);
    println!(
        "the RIE's lines for the slow invocation:\n{}",
        lines.join("\n")
    );
    println!("the sender got: {status} {body} (after {took:?})");
    let report = lines.last().expect("lines");
    assert!(report.starts_with("REPORT RequestId"), "{lines:?}");
    assert!(
        !rie.logs().contains("Task timed out"),
        "the RIE ended the invocation:\n{}",
        rie.logs()
    );

    let c = db.client().await;
    let (state, attempt, error) = row(&c, "github", "slow-1").await.expect("row kept");
    println!("the row afterwards: status {state}, attempt {attempt}, last_error {error:?}");
    assert_eq!((state.as_str(), attempt), ("failed", 1), "{error:?}");

    // The same environment answers the next invocations: a new delivery, and the redelivery of
    // the slow one, whose second attempt is quick.
    let plain = serde_json::json!({"ref": "refs/heads/main"});
    let (status, body, _) = rie.deliver(&github_event("next-1", &plain, "api-next-1"));
    assert_eq!((status, body["status"].as_str()), (200, Some("processed")));
    let (status, body, _) = rie.deliver(&github_event("slow-1", &slow, "api-slow-2"));
    assert_eq!((status, body["status"].as_str()), (200, Some("processed")));
    assert_eq!(
        row(&c, "github", "slow-1").await.map(|r| (r.0, r.1)),
        Some(("done".to_string(), 2))
    );
    let logs = rie.logs();
    assert_eq!(
        logs.matches("INIT START").count(),
        1,
        "one environment:\n{logs}"
    );
}

#[tokio::test]
async fn delivery_lines_under_the_rie_carry_lambdas_request_id_and_powertools_keys() {
    let exe = webhook_bootstrap();
    let db = TestDb::empty().await;
    let rie = Rie::start(&exe, &environment(&db), TIMEOUT_SECS);
    let body = serde_json::json!({"ref": "refs/heads/main"});

    let (first, _, _) = rie.deliver(&github_event("corr-1", &body, "api-corr-1"));
    let (second, _, _) = rie.deliver(&github_event("corr-1", &body, "api-corr-2"));

    assert_eq!((first, second), (200, 200));
    let ids = rie.request_ids();
    for id in &ids {
        rie.invocation_lines(id);
    }
    let lines = rie.delivery_lines();
    for line in &lines {
        println!("a delivery line under the RIE: {line}");
    }
    assert_eq!(lines.len(), 2, "{}", rie.logs());
    for (i, (line, api)) in lines.iter().zip(["api-corr-1", "api-corr-2"]).enumerate() {
        assert_eq!(line["function_request_id"], ids[i].as_str(), "{line}");
        assert_eq!(line["correlation_id"], api, "{line}");
        assert_eq!(line["cold_start"], i == 0, "{line}");
        // The RIE hands the runtime no X-Ray trace header; Lambda does when tracing is on.
        assert!(line.get("xray_trace_id").is_none(), "{line}");
    }
    assert_eq!(lines[1]["outcome"], "duplicate");
}

#[tokio::test]
async fn a_bad_setting_fails_the_init_phase_as_lambda_reports_it() {
    let exe = webhook_bootstrap();
    let db = TestDb::empty().await;
    let mut env = environment(&db);
    env.insert("DATABASE_TLS".into(), "sometimes".into());
    let rie = Rie::start(&exe, &env, TIMEOUT_SECS);

    let (status, body) = rie.invoke(&github_event(
        "init-1",
        &serde_json::json!({}),
        "api-init-1",
    ));

    let logs = rie.logs();
    println!("the RIE's log of the failed cold start:\n{logs}");
    // The invocation fails (the RIE's 502; Lambda's Invoke API: FunctionError Unhandled), the
    // init phase ends in error with Lambda's error type, and the function's own line names the
    // setting.
    assert_eq!(status, 502, "{body}");
    assert!(logs.contains("INIT RTDONE(status: error)"), "{logs}");
    assert!(logs.contains("Runtime.ExitError"), "{logs}");
    assert!(
        logs.lines()
            .any(|l| l.contains("\"bad configuration\"") && l.contains("DATABASE_TLS")),
        "{logs}"
    );
    let c = db.client().await;
    assert_eq!(
        support::count(
            &c,
            "SELECT count(*) FROM pg_tables WHERE tablename = 'hookclaim_deliveries'"
        )
        .await,
        0
    );
}

#[tokio::test]
async fn a_cold_start_with_the_database_unreachable_completes_and_answers_503() {
    let exe = webhook_bootstrap();
    let db = TestDb::empty().await;
    let mut env = environment(&db);
    let closed = support::free_port();
    env.insert(
        "DATABASE_URL".into(),
        format!("postgres://postgres@127.0.0.1:{closed}/hookclaim"),
    );
    let rie = Rie::start(&exe, &env, TIMEOUT_SECS);

    let (status, body, headers) = rie.deliver(&github_event(
        "down-1",
        &serde_json::json!({}),
        "api-down-1",
    ));

    let logs = rie.logs();
    println!("the RIE's log of the cold start without a database:\n{logs}");
    assert_eq!(
        (status, body["status"].as_str()),
        (503, Some("unavailable"))
    );
    assert!(headers.get("retry-after").is_some(), "{headers}");
    assert!(logs.contains("INIT RTDONE(status: success)"), "{logs}");
    assert!(
        logs.contains("database not ready at cold start"),
        "the cold start says why:\n{logs}"
    );
}
