//! A throttling downstream defers a delivery (`ProcessError::defer`): tried again no sooner than
//! it said, without spending an attempt, and bounded by the delivery's age instead.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hookclaim::testing::{Happened, Harness, Status};
use hookclaim::{Delivery, ProcessError, Processor, Work};
use support::{answer, github_request, row, Format, TestDb};

/// What the throttling downstream asks for, as its `Retry-After` would.
const WAIT: Duration = Duration::from_secs(30);

/// Defers every call until `throttled` calls have been deferred, then succeeds.
struct Throttled {
    throttled: usize,
    calls: AtomicUsize,
}

impl Throttled {
    fn new(throttled: usize) -> Self {
        Throttled {
            throttled,
            calls: AtomicUsize::new(0),
        }
    }
}

impl Processor for Throttled {
    fn name(&self) -> &'static str {
        "throttled"
    }

    async fn process(&self, _: &Delivery, _: &mut Work<'_>) -> Result<(), ProcessError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.throttled {
            return Err(ProcessError::defer("chat API answered 429", WAIT));
        }
        Ok(())
    }
}

/// The row's attempt number and deferrals.
async fn counts(c: &tokio_postgres::Client, id: &str) -> (String, i32, i32) {
    let r = c
        .query_one(
            "SELECT status, attempt, deferrals FROM hookclaim_deliveries
              WHERE delivery_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

#[tokio::test]
async fn a_deferred_delivery_answers_503_with_the_downstreams_retry_after() {
    let db = TestDb::migrated().await;
    let config = support::config(&db.url, &[("RETRY_BASE_SECS", "5")]);
    let hook = hookclaim::Webhook::from_config(&config, Throttled::new(1))
        .await
        .unwrap();

    let resp = hook
        .handle(github_request(
            Format::HttpApiV2,
            "throttled-1",
            b"{}",
            false,
        ))
        .await;

    let (status, json) = answer(&resp);
    assert_eq!((status, json["status"].as_str()), (503, Some("deferred")));
    assert_eq!(resp.headers()["retry-after"], "30");
    let c = db.client().await;
    assert_eq!(counts(&c, "throttled-1").await, ("failed".into(), 1, 1));
    let (_, _, error) = row(&c, "github", "throttled-1").await.unwrap();
    assert_eq!(error.as_deref(), Some("chat API answered 429"));
}

/// A harness over `processor` with GitHub as its source (the default policy: MAX_ATTEMPTS 8,
/// MAX_DELIVERY_AGE_SECS three days).
async fn harness(db: &TestDb, processor: Throttled) -> Harness<Throttled> {
    Harness::builder(processor)
        .sources(r#"{"github":{"kind":"github"}}"#)
        .connect(&db.url)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_delivery_deferred_more_times_than_max_attempts_spends_none_and_is_then_done() {
    let db = TestDb::migrated().await;
    let deferrals = 10;
    let h = harness(&db, Throttled::new(deferrals)).await;
    let d = Delivery::new("github", "throttled-many", "{}");

    let first = h.deliver(&d).await.unwrap();
    assert_eq!(first.outcome.happened, Happened::Deferred(WAIT));
    for _ in 1..deferrals {
        // Refused before it is due, taken once the clock has moved past the downstream's wait.
        let early = h.deliver(&d).await.unwrap();
        assert!(
            matches!(early.outcome.happened, Happened::RetryLater(_)),
            "{early:?}"
        );
        h.advance(WAIT).await.unwrap();
        let again = h.deliver(&d).await.unwrap();
        assert_eq!(
            again.outcome.happened,
            Happened::Deferred(WAIT),
            "{again:?}"
        );
    }
    h.advance(WAIT).await.unwrap();
    let done = h.deliver(&d).await.unwrap();

    assert_eq!(done.outcome.happened, Happened::Done, "{done:?}");
    assert_eq!(done.outcome.attempt, Some(deferrals as i32 + 1));
    // Every attempt but the last was deferred: one counted toward the cap of 8.
    let counts: (i32, i32) = h
        .client()
        .query_one(
            "SELECT attempt, deferrals FROM hookclaim_deliveries
              WHERE delivery_id = 'throttled-many'",
            &[],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(counts, (deferrals as i32 + 1, deferrals as i32));
}

#[tokio::test]
async fn a_delivery_still_deferred_at_its_age_bound_is_dead_with_the_reason() {
    let db = TestDb::migrated().await;
    let h = harness(&db, Throttled::new(usize::MAX)).await;
    let d = Delivery::new("github", "throttled-old", "{}");
    let first = h.deliver(&d).await.unwrap();
    assert_eq!(first.outcome.happened, Happened::Deferred(WAIT));

    // Three days on (MAX_DELIVERY_AGE_SECS' default), the next deferral would fall due past
    // the bound.
    h.advance(Duration::from_secs(3 * 86_400)).await.unwrap();
    let dead = h.deliver(&d).await.unwrap();

    let reason = "gave up: deferred past the delivery's age bound of 259200 seconds: \
                  chat API answered 429";
    assert_eq!(dead.outcome.happened, Happened::Dead);
    assert_eq!(dead.outcome.reason.as_deref(), Some(reason));
    let row = dead.row.unwrap();
    assert_eq!((row.status, row.attempt), (Status::Dead, 2));
    assert_eq!(row.last_error.as_deref(), Some(reason));
}
