//! Reliability under the faults production has: races between environments, backends killed
//! between invocations, an invocation that outlives its lease, and hostile input.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::support::licences::Licences;
use hookclaim::processor::{Delivery, ProcessError, Processor, StoreOnly};
use hookclaim::work::Work;
use support::ledger::{assert_rows_well_formed, expire_lease, licence_count};
use support::{answer, delivery_count, github_request, row, Format, TestDb};
use tokio::sync::Notify;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_deliveries_of_one_id_across_sixteen_environments_have_one_effect() {
    let db = TestDb::migrated().await;
    let mut envs = Vec::new();
    for _ in 0..16 {
        envs.push(Arc::new(support::webhook(&db.url, &[], Licences).await));
    }
    let barrier = Arc::new(tokio::sync::Barrier::new(64));
    let mut tasks = Vec::new();
    for i in 0..64 {
        let (env, barrier) = (envs[i % 16].clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let req = github_request(
                Format::HttpApiV2,
                "same-id",
                br#"{"order_id":"o-race"}"#,
                false,
            );
            barrier.wait().await;
            answer(&env.handle(req).await)
        }));
    }
    let mut outcomes = std::collections::BTreeMap::new();
    for t in tasks {
        let (status, json) = t.await.unwrap();
        *outcomes
            .entry((status, json["status"].as_str().unwrap().to_string()))
            .or_insert(0) += 1;
    }
    println!("64 racing deliveries: {outcomes:?}");
    let c = db.client().await;
    assert_eq!(licence_count(&c).await, 1, "exactly one effect");
    assert_eq!(
        outcomes.get(&(200, "processed".into())),
        Some(&1),
        "one processed answer"
    );
    for (status, outcome) in outcomes.keys() {
        assert!(
            [(200, "processed"), (200, "duplicate"), (202, "in_progress")]
                .contains(&(*status, outcome.as_str())),
            "{status} {outcome}"
        );
    }
    assert_rows_well_formed(&c).await;
}

#[tokio::test]
async fn every_backend_terminated_between_a_hundred_invocations_fails_no_delivery() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], Licences).await;
    let admin = db.client().await;
    let mut failed = 0;
    for i in 0..100 {
        support::terminate_other_backends(&admin).await;
        let body = format!(r#"{{"order_id":"stale-{i}"}}"#);
        let resp = hook
            .handle(github_request(
                Format::HttpApiV2,
                &format!("stale-{i}"),
                body.as_bytes(),
                false,
            ))
            .await;
        if answer(&resp).0 != 200 {
            failed += 1;
        }
    }
    println!(
        "stale sockets: 100 invocations, {failed} failed, {} connections",
        hook.database().connect_count()
    );
    assert_eq!(failed, 0);
    assert_eq!(licence_count(&admin).await, 100);
}

/// A processor that, on its first call only, does its effect and then waits to be released
/// before returning: an invocation that outlives its lease.
struct SlowFirst(Arc<Gate>);

struct Gate {
    calls: AtomicUsize,
    started: Notify,
    release: Notify,
}

impl Processor for SlowFirst {
    fn name(&self) -> &'static str {
        "slow-first"
    }

    async fn setup(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
    ) -> Result<(), tokio_postgres::Error> {
        tx.batch_execute("CREATE TABLE IF NOT EXISTS effects (attempt int, owner text)")
            .await
    }

    async fn process(&self, d: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        let call = self.0.calls.fetch_add(1, Ordering::SeqCst);
        let owner = if call == 0 { "zombie" } else { "new" };
        work.queue("INSERT INTO effects VALUES ($1, $2)", &[&d.attempt, &owner]);
        if call == 0 {
            self.0.started.notify_one();
            self.0.release.notified().await;
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_that_outlives_its_lease_cannot_overwrite_the_new_owners_result() {
    let db = TestDb::migrated().await;
    let slow = Arc::new(Gate {
        calls: AtomicUsize::new(0),
        started: Notify::new(),
        release: Notify::new(),
    });
    let zombie_env = Arc::new(support::webhook(&db.url, &[], SlowFirst(slow.clone())).await);
    let other_env = support::webhook(&db.url, &[], SlowFirst(slow.clone())).await;

    // The first invocation stalls inside its processing while its lease runs out (an
    // environment frozen mid-invocation; a live invocation gives up before its deadline, so only
    // such a stall outlives a lease).
    let first = github_request(Format::HttpApiV2, "zombie", br#"{}"#, false);
    let zombie = tokio::spawn({
        let env = zombie_env.clone();
        async move { answer(&env.handle(first).await) }
    });
    slow.started.notified().await;
    expire_lease(&db.client().await, "zombie").await;

    // The lease has expired: the sender's redelivery takes the delivery over and finishes it.
    let redelivery = other_env
        .handle(github_request(Format::HttpApiV2, "zombie", br#"{}"#, false))
        .await;
    assert_eq!(answer(&redelivery).0, 200);

    // Now the zombie finishes.
    slow.release.notify_one();
    let (status, json) = zombie.await.unwrap();

    // It lost: what the newer attempt concluded is not its to promise, so the sender is asked
    // to come back and hears the committed outcome then.
    assert_eq!(
        (status, json["status"].as_str()),
        (503, Some("busy")),
        "the zombie is told it lost"
    );
    let c = db.client().await;
    assert_eq!(
        row(&c, "github", "zombie").await.unwrap(),
        ("done".into(), 2, None)
    );
    let effects: Vec<(i32, String)> = c
        .query("SELECT attempt, owner FROM effects", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        effects,
        vec![(2, "new".to_string())],
        "the zombie's work was rolled back"
    );
    assert_rows_well_formed(&c).await;
}

/// A request as sent: source, headers, body.
type Sent<'a> = (&'a str, Vec<(String, String)>, Vec<u8>);

#[tokio::test]
async fn hostile_input_gets_its_specified_status_stores_nothing_and_never_panics() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    let c = db.client().await;
    let sig = |body: &[u8]| support::github_signature(support::GITHUB_SECRET, body);
    let stripe_sig =
        |t: &str, body: &[u8]| support::stripe_signature(support::STRIPE_SECRET, t, body);
    let now = (support::EVENTS_SIGNED_AT + 90).to_string();
    let huge = "a".repeat(64 * 1024);
    let long_id = "i".repeat(10 * 1024);
    let invalid_utf8: &[u8] = &[0xff, 0xfe, 0x00, 0x80];
    let gh = |id: &str, body: &[u8], sig: &str| {
        (
            "github",
            vec![
                ("x-github-delivery".to_string(), id.to_string()),
                ("x-github-event".to_string(), "push".to_string()),
                ("x-hub-signature-256".to_string(), sig.to_string()),
            ],
            body.to_vec(),
        )
    };
    let stripe = |body: &[u8], sig: String| {
        (
            "stripe",
            vec![("stripe-signature".to_string(), sig)],
            body.to_vec(),
        )
    };
    // (case, source, headers, body, expected status)
    let cases: Vec<(&str, Sent, u16)> = vec![
        ("oversized body", ("acme", vec![], vec![b'x'; 262_145]), 413),
        (
            "invalid UTF-8, unsigned",
            gh("u1", invalid_utf8, "sha256=00"),
            401,
        ),
        (
            "invalid JSON where the id lives (Stripe)",
            stripe(b"{not json", stripe_sig(&now, b"{not json")),
            400,
        ),
        (
            "empty body, Stripe signed",
            stripe(b"", stripe_sig(&now, b"")),
            400,
        ),
        ("empty body, unsigned", ("github", vec![], vec![]), 401),
        ("huge signature header", gh("h1", b"{}", &huge), 401),
        (
            "huge unrelated header",
            (
                "github",
                vec![("x-junk".into(), huge.clone())],
                b"{}".to_vec(),
            ),
            401,
        ),
        (
            "non-numeric timestamp",
            stripe(b"{}", format!("t=abc,v1={}", "0".repeat(64))),
            401,
        ),
        (
            "overflowing timestamp",
            stripe(b"{}", stripe_sig("99999999999999999999999", b"{}")),
            401,
        ),
        (
            "negative timestamp",
            stripe(b"{}", stripe_sig("-5", b"{}")),
            401,
        ),
        // HTTP header values cannot carry NUL; a JSON body can.
        (
            "id with NUL (Stripe body)",
            stripe(
                br#"{"id":"evt_a\u0000b"}"#,
                stripe_sig(&now, br#"{"id":"evt_a\u0000b"}"#),
            ),
            400,
        ),
        ("id of 10 KB", gh(&long_id, b"{}", &sig(b"{}")), 400),
        (
            "signature for another body",
            gh("x1", b"{\"a\":1}", &sig(b"{}")),
            401,
        ),
        ("unknown source", ("paypal", vec![], b"{}".to_vec()), 404),
    ];
    for (name, (source, headers, body), want) in &cases {
        let hdrs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        for format in [Format::HttpApiV2, Format::RestV1] {
            let req = support::request(format, "POST", source, &hdrs, body, true);
            let got = answer(&hook.handle(req).await).0;
            assert_eq!(got, *want, "{name} ({format:?})");
        }
    }
    for method in ["GET", "PUT", "DELETE", "PATCH", "OPTIONS"] {
        let req = support::request(Format::FunctionUrl, method, "github", &[], b"", false);
        assert_eq!(answer(&hook.handle(req).await).0, 405, "{method}");
    }
    assert_eq!(delivery_count(&c).await, 0, "nothing stored");

    // Ids and bodies that are odd but valid are stored exactly.
    for id in ["quote'\"id", "spaces in id", "semi;colon,comma"] {
        let body = [invalid_utf8, id.as_bytes()].concat();
        let resp = hook
            .handle(github_request(Format::HttpApiV2, id, &body, true))
            .await;
        assert_eq!(answer(&resp).0, 200, "{id}");
        assert_eq!(row(&c, "github", id).await.unwrap().0, "done");
    }
}
