//! The claim core on a real PostgreSQL: every case of the one-statement claim, fenced finishing,
//! migrations, a 64-way race, and the statement count per claim.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use hookclaim::ledger::{self, Attempt, Claim, Claimant, Finish, NewDelivery};
use hookclaim::verify::IdOrigin;
use sha2::{Digest, Sha256};
use support::ledger::{assert_rows_well_formed, exists, expire_lease, state, status};
use support::{PgServer, TestDb};
use tokio_postgres::Client;

const LEASE: Duration = Duration::from_secs(60);

/// The SQLSTATE of a ledger function refusing an argument (`hookclaim_refuse`).
const REFUSED: &str = "HC001";

#[derive(Clone)]
struct Sample {
    source: &'static str,
    id: String,
    body: Vec<u8>,
    hash: Vec<u8>,
    headers: BTreeMap<String, String>,
    /// Its source's replay guard.
    guarded: bool,
}

impl Sample {
    /// A Stripe delivery: its id is in the signed body, so its source has no replay guard.
    fn new(id: &str, body: &str) -> Sample {
        Sample {
            source: "stripe",
            id: id.into(),
            body: body.as_bytes().to_vec(),
            hash: Sha256::digest(body.as_bytes()).to_vec(),
            headers: BTreeMap::from([("stripe-signature".into(), "t=1,v1=ab".into())]),
            guarded: false,
        }
    }

    /// A GitHub delivery: its id is a header the signature does not cover, so its source has
    /// the replay guard.
    fn github(id: &str, body: &str) -> Sample {
        Sample {
            source: "github",
            headers: BTreeMap::from([("x-hub-signature-256".into(), "sha256=ab".into())]),
            guarded: true,
            ..Sample::new(id, body)
        }
    }

    fn delivery(&self) -> NewDelivery<'_> {
        NewDelivery {
            source: self.source,
            delivery_id: &self.id,
            id_origin: if self.guarded {
                IdOrigin::Header
            } else {
                IdOrigin::Body
            },
            event_type: Some("checkout.session.completed"),
            payload: &self.body,
            payload_sha256: &self.hash,
            headers: &self.headers,
            long_key_retention: self.guarded,
            replay_guard: self.guarded,
        }
    }
}

fn claimant(owner: &str) -> Claimant<'_> {
    Claimant {
        owner,
        lease: LEASE,
        max_attempts: 5,
    }
}

/// The answer of a claim won at `attempt`, with the request's own body.
fn claimed(attempt: i32) -> Claim {
    Claim::Claimed {
        attempt,
        same_payload: true,
    }
}

/// Claims as the webhook does for a processor that is not store-only.
async fn claim(c: &Client, s: &Sample, owner: &str) -> Claim {
    ledger::claim(c, &s.delivery(), &claimant(owner), false)
        .await
        .unwrap()
}

fn attempt<'a>(s: &'a Sample, n: i32, owner: &'a str) -> Attempt<'a> {
    Attempt {
        source: s.source,
        delivery_id: &s.id,
        attempt: n,
        owner,
    }
}

#[tokio::test]
async fn new_delivery_is_claimed_as_processing_with_its_payload_stored() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_new", r#"{"id":"evt_new"}"#);

    assert_eq!(claim(&c, &s, "a").await, claimed(1));

    let row = c
        .query_one(
            "SELECT status, payload, payload_sha256, headers->>'stripe-signature', event_type,
                    id_origin, lease_until > now() + interval '50 seconds'
               FROM hookclaim_deliveries WHERE delivery_id = 'evt_new'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, &str>(0), "processing");
    assert_eq!(row.get::<_, &[u8]>(1), s.body.as_slice());
    assert_eq!(row.get::<_, &[u8]>(2), s.hash.as_slice());
    assert_eq!(row.get::<_, &str>(3), "t=1,v1=ab");
    assert_eq!(row.get::<_, &str>(4), "checkout.session.completed");
    assert_eq!(row.get::<_, &str>(5), "body");
    assert!(
        row.get::<_, bool>(6),
        "lease runs from the database's now()"
    );
}

#[tokio::test]
async fn store_only_claim_records_the_delivery_as_done_in_the_same_statement() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_store", "{}");

    let got = ledger::claim(&c, &s.delivery(), &claimant("a"), true)
        .await
        .unwrap();

    assert_eq!(got, claimed(1));
    assert_eq!(status(&c, "stripe", "evt_store").await, ("done".into(), 1));
    assert_eq!(claim(&c, &s, "b").await, Claim::Done { same_payload: true });
}

#[tokio::test]
async fn a_store_only_claim_retried_by_its_owner_is_its_own_claim_not_a_duplicate() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_store_retry", "{}");
    ledger::claim(&c, &s.delivery(), &claimant("a"), true)
        .await
        .unwrap();

    // As after a lost answer: the row is already done, and its owner asks again.
    let again = ledger::claim(&c, &s.delivery(), &claimant("a"), true)
        .await
        .unwrap();

    assert_eq!(again, claimed(1));
    assert_eq!(claim(&c, &s, "b").await, Claim::Done { same_payload: true });
    assert_eq!(
        status(&c, "stripe", "evt_store_retry").await,
        ("done".into(), 1)
    );
}

#[tokio::test]
async fn every_value_of_a_new_row_is_stored_exactly_as_sent() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    // Quotes, backslashes, commas, parentheses and non-ASCII: what a composite literal must
    // escape, and what a sender may put in an event type or a header.
    let tricky = r#"a "quoted", (parenthesised) \ back\slashed ünïcødé ✓"#;
    let mut s = Sample::new("evt_exact", "{}");
    s.headers = BTreeMap::from([
        ("stripe-signature".into(), "t=1,v1=ab".into()),
        ("x-odd".into(), tricky.into()),
        ("x-empty".into(), String::new()),
    ]);
    let mut with_type = s.delivery();
    with_type.event_type = Some(tricky);
    with_type.long_key_retention = true;
    let mut without_type = s.delivery();
    without_type.delivery_id = "evt_exact_untyped";
    without_type.event_type = None;
    without_type.id_origin = IdOrigin::BodySha256;

    let first = ledger::claim(&c, &with_type, &claimant("a"), false).await;
    let second = ledger::claim(&c, &without_type, &claimant("a"), true).await;

    assert_eq!(first.unwrap(), claimed(1));
    assert_eq!(second.unwrap(), claimed(1));
    let row = |id: &'static str| {
        let c = &c;
        async move {
            c.query_one(
                "SELECT event_type, headers::text, id_origin, long_key_retention, status,
                        lease_owner
                   FROM hookclaim_deliveries WHERE delivery_id = $1",
                &[&id],
            )
            .await
            .unwrap()
        }
    };
    let typed = row("evt_exact").await;
    let stored: BTreeMap<String, String> = serde_json::from_str(typed.get::<_, &str>(1)).unwrap();
    assert_eq!(typed.get::<_, Option<&str>>(0), Some(tricky));
    assert_eq!(stored, s.headers);
    assert_eq!(typed.get::<_, &str>(2), "body");
    assert!(typed.get::<_, bool>(3));
    assert_eq!(typed.get::<_, &str>(4), "processing");
    assert_eq!(typed.get::<_, &str>(5), "a");
    let untyped = row("evt_exact_untyped").await;
    assert_eq!(untyped.get::<_, Option<&str>>(0), None);
    assert_eq!(untyped.get::<_, &str>(2), "body_sha256");
    assert!(!untyped.get::<_, bool>(3));
    assert_eq!(untyped.get::<_, &str>(4), "done");
    assert_rows_well_formed(&c).await;
}

#[tokio::test]
async fn duplicate_of_a_done_delivery_is_reported_and_changes_nothing() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_done", "{}");
    claim(&c, &s, "a").await;
    assert_eq!(
        ledger::finish_done(&c, &attempt(&s, 1, "a")).await.unwrap(),
        Finish::Applied
    );

    assert_eq!(claim(&c, &s, "b").await, Claim::Done { same_payload: true });
    assert_eq!(status(&c, "stripe", "evt_done").await, ("done".into(), 1));
}

#[tokio::test]
async fn duplicate_with_a_different_payload_is_still_a_duplicate_but_flagged() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_mm", r#"{"a":1}"#);
    ledger::claim(&c, &s.delivery(), &claimant("a"), true)
        .await
        .unwrap();

    let other = Sample::new("evt_mm", r#"{"a":2}"#);
    assert_eq!(
        claim(&c, &other, "b").await,
        Claim::Done {
            same_payload: false
        }
    );
}

#[tokio::test]
async fn duplicate_of_a_dead_delivery_with_a_different_payload_is_flagged() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_dead_mm", r#"{"a":1}"#);
    claim(&c, &s, "a").await;
    ledger::finish_dead(&c, &attempt(&s, 1, "a"), "bad")
        .await
        .unwrap();

    let other = Sample::new("evt_dead_mm", r#"{"a":2}"#);
    assert_eq!(
        claim(&c, &other, "b").await,
        Claim::Dead {
            same_payload: false
        }
    );
    assert_eq!(
        status(&c, "stripe", "evt_dead_mm").await,
        ("dead".into(), 1)
    );
}

#[tokio::test]
async fn duplicate_of_a_dead_delivery_is_reported_and_never_taken() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_dead", "{}");
    claim(&c, &s, "a").await;
    ledger::finish_dead(&c, &attempt(&s, 1, "a"), "no order id")
        .await
        .unwrap();

    assert_eq!(claim(&c, &s, "b").await, Claim::Dead { same_payload: true });
    let st = state(&c, "stripe", "evt_dead").await;
    assert_eq!((st.status.as_str(), st.attempt), ("dead", 1));
    assert_eq!(st.last_error.as_deref(), Some("no order id"));
    assert!(st.has_payload, "payload kept for replay");
}

/// The row's `xmax`: a row lock or an update by another transaction would set it.
async fn xmax(c: &Client, id: &str) -> String {
    c.query_one(
        "SELECT xmax::text FROM hookclaim_deliveries WHERE delivery_id = $1",
        &[&id],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn duplicates_of_done_and_dead_deliveries_lock_nothing_and_write_no_wal() {
    // A private, quiet server, so that its WAL position moves only for this test: no other
    // test's database, no autovacuum, no standby snapshots (wal_level minimal) and no timed
    // checkpoint.
    let server = PgServer::start_with(&[
        "autovacuum = off",
        "wal_level = minimal",
        "max_wal_senders = 0",
        "checkpoint_timeout = '1d'",
    ]);
    let url = server.url("postgres");
    let mut admin = support::connect(&url).await;
    hookclaim::schema::migrate(&mut admin).await.unwrap();
    admin
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await
        .unwrap();
    let c = support::connect(&url).await;
    let done = Sample::new("evt_quiet_done", "{}");
    let dead = Sample::new("evt_quiet_dead", "{}");
    claim(&c, &done, "a").await;
    ledger::finish_done(&c, &attempt(&done, 1, "a"))
        .await
        .unwrap();
    claim(&c, &dead, "a").await;
    ledger::finish_dead(&c, &attempt(&dead, 1, "a"), "bad")
        .await
        .unwrap();
    let guarded = Sample::github("gh_quiet_done", r#"{"ref":"main"}"#);
    claim(&c, &guarded, "a").await;
    ledger::finish_done(&c, &attempt(&guarded, 1, "a"))
        .await
        .unwrap();
    // As autovacuum would: this clears the row versions the finishes left behind and sets the
    // commit hint bits, which the first read after a commit sets (without WAL, but dirtying a
    // page) whatever that read is.
    admin
        .batch_execute("VACUUM hookclaim_deliveries")
        .await
        .unwrap();

    // Some senders count their attempts in the body, so a redelivery's payload may differ: it is
    // answered from the same read.
    let done_other = Sample::new("evt_quiet_done", r#"{"attempt":2}"#);
    // With the replay guard, the same signed body under a new id: the body's row answers it,
    // read after the key's lookup found nothing.
    let resent = Sample::github("gh_quiet_resent", r#"{"ref":"main"}"#);
    for (s, holder, reads, want) in [
        (&done, &done, 1, Claim::Done { same_payload: true }),
        (&dead, &dead, 1, Claim::Dead { same_payload: true }),
        (
            &done_other,
            &done,
            1,
            Claim::Done {
                same_payload: false,
            },
        ),
        (
            &resent,
            &guarded,
            2,
            Claim::Resent {
                of: guarded.id.clone(),
                answer: Box::new(Claim::Done { same_payload: true }),
            },
        ),
    ] {
        let xmax_before = xmax(&c, &holder.id).await;
        admin
            .batch_execute("SELECT pg_stat_statements_reset()")
            .await
            .unwrap();
        // In a transaction, to ask afterwards whether the claim needed a transaction id, which
        // any row lock or write would have taken.
        c.batch_execute("BEGIN").await.unwrap();
        let lsn_before: String = c
            .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
            .await
            .unwrap()
            .get(0);
        let got = ledger::claim(&c, &s.delivery(), &claimant("b"), false)
            .await
            .unwrap();
        let after = c
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::text::pg_lsn)::int8,
                        pg_current_xact_id_if_assigned()::text",
                &[&lsn_before],
            )
            .await
            .unwrap();
        c.batch_execute("COMMIT").await.unwrap();
        // The claim's call and the statements inside it: everything but the probes above.
        let stats = admin
            .query_one(
                "SELECT sum(calls) FILTER (WHERE toplevel)::int8,
                        sum(calls) FILTER (WHERE NOT toplevel)::int8,
                        sum(wal_records)::int8, sum(wal_bytes)::int8,
                        sum(shared_blks_dirtied)::int8
                   FROM pg_stat_statements
                  WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND query NOT ILIKE '%pg_current_wal_insert_lsn%'
                    AND query NOT ILIKE '%pg_stat_statements_reset%'
                    AND query NOT ILIKE 'BEGIN%' AND query NOT ILIKE 'COMMIT%'",
                &[],
            )
            .await
            .unwrap();

        assert_eq!(got, want);
        assert_eq!(after.get::<_, i64>(0), 0, "{}: WAL bytes written", s.id);
        assert_eq!(
            after.get::<_, Option<String>>(1),
            None,
            "{}: the claim took a transaction id",
            s.id
        );
        assert_eq!(
            xmax(&c, &holder.id).await,
            xmax_before,
            "{}: row locked",
            s.id
        );
        let (calls, nested, records, bytes, dirtied): (i64, i64, i64, i64, i64) = (
            stats.get(0),
            stats.get(1),
            stats.get(2),
            stats.get(3),
            stats.get(4),
        );
        assert_eq!(calls, 1, "{}: one claim statement", s.id);
        assert_eq!(
            nested, reads,
            "{}: the claim's reads alone ran inside it",
            s.id
        );
        assert_eq!(
            (records, bytes, dirtied),
            (0, 0, 0),
            "{}: the claim's WAL records, WAL bytes, buffers dirtied",
            s.id
        );
    }
    assert_eq!(status(&c, "stripe", &done.id).await, ("done".into(), 1));
    assert_eq!(status(&c, "stripe", &dead.id).await, ("dead".into(), 1));
    assert!(!exists(&c, "github", &resent.id).await, "nothing stored");
}

#[tokio::test]
async fn delivery_under_a_live_lease_is_in_progress_for_everyone_else() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_busy", "{}");
    claim(&c, &s, "a").await;

    assert_eq!(claim(&c, &s, "b").await, Claim::InProgress);
    assert_eq!(
        status(&c, "stripe", "evt_busy").await,
        ("processing".into(), 1)
    );
}

#[tokio::test]
async fn retry_by_the_same_owner_gets_the_same_claim_back() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_retry", "{}");
    claim(&c, &s, "a").await;

    // As after a lost answer: the first claim committed, the owner asks again.
    assert_eq!(claim(&c, &s, "a").await, claimed(1));
}

/// Claims `s` for `owner` on a connection of its own, failing the test if the answer takes
/// more than two seconds: the transactions these tests hold open stay open much longer.
async fn claim_at_once(url: &str, s: &Sample, owner: &str) -> Claim {
    let c = support::connect(url).await;
    tokio::time::timeout(Duration::from_secs(2), claim(&c, s, owner))
        .await
        .expect("the claim waited for another transaction")
}

/// Starts claiming `s` for `owner` on a connection of its own, and checks that it is still
/// waiting a moment later (for another transaction's insert to commit or roll back).
async fn claim_waiting(url: &str, s: &Sample, owner: &str) -> tokio::task::JoinHandle<Claim> {
    let c = support::connect(url).await;
    let (s, owner) = (s.clone(), owner.to_owned());
    let waiting = tokio::spawn(async move { claim(&c, &s, &owner).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "the claim answered from an uncommitted row"
    );
    waiting
}

/// A competitor's claim never answers from a row that has not committed: it waits for the
/// inserting statement's transaction, and answers from what it committed.
#[tokio::test]
async fn a_duplicate_of_a_delivery_being_inserted_waits_for_the_insert_and_answers_from_its_commit()
{
    let db = TestDb::migrated().await;
    let holder = db.client().await;
    let s = Sample::new("evt_inserting", "{}");

    // The first claimant's insert has not committed (its transaction stays open).
    holder.batch_execute("BEGIN").await.unwrap();
    assert_eq!(claim(&holder, &s, "a").await, claimed(1));
    let other = claim_waiting(&db.url, &s, "b").await;
    // So does the same owner's retry while its first try has not committed.
    let retry = claim_waiting(&db.url, &s, "a").await;

    holder.batch_execute("COMMIT").await.unwrap();
    assert_eq!(other.await.unwrap(), Claim::InProgress);
    assert_eq!(retry.await.unwrap(), claimed(1));
}

/// The claim that rolls back after inserting (a statement timeout, a cancelled or killed
/// backend) leaves nothing that could have been promised: the competitor that waited for it
/// stores the delivery itself.
#[tokio::test]
async fn a_claim_whose_competitor_rolls_back_stores_the_delivery_itself() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let holder = db.client().await;
    for s in [
        Sample::new("evt_rolled_back", "{}"),
        Sample::github("gh_rolled_back", r#"{"n":1}"#),
    ] {
        holder.batch_execute("BEGIN").await.unwrap();
        assert_eq!(claim(&holder, &s, "a").await, claimed(1));
        let other = claim_waiting(&db.url, &s, "b").await;

        holder.batch_execute("ROLLBACK").await.unwrap();
        assert_eq!(other.await.unwrap(), claimed(1));
        let row = state(&c, s.source, &s.id).await;
        assert_eq!((row.status.as_str(), row.attempt), ("processing", 1));
    }
}

/// A replay-guarded body being inserted under one id, claimed under another: the second claim
/// waits too, and is answered from the body's committed row, or stores its own when the first
/// rolled back.
#[tokio::test]
async fn a_guarded_body_being_inserted_under_another_id_is_answered_only_once_it_commits() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let holder = db.client().await;
    let body = r#"{"action":"opened"}"#;
    for (end, first, second) in [("ROLLBACK", "gh_a1", "gh_b1"), ("COMMIT", "gh_a2", "gh_b2")] {
        let body = format!("{body}{first}");
        let (a, b) = (Sample::github(first, &body), Sample::github(second, &body));
        holder.batch_execute("BEGIN").await.unwrap();
        assert_eq!(claim(&holder, &a, "a").await, claimed(1));
        let other = claim_waiting(&db.url, &b, "b").await;

        holder.batch_execute(end).await.unwrap();
        let got = other.await.unwrap();
        if end == "ROLLBACK" {
            assert_eq!(got, claimed(1));
            assert!(exists(&c, "github", second).await && !exists(&c, "github", first).await);
        } else {
            let want = Claim::Resent {
                of: first.into(),
                answer: Box::new(Claim::InProgress),
            };
            assert_eq!(got, want);
            assert!(!exists(&c, "github", second).await);
        }
    }
}

/// The reviewer's case: a claim blocked in its insert (here behind a lock another transaction
/// holds on the table) is cancelled by its statement timeout. A competitor arriving meanwhile
/// never hears "in progress" from it, and stores the delivery once the way is clear.
#[tokio::test]
async fn a_claim_cancelled_by_its_statement_timeout_never_makes_a_competitor_answer_in_progress() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let blocker = db.client().await;
    let s = Sample::new("evt_timed_out", "{}");
    blocker
        .batch_execute("BEGIN; LOCK TABLE hookclaim_deliveries IN SHARE MODE")
        .await
        .unwrap();
    let timed_out = {
        let a = support::connect(&db.url).await;
        a.batch_execute("SET statement_timeout = 500")
            .await
            .unwrap();
        let s = Sample::new("evt_timed_out", "{}");
        tokio::spawn(async move { ledger::claim(&a, &s.delivery(), &claimant("a"), false).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let other = claim_waiting(&db.url, &s, "b").await;

    let e = timed_out
        .await
        .unwrap()
        .expect_err("cancelled by its statement timeout");
    assert_eq!(
        e.code(),
        Some(&tokio_postgres::error::SqlState::QUERY_CANCELED)
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !other.is_finished(),
        "answered while the insert was still blocked"
    );
    blocker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(other.await.unwrap(), claimed(1));
    assert_eq!(status(&c, "stripe", &s.id).await, ("processing".into(), 1));
}

#[tokio::test]
async fn a_duplicate_during_an_open_processing_transaction_is_answered_without_waiting() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let holder = db.client().await;
    let live = Sample::new("evt_processing_live", "{}");
    let expired = Sample::new("evt_processing_expired", "{}");
    for s in [&live, &expired] {
        assert_eq!(claim(&c, s, "a").await, claimed(1));
    }
    expire_lease(&c, &expired.id).await;

    // The processing transaction has written the fenced finish (the rows are locked until it
    // ends) and has not committed: its COMMIT is still on the way.
    holder.batch_execute("BEGIN").await.unwrap();
    for s in [&live, &expired] {
        let at = attempt(s, 1, "a");
        let finished = ledger::finish_done(&holder, &at).await.unwrap();
        assert_eq!(finished, Finish::Applied);
    }

    // Under a live lease: the committed claim is in progress. Under an expired one whose holder
    // is finishing: its outcome has not committed, so nothing is promised (busy), and nothing
    // is taken over. Both at once.
    assert_eq!(claim_at_once(&db.url, &live, "b").await, Claim::InProgress);
    assert_eq!(claim_at_once(&db.url, &expired, "b").await, Claim::Busy);
    holder.batch_execute("COMMIT").await.unwrap();
    for s in [&live, &expired] {
        assert_eq!(status(&c, "stripe", &s.id).await, ("done".into(), 1));
        assert_eq!(claim(&c, s, "b").await, Claim::Done { same_payload: true });
    }
}

/// Without the replay guard a due row can be taken over by a request with another body; the
/// claim says so, and the body to run is the stored one.
#[tokio::test]
async fn a_takeover_with_another_body_is_claimed_and_flagged_and_the_stored_body_is_held() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let first = Sample::new("evt_two_bodies", r#"{"body":1}"#);
    let second = Sample::new("evt_two_bodies", r#"{"body":2}"#);
    assert_eq!(claim(&c, &first, "a").await, claimed(1));
    expire_lease(&c, &first.id).await;

    assert_eq!(
        claim(&c, &second, "b").await,
        Claim::Claimed {
            attempt: 2,
            same_payload: false
        }
    );
    let held = ledger::held(&c, &attempt(&first, 2, "b"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held.payload.as_deref(), Some(first.body.as_slice()));
    assert_eq!(held.attempt, 2);
    // Only the holder reads it as held.
    assert!(ledger::held(&c, &attempt(&first, 2, "a"))
        .await
        .unwrap()
        .is_none());
}

/// What the claim must never store is refused with hookclaim's own SQLSTATE, and nothing is
/// written: the Rust never sends these, so each is a caller's bug, not a row retention could
/// not re-drive.
#[tokio::test]
async fn the_claim_refuses_arguments_it_must_never_store() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let good = [
        "'stripe'",
        "'evt_args'",
        "'owner'",
        "60",
        "'\\x7b7d'::bytea",
        "sha256('\\x7b7d'::bytea)",
        "'{}'",
        "'t'",
        "'body'",
        "false",
        "false",
        "false",
        "5",
    ];
    let names = [
        "p_source",
        "p_delivery_id",
        "p_owner",
        "p_lease_secs",
        "p_payload",
        "p_payload_sha256",
        "p_headers",
        "p_event_type",
        "p_id_origin",
        "p_store_only",
        "p_long_key_retention",
        "p_replay_guard",
        "p_max_attempts",
    ];
    let call = |changes: &[(&str, &str)]| {
        let args: Vec<String> = names
            .iter()
            .zip(good)
            .map(|(name, value)| {
                let value = changes
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(value, |(_, v)| v);
                format!("{name} => {value}")
            })
            .collect();
        format!("SELECT state FROM hookclaim_claim({})", args.join(", "))
    };
    let refused: &[&[(&str, &str)]] = &[
        &[("p_payload", "NULL")],
        &[("p_headers", "'null'")],
        &[("p_headers", "'[1,2]'")],
        &[("p_headers", "'\"text\"'")],
        &[("p_id_origin", "'somewhere'")],
        &[("p_id_origin", "NULL")],
        &[
            ("p_payload_sha256", "''::bytea"),
            ("p_replay_guard", "true"),
        ],
        &[("p_payload_sha256", "NULL")],
        &[("p_lease_secs", "0")],
        &[("p_lease_secs", "-5")],
        &[("p_lease_secs", "NULL")],
        // PostgreSQL orders NaN above every number, so `> 0` alone would pass it.
        &[("p_lease_secs", "'NaN'")],
        &[("p_lease_secs", "'Infinity'")],
        &[("p_lease_secs", "1e13")],
        &[("p_lease_secs", "1e-9")],
        &[("p_max_attempts", "0")],
        &[("p_max_attempts", "NULL")],
        &[("p_owner", "NULL")],
        &[("p_owner", "NULL"), ("p_store_only", "true")],
        &[("p_store_only", "NULL")],
        &[("p_replay_guard", "NULL")],
        &[("p_long_key_retention", "NULL")],
        &[("p_source", "NULL")],
        &[("p_delivery_id", "NULL")],
        &[("p_headers", "'{'")],
        &[("p_headers", "NULL")],
    ];
    for changes in refused {
        let e = c
            .batch_execute(&call(changes))
            .await
            .expect_err(&call(changes));
        assert_eq!(
            e.code().map(|s| s.code()),
            Some(REFUSED),
            "{changes:?}: {e}"
        );
    }
    assert_eq!(support::delivery_count(&c).await, 0);
    // The same call with good arguments stores the row.
    c.batch_execute(&call(&[])).await.unwrap();
    assert_eq!(
        status(&c, "stripe", "evt_args").await,
        ("processing".into(), 1)
    );
    // A takeover checks its lease and cap too.
    expire_lease(&c, "evt_args").await;
    let e = c
        .batch_execute(&call(&[("p_owner", "'other'"), ("p_lease_secs", "0")]))
        .await
        .expect_err("a takeover with a lease of 0");
    assert_eq!(e.code().map(|s| s.code()), Some(REFUSED), "{e}");
    assert_eq!(
        status(&c, "stripe", "evt_args").await,
        ("processing".into(), 1)
    );
}

#[tokio::test]
async fn an_expired_lease_at_the_attempt_cap_is_made_dead_instead_of_taken_over() {
    // Every attempt dies without recording anything (a payload that kills the process).
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_poison", r#"{"id":"evt_poison"}"#);
    let capped = |owner| Claimant {
        max_attempts: 2,
        ..claimant(owner)
    };
    let claim_capped = async |owner| {
        ledger::claim(&c, &s.delivery(), &capped(owner), false)
            .await
            .unwrap()
    };
    assert_eq!(claim_capped("a").await, claimed(1));
    expire_lease(&c, &s.id).await;
    assert_eq!(claim_capped("b").await, claimed(2));
    expire_lease(&c, &s.id).await;

    assert_eq!(claim_capped("c").await, Claim::GaveUp);

    let st = state(&c, "stripe", &s.id).await;
    assert_eq!((st.status.as_str(), st.attempt), ("dead", 2));
    assert_eq!(
        st.last_error.as_deref(),
        Some("gave up after 2 attempts: processing never finished (the invocation died each time)")
    );
    assert!(st.has_payload, "kept for a replay");
    assert_eq!(
        claim_capped("d").await,
        Claim::Dead { same_payload: true },
        "and a duplicate from then on"
    );
    assert_rows_well_formed(&c).await;
}

#[tokio::test]
async fn a_due_retry_at_a_lowered_attempt_cap_is_made_dead_instead_of_taken_over() {
    // Five attempts failed under a cap of 8; the cap is then lowered to 5.
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_capped", r#"{"id":"evt_capped"}"#);
    assert_eq!(claim(&c, &s, "a").await, claimed(1));
    c.batch_execute(
        "UPDATE hookclaim_deliveries
            SET status = 'failed', attempt = 5, lease_until = NULL, last_error = 'HTTP 500',
                next_attempt_at = now() - interval '1 second'
          WHERE delivery_id = 'evt_capped'",
    )
    .await
    .unwrap();
    let capped = Claimant {
        max_attempts: 5,
        ..claimant("b")
    };

    let got = ledger::claim(&c, &s.delivery(), &capped, false)
        .await
        .unwrap();

    assert_eq!(got, Claim::GaveUp, "not attempt 6 of 5");
    let st = state(&c, "stripe", &s.id).await;
    assert_eq!((st.status.as_str(), st.attempt), ("dead", 5));
    assert_eq!(
        st.last_error.as_deref(),
        Some("gave up after 5 attempts: HTTP 500")
    );
    // The reclaim applies the same cap.
    let r = Sample::new("evt_capped_r", r#"{"id":"evt_capped_r"}"#);
    assert_eq!(claim(&c, &r, "a").await, claimed(1));
    c.batch_execute(
        "UPDATE hookclaim_deliveries
            SET status = 'failed', attempt = 5, lease_until = NULL, last_error = 'HTTP 500',
                next_attempt_at = now() - interval '1 second'
          WHERE delivery_id = 'evt_capped_r'",
    )
    .await
    .unwrap();
    let start = ledger::ReclaimCursor::default();
    let next = ledger::reclaim_next(&c, &capped, &start).await.unwrap();
    let taken = next.and_then(|r| r.taken).expect("the reclaim reaches it");
    assert!(taken.gave_up, "{taken:?}");
    assert_eq!(status(&c, "stripe", &r.id).await, ("dead".into(), 5));
    assert_rows_well_formed(&c).await;
}

/// The finish refuses what it must never record, with hookclaim's own SQLSTATE, and changes
/// nothing; only a good call finishes the attempt.
#[tokio::test]
async fn the_finish_refuses_outcomes_it_must_never_record() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_finish_args", "{}");
    assert_eq!(claim(&c, &s, "a").await, claimed(1));
    // The outcome, then its retry time, attempt cap and age bound.
    let call = |outcome: &str, retry: &str, cap: &str, age: &str| {
        format!(
            "SELECT hookclaim_finish(p_source => 'stripe', p_delivery_id => 'evt_finish_args',
                                     p_attempt => 1, p_owner => 'a', p_outcome => {outcome},
                                     p_error => 'e', p_retry_in_secs => {retry},
                                     p_max_attempts => {cap}, p_max_age_secs => {age})"
        )
    };
    let refused = [
        ("'finished'", "NULL", "NULL", "NULL"),
        ("'processing'", "NULL", "NULL", "NULL"),
        ("NULL", "NULL", "NULL", "NULL"),
        ("'failed'", "NULL", "NULL", "NULL"),
        ("'failed'", "'NaN'", "NULL", "NULL"),
        ("'failed'", "'Infinity'", "NULL", "NULL"),
        ("'failed'", "-1", "NULL", "NULL"),
        ("'done'", "30", "NULL", "NULL"),
        ("'failed'", "30", "0", "NULL"),
        ("'failed'", "30", "NULL", "3600"),
        ("'done'", "NULL", "8", "NULL"),
        ("'deferred'", "30", "NULL", "NULL"),
        ("'deferred'", "NULL", "NULL", "3600"),
        ("'deferred'", "30", "8", "3600"),
        ("'deferred'", "30", "NULL", "0"),
        ("'deferred'", "30", "NULL", "'NaN'"),
        ("'deferred'", "30", "NULL", "'Infinity'"),
        ("'dead'", "NULL", "NULL", "3600"),
    ];
    for (outcome, retry, cap, age) in refused {
        let sql = call(outcome, retry, cap, age);
        let e = c.batch_execute(&sql).await.expect_err(&sql);
        assert_eq!(e.code().map(|s| s.code()), Some(REFUSED), "{sql}: {e}");
        assert_eq!(
            status(&c, "stripe", &s.id).await,
            ("processing".into(), 1),
            "{sql}"
        );
    }
    c.batch_execute(&call("'failed'", "30", "8", "NULL"))
        .await
        .unwrap();
    assert_eq!(status(&c, "stripe", &s.id).await, ("failed".into(), 1));
    assert_rows_well_formed(&c).await;
}

#[tokio::test]
async fn expired_lease_is_taken_over_with_the_next_attempt_number() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_expired", "{}");
    claim(&c, &s, "a").await;
    expire_lease(&c, "evt_expired").await;

    assert_eq!(claim(&c, &s, "b").await, claimed(2));
    assert_eq!(
        status(&c, "stripe", "evt_expired").await,
        ("processing".into(), 2)
    );
    assert_rows_well_formed(&c).await;
}

#[tokio::test]
async fn due_failed_row_is_reclaimed_and_a_not_yet_due_one_is_not() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let due = Sample::new("evt_due", "{}");
    let later = Sample::new("evt_later", "{}");
    for s in [&due, &later] {
        claim(&c, s, "a").await;
    }
    ledger::finish_failed(&c, &attempt(&due, 1, "a"), "timeout", Duration::ZERO)
        .await
        .unwrap();
    ledger::finish_failed(
        &c,
        &attempt(&later, 1, "a"),
        "timeout",
        Duration::from_secs(120),
    )
    .await
    .unwrap();

    assert_eq!(claim(&c, &due, "b").await, claimed(2));
    let stored: std::time::SystemTime = c
        .query_one(
            "SELECT next_attempt_at FROM hookclaim_deliveries WHERE delivery_id = 'evt_later'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    match claim(&c, &later, "b").await {
        Claim::RetryLater {
            next_attempt_at,
            same_payload: true,
        } => {
            let wait = next_attempt_at
                .duration_since(std::time::SystemTime::now())
                .unwrap();
            assert!(wait > Duration::from_secs(100), "{wait:?}");
            let off = next_attempt_at
                .duration_since(stored)
                .unwrap_or_else(|e| e.duration());
            assert!(
                off < Duration::from_millis(1),
                "answered {off:?} off the stored due time"
            );
        }
        other => panic!("expected RetryLater, got {other:?}"),
    }
    assert_eq!(
        status(&c, "stripe", "evt_later").await,
        ("failed".into(), 1)
    );
    assert_rows_well_formed(&c).await;
}

/// A state a row can be in when the next claimant or the retention run finds it.
#[derive(Debug, Clone, Copy)]
enum Found {
    LiveLease,
    ExpiredLease { attempt: i32 },
    Failed { attempt: i32, due: bool },
    Done,
    Dead,
}

/// What taking a row over came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takeover {
    /// Taken at this attempt.
    Taken(i32),
    /// Made dead at the attempt cap instead.
    GaveUp,
    /// Left as it was.
    Left,
}

/// Leaves `s`'s row as `found` describes it, the way the statements themselves write it: a
/// first claim by "a", the attempt number moved to what earlier takeovers would have left, and
/// the finish or the expiry.
async fn arrange(c: &Client, s: &Sample, found: Found) {
    c.execute("DELETE FROM hookclaim_deliveries", &[])
        .await
        .unwrap();
    assert_eq!(claim(c, s, "a").await, claimed(1));
    let n = match found {
        Found::ExpiredLease { attempt } | Found::Failed { attempt, .. } => attempt,
        _ => 1,
    };
    c.execute(
        "UPDATE hookclaim_deliveries SET attempt = $2 WHERE delivery_id = $1",
        &[&s.id, &n],
    )
    .await
    .unwrap();
    let at = attempt(s, n, "a");
    let finished = match found {
        Found::LiveLease => Finish::Applied,
        Found::ExpiredLease { .. } => {
            expire_lease(c, &s.id).await;
            Finish::Applied
        }
        Found::Failed { due, .. } => {
            let retry_in = Duration::from_secs(if due { 0 } else { 120 });
            ledger::finish_failed(c, &at, "timeout", retry_in)
                .await
                .unwrap()
        }
        Found::Done => ledger::finish_done(c, &at).await.unwrap(),
        Found::Dead => ledger::finish_dead(c, &at, "rejected").await.unwrap(),
    };
    assert_eq!(finished, Finish::Applied, "{found:?}");
}

/// The row as the takeover rule sees and writes it, with the taker's owner token as `taker`.
async fn row(c: &Client, id: &str, taker: &str) -> String {
    let r = c
        .query_one(
            "SELECT status, attempt, lease_owner, lease_until > now(), next_attempt_at IS NULL,
                    completed_at IS NULL, last_error, payload IS NULL
               FROM hookclaim_deliveries WHERE delivery_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let owner: String = r.get(2);
    let owner = if owner == taker { "<taker>" } else { &owner };
    format!(
        "{} attempt {} owner {owner} live lease {:?} no due time {} not completed {} error {:?} \
         payload trimmed {}",
        r.get::<_, String>(0),
        r.get::<_, i32>(1),
        r.get::<_, Option<bool>>(3),
        r.get::<_, bool>(4),
        r.get::<_, bool>(5),
        r.get::<_, Option<String>>(6),
        r.get::<_, bool>(7),
    )
}

#[tokio::test]
async fn the_claim_and_the_retention_reclaim_take_over_each_state_as_the_rule_says() {
    // Both take rows over with hookclaim_take_over: each state is arranged once for each, and
    // each must take the row at the next attempt, make it dead at the cap, or leave it as it
    // was.
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_rule", r#"{"id":"evt_rule"}"#);
    let cases = [
        (Found::LiveLease, Takeover::Left),
        (Found::ExpiredLease { attempt: 1 }, Takeover::Taken(2)),
        (Found::ExpiredLease { attempt: 4 }, Takeover::Taken(5)),
        (Found::ExpiredLease { attempt: 5 }, Takeover::GaveUp),
        // MAX_ATTEMPTS lowered below a row's attempts since its claim.
        (Found::ExpiredLease { attempt: 7 }, Takeover::GaveUp),
        (
            Found::Failed {
                attempt: 1,
                due: true,
            },
            Takeover::Taken(2),
        ),
        (
            Found::Failed {
                attempt: 4,
                due: true,
            },
            Takeover::Taken(5),
        ),
        (
            Found::Failed {
                attempt: 1,
                due: false,
            },
            Takeover::Left,
        ),
        (Found::Done, Takeover::Left),
        (Found::Dead, Takeover::Left),
    ];
    for (found, expected) in cases {
        arrange(&c, &s, found).await;
        let before = row(&c, &s.id, "r").await;
        let by_reclaim = match reclaim_first(&c, "r").await {
            None => Takeover::Left,
            Some(d) if d.gave_up => Takeover::GaveUp,
            Some(d) => Takeover::Taken(d.attempt),
        };
        let after_reclaim = row(&c, &s.id, "r").await;
        assert_rows_well_formed(&c).await;

        arrange(&c, &s, found).await;
        assert_eq!(
            row(&c, &s.id, "c").await,
            before,
            "{found:?}: arranged alike"
        );
        let answer = claim(&c, &s, "c").await;
        let by_claim = match answer {
            Claim::Claimed { attempt, .. } => Takeover::Taken(attempt),
            Claim::GaveUp => Takeover::GaveUp,
            _ => Takeover::Left,
        };
        let after_claim = row(&c, &s.id, "c").await;
        assert_rows_well_formed(&c).await;

        assert_eq!(
            (by_claim, by_reclaim),
            (expected, expected),
            "{found:?}: (claim, reclaim); the claim answered {answer:?}"
        );
        if expected == Takeover::Left {
            assert_eq!(
                after_claim, before,
                "{found:?}: left as it was by the claim"
            );
            assert_eq!(
                after_reclaim, before,
                "{found:?}: left as it was by the reclaim"
            );
        }
    }
}

/// Whether `got` is the answer `want` describes; a retry time is compared by being there.
fn answers_as(got: &Claim, want: &Claim) -> bool {
    match (got, want) {
        (
            Claim::RetryLater { same_payload, .. },
            Claim::RetryLater {
                same_payload: wanted,
                ..
            },
        ) => same_payload == wanted,
        (Claim::Resent { of, answer }, Claim::Resent { of: o, answer: a }) => {
            of == o && answers_as(answer, a)
        }
        _ => got == want,
    }
}

#[tokio::test]
async fn with_the_replay_guard_a_body_resent_under_a_new_id_is_answered_from_the_row_holding_it() {
    // A signed body posted again with a new delivery id (the id is an unsigned header): it is
    // answered as a redelivery of the delivery that holds the body, and nothing is stored,
    // taken over or made runnable under the new id, whatever state that delivery is in.
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let original = Sample::github("gh-original", r#"{"ref":"main","after":"1f0e"}"#);
    let replay = Sample::github("gh-replay", r#"{"ref":"main","after":"1f0e"}"#);
    let retry_later = |same_payload| Claim::RetryLater {
        next_attempt_at: std::time::SystemTime::now(),
        same_payload,
    };
    let cases = [
        (Found::Done, Claim::Done { same_payload: true }),
        (Found::Dead, Claim::Dead { same_payload: true }),
        (Found::LiveLease, Claim::InProgress),
        (Found::ExpiredLease { attempt: 1 }, Claim::Busy),
        (
            Found::Failed {
                attempt: 1,
                due: false,
            },
            retry_later(true),
        ),
        (
            Found::Failed {
                attempt: 2,
                due: true,
            },
            retry_later(true),
        ),
    ];
    for (found, holder) in cases {
        arrange(&c, &original, found).await;
        let before = row(&c, &original.id, "b").await;

        let got = claim(&c, &replay, "b").await;

        let want = Claim::Resent {
            of: original.id.clone(),
            answer: Box::new(holder),
        };
        assert!(answers_as(&got, &want), "{found:?}: {got:?}, want {want:?}");
        assert_eq!(
            row(&c, &original.id, "b").await,
            before,
            "{found:?}: left as it was"
        );
        assert!(!exists(&c, "github", &replay.id).await, "{found:?}: stored");
        // The same owner asking again (its answer lost) is answered the same way.
        let again = claim(&c, &replay, "b").await;
        assert!(answers_as(&again, &want), "{found:?} again: {again:?}");
    }
    // A body the guard has not seen is a new delivery, as always.
    let other = Sample::github("gh-other", r#"{"ref":"main","after":"2a7c"}"#);
    assert_eq!(claim(&c, &other, "b").await, claimed(1));
    assert_rows_well_formed(&c).await;
}

#[tokio::test]
async fn with_the_replay_guard_a_due_row_is_taken_over_only_by_its_own_body() {
    // Another signed body of the source, posted with the id of a delivery that failed (or
    // whose invocation died): it is not run under that id and does not finish it; the delivery
    // stays for its own redelivery or re-drive, which runs the body stored with it.
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let own = Sample::github("gh-due", r#"{"action":"opened","number":7}"#);
    let other = Sample::github("gh-due", r#"{"action":"closed","number":9}"#);
    for (found, refused) in [
        (
            Found::Failed {
                attempt: 1,
                due: true,
            },
            Claim::RetryLater {
                next_attempt_at: std::time::SystemTime::now(),
                same_payload: false,
            },
        ),
        (Found::ExpiredLease { attempt: 1 }, Claim::Busy),
    ] {
        arrange(&c, &own, found).await;
        let before = row(&c, &own.id, "b").await;

        let got = claim(&c, &other, "b").await;

        assert!(answers_as(&got, &refused), "{found:?}: {got:?}");
        assert_eq!(
            row(&c, &own.id, "b").await,
            before,
            "{found:?}: left as it was"
        );
        // Its own body takes it over, as the retention reclaim does (from the stored payload).
        assert_eq!(claim(&c, &own, "b").await, claimed(2), "{found:?}");
        arrange(&c, &own, found).await;
        let reclaimed = reclaim_first(&c, "r").await.expect("the reclaim takes it");
        assert_eq!(
            (reclaimed.attempt, reclaimed.payload.as_deref()),
            (2, Some(own.body.as_slice())),
            "{found:?}"
        );
    }
    assert_rows_well_formed(&c).await;
}

#[tokio::test]
async fn without_the_replay_guard_a_body_under_a_new_id_is_new_and_any_body_takes_a_due_row() {
    // A source whose signature covers the id (or that turned the guard off) behaves as it
    // always has: the key alone decides.
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let first = Sample::new("evt_open_1", r#"{"ping":true}"#);
    let second = Sample::new("evt_open_2", r#"{"ping":true}"#);
    claim(&c, &first, "a").await;
    ledger::finish_done(&c, &attempt(&first, 1, "a"))
        .await
        .unwrap();

    assert_eq!(claim(&c, &second, "b").await, claimed(1));

    let own = Sample::new("evt_open_due", r#"{"n":1}"#);
    let other = Sample::new("evt_open_due", r#"{"n":2}"#);
    arrange(
        &c,
        &own,
        Found::Failed {
            attempt: 1,
            due: true,
        },
    )
    .await;
    // Taken over, and flagged: the stored body is the one to run.
    assert_eq!(
        claim(&c, &other, "b").await,
        Claim::Claimed {
            attempt: 2,
            same_payload: false
        }
    );
}

#[tokio::test]
async fn the_replay_guards_lookup_is_planned_once_however_many_rows_share_a_body() {
    // A sender that posts the same bytes under new ids, to a source without the guard, leaves
    // many rows of one hash. Statistics sampled from such a table under-count the distinct
    // hashes, price a lookup by any hash above a lookup by one seen, and PL/pgSQL would then
    // plan the guard's lookup again at every claim.
    let db = TestDb::migrated().await;
    let admin = db.client().await;
    admin
        .batch_execute(
            "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
             INSERT INTO hookclaim_deliveries
                 (source, delivery_id, status, lease_owner, completed_at, payload, payload_sha256)
             SELECT 'stripe', 'evt_same_body_' || n, 'done', 'a', now(), '{}', sha256('{}')
               FROM generate_series(1, 20000) n;
             INSERT INTO hookclaim_deliveries
                 (source, delivery_id, status, lease_owner, completed_at, payload, payload_sha256,
                  replay_guard)
             SELECT 'github', 'gh_stored_' || n, 'done', 'a', now(), '{}', sha256(int8send(n)),
                    true
               FROM generate_series(1, 2000) n;
             -- A sample of 3,000 rows, as ANALYZE reads of a table of millions.
             SET default_statistics_target = 10;
             ANALYZE hookclaim_deliveries;",
        )
        .await
        .unwrap();
    let c = db.client().await;
    c.batch_execute("SET pg_stat_statements.track_planning = on")
        .await
        .unwrap();
    reset_statements(&admin).await;

    // New guarded deliveries: each looks its body up, finds none, and is stored.
    for n in 0..30 {
        let s = Sample::github(&format!("gh_planned_{n}"), &format!(r#"{{"n":{n}}}"#));
        assert_eq!(claim(&c, &s, "a").await, claimed(1));
    }

    let (calls, plans) = statement_stats(
        &admin,
        Level::Nested,
        "%payload_sha256 = p_payload_sha256 AND replay_guard%",
    )
    .await;
    // PL/pgSQL plans a statement for its first five calls' values, then keeps one plan for
    // every value when that plan costs no more.
    assert_eq!(calls, 30);
    assert!(
        plans <= 6,
        "the guard's lookup was planned {plans} times in {calls} calls"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ids_racing_with_one_guarded_body_store_it_once_every_round() {
    // Many new ids carrying one signed body at the same moment: the body's unique index lets
    // exactly one of them in; the others are in progress (the winner had not committed) or
    // answered from the winner's row.
    let db = TestDb::migrated().await;
    let mut clients = Vec::new();
    for _ in 0..32 {
        clients.push(std::sync::Arc::new(db.client().await));
    }
    for round in 0..50 {
        let body = format!(r#"{{"round":{round}}}"#);
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(clients.len()));
        let mut tasks = Vec::new();
        for (i, c) in clients.iter().enumerate() {
            let (c, body, barrier) = (c.clone(), body.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                let s = Sample::github(&format!("gh-race-{round}-{i}"), &body);
                barrier.wait().await;
                claim(&c, &s, &format!("owner-{i}")).await
            }));
        }
        let mut winners = 0;
        for t in tasks {
            match t.await.unwrap() {
                Claim::Claimed { attempt: 1, .. } => winners += 1,
                Claim::InProgress | Claim::Resent { .. } => {}
                other => panic!("round {round}: unexpected {other:?}"),
            }
        }
        let stored = clients[0]
            .query_one(
                "SELECT count(*) FROM hookclaim_deliveries WHERE payload = $1",
                &[&body.as_bytes()],
            )
            .await
            .unwrap()
            .get::<_, i64>(0);
        assert_eq!((winners, stored), (1, 1), "round {round}");
    }
    assert_rows_well_formed(&clients[0]).await;
}

#[tokio::test]
async fn a_store_only_claim_that_takes_over_an_expired_lease_leaves_it_to_be_finished() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_store_takeover", "{}");
    claim(&c, &s, "a").await;
    expire_lease(&c, &s.id).await;

    let got = ledger::claim(&c, &s.delivery(), &claimant("b"), true).await;

    assert_eq!(got.unwrap(), claimed(2));
    assert_eq!(status(&c, "stripe", &s.id).await, ("processing".into(), 2));
    let finished = ledger::finish_done(&c, &attempt(&s, 2, "b")).await.unwrap();
    assert_eq!(finished, Finish::Applied);
}

#[tokio::test]
async fn the_schema_refuses_a_row_that_breaks_the_state_machine() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_checked", "{}");
    claim(&c, &s, "a").await;
    // Hand-written updates that would leave a delivery no run can take, or a status nothing
    // reads, each refused by the table's one CHECK.
    let cases = [
        "status = 'finished', lease_until = NULL",
        "attempt = 0",
        "lease_until = NULL",
        "lease_owner = NULL",
        "next_attempt_at = now()",
        "completed_at = now()",
        "status = 'failed', lease_until = NULL",
        "status = 'done', lease_until = NULL",
        "status = 'done', completed_at = now()",
        "status = 'dead', lease_until = NULL, next_attempt_at = now(), completed_at = now()",
        "status = 'failed', lease_until = NULL, next_attempt_at = now(), completed_at = now()",
        "deferrals = -1",
        "deferrals = 2",
    ];
    let cases = cases.map(|set| (set, "hookclaim_row_state"));
    for (set, constraint) in cases {
        let sql =
            format!("UPDATE hookclaim_deliveries SET {set} WHERE delivery_id = 'evt_checked'");
        let e = c.batch_execute(&sql).await.expect_err(set);
        let refused = e.as_db_error().and_then(|d| d.constraint());
        assert_eq!(refused, Some(constraint), "{set}: {e}");
    }
    assert_eq!(status(&c, "stripe", &s.id).await, ("processing".into(), 1));
}

#[tokio::test]
async fn a_stale_attempts_finish_is_rejected_and_the_new_owners_result_stands() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let s = Sample::new("evt_zombie", "{}");
    claim(&c, &s, "old").await;
    expire_lease(&c, "evt_zombie").await;
    assert_eq!(claim(&c, &s, "new").await, claimed(2));

    // The old owner wakes up and tries every kind of finish.
    let stale = attempt(&s, 1, "old");
    assert_eq!(
        ledger::finish_done(&c, &stale).await.unwrap(),
        Finish::Fenced
    );
    assert_eq!(
        ledger::finish_failed(&c, &stale, "x", Duration::ZERO)
            .await
            .unwrap(),
        Finish::Fenced
    );
    assert_eq!(
        ledger::finish_dead(&c, &stale, "x").await.unwrap(),
        Finish::Fenced
    );
    // Right attempt number, wrong owner: still fenced.
    assert_eq!(
        ledger::finish_done(&c, &attempt(&s, 2, "old"))
            .await
            .unwrap(),
        Finish::Fenced
    );
    assert_eq!(
        status(&c, "stripe", "evt_zombie").await,
        ("processing".into(), 2)
    );

    assert_eq!(
        ledger::finish_done(&c, &attempt(&s, 2, "new"))
            .await
            .unwrap(),
        Finish::Applied
    );
    assert_eq!(status(&c, "stripe", "evt_zombie").await, ("done".into(), 2));
    // Finishing twice is fenced too: done rows are never touched again.
    assert_eq!(
        ledger::finish_dead(&c, &attempt(&s, 2, "new"), "x")
            .await
            .unwrap(),
        Finish::Fenced
    );
    assert_rows_well_formed(&c).await;
}

#[tokio::test]
async fn migrations_applied_twice_change_nothing() {
    let db = TestDb::empty().await;
    let mut c = db.client().await;
    assert_eq!(hookclaim::schema::current_version(&c).await.unwrap(), 0);

    let first = hookclaim::schema::migrate(&mut c).await.unwrap();
    let second = hookclaim::schema::migrate(&mut c).await.unwrap();

    let all: Vec<i32> = (1..=hookclaim::schema::latest_version()).collect();
    assert_eq!(first, all);
    assert!(second.is_empty());
    let rows = support::count(&c, "SELECT count(*) FROM hookclaim_schema_migrations").await;
    assert_eq!(rows, hookclaim::schema::MIGRATIONS.len() as i64);
}

#[tokio::test]
async fn migrations_from_many_connections_at_once_apply_exactly_once() {
    let db = TestDb::empty().await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let url = db.url.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = support::connect(&url).await;
            hookclaim::schema::migrate(&mut c).await
        }));
    }
    let mut applied = Vec::new();
    for t in tasks {
        applied.extend(t.await.unwrap().expect("no migration may fail"));
    }
    let all: Vec<i32> = (1..=hookclaim::schema::latest_version()).collect();
    assert_eq!(applied, all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_connections_racing_for_one_id_produce_exactly_one_winner_every_round() {
    let db = TestDb::migrated().await;
    let mut clients = Vec::new();
    for _ in 0..64 {
        clients.push(std::sync::Arc::new(db.client().await));
    }
    for round in 0..100 {
        let id = format!("evt_race_{round}");
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(64));
        let mut tasks = Vec::new();
        for (i, c) in clients.iter().enumerate() {
            let (c, id, barrier) = (c.clone(), id.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                let s = Sample::new(&id, "{}");
                barrier.wait().await;
                claim(&c, &s, &format!("owner-{i}")).await
            }));
        }
        let mut winners = 0;
        for t in tasks {
            match t.await.unwrap() {
                Claim::Claimed { attempt: 1, .. } => winners += 1,
                Claim::InProgress => {}
                other => panic!("round {round}: unexpected {other:?}"),
            }
        }
        assert_eq!(winners, 1, "round {round}");
    }
    assert_rows_well_formed(&clients[0]).await;
}

/// Clears pg_stat_statements' entries for this database only: the other tests' databases
/// share the server, and some count their own statements.
async fn reset_statements(c: &Client) {
    c.batch_execute(
        "SELECT pg_stat_statements_reset(0, oid, 0) FROM pg_database
          WHERE datname = current_database()",
    )
    .await
    .unwrap();
}

/// Which statements [`statement_stats`] counts.
enum Level {
    /// Those the client sent.
    TopLevel,
    /// Those run inside others (the claim function's).
    Nested,
}

/// Calls and plans since the last reset, by pg_stat_statements, of this database's statements
/// at `level` whose text matches `like`.
async fn statement_stats(c: &Client, level: Level, like: &str) -> (i64, i64) {
    let row = c
        .query_one(
            "SELECT coalesce(sum(calls), 0)::int8, coalesce(sum(plans), 0)::int8
               FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND toplevel = $1 AND query ILIKE $2",
            &[&matches!(level, Level::TopLevel), &like],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// Statements the client sent in this database, by pg_stat_statements (top level: not the
/// statements inside the claim function).
async fn statements_since_reset(c: &Client, like: &str) -> i64 {
    statement_stats(c, Level::TopLevel, like).await.0
}

/// Statements run inside others in this database since the last reset (the claim function's).
async fn nested_statements(c: &Client) -> i64 {
    statement_stats(c, Level::Nested, "%").await.0
}

#[tokio::test]
async fn a_new_claim_and_a_duplicate_each_cost_one_statement_on_the_server() {
    let db = TestDb::migrated().await;
    let admin = db.client().await;
    admin
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await
        .unwrap();
    let c = db.client().await;
    let s = Sample::new("evt_count", "{}");
    // Everything this connection sends from here on is counted.
    reset_statements(&admin).await;

    ledger::claim(&c, &s.delivery(), &claimant("a"), true)
        .await
        .unwrap();
    let after_new = statements_since_reset(&admin, "%hookclaim_claim(%").await;
    // Inside it, the claim function ran once: its read of the key and its insert. (Were the
    // function called once per answer column, these would be counted four times.)
    let nested = nested_statements(&admin).await;
    ledger::claim(&c, &s.delivery(), &claimant("b"), true)
        .await
        .unwrap();
    let after_dup = statements_since_reset(&admin, "%hookclaim_claim(%").await;
    let all: i64 = admin
        .query_one(
            "SELECT coalesce(sum(calls),0)::int8 FROM pg_stat_statements
              WHERE query NOT ILIKE '%pg_stat_statements%' AND toplevel
                AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[],
        )
        .await
        .unwrap()
        .get(0);

    assert_eq!(after_new, 1, "new delivery: one statement");
    assert_eq!(nested, 2, "new delivery: statements run inside the claim");
    assert_eq!(after_dup - after_new, 1, "duplicate: one statement");
    assert_eq!(all, 2, "nothing else was sent (no prepare, no extra reads)");
    println!(
        "statements: new={after_new} duplicate={}",
        after_dup - after_new
    );
}

/// What a retention run's first reclaim takes, as `owner`: the first due row, if it took it.
async fn reclaim_first(c: &Client, owner: &str) -> Option<ledger::StoredDelivery> {
    let start = ledger::ReclaimCursor::default();
    let next = ledger::reclaim_next(c, &claimant(owner), &start).await;
    next.unwrap().and_then(|r| r.taken)
}
