//! Strategy B: effects at another service. The forward processor calls a local HTTP endpoint
//! with an idempotency key; a crash between the call and finishing yields at most one repeat
//! call, carrying the same key.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hookclaim::forward::Forwarder;
use hookclaim::keyed::IDEMPOTENCY_KEY;
use hookclaim::processor::{Delivery, ProcessError, Processor};
use hookclaim::work::Work;
use support::endpoint::{self, HttpCall};
use support::{answer, github_request, row, Format, TestDb};

/// The idempotency key a call carried.
fn key(call: &HttpCall) -> &str {
    call.headers[IDEMPOTENCY_KEY].to_str().unwrap()
}

/// The forwarder, dying after its call on the first attempt (processing never returns, as when
/// the process is killed): the effect happened at the other service, the delivery was never
/// finished.
struct CrashAfterCall(Forwarder);

impl Processor for CrashAfterCall {
    fn name(&self) -> &'static str {
        "crash-after-call"
    }

    async fn process(&self, d: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        self.0.process(d, work).await?;
        if d.attempt == 1 {
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

fn forwarder(url: &str) -> Forwarder {
    Forwarder::new(url.parse().unwrap(), Duration::from_secs(5)).unwrap()
}

#[tokio::test]
async fn forwarded_once_and_a_duplicate_is_not_forwarded_again() {
    let db = TestDb::migrated().await;
    let (url, calls) = endpoint::start(200).await;
    let hook = support::webhook(&db.url, &[], forwarder(&url)).await;
    let body = br#"{"order_id":"o-1"}"#;

    let first = hook
        .handle(github_request(Format::HttpApiV2, "fwd-1", body, false))
        .await;
    let again = hook
        .handle(github_request(Format::HttpApiV2, "fwd-1", body, false))
        .await;

    assert_eq!(answer(&first).0, 200);
    assert_eq!(answer(&again).1["status"], "duplicate");
    let calls = calls.lock().await;
    assert_eq!(calls.len(), 1);
    assert_eq!(
        key(&calls[0]),
        hookclaim::processor::idempotency_key("github", "fwd-1")
    );
    assert_eq!(calls[0].body, br#"{"order_id":"o-1"}"#);
}

#[tokio::test]
async fn endpoint_errors_become_retries_or_dead_letters() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let (down, _) = endpoint::start(503).await;
    let hook = support::webhook(&db.url, &[], forwarder(&down)).await;
    let resp = hook
        .handle(support::github_delivery(Format::HttpApiV2, "fwd-503"))
        .await;
    assert_eq!(answer(&resp).0, 503);
    assert_eq!(row(&c, "github", "fwd-503").await.unwrap().0, "failed");

    let (gone, _) = endpoint::start(410).await;
    let hook = support::webhook(&db.url, &[], forwarder(&gone)).await;
    let resp = hook
        .handle(support::github_delivery(Format::HttpApiV2, "fwd-410"))
        .await;
    assert_eq!(answer(&resp).1["status"], "dead");

    // Nothing listening: a connection error is retryable.
    let port = support::free_port();
    let hook = support::webhook(
        &db.url,
        &[],
        forwarder(&format!("http://127.0.0.1:{port}/x")),
    )
    .await;
    let resp = hook
        .handle(support::github_delivery(Format::HttpApiV2, "fwd-refused"))
        .await;
    assert_eq!(answer(&resp).0, 503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_call_and_finishing_repeats_the_call_at_most_once_with_the_same_key() {
    let db = TestDb::migrated().await;
    let (url, calls) = endpoint::start(200).await;
    let overrides = [("LEASE_MARGIN_SECS", "0")];
    let hook =
        Arc::new(support::webhook(&db.url, &overrides, CrashAfterCall(forwarder(&url))).await);
    let body = br#"{"order_id":"o-crash"}"#;

    // The first invocation (a 3-second function timeout) calls the endpoint, then crashes.
    let req = support::with_deadline(
        github_request(Format::HttpApiV2, "fwd-crash", body, false),
        Duration::from_secs(3),
    );
    // The process is gone after a second, before hookclaim's own deadline handling would answer.
    let crashed = tokio::time::timeout(Duration::from_secs(1), hook.handle(req)).await;
    assert!(crashed.is_err(), "the invocation died without an answer");

    // The sender's retry while the lease holds: in progress, no call.
    let during = hook
        .handle(github_request(Format::HttpApiV2, "fwd-crash", body, false))
        .await;
    assert_eq!(answer(&during).0, 202, "{:?}", answer(&during));
    let c = db.client().await;
    let lease_left: f64 = c
        .query_one(
            "SELECT extract(epoch FROM lease_until - now())::float8 FROM hookclaim_deliveries
              WHERE delivery_id = 'fwd-crash'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    tokio::time::sleep(Duration::from_secs_f64(lease_left.max(0.0) + 0.2)).await;

    // After the lease: the retention re-drive finishes it, calling once more.
    let retention = support::retention(&db.url, &overrides, CrashAfterCall(forwarder(&url))).await;
    let report = retention
        .handle(
            serde_json::json!({}),
            SystemTime::now() + Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert_eq!(report.redriven.ok, 1);
    // And every later redelivery is a duplicate.
    let later = hook
        .handle(github_request(Format::HttpApiV2, "fwd-crash", body, false))
        .await;
    assert_eq!(answer(&later).1["status"], "duplicate");

    let calls = calls.lock().await;
    let key = hookclaim::processor::idempotency_key("github", "fwd-crash");
    println!("forward calls for one crashed delivery: {}", calls.len());
    assert_eq!(calls.len(), 2, "the original call and exactly one repeat");
    assert!(
        calls.iter().all(|c| self::key(c) == key),
        "both carry the same idempotency key"
    );
    assert_eq!(row(&c, "github", "fwd-crash").await.unwrap().0, "done");
}

/// A processor's own call through the keyed client: done on 2xx, deferred on a 429's
/// `Retry-After`, a counted retry on a 5xx, dead on another 4xx, each carrying the key.
#[tokio::test]
async fn a_processors_keyed_call_reads_each_answer_as_the_forwarder_does() {
    let http = hookclaim::KeyedHttp::new().unwrap();
    let d = Delivery::new("github", "keyed-1", "{}");
    let cases: [(u16, &[(&str, &str)]); 5] = [
        (201, &[]),
        (429, &[("Retry-After", "30")]),
        (503, &[("Retry-After", "45")]),
        (502, &[]),
        (400, &[]),
    ];
    let mut answers = Vec::new();
    for (status, headers) in cases {
        let (url, calls) = endpoint::start_with(status, headers).await;
        let answer = http.post(&url, &d, r#"{"text":"hi"}"#).await;
        let calls = calls.lock().await;
        assert_eq!(calls.len(), 1, "{status}");
        assert_eq!(key(&calls[0]), d.idempotency_key());
        assert_eq!(calls[0].body, br#"{"text":"hi"}"#);
        answers.push(answer);
    }

    assert_eq!(answers[0].as_ref().unwrap().as_u16(), 201);
    let e = answers[1].as_ref().unwrap_err();
    assert!(e.is_deferral() && e.retry_after() == Some(Duration::from_secs(30)));
    let e = answers[2].as_ref().unwrap_err();
    assert!(e.is_deferral() && e.retry_after() == Some(Duration::from_secs(45)));
    let e = answers[3].as_ref().unwrap_err();
    assert!(!e.is_deferral() && !e.is_permanent() && e.retry_after().is_none());
    assert!(answers[4].as_ref().unwrap_err().is_permanent());
    let bad_url = http.post("not a url", &d, "{}").await.unwrap_err();
    assert!(bad_url.is_permanent(), "{bad_url}");
}
