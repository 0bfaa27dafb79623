//! Bulk replay after an outage (`replay_all`): every failed or dead delivery of a source run
//! again page by page within the deadline, each claimed on its own (fenced), while new
//! deliveries and redeliveries arrive, with a dry-run count and filters by event type and time.

use crate::support;

use std::time::{Duration, SystemTime};

use crate::support::licences::Licences;
use hookclaim::config::RetentionSettings;
use hookclaim::config::RetryPolicy;
use hookclaim::processor::Processor;
use hookclaim::retention::{BulkReplayReport, Report, Retention};
use serde_json::{json, Value};
use support::{answer, github_request, Format, TestDb};
use tokio_postgres::Client;

/// Dead deliveries per source: the two sources make 1,000.
const PER_SOURCE: usize = 500;

/// A retention function over `db` that stops its work one second before the deadline (and
/// counts what is left in that second).
async fn retention<P: Processor>(db: &TestDb, processor: P) -> Retention<P> {
    let config = support::config(&db.url, &[]);
    let database = hookclaim::environment::database(&config).await.unwrap();
    let settings = RetentionSettings {
        retention: Duration::from_secs(30 * 86_400),
        key_retention: Duration::from_secs(365 * 86_400),
        trim_after: None,
        trim_dead_after: None,
        batch_size: 1000,
        deadline_margin: Duration::from_secs(1),
        redrive_timeout: Duration::from_secs(10),
    };
    let retry = RetryPolicy {
        max_attempts: 8,
        base: Duration::from_secs(30),
        cap: Duration::from_secs(3600),
        max_delivery_age: Duration::from_secs(3 * 86_400),
    };
    let r = Retention::new(
        database,
        processor,
        settings,
        retry,
        Duration::from_secs(10),
    );
    r.ensure_ready().await.unwrap();
    r
}

/// The body of delivery `n` of `source`: an order the licence example issues a key for.
fn body(source: &str, n: usize) -> String {
    format!(r#"{{"order_id":"{source}-order-{n}"}}"#)
}

/// `PER_SOURCE` dead deliveries for each of `sources`, as an outage of a few hours leaves them:
/// every attempt used up, payload kept, received over the last two hours.
async fn outage(c: &Client, sources: &[&str]) {
    for source in sources {
        c.execute(
            "INSERT INTO hookclaim_deliveries
                 (source, delivery_id, status, attempt, event_type, payload, payload_sha256,
                  received_at, completed_at, last_error)
             SELECT $1::text, $1::text || '-' || i, 'dead', 8, 'push',
                    convert_to(format('{\"order_id\":\"%s-order-%s\"}', $1::text, i), 'UTF8'),
                    sha256(convert_to(format('{\"order_id\":\"%s-order-%s\"}', $1::text, i), 'UTF8')),
                    now() - interval '2 hours' + i * interval '10 ms', now() - interval '1 hour',
                    'database unreachable'
               FROM generate_series(1, $2::int) AS i",
            &[source, &(PER_SOURCE as i32)],
        )
        .await
        .expect("insert dead deliveries");
    }
}

fn replay_all(source: &str) -> Value {
    json!({"command": "replay_all", "source": source})
}

fn bulk(report: &Report) -> &BulkReplayReport {
    report.bulk_replay.as_ref().expect("bulk replay section")
}

/// (status, attempt) → count over `source`'s rows.
async fn census(c: &Client, source: &str) -> Vec<(String, i32, i64)> {
    c.query(
        "SELECT status, attempt, count(*) FROM hookclaim_deliveries WHERE source = $1
          GROUP BY 1, 2 ORDER BY 1, 2",
        &[&source],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

/// Licences issued for orders whose id starts with `prefix`.
async fn licences_like(c: &Client, prefix: &str) -> i64 {
    c.query_one(
        "SELECT count(*) FROM hookclaim_example_licences WHERE order_id LIKE $1 || '%'",
        &[&prefix],
    )
    .await
    .unwrap()
    .get(0)
}

/// Sends `new` new GitHub deliveries and a redelivery of each of `redeliver` dead ones through
/// the webhook function, one after another; returns the statuses answered.
async fn traffic(url: &str, tag: &str, new: usize, redeliver: &[usize]) -> Vec<(String, u16)> {
    let webhook = support::webhook(url, &[], Licences).await;
    let mut answers = Vec::new();
    for i in 0..new {
        let id = format!("new-{tag}-{i}");
        let b = format!(r#"{{"order_id":"new-{tag}-order-{i}"}}"#);
        let resp = webhook
            .handle(github_request(Format::HttpApiV2, &id, b.as_bytes(), false))
            .await;
        answers.push((id, answer(&resp).0));
        if let Some(&n) = redeliver.get(i) {
            let id = format!("github-{n}");
            let b = body("github", n);
            let resp = webhook
                .handle(github_request(Format::HttpApiV2, &id, b.as_bytes(), false))
                .await;
            answers.push((id, answer(&resp).0));
        }
    }
    answers
}

#[tokio::test]
async fn bulk_replay_after_an_outage_stops_at_the_deadline_finishes_next_time_and_runs_each_once() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let first = retention(&db, Licences).await;
    outage(&c, &["github", "stripe"]).await;

    // The dry run counts and changes nothing.
    let mut dry = replay_all("github");
    dry["dry_run"] = json!(true);
    let counted = first
        .handle(dry, SystemTime::now() + Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(bulk(&counted).matched, PER_SOURCE as u64);
    assert_eq!(bulk(&counted).remaining, Some(PER_SOURCE as u64));
    assert_eq!(counted.reclaimed, 0);
    assert_eq!(
        census(&c, "github").await,
        vec![("dead".into(), 8, PER_SOURCE as i64)]
    );

    // Under a short deadline (0.1 s of work, less than 500 replays take on a fast machine), with
    // new deliveries and redeliveries of the dead ones arriving.
    let redelivered: Vec<usize> = (1..=PER_SOURCE).step_by(10).collect();
    let arriving = tokio::spawn({
        let url = db.url.clone();
        let redelivered = redelivered.clone();
        async move { traffic(&url, "a", 50, &redelivered).await }
    });
    let short = first
        .handle(
            replay_all("github"),
            SystemTime::now() + Duration::from_millis(1100),
        )
        .await
        .unwrap();
    let answers_a = arriving.await.unwrap();
    println!(
        "short run: {}",
        serde_json::to_string(&json!({
            "reclaimed": short.reclaimed, "redriven": short.redriven,
            "stopped_early": short.stopped_early, "bulk_replay": short.bulk_replay,
        }))
        .unwrap()
    );
    assert!(short.stopped_early, "the deadline stopped it");
    let left = bulk(&short).remaining.expect("remaining counted");
    assert!(short.redriven.ok > 0, "some were replayed: {short:?}");
    assert!(left > 0, "some remain: {short:?}");
    assert_eq!(
        left + short.redriven.ok,
        PER_SOURCE as u64,
        "what remains is what was not replayed"
    );

    // The next run, started twice at once (an operator retrying, say) while more deliveries
    // arrive, finishes: each remaining delivery is replayed by exactly one of the two.
    let second = retention(&db, Licences).await;
    let arriving = tokio::spawn({
        let url = db.url.clone();
        async move { traffic(&url, "b", 50, &[]).await }
    });
    let minute = SystemTime::now() + Duration::from_secs(60);
    let (x, y) = tokio::join!(
        first.handle(replay_all("github"), minute),
        second.handle(replay_all("github"), minute)
    );
    let (x, y) = (x.unwrap(), y.unwrap());
    let answers_b = arriving.await.unwrap();
    for (name, r) in [("x", &x), ("y", &y)] {
        println!(
            "second run {name}: {}",
            serde_json::to_string(&json!({
                "reclaimed": r.reclaimed, "redriven": r.redriven,
                "stopped_early": r.stopped_early, "bulk_replay": r.bulk_replay,
            }))
            .unwrap()
        );
        assert!(!r.stopped_early, "{name} finished");
        assert_eq!(bulk(r).remaining, Some(0), "{name}");
        assert_eq!(
            (r.redriven.failed, r.redriven.dead, r.redriven.fenced),
            (0, 0, 0)
        );
    }
    assert_eq!(
        short.redriven.ok + x.redriven.ok + y.redriven.ok,
        PER_SOURCE as u64,
        "every delivery replayed once over all runs"
    );

    // Exactly once: one licence per replayed order, each row claimed exactly once more than
    // before (attempt 8 → 9: a second claim would show as 10), the other source untouched.
    assert_eq!(licences_like(&c, "github-order-").await, PER_SOURCE as i64);
    assert_eq!(
        census(&c, "github")
            .await
            .iter()
            .filter(|r| r.0 == "dead")
            .count(),
        0
    );
    let replayed: i64 = c
        .query_one(
            "SELECT count(*) FROM hookclaim_deliveries
              WHERE source = 'github' AND delivery_id LIKE 'github-%'
                AND status = 'done' AND attempt = 9",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(replayed, PER_SOURCE as i64);
    assert_eq!(licences_like(&c, "stripe-order-").await, 0);
    assert_eq!(
        census(&c, "stripe").await,
        vec![("dead".into(), 8, PER_SOURCE as i64)]
    );

    // The new deliveries were processed as they arrived, once each; the redeliveries of dead
    // deliveries were answered as duplicates (200) or, while a replay held them, 202.
    for (id, status) in answers_a.iter().chain(&answers_b) {
        if id.starts_with("new-") {
            assert_eq!(*status, 200, "{id}");
        } else {
            assert!(matches!(status, 200 | 202), "{id}: {status}");
        }
    }
    assert_eq!(licences_like(&c, "new-a-order-").await, 50);
    assert_eq!(licences_like(&c, "new-b-order-").await, 50);
    let new_done: i64 = c
        .query_one(
            "SELECT count(*) FROM hookclaim_deliveries
              WHERE delivery_id LIKE 'new-%' AND status = 'done' AND attempt = 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(new_done, 100);
}

#[tokio::test]
async fn bulk_replay_takes_only_what_its_filters_select_and_counts_trimmed_ones_apart() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let r = retention(&db, Licences).await;
    // Six github deliveries: event type, status and receipt time vary; one has lost its payload.
    for (id, event_type, status, hours_ago, payload) in [
        ("in-window", "push", "dead", 3, true),
        ("in-window-failed", "push", "failed", 3, true),
        ("other-type", "ping", "dead", 3, true),
        ("too-old", "push", "dead", 30, true),
        ("trimmed", "push", "dead", 3, false),
        ("done-already", "push", "done", 3, true),
    ] {
        c.execute(
            "INSERT INTO hookclaim_deliveries
                 (source, delivery_id, status, attempt, event_type, payload, payload_sha256,
                  received_at, next_attempt_at, completed_at)
             VALUES ('github', $1::text, $2, 2, $3,
                     CASE WHEN $5 THEN convert_to(format('{\"order_id\":\"%s\"}', $1::text), 'UTF8') END,
                     '\\x00', now() - make_interval(hours => $4),
                     CASE WHEN $2 = 'failed' THEN now() + interval '1 hour' END,
                     CASE WHEN $2 <> 'failed' THEN now() END)",
            &[&id, &status, &event_type, &hours_ago, &payload],
        )
        .await
        .unwrap();
    }
    let window = json!({
        "command": "replay_all", "source": "github", "event_type": "push",
        "received_after": iso(SystemTime::now() - Duration::from_secs(24 * 3600)),
        "received_before": iso(SystemTime::now()),
    });

    let mut dry = window.clone();
    dry["dry_run"] = json!(true);
    let counted = r
        .handle(dry, SystemTime::now() + Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        (bulk(&counted).matched, bulk(&counted).unreplayable),
        (2, 1)
    );

    let report = r
        .handle(window, SystemTime::now() + Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(report.redriven.ok, 2, "{report:?}");
    assert_eq!(bulk(&report).remaining, Some(0));
    let status = |id: &'static str| {
        let c = &c;
        async move { support::ledger::status(c, "github", id).await }
    };
    assert_eq!(status("in-window").await, ("done".into(), 3));
    assert_eq!(
        status("in-window-failed").await,
        ("done".into(), 3),
        "not due, replayed anyway"
    );
    assert_eq!(status("other-type").await, ("dead".into(), 2));
    assert_eq!(status("too-old").await, ("dead".into(), 2));
    assert_eq!(status("trimmed").await, ("dead".into(), 2));
    assert_eq!(status("done-already").await, ("done".into(), 2));
    assert_eq!(licences_like(&c, "in-window").await, 2);
}

/// `t` as RFC 3339 in UTC, as an operator would write it.
fn iso(t: SystemTime) -> String {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Reads its own row's lease while it runs (what a run killed at that moment would leave
/// behind), in seconds from now, and succeeds.
struct LeaseProbe(std::sync::Arc<std::sync::Mutex<Vec<(String, f64)>>>);

impl Processor for LeaseProbe {
    fn name(&self) -> &'static str {
        "lease-probe"
    }

    async fn process(
        &self,
        delivery: &hookclaim::processor::Delivery,
        work: &mut hookclaim::work::Work<'_>,
    ) -> Result<(), hookclaim::processor::ProcessError> {
        let rows = work
            .query(
                "SELECT extract(epoch FROM lease_until - now())::float8 FROM hookclaim_deliveries
                  WHERE source = $1 AND delivery_id = $2",
                &[&delivery.source, &delivery.delivery_id],
            )
            .await?;
        let left: f64 = rows[0].get(0);
        let mut seen = self.0.lock().expect("probe");
        seen.push((delivery.delivery_id.clone(), left));
        Ok(())
    }
}

/// A stored GitHub delivery in `status` (`dead`, or `failed` and due), ready to be replayed or
/// reclaimed.
async fn stored(c: &Client, id: &str, status: &str) {
    c.execute(
        "INSERT INTO hookclaim_deliveries
             (source, delivery_id, status, attempt, event_type, payload, payload_sha256,
              completed_at, next_attempt_at, last_error)
         VALUES ('github', $1, $2, 1, 'push', convert_to($1, 'UTF8'), sha256(convert_to($1, 'UTF8')),
                 CASE WHEN $2 = 'dead' THEN now() END,
                 CASE WHEN $2 = 'failed' THEN now() - interval '1 second' END, 'earlier failure')",
        &[&id, &status],
    )
    .await
    .expect("insert stored delivery");
}

#[tokio::test]
async fn a_day_long_run_leases_each_delivery_for_the_redrive_timeout_not_for_the_run() {
    // An operator's replay from a terminal with --deadline-secs 86400, or any long run: each
    // delivery is leased for REDRIVE_TIMEOUT_SECS plus the lease margin, so a run killed
    // mid-delivery leaves a lease that ends within that, not at the end of the day.
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let retention = support::retention(
        &db.url,
        &[("REDRIVE_TIMEOUT_SECS", "10"), ("LEASE_MARGIN_SECS", "10")],
        LeaseProbe(seen.clone()),
    )
    .await;
    let a_day = SystemTime::now() + Duration::from_secs(86_400);

    for id in ["bulk-1", "bulk-2", "bulk-3"] {
        stored(&c, id, "dead").await;
    }
    let report = retention.handle(replay_all("github"), a_day).await.unwrap();
    assert_eq!(report.reclaimed, 3, "{report:?}");
    stored(&c, "due-1", "failed").await;
    let report = retention.handle(json!({}), a_day).await.unwrap();
    assert_eq!(report.reclaimed, 1, "{report:?}");
    stored(&c, "one-1", "dead").await;
    let replay = json!({"command": "replay", "source": "github", "delivery_id": "one-1"});
    let report = retention.handle(replay, a_day).await.unwrap();
    assert_eq!(report.reclaimed, 1, "{report:?}");

    let seen = seen.lock().expect("probe").clone();
    println!("[replay] lease left while processing, in seconds: {seen:?}");
    assert_eq!(seen.len(), 5, "{seen:?}");
    for (id, left) in &seen {
        assert!(
            *left > 15.0 && *left <= 20.0,
            "{id}: leased for {left:.0} s from now, not the 10 s timeout + 10 s margin"
        );
    }
}
