//! The retention function on a real PostgreSQL: re-drive of expired leases and due retries
//! (with backoff, dead-lettering and fencing), purge and trim, the deadline, every operator
//! command (and malformed ones), and the scheduled events.

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use crate::support::licences::Licences;
use hookclaim::config::{Config, RetentionSettings, RetryPolicy};
use hookclaim::ledger::{self, Attempt, Claim, Finish, Ledger};
use hookclaim::pipeline::{self, Happened};
use hookclaim::processor::{Delivery, ProcessError, Processor, StoreOnly};
use hookclaim::retention::{Backlog, Report, Retention, RetentionError, TRIMMED_PAYLOAD_ERROR};
use hookclaim::work::Work;
use serde_json::{json, Value};
use support::ledger::{
    assert_rows_well_formed, claim_as, exists, expire_lease, licences, make_due, state, status,
};
use support::TestDb;
use tokio_postgres::Client;

const DAY: u64 = 86_400;

fn settings() -> RetentionSettings {
    RetentionSettings {
        retention: Duration::from_secs(30 * DAY),
        key_retention: Duration::from_secs(365 * DAY),
        trim_after: None,
        trim_dead_after: None,
        batch_size: 1000,
        deadline_margin: Duration::from_secs(1),
        redrive_timeout: Duration::from_secs(10),
    }
}

fn policy(max_attempts: i32, base: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base,
        cap: Duration::from_secs(3600),
        max_delivery_age: Duration::from_secs(3 * 86_400),
    }
}

/// Five attempts, the first retry 30 to 60 s later: for the tests that are not about backoff.
fn usual_policy() -> RetryPolicy {
    policy(5, Duration::from_secs(30))
}

/// The configuration a deployed function would read, pointed at the test database.
fn config(db: &TestDb) -> Config {
    config_with(db, &[])
}

/// [`config`] with `extra` settings added.
fn config_with(db: &TestDb, extra: &[(&'static str, &str)]) -> Config {
    let mut vars = BTreeMap::from([
        (
            "HOOKCLAIM_SOURCES",
            r#"{"stripe":{"kind":"stripe"}}"#.to_string(),
        ),
        ("DATABASE_URL", db.url.clone()),
        ("DATABASE_TLS", "disable".to_string()),
    ]);
    vars.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    Config::from_lookup(|k| vars.get(k).cloned()).expect("test configuration")
}

async fn retention<P: Processor>(
    db: &TestDb,
    processor: P,
    settings: RetentionSettings,
    retry: RetryPolicy,
) -> Retention<P> {
    retention_on(&config(db), processor, settings, retry).await
}

/// [`retention`] with `config`.
async fn retention_on<P: Processor>(
    config: &Config,
    processor: P,
    settings: RetentionSettings,
    retry: RetryPolicy,
) -> Retention<P> {
    let database = hookclaim::environment::database(config).await.unwrap();
    Retention::new(
        database,
        processor,
        settings,
        retry,
        Duration::from_secs(10),
    )
}

fn in_a_minute() -> SystemTime {
    SystemTime::now() + Duration::from_secs(60)
}

/// A scheduled run with a minute to go.
async fn run<P: Processor>(r: &Retention<P>) -> Report {
    r.handle(json!({}), in_a_minute()).await.expect("run")
}

/// A Stripe-like event body whose order id the licence example finds.
fn order_body(id: &str, order: &str) -> String {
    json!({
        "id": id,
        "type": "checkout.session.completed",
        "data": {"object": {"id": "cs_x", "metadata": {"order_id": order}}}
    })
    .to_string()
}

/// Claims a Stripe delivery as a webhook invocation `owner` would: processing, with its payload.
async fn claim(c: &Client, id: &str, body: &str, owner: &str) -> Claim {
    claim_as(c, "stripe", id, body, owner).await
}

/// Attempt 1 at `id`, as webhook invocation `owner` claimed it with [`claim`].
fn first_attempt<'a>(id: &'a str, owner: &'a str) -> Attempt<'a> {
    Attempt {
        source: "stripe",
        delivery_id: id,
        attempt: 1,
        owner,
    }
}

/// Inserts a row in `status`, received (and, when finished, completed) `days_ago`.
async fn insert(c: &Client, source: &str, id: &str, status: &str, days_ago: i32) {
    c.execute(
        "INSERT INTO hookclaim_deliveries
             (source, delivery_id, id_origin, status, attempt, lease_owner, lease_until,
              next_attempt_at, payload, payload_sha256, headers, long_key_retention, received_at,
              completed_at)
         VALUES ($1, $2, 'header', $3, 1, 'someone',
                 CASE WHEN $3 = 'processing' THEN now() + interval '5 minutes' END,
                 CASE WHEN $3 = 'failed' THEN now() + interval '1 hour' END,
                 convert_to($2, 'UTF8'), sha256(convert_to($2, 'UTF8')), '{}', false,
                 now() - make_interval(days => $4),
                 CASE WHEN $3 IN ('done', 'dead') THEN now() - make_interval(days => $4) END)",
        &[&source, &id, &status, &days_ago],
    )
    .await
    .unwrap();
}

/// Seconds between when the row last changed and its next attempt: the backoff it was given.
async fn backoff_secs(c: &Client, id: &str) -> f64 {
    c.query_one(
        "SELECT extract(epoch FROM next_attempt_at - updated_at)::float8
           FROM hookclaim_deliveries WHERE delivery_id = $1",
        &[&id],
    )
    .await
    .unwrap()
    .get(0)
}

/// Every column of every row, to prove that something changed nothing.
async fn snapshot(c: &Client) -> String {
    c.query_one(
        "SELECT coalesce(string_agg(d::text, E'\\n' ORDER BY source, delivery_id), '')
           FROM hookclaim_deliveries d",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

/// A processor whose downstream is always unavailable.
struct AlwaysRetry;

impl Processor for AlwaysRetry {
    fn name(&self) -> &'static str {
        "always-retry"
    }

    async fn process(
        &self,
        _delivery: &Delivery,
        _work: &mut Work<'_>,
    ) -> Result<(), ProcessError> {
        Err(ProcessError::new("downstream answered 503"))
    }
}

// --- Reclaim and re-drive -------------------------------------------------------------------

#[tokio::test]
async fn expired_lease_is_redriven_to_done_once_and_a_live_lease_is_left_alone() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    r.ensure_ready().await.unwrap();
    claim(
        &c,
        "evt_expired",
        &order_body("evt_expired", "order-1"),
        "webhook-a",
    )
    .await;
    claim(
        &c,
        "evt_live",
        &order_body("evt_live", "order-2"),
        "webhook-b",
    )
    .await;
    expire_lease(&c, "evt_expired").await;

    let report = run(&r).await;

    assert_eq!(report.reclaimed, 1);
    assert_eq!(report.redriven.ok, 1);
    assert_eq!(
        status(&c, "stripe", "evt_expired").await,
        ("done".into(), 2)
    );
    assert_eq!(licences(&c, "order-1").await, 1, "exactly one licence");
    assert_eq!(
        status(&c, "stripe", "evt_live").await,
        ("processing".into(), 1)
    );
    assert_eq!(licences(&c, "order-2").await, 0, "live lease untouched");

    let again = run(&r).await;
    assert_eq!(again.reclaimed, 0);
    assert_eq!(licences(&c, "order-1").await, 1);
}

#[tokio::test]
async fn due_failed_row_is_redriven_and_a_not_yet_due_one_is_not() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    r.ensure_ready().await.unwrap();
    for (id, order, retry_in) in [("evt_due", "order-d", 0), ("evt_later", "order-l", 600)] {
        claim(&c, id, &order_body(id, order), "webhook").await;
        let at = first_attempt(id, "webhook");
        let finish = ledger::finish_failed(&c, &at, "timeout", Duration::from_secs(retry_in)).await;
        assert_eq!(finish.unwrap(), Finish::Applied);
    }

    let report = run(&r).await;

    assert_eq!((report.reclaimed, report.redriven.ok), (1, 1));
    assert_eq!(status(&c, "stripe", "evt_due").await, ("done".into(), 2));
    assert_eq!(state(&c, "stripe", "evt_due").await.last_error, None);
    assert_eq!(licences(&c, "order-d").await, 1);
    assert_eq!(
        status(&c, "stripe", "evt_later").await,
        ("failed".into(), 1)
    );
    assert_eq!(licences(&c, "order-l").await, 0);
}

#[tokio::test]
async fn failing_redrive_backs_off_with_growing_delays_and_ends_dead_after_max_attempts() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(
        &db,
        AlwaysRetry,
        settings(),
        policy(4, Duration::from_secs(10)),
    )
    .await;
    claim(&c, "evt_poison", "{}", "webhook").await;
    expire_lease(&c, "evt_poison").await;

    // Attempt 2: failed, due again after backoff(2) = 10..20 s.
    let first = run(&r).await;
    assert_eq!((first.reclaimed, first.redriven.failed), (1, 1));
    assert_eq!(
        status(&c, "stripe", "evt_poison").await,
        ("failed".into(), 2)
    );
    let delay2 = backoff_secs(&c, "evt_poison").await;
    assert!((10.0..20.0).contains(&delay2), "{delay2}");
    assert_eq!(
        state(&c, "stripe", "evt_poison")
            .await
            .last_error
            .as_deref(),
        Some("downstream answered 503")
    );

    // Not due yet: a run leaves it alone.
    let idle = run(&r).await;
    assert_eq!(idle.reclaimed, 0);
    assert_eq!(
        status(&c, "stripe", "evt_poison").await,
        ("failed".into(), 2)
    );

    // Attempt 3: failed again, with a longer delay (20..40 s).
    make_due(&c, "evt_poison").await;
    let second = run(&r).await;
    assert_eq!(second.redriven.failed, 1);
    let delay3 = backoff_secs(&c, "evt_poison").await;
    assert!((20.0..40.0).contains(&delay3), "{delay3}");
    assert!(delay3 > delay2, "backoff grows: {delay2} then {delay3}");

    // Attempt 4 is the last: dead, and reported with its error.
    make_due(&c, "evt_poison").await;
    let last = run(&r).await;
    assert_eq!(last.redriven.dead, 1);
    assert_eq!(last.dead.len(), 1);
    let dead = &last.dead[0];
    assert_eq!((dead.delivery_id.as_str(), dead.attempt), ("evt_poison", 4));
    assert_eq!(
        dead.error,
        "gave up after 4 attempts: downstream answered 503"
    );
    let st = state(&c, "stripe", "evt_poison").await;
    assert_eq!((st.status.as_str(), st.attempt), ("dead", 4));
    assert_eq!(st.last_error.as_deref(), Some(dead.error.as_str()));
    assert!(st.has_payload, "kept for a manual replay");
    assert_rows_well_formed(&c).await;

    // Dead is final for the scheduled runs.
    assert_eq!(run(&r).await.reclaimed, 0);
}

#[tokio::test]
async fn each_due_delivery_gets_at_most_one_attempt_per_run_even_without_backoff() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, AlwaysRetry, settings(), policy(5, Duration::ZERO)).await;
    claim(&c, "evt_spin", "{}", "webhook").await;
    expire_lease(&c, "evt_spin").await;

    let first = run(&r).await;

    assert_eq!((first.reclaimed, first.redriven.failed), (1, 1));
    assert_eq!(status(&c, "stripe", "evt_spin").await, ("failed".into(), 2));
    assert_eq!(
        first.remaining.map(|b| b.reclaim),
        Some(1),
        "due again at once, left for the next run"
    );
    let second = run(&r).await;
    assert_eq!(second.reclaimed, 1);
    assert_eq!(status(&c, "stripe", "evt_spin").await, ("failed".into(), 3));
}

#[tokio::test]
async fn a_zombie_finishing_after_the_redrive_took_over_changes_nothing() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    r.ensure_ready().await.unwrap();
    let body = order_body("evt_zombie", "order-z");
    assert_eq!(
        claim(&c, "evt_zombie", &body, "zombie").await,
        Claim::Claimed {
            attempt: 1,
            same_payload: true
        }
    );
    expire_lease(&c, "evt_zombie").await;
    assert_eq!(run(&r).await.redriven.ok, 1);
    assert_eq!(status(&c, "stripe", "evt_zombie").await, ("done".into(), 2));
    let before = snapshot(&c).await;

    // The first invocation thaws and finishes its attempt 1, by every route it has.
    let delivery = Delivery::new("stripe", "evt_zombie", body.into_bytes());
    let retry = usual_policy();
    let mut ledger = Ledger::open(r.database()).await;
    let done = pipeline::run_claimed(
        &mut ledger,
        &Licences,
        &delivery,
        "zombie",
        &retry,
        in_a_minute(),
    )
    .await;
    let failed = pipeline::run_claimed(
        &mut ledger,
        &AlwaysRetry,
        &delivery,
        "zombie",
        &retry,
        in_a_minute(),
    )
    .await;
    drop(ledger);
    let at = first_attempt("evt_zombie", "zombie");
    let dead = ledger::finish_dead(&c, &at, "late").await.unwrap();

    assert_eq!(done.unwrap().happened, Happened::Fenced);
    assert_eq!(failed.unwrap().happened, Happened::Fenced);
    assert_eq!(dead, Finish::Fenced);
    assert_eq!(snapshot(&c).await, before, "nothing changed");
    assert_eq!(licences(&c, "order-z").await, 1);
}

#[tokio::test]
async fn a_reclaimed_row_without_its_payload_is_marked_dead_with_a_clear_error() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    claim(
        &c,
        "evt_bare",
        &order_body("evt_bare", "order-b"),
        "webhook",
    )
    .await;
    c.execute(
        "UPDATE hookclaim_deliveries SET payload = NULL, payload_trimmed_at = now(),
                lease_until = now() - interval '1 second' WHERE delivery_id = 'evt_bare'",
        &[],
    )
    .await
    .unwrap();

    let report = run(&r).await;

    assert_eq!((report.reclaimed, report.redriven.dead), (1, 1));
    assert_eq!(report.dead[0].error, TRIMMED_PAYLOAD_ERROR);
    let st = state(&c, "stripe", "evt_bare").await;
    assert_eq!((st.status.as_str(), st.attempt), ("dead", 2));
    assert_eq!(st.last_error.as_deref(), Some(TRIMMED_PAYLOAD_ERROR));
    assert_eq!(licences(&c, "order-b").await, 0);
}

// --- Purge and trim -------------------------------------------------------------------------

#[tokio::test]
async fn purge_deletes_exactly_the_finished_rows_past_the_horizon() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let small_batches = RetentionSettings {
        batch_size: 2,
        ..settings()
    };
    let r = retention(&db, StoreOnly, small_batches, usual_policy()).await;
    for i in 0..5 {
        insert(&c, "stripe", &format!("old_done_{i}"), "done", 31 + i).await;
    }
    insert(&c, "stripe", "old_dead", "dead", 45).await;
    insert(&c, "stripe", "recent_done", "done", 29).await;
    insert(&c, "stripe", "recent_dead", "dead", 1).await;
    insert(&c, "stripe", "old_processing", "processing", 60).await;
    insert(&c, "stripe", "old_failed", "failed", 60).await;

    let report = run(&r).await;

    assert_eq!(report.purged, 6, "in batches of 2");
    assert!(!report.stopped_early);
    assert_eq!(report.remaining, Some(Backlog::default()));
    for i in 0..5 {
        assert!(!exists(&c, "stripe", &format!("old_done_{i}")).await);
    }
    assert!(!exists(&c, "stripe", "old_dead").await);
    for kept in ["recent_done", "recent_dead", "old_processing", "old_failed"] {
        assert!(exists(&c, "stripe", kept).await, "{kept} must stay");
    }
}

/// Gives `id` long key retention, as the webhook does for a source whose signatures do not
/// expire.
async fn keep_key_longer(c: &Client, id: &str) {
    c.execute(
        "UPDATE hookclaim_deliveries SET long_key_retention = true WHERE delivery_id = $1",
        &[&id],
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_kept_key_outlives_its_payload_so_a_late_replay_is_still_a_duplicate() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, StoreOnly, settings(), usual_policy()).await;
    // Past RETENTION_DAYS (30): a row whose key goes with it, and kept keys, done and dead.
    insert(&c, "stripe", "timed_old", "done", 40).await;
    for (id, status) in [("untimed_old", "done"), ("untimed_old_dead", "dead")] {
        insert(&c, "github", id, status, 40).await;
        keep_key_longer(&c, id).await;
    }
    // Within the payload window, and past KEY_RETENTION_DAYS (365).
    insert(&c, "github", "untimed_fresh", "done", 3).await;
    keep_key_longer(&c, "untimed_fresh").await;
    insert(&c, "github", "untimed_ancient", "done", 400).await;
    keep_key_longer(&c, "untimed_ancient").await;

    let report = run(&r).await;

    assert_eq!(
        report.purged, 2,
        "the timed row at 30 days, the kept key at 365"
    );
    assert!(!exists(&c, "stripe", "timed_old").await);
    assert!(!exists(&c, "github", "untimed_ancient").await);
    assert_eq!(report.trimmed, 2, "the kept keys' payloads go at 30 days");
    for id in ["untimed_old", "untimed_old_dead"] {
        let st = state(&c, "github", id).await;
        assert!(!st.has_payload, "{id} lost its payload");
    }
    assert!(state(&c, "github", "untimed_fresh").await.has_payload);
    assert_eq!(report.remaining.map(|b| (b.purge, b.trim)), Some((0, 0)));

    // A captured request replayed after the payload window: still a duplicate.
    let replayed = claim_as(&c, "github", "untimed_old", "untimed_old", "attacker").await;
    assert_eq!(replayed, Claim::Done { same_payload: true });
    let again = run(&r).await;
    assert_eq!((again.purged, again.trimmed), (0, 0));
}

#[tokio::test]
async fn dead_payloads_stay_for_a_manual_replay_unless_their_own_trim_window_is_set() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    insert(&c, "stripe", "dead_10_days", "dead", 10).await;
    insert(&c, "stripe", "dead_3_days", "dead", 3).await;
    insert(&c, "stripe", "done_10_days", "done", 10).await;

    // By default a dead row keeps its payload until it is purged.
    let keeping = retention(&db, StoreOnly, settings(), usual_policy()).await;
    let report = run(&keeping).await;
    assert_eq!(report.trimmed, 0);
    assert!(state(&c, "stripe", "dead_10_days").await.has_payload);

    // TRIM_DEAD_PAYLOAD_AFTER_DAYS=7: dead payloads past it go; the rest stays.
    let trimming_dead = RetentionSettings {
        trim_dead_after: Some(Duration::from_secs(7 * DAY)),
        batch_size: 1,
        ..settings()
    };
    let r = retention(&db, StoreOnly, trimming_dead, usual_policy()).await;
    let dry = r
        .handle(json!({"command": "dry_run"}), in_a_minute())
        .await
        .expect("dry run");
    assert_eq!(
        dry.would.map(|b| b.trim),
        Some(1),
        "the dry run counts what the run drops"
    );
    let report = run(&r).await;
    assert_eq!(report.trimmed, 1);
    let st = state(&c, "stripe", "dead_10_days").await;
    assert_eq!((st.status.as_str(), st.has_payload), ("dead", false));
    assert!(state(&c, "stripe", "dead_3_days").await.has_payload);
    assert!(state(&c, "stripe", "done_10_days").await.has_payload);
    assert_eq!(run(&r).await.trimmed, 0);
}

#[tokio::test]
async fn trim_drops_old_payloads_keeps_keys_and_a_redelivery_is_still_a_duplicate() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let trimming = RetentionSettings {
        trim_after: Some(Duration::from_secs(7 * DAY)),
        batch_size: 2,
        ..settings()
    };
    let r = retention(&db, StoreOnly, trimming, usual_policy()).await;
    for i in 0..5 {
        insert(&c, "stripe", &format!("week_old_{i}"), "done", 8 + i).await;
    }
    insert(&c, "stripe", "fresh_done", "done", 3).await;
    insert(&c, "stripe", "week_old_dead", "dead", 10).await;
    insert(&c, "stripe", "week_old_failed", "failed", 10).await;
    insert(&c, "stripe", "ancient_done", "done", 40).await;

    let report = run(&r).await;

    assert_eq!(report.purged, 1, "the 40-day row is purged, not trimmed");
    assert_eq!(report.trimmed, 5, "in batches of 2, walked once");
    for i in 0..5 {
        let st = state(&c, "stripe", &format!("week_old_{i}")).await;
        assert!(!st.has_payload);
        assert_eq!(st.status, "done", "the key stays");
    }
    for kept in ["fresh_done", "week_old_dead", "week_old_failed"] {
        assert!(
            state(&c, "stripe", kept).await.has_payload,
            "{kept} keeps its payload"
        );
    }
    let trimmed_at = support::count(
        &c,
        "SELECT count(*) FROM hookclaim_deliveries WHERE payload_trimmed_at IS NOT NULL",
    )
    .await;
    assert_eq!(trimmed_at, 5);

    // The sender redelivers a trimmed one: still a duplicate, with the same payload hash.
    let redelivery = claim(&c, "week_old_0", "week_old_0", "webhook").await;
    assert_eq!(redelivery, Claim::Done { same_payload: true });
    assert_eq!(run(&r).await.trimmed, 0);
}

#[tokio::test]
async fn the_next_trim_starts_where_the_last_one_stopped_and_reaches_newly_due_payloads() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let trimming = RetentionSettings {
        trim_after: Some(Duration::from_secs(7 * DAY)),
        batch_size: 2,
        ..settings()
    };
    let r = retention(&db, StoreOnly, trimming, policy(5, Duration::from_secs(30))).await;
    for i in 0..3 {
        insert(&c, "stripe", &format!("first_{i}"), "done", 10 + i).await;
    }
    assert_eq!(run(&r).await.trimmed, 3);

    // Rows that became due since, between the last trimmed row and the horizon, and a dead row
    // among them (dead rows keep their payload for replay).
    insert(&c, "stripe", "since_0", "done", 9).await;
    insert(&c, "stripe", "since_1", "done", 8).await;
    insert(&c, "stripe", "since_dead", "dead", 8).await;
    let report = run(&r).await;

    assert_eq!(report.trimmed, 2);
    assert_eq!(report.remaining, Some(Backlog::default()));
    for gone in ["since_0", "since_1"] {
        assert!(
            !state(&c, "stripe", gone).await.has_payload,
            "{gone} trimmed"
        );
    }
    assert!(state(&c, "stripe", "since_dead").await.has_payload);
}

#[tokio::test]
async fn a_large_purge_stops_at_the_deadline_and_the_next_run_finishes_it() {
    const ROWS: i64 = 1_000_000;
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let generating = Instant::now();
    c.execute(
        "INSERT INTO hookclaim_deliveries
             (source, delivery_id, status, payload, payload_sha256, received_at, completed_at)
         SELECT 'stripe', 'evt_bulk_' || i, 'done', '\\x7b7d'::bytea, '\\x00'::bytea,
                now() - interval '40 days', now() - interval '40 days' - i * interval '1 ms'
           FROM generate_series(1, $1::int8) AS i",
        &[&ROWS],
    )
    .await
    .unwrap();
    c.batch_execute("VACUUM ANALYZE hookclaim_deliveries")
        .await
        .unwrap();
    insert(&c, "stripe", "recent", "done", 1).await;
    println!("generated {ROWS} rows in {:?}", generating.elapsed());
    let defaults = RetentionSettings {
        batch_size: 5000,
        deadline_margin: Duration::from_secs(2),
        ..settings()
    };
    let r = retention(&db, StoreOnly, defaults, usual_policy()).await;
    r.ensure_ready().await.unwrap();

    // Three seconds to the deadline, two of them margin: about one second of work.
    let deadline = SystemTime::now() + Duration::from_secs(3);
    let short = r.handle(json!({}), deadline).await.unwrap();
    let returned_at = SystemTime::now();

    assert!(returned_at < deadline, "returned before the deadline");
    assert!(short.stopped_early);
    assert!(short.purged > 0);
    let left = short.remaining.expect("remaining counted").purge;
    assert_eq!(left, ROWS as u64 - short.purged);
    println!(
        "short run: purged {} in {} ms, stopped early with {left} remaining",
        short.purged, short.elapsed_ms
    );

    let next = r
        .handle(json!({}), SystemTime::now() + Duration::from_secs(600))
        .await
        .unwrap();

    assert!(!next.stopped_early);
    assert_eq!(next.purged, left);
    assert_eq!(next.remaining, Some(Backlog::default()));
    assert!(exists(&c, "stripe", "recent").await);
    let total = short.purged + next.purged;
    let secs = (short.elapsed_ms + next.elapsed_ms) as f64 / 1000.0;
    println!(
        "purge rate: {total} rows in {secs:.2} s = {:.0} rows/s (batches of 5000, debug build)",
        total as f64 / secs
    );
}

/// Processing that takes `0` (a slow downstream call), then succeeds.
struct Slow(Duration);

impl Processor for Slow {
    fn name(&self) -> &'static str {
        "slow"
    }

    async fn process(&self, _: &Delivery, _: &mut Work<'_>) -> Result<(), ProcessError> {
        tokio::time::sleep(self.0).await;
        Ok(())
    }
}

/// `n` failed deliveries due now and `m` done ones past the purge horizon.
async fn backlog_of(c: &Client, due: usize, purgeable: usize) {
    for i in 0..due {
        insert(c, "stripe", &format!("due-{i}"), "failed", 0).await;
    }
    c.batch_execute(
        "UPDATE hookclaim_deliveries SET next_attempt_at = now() - interval '1 minute'",
    )
    .await
    .unwrap();
    for i in 0..purgeable {
        insert(c, "stripe", &format!("old-{i}"), "done", 40).await;
    }
}

async fn rows_like(c: &Client, prefix: &str) -> i64 {
    support::count(
        c,
        &format!("SELECT count(*) FROM hookclaim_deliveries WHERE delivery_id LIKE '{prefix}%'"),
    )
    .await
}

#[tokio::test]
async fn an_expired_lease_at_the_attempt_cap_is_reported_dead_and_not_run_again() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    insert(&c, "stripe", "poison", "processing", 0).await;
    c.batch_execute(
        "UPDATE hookclaim_deliveries SET attempt = 5, lease_until = now() - interval '1 second'",
    )
    .await
    .unwrap();
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    r.ensure_ready().await.unwrap();

    let report = run(&r).await;

    assert_eq!(report.redriven.dead, 1);
    assert_eq!(report.dead[0].delivery_id, "poison");
    assert!(report.dead[0].error.starts_with("gave up after 5 attempts"));
    assert_eq!(
        report.redriven.ok + report.redriven.failed,
        0,
        "nothing ran"
    );
    assert_eq!(status(&c, "stripe", "poison").await, ("dead".into(), 5));
    assert_eq!(licences(&c, "poison").await, 0);
}

#[tokio::test]
async fn a_redrive_backlog_leaves_the_purge_its_share_of_the_run() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    backlog_of(&c, 40, 100).await;
    let r = retention(
        &db,
        Slow(Duration::from_millis(250)),
        settings(),
        usual_policy(),
    )
    .await;
    r.ensure_ready().await.unwrap();

    // Four seconds, one of them margin: the re-drives alone would need ten.
    let report = r
        .handle(json!({}), SystemTime::now() + Duration::from_secs(4))
        .await
        .unwrap();

    assert!(report.redriven.ok > 0);
    assert!(report.redriven.ok < 40);
    assert_eq!(
        report.purged, 100,
        "the purge ran despite the re-drive backlog"
    );
    assert!(report.stopped_early);
    assert_eq!(rows_like(&c, "old-").await, 0);
}

#[tokio::test]
async fn a_purge_batch_that_outruns_the_statement_timeout_is_retried_smaller() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    backlog_of(&c, 0, 300).await;
    // Every deleted row costs 4 ms: a batch of 1000 (300 rows) takes 1.2 s.
    c.batch_execute(
        "CREATE FUNCTION slow_delete() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN PERFORM pg_sleep(0.004); RETURN OLD; END $$;
         CREATE TRIGGER slow_delete BEFORE DELETE ON hookclaim_deliveries
           FOR EACH ROW EXECUTE FUNCTION slow_delete();",
    )
    .await
    .unwrap();
    let config = config_with(&db, &[("DATABASE_STATEMENT_TIMEOUT_MS", "300")]);
    let r = retention_on(&config, StoreOnly, settings(), usual_policy()).await;
    r.ensure_ready().await.unwrap();

    let report = r.handle(json!({}), in_a_minute()).await.expect("run");

    assert_eq!(report.purged, 300);
    assert!(!report.stopped_early);
    assert_eq!(rows_like(&c, "old-").await, 0);
}

#[tokio::test]
async fn a_failing_phase_is_reported_and_the_other_phases_still_run() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    backlog_of(&c, 1, 50).await;
    // The reclaim's statement fails (as a poisoned row or a bug would make it).
    c.batch_execute(
        "CREATE FUNCTION no_reclaim() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN
                IF OLD.status = 'failed' AND NEW.status = 'processing' THEN
                  RAISE EXCEPTION 'reclaim refused';
                END IF;
                RETURN NEW;
              END $$;
         CREATE TRIGGER no_reclaim BEFORE UPDATE ON hookclaim_deliveries
           FOR EACH ROW EXECUTE FUNCTION no_reclaim();",
    )
    .await
    .unwrap();
    let r = retention(&db, StoreOnly, settings(), usual_policy()).await;
    r.ensure_ready().await.unwrap();

    let result = r.handle(json!({}), in_a_minute()).await;

    let err = result.expect_err("the run reports the failed phase");
    assert!(err.to_string().contains("reclaim refused"), "{err}");
    assert_eq!(err.error_type(), "hookclaim.DatabaseError");
    assert_eq!(rows_like(&c, "old-").await, 0, "the purge still ran");
    assert_eq!(status(&c, "stripe", "due-0").await.0, "failed");
}

// --- Operator commands ----------------------------------------------------------------------

/// One row of each kind a run would act on, plus rows it would leave alone.
async fn mixed_ledger(c: &Client) {
    claim(
        c,
        "evt_expired",
        &order_body("evt_expired", "order-e"),
        "webhook",
    )
    .await;
    expire_lease(c, "evt_expired").await;
    claim(c, "evt_due", &order_body("evt_due", "order-d"), "webhook").await;
    let at = first_attempt("evt_due", "webhook");
    ledger::finish_failed(c, &at, "timeout", Duration::ZERO)
        .await
        .unwrap();
    insert(c, "stripe", "old_done", "done", 40).await;
    insert(c, "stripe", "old_dead", "dead", 35).await;
    insert(c, "stripe", "trimmable", "done", 10).await;
    insert(c, "stripe", "fresh", "done", 1).await;
    insert(c, "github", "gh_live", "processing", 0).await;
    insert(c, "github", "gh_failed", "failed", 2).await;
}

#[tokio::test]
async fn dry_run_counts_what_a_run_would_do_and_changes_nothing() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let trimming = RetentionSettings {
        trim_after: Some(Duration::from_secs(7 * DAY)),
        ..settings()
    };
    let r = retention(&db, Licences, trimming, usual_policy()).await;
    r.ensure_ready().await.unwrap();
    mixed_ledger(&c).await;
    let before = snapshot(&c).await;

    let report = r
        .handle(json!({"command": "dry_run"}), in_a_minute())
        .await
        .unwrap();

    assert_eq!(report.command, "dry_run");
    assert_eq!(
        report.would,
        Some(Backlog {
            reclaim: 2,
            purge: 2,
            trim: 1
        })
    );
    assert_eq!((report.reclaimed, report.purged, report.trimmed), (0, 0, 0));
    assert_eq!(snapshot(&c).await, before);
    assert_eq!(licences(&c, "order-e").await, 0);

    // And a real run does what the dry run said.
    let real = run(&r).await;
    assert_eq!((real.reclaimed, real.purged, real.trimmed), (2, 2, 1));
}

#[tokio::test]
async fn purge_command_uses_its_own_horizon_and_nothing_else() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    mixed_ledger(&c).await;
    insert(&c, "stripe", "ten_days", "done", 10).await;

    let report = r
        .handle(
            serde_json::from_str(include_str!("../../events/retention-purge.json")).unwrap(),
            in_a_minute(),
        )
        .await
        .unwrap();

    assert_eq!(report.command, "purge");
    assert_eq!(report.purged, 4, "everything finished more than 7 days ago");
    assert_eq!(report.reclaimed, 0, "purge only");
    for gone in ["old_done", "old_dead", "trimmable", "ten_days"] {
        assert!(!exists(&c, "stripe", gone).await, "{gone}");
    }
    assert!(exists(&c, "stripe", "fresh").await);
    assert_eq!(
        status(&c, "stripe", "evt_expired").await,
        ("processing".into(), 1)
    );
    assert_eq!(report.remaining.map(|b| b.purge), Some(0));
}

#[tokio::test]
async fn a_purge_horizon_below_the_floor_is_refused_unless_forced() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, StoreOnly, settings(), usual_policy()).await;
    insert(&c, "stripe", "four_days", "done", 4).await;
    insert(&c, "stripe", "one_day", "done", 1).await;

    let refused = r
        .handle(
            json!({"command": "purge", "older_than_days": 3}),
            in_a_minute(),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.error_type(), "hookclaim.BadCommand");
    assert!(refused.to_string().contains("force"), "{refused}");
    assert!(exists(&c, "stripe", "four_days").await, "nothing purged");

    let forced = r
        .handle(
            json!({"command": "purge", "older_than_days": 3, "force": true}),
            in_a_minute(),
        )
        .await
        .unwrap();
    assert_eq!(forced.purged, 1);
    assert!(!exists(&c, "stripe", "four_days").await);
    assert!(exists(&c, "stripe", "one_day").await);
}

#[tokio::test]
async fn every_run_reports_how_long_the_oldest_waiting_work_has_waited() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    // An expired lease and a due retry that the run cannot take: a concurrent transaction holds
    // their rows (the reclaim skips locked rows), as a slow redelivery would.
    claim(&c, "evt_stuck", &order_body("evt_stuck", "o-s"), "webhook").await;
    c.execute(
        "UPDATE hookclaim_deliveries SET lease_until = now() - interval '10 minutes'
          WHERE delivery_id = 'evt_stuck'",
        &[],
    )
    .await
    .unwrap();
    insert(&c, "github", "gh_due", "failed", 0).await;
    c.execute(
        "UPDATE hookclaim_deliveries SET next_attempt_at = now() - interval '5 minutes'
          WHERE delivery_id = 'gh_due'",
        &[],
    )
    .await
    .unwrap();
    let mut holder = db.client().await;
    let tx = holder.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM hookclaim_deliveries FOR UPDATE", &[])
        .await
        .unwrap();

    let report = run(&r).await;
    let waiting = report.waiting.expect("measured");
    assert!(
        (600.0..700.0).contains(&waiting.expired_lease_secs),
        "{waiting:?}"
    );
    assert!(
        (300.0..400.0).contains(&waiting.due_retry_secs),
        "{waiting:?}"
    );
    let line = hookclaim::retention::report_line(&report, None, "hookclaim", SystemTime::now());
    assert!(line["oldest_expired_lease_age_secs"].as_f64().unwrap() >= 600.0);
    assert!(line["oldest_due_retry_age_secs"].as_f64().unwrap() >= 300.0);
    assert_eq!(
        (line["completed"].as_u64(), line["errors"].as_u64()),
        (Some(1), Some(0))
    );
    tx.rollback().await.unwrap();

    // Once they are taken, nothing waits.
    let report = run(&r).await;
    assert_eq!(report.reclaimed, 2);
    let waiting = report.waiting.expect("measured");
    assert_eq!(
        (waiting.expired_lease_secs, waiting.due_retry_secs),
        (0.0, 0.0)
    );
}

fn replay(id: &str, force: bool) -> Value {
    json!({"command": "replay", "source": "stripe", "delivery_id": id, "force": force})
}

#[tokio::test]
async fn replay_runs_a_dead_delivery_again_and_reports_the_outcome() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    r.ensure_ready().await.unwrap();
    claim(
        &c,
        "evt_dead",
        &order_body("evt_dead", "order-r"),
        "webhook",
    )
    .await;
    let at = first_attempt("evt_dead", "webhook");
    ledger::finish_dead(&c, &at, "licence service said no")
        .await
        .unwrap();

    let report = r
        .handle(replay("evt_dead", false), in_a_minute())
        .await
        .unwrap();

    let outcome = report.replay.expect("replay section");
    assert_eq!(outcome.outcome, "done");
    assert_eq!(
        (outcome.delivery_id.as_str(), outcome.attempt),
        ("evt_dead", 2)
    );
    assert_eq!(report.redriven.ok, 1);
    assert_eq!(status(&c, "stripe", "evt_dead").await, ("done".into(), 2));
    assert_eq!(licences(&c, "order-r").await, 1);
}

#[tokio::test]
async fn replay_of_a_done_delivery_needs_force_and_stays_exactly_once() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    r.ensure_ready().await.unwrap();
    claim(
        &c,
        "evt_done",
        &order_body("evt_done", "order-f"),
        "webhook",
    )
    .await;
    expire_lease(&c, "evt_done").await;
    run(&r).await;
    assert_eq!(status(&c, "stripe", "evt_done").await, ("done".into(), 2));
    let before = snapshot(&c).await;

    let refused = r.handle(replay("evt_done", false), in_a_minute()).await;

    match refused {
        Err(e @ RetentionError::ReplayRefused(_)) => {
            assert!(e.to_string().contains("force"), "{e}");
            let d: lambda_runtime::Diagnostic = e.into();
            assert_eq!(d.error_type, "hookclaim.ReplayRefused");
        }
        other => panic!("expected ReplayRefused, got {other:?}"),
    }
    assert_eq!(snapshot(&c).await, before);

    let forced = r
        .handle(replay("evt_done", true), in_a_minute())
        .await
        .unwrap();

    assert_eq!(forced.replay.unwrap().outcome, "done");
    assert_eq!(status(&c, "stripe", "evt_done").await, ("done".into(), 3));
    assert_eq!(licences(&c, "order-f").await, 1, "the business key holds");
}

#[tokio::test]
async fn replay_that_fails_again_reports_the_error_and_the_backoff() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, AlwaysRetry, settings(), usual_policy()).await;
    claim(&c, "evt_f", "{}", "webhook").await;
    let at = first_attempt("evt_f", "webhook");
    ledger::finish_failed(&c, &at, "first", Duration::from_secs(3600))
        .await
        .unwrap();

    let report = r
        .handle(replay("evt_f", false), in_a_minute())
        .await
        .unwrap();

    let outcome = report.replay.unwrap();
    assert_eq!(outcome.outcome, "failed");
    assert_eq!(outcome.error.as_deref(), Some("downstream answered 503"));
    let retry_in = outcome.retry_in_secs.unwrap();
    assert!((30.0..=60.0).contains(&retry_in), "{retry_in}");
    assert_eq!(status(&c, "stripe", "evt_f").await, ("failed".into(), 2));
}

#[tokio::test]
async fn replay_of_an_unknown_or_busy_delivery_is_refused_and_changes_nothing() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    claim(
        &c,
        "evt_busy",
        &order_body("evt_busy", "order-x"),
        "webhook",
    )
    .await;
    insert(&c, "stripe", "evt_trimmed", "dead", 3).await;
    c.execute(
        "UPDATE hookclaim_deliveries SET payload = NULL WHERE delivery_id = 'evt_trimmed'",
        &[],
    )
    .await
    .unwrap();
    let before = snapshot(&c).await;

    let unknown = r.handle(replay("evt_nope", false), in_a_minute()).await;
    let busy = r.handle(replay("evt_busy", true), in_a_minute()).await;
    let trimmed = r.handle(replay("evt_trimmed", true), in_a_minute()).await;

    assert!(
        matches!(&unknown, Err(RetentionError::NotFound(m)) if m.contains("stripe/evt_nope")),
        "{unknown:?}"
    );
    assert!(
        matches!(&busy, Err(RetentionError::ReplayRefused(m)) if m.contains("lease")),
        "{busy:?}"
    );
    assert!(
        matches!(&trimmed, Err(RetentionError::ReplayRefused(m)) if m.contains("trimmed")),
        "{trimmed:?}"
    );
    assert_eq!(snapshot(&c).await, before);
}

#[tokio::test]
async fn stats_counts_by_source_and_status_and_finds_the_oldest() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, StoreOnly, settings(), usual_policy()).await;
    mixed_ledger(&c).await;

    let report = r
        .handle(json!({"command": "stats"}), in_a_minute())
        .await
        .unwrap();

    let stats = report.stats.expect("stats section");
    let stripe = &stats.by_source["stripe"];
    assert_eq!(stripe["done"], 3);
    assert_eq!(stripe["dead"], 1);
    assert_eq!(stripe["failed"], 1);
    assert_eq!(stripe["processing"], 1);
    assert_eq!(stats.by_source["github"]["processing"], 1);
    assert_eq!(stats.by_source["github"]["failed"], 1);
    assert_eq!(stats.total, 8);
    let lease = stats.oldest_lease.expect("a lease");
    assert_eq!(lease.delivery_id, "evt_expired");
    assert!(lease.expired);
    assert!(lease.lease_until.ends_with('Z'));
    let oldest_age = stats.oldest_age_secs.unwrap();
    assert!(oldest_age > 40.0 * DAY as f64 - 60.0, "{oldest_age}");
    assert!(stats.oldest_received_at.is_some());
    // The oldest stuck deliveries (dead, failed, or with an expired lease), oldest first, by id.
    let stuck: Vec<(&str, &str)> = stats
        .stuck
        .iter()
        .map(|d| (d.delivery_id.as_str(), d.status.as_str()))
        .collect();
    assert_eq!(
        stuck,
        [
            ("old_dead", "dead"),
            ("gh_failed", "failed"),
            ("evt_expired", "processing"),
            ("evt_due", "failed"),
        ]
    );
    assert_eq!(stats.stuck[3].last_error.as_deref(), Some("timeout"));
    assert!(stats.stuck[0].age_secs > 35.0 * DAY as f64 - 60.0);
    assert!(stats.stuck[1].next_attempt_at.is_some());
    // The report serialises as operators will see it.
    let v = serde_json::to_value(
        r.handle(json!({"command": "stats"}), in_a_minute())
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(v["stats"]["by_source"]["github"]["failed"], 1);
}

#[tokio::test]
async fn migrate_command_applies_the_schema_once() {
    let db = TestDb::empty().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    let migrate: Value =
        serde_json::from_str(include_str!("../../events/retention-migrate.json")).unwrap();

    let first = r.handle(migrate.clone(), in_a_minute()).await.unwrap();
    let second = r.handle(migrate, in_a_minute()).await.unwrap();

    let latest = hookclaim::schema::latest_version();
    let first = first.migrations.unwrap();
    let all: Vec<i32> = (1..=latest).collect();
    assert_eq!((first.applied, first.version), (all, latest));
    let second = second.migrations.unwrap();
    assert_eq!((second.applied, second.version), (vec![], latest));
    assert_eq!(
        hookclaim::schema::current_version(&c).await.unwrap(),
        latest
    );
}

#[tokio::test]
async fn malformed_commands_are_refused_and_change_nothing() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;
    r.ensure_ready().await.unwrap();
    mixed_ledger(&c).await;
    let before = snapshot(&c).await;
    let payloads = [
        json!({"command": "vacuum"}),
        json!({"command": "purge"}),
        json!({"command": "purge", "older_than_days": "7"}),
        json!({"command": "purge", "older_than_days": 0}),
        json!({"command": "purge", "older_than_days": 7, "force": "yes"}),
        json!({"command": "purge", "older_than_days": 3}),
        json!({"command": "replay_all", "source": "stripe", "received_after": "today"}),
        json!({"command": "replay", "source": "stripe"}),
        json!({"command": "replay", "source": "stripe", "delivery_id": 42}),
        json!({"command": "replay", "source": "stripe", "delivery_id": "evt_due", "force": 1}),
        json!({"command": "run", "older_than_days": 1}),
        json!({"command": "dry_run", "verbose": true}),
        json!({"command": null}),
        json!({"command": ["run"]}),
        json!("run"),
        json!([]),
    ];

    for payload in payloads {
        let got = r.handle(payload.clone(), in_a_minute()).await;
        match got {
            Err(e @ RetentionError::BadCommand(_)) => {
                let d: lambda_runtime::Diagnostic = e.into();
                assert_eq!(d.error_type, "hookclaim.BadCommand", "{payload}");
            }
            other => panic!("{payload}: expected BadCommand, got {other:?}"),
        }
    }
    assert_eq!(snapshot(&c).await, before, "nothing changed");
    assert_eq!(licences(&c, "order-e").await, 0);
}

#[tokio::test]
async fn a_malformed_command_touches_not_even_the_schema() {
    let db = TestDb::empty().await;
    let c = db.client().await;
    let r = retention(&db, Licences, settings(), usual_policy()).await;

    let got = r
        .handle(json!({"command": "migrate", "to": 0}), in_a_minute())
        .await;

    assert!(matches!(got, Err(RetentionError::BadCommand(_))), "{got:?}");
    assert_eq!(hookclaim::schema::current_version(&c).await.unwrap(), 0);
}

// --- Scheduled events -----------------------------------------------------------------------

#[tokio::test]
async fn the_scheduled_event_and_an_empty_payload_each_start_a_normal_run() {
    let events = [
        include_str!("../../events/retention-scheduled.json"),
        include_str!("../../events/retention-scheduler.json"),
        include_str!("../../events/retention-run.json"),
    ];
    for (i, event) in events.into_iter().enumerate() {
        let db = TestDb::migrated().await;
        let c = db.client().await;
        let r = retention(&db, Licences, settings(), usual_policy()).await;
        mixed_ledger(&c).await;
        let payload: Value = serde_json::from_str(event).unwrap();

        let report = r.handle(payload, in_a_minute()).await.unwrap();

        assert_eq!(report.command, "run", "event {i}");
        assert_eq!(
            (report.reclaimed, report.redriven.ok, report.purged),
            (2, 2, 2),
            "event {i}"
        );
        assert_eq!(licences(&c, "order-e").await, 1, "event {i}");
        assert!(!exists(&c, "stripe", "old_done").await, "event {i}");
    }
}

#[test]
fn every_sample_retention_event_parses_to_the_command_its_name_says() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/events");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let Some(kind) = name.strip_prefix("retention-") else {
            continue;
        };
        let payload: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let command =
            hookclaim::retention::parse_command(&payload).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = match kind {
            "scheduled" | "scheduler" => "run",
            other => other,
        };
        assert_eq!(command.name(), want.replace('-', "_"), "{name}");
        seen.push(want.replace('-', "_"));
    }
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        ["dry_run", "migrate", "purge", "replay", "run", "stats"],
        "one sample per command"
    );
}

/// From a terminal, a run shows its progress on stderr while it works (here a log, not a
/// terminal: a line per phase at least), and stdout holds the JSON report alone.
#[tokio::test]
async fn a_run_from_a_terminal_shows_its_progress_on_stderr_and_prints_only_the_report() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    c.batch_execute(
        "INSERT INTO hookclaim_deliveries (source, delivery_id, status, lease_owner,
                                           next_attempt_at, payload, payload_sha256)
         SELECT 'stripe', 'evt_due_' || i, 'failed', 'gone', now() - interval '1 minute',
                '{}', sha256(int4send(i))
           FROM generate_series(1, 40) i",
    )
    .await
    .unwrap();
    let mut env = support::local_env();
    env.insert("DATABASE_URL".into(), db.url.clone());
    env.remove("HOOKCLAIM_SECRETS");

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_retention"))
        .args(["run", "--deadline-secs", "60"])
        .env_clear()
        .envs(&env)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .await
        .expect("run the retention binary");

    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(report["reclaimed"], 40, "{report}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("reclaim: 40 of 40 done, ")),
        "{stderr}"
    );
    assert!(
        stderr.lines().any(|l| l.starts_with("purge: 0 of 0 done")),
        "{stderr}"
    );
}
