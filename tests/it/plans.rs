//! The ledger's plans on an outage's backlog: every statement that names one delivery reaches
//! it by its key, and the reclaim finds its next due row on the due index, whatever the
//! statistics say.
//!
//! Each statement runs as the handler and the retention function run it, with `auto_explain`
//! reporting the plan of every statement, those inside the ledger's SQL functions included, as
//! a notice to this test's own connection (`EXPLAIN (FORMAT JSON)` of what really ran). Both
//! plan modes a pooled connection can end up in are checked: the custom plans PL/pgSQL makes
//! for its first runs and the generic plan it may settle on.

use std::collections::BTreeMap;
use std::sync::mpsc;

use hookclaim::ledger::{self, Attempt, Claim, Claimant, NewDelivery, ReclaimCursor};
use hookclaim::verify::IdOrigin;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_postgres::{AsyncMessage, Client, NoTls};

use crate::support::TestDb;

/// The primary key, the one way in for a statement that names one delivery.
const KEY: &str = "hookclaim_deliveries_pkey";
/// The replay guard's key: the guarded claim's read of a body stored under another id.
const GUARD_KEY: &str = "hookclaim_deliveries_guarded_body_idx";
/// The reclaim's index, in due order.
const DUE: &str = "hookclaim_deliveries_due_idx";

/// The outage the statistics have not seen: 100,000 finished rows, ANALYZE, then 30,000
/// expired leases, 30,000 retries not yet due and 200,000 due (autovacuum off on the table, so
/// no ANALYZE catches up during the test).
const STALE_BACKLOG: &str = "
    ALTER TABLE hookclaim_deliveries SET (autovacuum_enabled = false);
    INSERT INTO hookclaim_deliveries (source, delivery_id, status, lease_owner, completed_at,
                                      payload, payload_sha256)
    SELECT 'stripe', 'done-' || i, 'done', 'old', now() - interval '1 day', '\\x7b7d',
           sha256(int4send(i))
      FROM generate_series(1, 100000) i;
    ANALYZE hookclaim_deliveries;
    INSERT INTO hookclaim_deliveries (source, delivery_id, status, lease_owner, lease_until,
                                      payload, payload_sha256)
    SELECT 'stripe', 'expired-' || i, 'processing', 'dead', now() - interval '1 minute',
           '\\x7b7d', sha256(int4send(-i))
      FROM generate_series(1, 30000) i;
    INSERT INTO hookclaim_deliveries (source, delivery_id, status, lease_owner,
                                      next_attempt_at, payload, payload_sha256)
    SELECT 'stripe', 'later-' || i, 'failed', 'old', now() + interval '1 hour', '\\x7b7d',
           sha256(int4send(1000000 + i))
      FROM generate_series(1, 30000) i;
    INSERT INTO hookclaim_deliveries (source, delivery_id, status, lease_owner,
                                      next_attempt_at, payload, payload_sha256)
    SELECT 'stripe', 'due-' || i, 'failed', 'old', now() - interval '1 minute', '\\x7b7d',
           sha256(int4send(2000000 + i))
      FROM generate_series(1, 200000) i;";

/// A big backlog the statistics have seen: 100,000 finished rows and 100,000 due retries,
/// vacuumed and analyzed as autovacuum leaves them.
const FRESH_BACKLOG: &str = "
    INSERT INTO hookclaim_deliveries (source, delivery_id, status, lease_owner, completed_at,
                                      payload, payload_sha256)
    SELECT 'stripe', 'done-' || i, 'done', 'old', now() - interval '1 day', '\\x7b7d',
           sha256(int4send(i))
      FROM generate_series(1, 100000) i;
    INSERT INTO hookclaim_deliveries (source, delivery_id, status, lease_owner,
                                      next_attempt_at, payload, payload_sha256)
    SELECT 'stripe', 'due-' || i, 'failed', 'old', now() - interval '1 minute', '\\x7b7d',
           sha256(int4send(2000000 + i))
      FROM generate_series(1, 100000) i;";

#[tokio::test]
async fn on_a_backlog_the_statistics_have_not_seen_each_delivery_is_reached_by_its_key() {
    let db = backlog(STALE_BACKLOG, false).await;
    check_every_plan(&db).await;
}

#[tokio::test]
async fn on_a_big_backlog_with_fresh_statistics_each_delivery_is_reached_by_its_key() {
    let db = backlog(FRESH_BACKLOG, true).await;
    check_every_plan(&db).await;
}

/// The single-delivery statements and the reclaim, in both plan modes, each on rows of its own.
async fn check_every_plan(db: &TestDb) {
    for (mode, first) in [("force_custom_plan", 70), ("force_generic_plan", 80)] {
        let (c, mut s) = Explained::connect(db, mode).await;
        single_delivery_statements(&c, &mut s, mode, first).await;
        reclaim_reads_the_due_index(&c, &mut s, mode).await;
    }
}

/// A migrated database with `backlog` in it, vacuumed and analyzed after if `vacuum`.
async fn backlog(backlog: &str, vacuum: bool) -> TestDb {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    c.batch_execute(backlog).await.expect("arrange the backlog");
    if vacuum {
        c.batch_execute("VACUUM ANALYZE hookclaim_deliveries")
            .await
            .expect("vacuum");
    }
    db
}

/// Runs each statement that names one delivery and checks that each scan of the ledger it made
/// went through the key (or, for the guarded read, the guard's key).
async fn single_delivery_statements(c: &Client, s: &mut Explained, mode: &str, first: u32) {
    let tag = mode.trim_start_matches("force_");
    let fresh = format!("new-{tag}");
    let guarded = format!("guarded-{tag}");
    let me = format!("me-{tag}");
    let claimant = Claimant {
        owner: &me,
        lease: std::time::Duration::from_secs(60),
        max_attempts: 5,
    };
    let headers = BTreeMap::new();
    // Several runs of each, so a generic plan PL/pgSQL would settle on is the one checked.
    for round in 0..6 {
        let id = format!("{fresh}-{round}");
        let body = format!("{{\"id\":\"{id}\"}}");
        let hash = Sha256::digest(body.as_bytes());
        let new = NewDelivery {
            source: "stripe",
            delivery_id: &id,
            id_origin: IdOrigin::Body,
            event_type: None,
            payload: body.as_bytes(),
            payload_sha256: &hash,
            headers: &headers,
            long_key_retention: false,
            replay_guard: false,
        };
        let what = format!("{mode}: a new delivery's claim and finish");
        let claim = s.run(&what, ledger::claim(c, &new, &claimant, false)).await;
        assert!(
            matches!(claim, Claim::Claimed { attempt: 1, .. }),
            "{claim:?}"
        );
        let at = Attempt {
            source: "stripe",
            delivery_id: &id,
            attempt: 1,
            owner: &me,
        };
        s.run(&what, ledger::held(c, &at)).await;
        s.run(&what, ledger::finish_done(c, &at)).await;
        s.only_keys(&what, &[KEY]);

        let what = format!("{mode}: a duplicate's claim");
        s.run(&what, ledger::claim(c, &new, &claimant, false)).await;
        s.only_keys(&what, &[KEY]);

        let gid = format!("{guarded}-{round}");
        let gbody = format!("{{\"guarded\":\"{gid}\"}}");
        let ghash = Sha256::digest(gbody.as_bytes());
        let guarded_new = NewDelivery {
            delivery_id: &gid,
            id_origin: IdOrigin::Header,
            payload: gbody.as_bytes(),
            payload_sha256: &ghash,
            replay_guard: true,
            ..new
        };
        let what = format!("{mode}: a guarded claim");
        s.run(&what, ledger::claim(c, &guarded_new, &claimant, false))
            .await;
        s.only_keys(&what, &[KEY, GUARD_KEY]);

        // A due retry and an expired lease, taken over by a redelivery, then finished failed.
        for due in [
            format!("due-{}", first + round),
            format!("expired-{}", first + round),
        ] {
            let Some(payload) = s.stored_payload(c, &due).await else {
                continue; // the fresh backlog has no expired leases
            };
            let hash = Sha256::digest(&payload);
            let redelivered = NewDelivery {
                delivery_id: &due,
                payload: &payload,
                payload_sha256: &hash,
                ..new
            };
            let what = format!("{mode}: a takeover of {due}");
            let claim = s
                .run(&what, ledger::claim(c, &redelivered, &claimant, false))
                .await;
            let Claim::Claimed { attempt, .. } = claim else {
                panic!("{what}: {claim:?}");
            };
            let at = Attempt {
                source: "stripe",
                delivery_id: &due,
                attempt,
                owner: &me,
            };
            s.run(&what, ledger::held(c, &at)).await;
            let retry = std::time::Duration::from_secs(3600);
            s.run(&what, ledger::finish_failed(c, &at, "again", retry))
                .await;
            s.only_keys(&what, &[KEY]);

            let what = format!("{mode}: an operator's replay of {due} and its state");
            let taken = s
                .run(
                    &what,
                    ledger::take_for_replay(c, "stripe", &due, &claimant, false),
                )
                .await;
            assert!(taken.is_some(), "{what}");
            s.run(&what, ledger::state(c, "stripe", &due)).await;
            s.only_keys(&what, &[KEY]);
        }
    }
}

/// Runs the reclaim from the start and a few steps on, and checks that it found each next row
/// on the due index (its takeover by the key), never by reading the table or a bitmap of every
/// waiting row.
async fn reclaim_reads_the_due_index(c: &Client, s: &mut Explained, mode: &str) {
    let owner = format!("reclaim-{mode}");
    let claimant = Claimant {
        owner: &owner,
        lease: std::time::Duration::from_secs(60),
        max_attempts: 5,
    };
    let mut cursor = ReclaimCursor::default();
    for step in 0..6 {
        let what = format!("{mode}: reclaim step {step}");
        let next = s
            .run(&what, ledger::reclaim_next(c, &claimant, &cursor))
            .await
            .unwrap_or_else(|| panic!("{what}: the backlog is due"));
        assert!(next.taken.is_some(), "{what}: nothing holds the backlog");
        cursor = next.cursor;
        let scans = s.only_keys(&what, &[DUE, KEY]);
        assert!(
            scans
                .iter()
                .any(|(kind, index)| kind.starts_with("Index") && index == DUE),
            "{what}: the due index was not read: {scans:?}"
        );
    }
}

/// The plans of a connection's statements, which come back to it as `auto_explain` notices.
struct Explained {
    notices: mpsc::Receiver<String>,
    /// The plans of the statements run since the last check.
    plans: Vec<Value>,
}

impl Explained {
    /// A new connection to `db` in `plan_cache_mode`, and where its plans arrive.
    async fn connect(db: &TestDb, plan_cache_mode: &str) -> (Client, Explained) {
        let (c, mut conn) = tokio_postgres::connect(&db.url, NoTls)
            .await
            .expect("connect");
        let (tx, notices) = mpsc::channel();
        // A notice reaches the channel before the answer of its statement reaches the client:
        // the connection hands them out in the order they arrive.
        tokio::spawn(async move {
            while let Some(m) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                match m {
                    Ok(AsyncMessage::Notice(n)) => {
                        let _ = tx.send(n.message().to_string());
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        c.batch_execute(&format!(
            "LOAD 'auto_explain';
             SET auto_explain.log_min_duration = 0;
             SET auto_explain.log_nested_statements = on;
             SET auto_explain.log_format = json;
             SET auto_explain.log_level = notice;
             SET plan_cache_mode = {plan_cache_mode};"
        ))
        .await
        .expect("auto_explain");
        let mut s = Explained {
            notices,
            plans: Vec::new(),
        };
        s.take_plans();
        (c, s)
    }

    /// Awaits one ledger call and keeps the plans it reported.
    async fn run<T, E: std::fmt::Display>(
        &mut self,
        what: &str,
        call: impl std::future::Future<Output = Result<T, E>>,
    ) -> T {
        let out = call.await.unwrap_or_else(|e| panic!("{what}: {e}"));
        while let Ok(notice) = self.notices.try_recv() {
            if let Some(start) = notice.find('{') {
                let plan: Value = serde_json::from_str(&notice[start..])
                    .unwrap_or_else(|e| panic!("{what}: auto_explain's JSON: {e}: {notice}"));
                self.plans.push(plan);
            }
        }
        out
    }

    /// The payload stored for stripe/`id`, if it exists (read without a plan check).
    async fn stored_payload(&mut self, c: &Client, id: &str) -> Option<Vec<u8>> {
        let row = c
            .query_opt(
                "SELECT payload FROM hookclaim_deliveries WHERE source = 'stripe' AND delivery_id = $1",
                &[&id],
            )
            .await
            .expect("read payload");
        self.take_plans();
        row.map(|r| r.get(0))
    }

    fn take_plans(&mut self) -> Vec<Value> {
        let _ = self.notices.try_iter().count();
        std::mem::take(&mut self.plans)
    }

    /// Asserts that every scan of the ledger table since the last check was an index scan of
    /// one of `indexes`, forgets the plans, and returns those scans as (node type, index name).
    fn only_keys(&mut self, what: &str, indexes: &[&str]) -> Vec<(String, String)> {
        let plans = self.take_plans();
        assert!(!plans.is_empty(), "{what}: no plan was reported");
        let mut all = Vec::new();
        for plan in &plans {
            let mut scans = Vec::new();
            collect_scans(&plan["Plan"], &mut scans);
            for (kind, index) in &scans {
                assert!(
                    matches!(kind.as_str(), "Index Scan" | "Index Only Scan")
                        && indexes.contains(&index.as_str()),
                    "{what}: {kind} {index:?} walks the backlog in\n{}\n{:#}",
                    plan["Query Text"].as_str().unwrap_or_default(),
                    plan["Plan"]
                );
            }
            all.extend(scans);
        }
        all
    }
}

/// The scans (not the writes) of `hookclaim_deliveries` in plan node `node` and below: (node type, index name).
fn collect_scans(node: &Value, out: &mut Vec<(String, String)>) {
    let kind = node["Node Type"].as_str().unwrap_or_default();
    if node["Relation Name"] == "hookclaim_deliveries" && kind.ends_with("Scan") {
        out.push((
            kind.to_string(),
            node["Index Name"].as_str().unwrap_or_default().to_string(),
        ));
    }
    for child in node["Plans"].as_array().into_iter().flatten() {
        collect_scans(child, out);
    }
}
