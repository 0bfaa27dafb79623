//! `hookclaim::testing` as a user's own crate uses it: harnesses on one database that never see
//! each other's rows, a clock the test moves, the retention pass in process, the same keying as
//! the function (replay guard included), and signed requests through the real `Webhook`.

use std::time::{Duration, SystemTime};

use hookclaim::testing::{Happened, Harness, SigningKey, Status};
use hookclaim::tokio_postgres::{self, Transaction};
use hookclaim::{Delivery, ProcessError, Processor, Work};

use crate::support;

const SOURCES: &str = r#"{"stripe":{"kind":"stripe"},"github":{"kind":"github"}}"#;
const SECRETS: &str = r#"{"stripe":"whsec_harness_test","github":"harness-github-secret"}"#;

/// Records each delivery it runs in `effects`, and fails a delivery's first attempt when its
/// body says `"fail_first": true`.
struct Effects;

impl Processor for Effects {
    fn name(&self) -> &'static str {
        "effects"
    }

    async fn setup(&self, tx: &Transaction<'_>) -> Result<(), tokio_postgres::Error> {
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS effects (delivery_id text NOT NULL, attempt integer NOT NULL)",
        )
        .await
    }

    async fn process(&self, d: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        let body: serde_json::Value = d.json()?;
        if body["fail_first"] == true && d.attempt == 1 {
            return Err(ProcessError::new("the downstream is down"));
        }
        work.queue(
            "INSERT INTO effects (delivery_id, attempt) VALUES ($1, $2)",
            &[&d.delivery_id, &d.attempt],
        );
        Ok(())
    }
}

/// A harness over the shared server's admin database, as every test here uses the same one.
async fn harness() -> Harness<Effects> {
    let url = tokio::task::spawn_blocking(support::admin_url)
        .await
        .expect("the server");
    Harness::builder(Effects)
        .sources(SOURCES)
        .secrets(SECRETS)
        .connect(&url)
        .await
        .expect("harness")
}

/// The number of effects recorded in `harness`'s schema.
async fn effects(harness: &Harness<Effects>) -> i64 {
    support::count(harness.client(), "SELECT count(*) FROM effects").await
}

/// A Stripe event `id` with `extra` fields in its body.
fn stripe_event(id: &str, extra: serde_json::Value) -> Delivery {
    let mut body = serde_json::json!({"id": id, "type": "invoice.paid"});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    Delivery::new("stripe", id, body.to_string()).with_event_type("invoice.paid")
}

/// Delivers the same ids as [`same_ids_in_a_second_parallel_test`]: each finds a ledger of its
/// own, new at every id.
async fn deliver_the_shared_ids() {
    let harness = harness().await;
    for round in 0..5 {
        let d = stripe_event("evt_shared", serde_json::json!({}));
        let delivered = harness.deliver(&d).await.unwrap();
        let expected = if round == 0 {
            Happened::Done
        } else {
            Happened::Duplicate
        };
        assert_eq!(delivered.outcome.happened, expected, "{delivered:?}");
        let row = delivered.row.expect("its row");
        assert_eq!((row.status, row.attempt), (Status::Done, 1));
        tokio::task::yield_now().await;
    }
    assert_eq!(effects(&harness).await, 1);
}

#[tokio::test]
async fn same_ids_in_one_parallel_test() {
    deliver_the_shared_ids().await;
}

#[tokio::test]
async fn same_ids_in_a_second_parallel_test() {
    deliver_the_shared_ids().await;
}

#[tokio::test]
async fn harnesses_running_at_once_on_one_database_never_see_each_others_rows() {
    let (first, second) = tokio::join!(harness(), harness());
    assert_ne!(first.schema(), second.schema());
    // The same id: failing in one, done in the other.
    let failing = stripe_event("evt_1", serde_json::json!({"fail_first": true}));
    let passing = stripe_event("evt_1", serde_json::json!({}));
    let (failed, done) = tokio::join!(first.deliver(&failing), second.deliver(&passing));
    let (failed, done) = (failed.unwrap(), done.unwrap());

    assert!(
        matches!(failed.outcome.happened, Happened::Failed(_)),
        "{failed:?}"
    );
    assert_eq!(failed.row.unwrap().status, Status::Failed);
    assert_eq!(done.outcome.happened, Happened::Done);
    assert_eq!(done.row.unwrap().status, Status::Done);
    assert_eq!((effects(&first).await, effects(&second).await), (0, 1));
}

#[tokio::test]
async fn a_failed_delivery_is_refused_until_the_clock_makes_it_due_then_redriven() {
    let harness = harness().await;
    let d = stripe_event("evt_retry", serde_json::json!({"fail_first": true}));
    let failed = harness.deliver(&d).await.unwrap();
    let Happened::Failed(retry_in) = failed.outcome.happened else {
        panic!("the first attempt fails: {failed:?}");
    };
    let row = failed.row.unwrap();
    assert_eq!((row.status, row.attempt), (Status::Failed, 1));
    assert_eq!(row.last_error.as_deref(), Some("the downstream is down"));
    let due = row.next_attempt_at.expect("a failed row's next attempt");
    assert!(due > SystemTime::now(), "due in {retry_in:?}");

    // Before it is due: the sender's redelivery is told to retry later, and the retention pass
    // leaves it.
    let early = harness.deliver(&d).await.unwrap();
    assert!(
        matches!(early.outcome.happened, Happened::RetryLater(_)),
        "{early:?}"
    );
    let report = harness.retention_pass().await.unwrap();
    assert_eq!(report.reclaimed, 0, "{report:?}");
    let row = harness.row("stripe", "evt_retry").await.unwrap().unwrap();
    assert_eq!((row.status, row.attempt), (Status::Failed, 1));
    assert_eq!(effects(&harness).await, 0);

    // Past its next attempt: the retention pass re-drives it, as attempt 2.
    harness
        .advance(retry_in + Duration::from_secs(1))
        .await
        .unwrap();
    let report = harness.retention_pass().await.unwrap();
    assert_eq!(report.reclaimed, 1, "{report:?}");
    assert_eq!(report.redriven.ok, 1, "{report:?}");
    let row = harness.row("stripe", "evt_retry").await.unwrap().unwrap();
    assert_eq!((row.status, row.attempt), (Status::Done, 2));
    assert_eq!(effects(&harness).await, 1);
    // And the sender's redelivery is now a duplicate.
    let late = harness.deliver(&d).await.unwrap();
    assert_eq!(late.outcome.happened, Happened::Duplicate);
}

#[tokio::test]
async fn a_finished_row_is_purged_once_the_clock_passes_its_retention() {
    let harness = harness().await;
    let d = stripe_event("evt_old", serde_json::json!({}));
    assert_eq!(
        harness.deliver(&d).await.unwrap().outcome.happened,
        Happened::Done
    );
    let report = harness.retention_pass().await.unwrap();
    assert_eq!(report.purged, 0, "{report:?}");

    // RETENTION_DAYS is 30 by default.
    harness
        .advance(Duration::from_secs(31 * 86_400))
        .await
        .unwrap();
    let report = harness.retention_pass().await.unwrap();
    assert_eq!(report.purged, 1, "{report:?}");
    assert_eq!(harness.row("stripe", "evt_old").await.unwrap(), None);
}

#[tokio::test]
async fn a_redelivery_through_the_webhook_before_the_retry_is_due_answers_retry_later() {
    let harness = harness().await;
    let body = r#"{"id":"evt_web","type":"invoice.paid","fail_first":true}"#;
    let send = || harness.request("stripe").body(body).build().unwrap();

    let first = harness.webhook().handle(send()).await;
    assert_eq!(first.status(), 503);
    let early = harness.webhook().handle(send()).await;
    let (status, answer) = support::answer(&early);
    assert_eq!(
        (status, answer["status"].as_str()),
        (503, Some("retry_later"))
    );
    assert!(early.headers().contains_key("retry-after"));

    harness.advance(Duration::from_secs(3600)).await.unwrap();
    let due = harness.webhook().handle(send()).await;
    let (status, answer) = support::answer(&due);
    assert_eq!(
        (status, answer["status"].as_str()),
        (200, Some("processed"))
    );
    let row = harness.row("stripe", "evt_web").await.unwrap().unwrap();
    assert_eq!((row.status, row.attempt), (Status::Done, 2));
}

#[tokio::test]
async fn a_github_body_under_a_new_id_is_a_duplicate_in_the_harness_as_in_the_function() {
    let harness = harness().await;
    let body = r#"{"ref":"refs/heads/main","after":"6dcb09b"}"#;
    let first = Delivery::new("github", "gh-1", body).with_event_type("push");
    assert_eq!(
        harness.deliver(&first).await.unwrap().outcome.happened,
        Happened::Done
    );

    // The same signed body under another id, in memory…
    let resent = Delivery::new("github", "gh-2", body).with_event_type("push");
    let duplicate = harness.deliver(&resent).await.unwrap();
    assert_eq!(duplicate.outcome.happened, Happened::Duplicate);
    assert!(duplicate.outcome.replayed_body, "{duplicate:?}");
    assert_eq!(duplicate.row, None, "nothing stored under the new id");

    // …and through the webhook function: 200, a duplicate.
    let request = harness
        .request("github")
        .id("gh-3")
        .event_type("push")
        .body(body)
        .build()
        .unwrap();
    let (status, answer) = support::answer(&harness.webhook().handle(request).await);
    assert_eq!(
        (status, answer["status"].as_str()),
        (200, Some("duplicate"))
    );
    assert_eq!(effects(&harness).await, 1);
}

#[tokio::test]
async fn a_signed_request_goes_through_the_real_webhook_and_a_wrong_key_is_refused() {
    let harness = harness().await;
    let body = r#"{"id":"evt_signed","type":"invoice.paid"}"#;
    let request = harness.request("stripe").body(body).build().unwrap();
    let (status, answer) = support::answer(&harness.webhook().handle(request).await);
    assert_eq!(
        (status, &answer),
        (
            200,
            &serde_json::json!({"status": "processed", "delivery_id": "evt_signed"})
        )
    );
    let row = harness.row("stripe", "evt_signed").await.unwrap().unwrap();
    assert_eq!(row.status, Status::Done);
    assert_eq!(row.event_type.as_deref(), Some("invoice.paid"));

    let forged = harness
        .request("stripe")
        .body(r#"{"id":"evt_forged","type":"invoice.paid"}"#)
        .signing_key(SigningKey::hmac("not the secret"))
        .build()
        .unwrap();
    assert_eq!(harness.webhook().handle(forged).await.status(), 401);
    let stale = harness
        .request("stripe")
        .body(r#"{"id":"evt_stale","type":"invoice.paid"}"#)
        .signed_at(SystemTime::now() - Duration::from_secs(3600))
        .build()
        .unwrap();
    assert_eq!(harness.webhook().handle(stale).await.status(), 401);
    assert_eq!(effects(&harness).await, 1);
}

#[tokio::test]
async fn a_source_that_is_not_configured_is_refused_as_the_function_refuses_it() {
    let harness = harness().await;
    let unknown = Delivery::new("paypal", "p-1", "{}");
    let err = harness.deliver(&unknown).await.unwrap_err();
    assert!(
        matches!(err, hookclaim::testing::HarnessError::UnknownSource(ref s) if s == "paypal"),
        "{err}"
    );
    assert!(harness.request("paypal").build().is_err());
}

#[tokio::test]
async fn the_clock_moves_every_time_the_ledger_stores() {
    let harness = harness().await;
    let columns = harness
        .client()
        .query(
            "SELECT table_name::text, column_name::text FROM information_schema.columns
              WHERE table_schema = current_schema() AND table_name LIKE 'hookclaim\\_%'
                AND table_name <> 'hookclaim_schema_migrations'
                AND data_type = 'timestamp with time zone'",
            &[],
        )
        .await
        .unwrap();
    assert!(columns.len() >= 7, "the ledger's times: {}", columns.len());
    let advance = include_str!("../../src/testing/sql/advance.sql");
    for c in columns {
        let (table, column): (String, String) = (c.get(0), c.get(1));
        let shifted = format!("{column} = {column} - make_interval(secs => $1)");
        assert!(
            advance.contains(&format!("UPDATE {table}")) && advance.contains(&shifted),
            "advance.sql does not move {table}.{column}"
        );
    }
}

#[tokio::test]
async fn a_harness_drops_its_schema_when_it_is_dropped_or_cleaned_up() {
    let observer = harness().await;
    let dropped = harness().await;
    let dropped_schema = dropped.schema().to_owned();
    let cleaned = harness().await;
    let cleaned_schema = cleaned.schema().to_owned();
    let count =
        |schema: &str| format!("SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'");
    assert_eq!(
        support::count(observer.client(), &count(&dropped_schema)).await,
        1
    );

    drop(dropped);
    cleaned.cleanup().await.unwrap();
    assert_eq!(
        support::count(observer.client(), &count(&dropped_schema)).await,
        0
    );
    assert_eq!(
        support::count(observer.client(), &count(&cleaned_schema)).await,
        0
    );
}

#[tokio::test]
async fn an_in_memory_delivery_is_keyed_as_the_same_request_through_the_webhook() {
    let harness = harness().await;
    let origin = |id: &'static str| {
        let c = harness.client();
        async move {
            c.query_one(
                "SELECT id_origin, replay_guard, long_key_retention FROM hookclaim_deliveries
                  WHERE delivery_id = $1",
                &[&id],
            )
            .await
            .map(|r| {
                (
                    r.get::<_, String>(0),
                    r.get::<_, bool>(1),
                    r.get::<_, bool>(2),
                )
            })
            .unwrap()
        }
    };
    let memory = [
        stripe_event("evt_m", serde_json::json!({})),
        Delivery::new("github", "gh-m", r#"{"n":1}"#),
    ];
    for d in &memory {
        harness.deliver(d).await.unwrap();
    }
    let requests = [
        harness
            .request("stripe")
            .body(r#"{"id":"evt_w","type":"invoice.paid"}"#)
            .build()
            .unwrap(),
        harness
            .request("github")
            .id("gh-w")
            .event_type("push")
            .body(r#"{"n":2}"#)
            .build()
            .unwrap(),
    ];
    for request in requests {
        assert_eq!(harness.webhook().handle(request).await.status(), 200);
    }

    assert_eq!(origin("evt_m").await, origin("evt_w").await);
    assert_eq!(origin("evt_m").await, ("body".into(), false, false));
    assert_eq!(origin("gh-m").await, origin("gh-w").await);
    assert_eq!(origin("gh-m").await, ("header".into(), true, true));
}
