//! Faults under the profile hookclaim deploys: a function of a user's own (the faulty processor
//! in tests/fixtures/faulty) built with `--release`, which is what `cargo lambda build
//! --release` produces (Cargo.toml sets every release setting it would otherwise choose), run
//! under the cargo-lambda emulator against the harness's PostgreSQL.

use crate::support;

use std::path::Path;

use support::emulator::Emulator;
use support::{row, TestDb, STRIPE_SECRET};

const WEBHOOK_URL: &str = "/lambda-url/faulty-webhook/webhooks/stripe";

/// Attempts before a failing delivery is given up, small so the test is short.
const MAX_ATTEMPTS: i32 = 4;

/// Posts a Stripe event `id` whose processing does `behaviour`, signed now: (status, body).
fn deliver(emu: &Emulator, id: &str, behaviour: &str) -> (u16, String) {
    let body = serde_json::json!({
        "id": id,
        "object": "event",
        "type": "invoice.paid",
        "behaviour": behaviour,
        "data": {"object": {}},
    })
    .to_string();
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let signature = support::stripe_signature(STRIPE_SECRET, t, body.as_bytes());
    emu.http(
        "POST",
        WEBHOOK_URL,
        &[
            ("content-type", "application/json"),
            ("stripe-signature", &signature),
        ],
        body.as_bytes(),
    )
}

/// Inserts `n` done Stripe rows completed 40 days ago, past the default 30-day retention.
async fn old_done_rows(c: &tokio_postgres::Client, n: i32) {
    c.execute(
        "INSERT INTO hookclaim_deliveries
             (source, delivery_id, status, attempt, payload, payload_sha256, received_at,
              completed_at)
         SELECT 'stripe', 'evt_old_' || i, 'done', 1, '\\x7b7d', sha256('\\x7b7d'),
                now() - interval '40 days', now() - interval '40 days'
           FROM generate_series(1, $1) AS i",
        &[&n],
    )
    .await
    .expect("insert old rows");
}

/// A scheduled retention run through the emulator: its report.
fn scheduled_run(emu: &Emulator) -> serde_json::Value {
    let event = Path::new(env!("CARGO_MANIFEST_DIR")).join("events/retention-scheduled.json");
    emu.invoke("faulty-retention", &event)
}

#[tokio::test]
async fn a_poisoned_delivery_ends_dead_under_the_deployed_profile_while_the_rest_is_purged_and_redriven(
) {
    let bins = support::emulator::build_binaries(
        "hookclaim-fixture-faulty",
        &["faulty-webhook", "faulty-retention"],
        true,
    );
    let db = TestDb::empty().await;
    let mut env = support::local_env();
    env.insert("DATABASE_URL".into(), db.url.clone());
    env.insert("MAX_ATTEMPTS".into(), MAX_ATTEMPTS.to_string());
    // Failed attempts are due again at once, so each redelivery and each run takes one over.
    env.insert("RETRY_BASE_SECS".into(), "0".into());
    env.insert("RETRY_MAX_SECS".into(), "0".into());
    let mut emu = Emulator::start();
    emu.run_function(
        "faulty-webhook",
        bins["faulty-webhook"].to_str().unwrap(),
        &env,
    );
    let mut retention_env = env.clone();
    retention_env.remove("HOOKCLAIM_SECRETS");
    emu.run_function(
        "faulty-retention",
        bins["faulty-retention"].to_str().unwrap(),
        &retention_env,
    );

    // Arrange: a normal delivery (its cold start also creates the table), rows past their
    // retention, a poisoned delivery and one that fails only its first attempt.
    let ok = deliver(&emu, "evt_ok", "none");
    assert_eq!(ok.0, 200, "{ok:?}");
    let c = db.client().await;
    old_done_rows(&c, 3).await;
    let poisoned = deliver(&emu, "evt_poison", "panic");
    assert_eq!(poisoned.0, 503, "a panic is a failed attempt: {poisoned:?}");
    assert!(poisoned.1.contains(r#""status":"failed""#), "{poisoned:?}");
    let flaky = deliver(&emu, "evt_flaky", "flaky");
    assert_eq!(flaky.0, 503, "{flaky:?}");

    // Act and assert: a scheduled run re-drives both (the poison fails again, the other ends
    // done) and still purges the old rows.
    let first = scheduled_run(&emu);
    assert_eq!(first["reclaimed"], 2, "{first}");
    assert_eq!(first["redriven"]["ok"], 1, "{first}");
    assert_eq!(first["redriven"]["failed"], 1, "{first}");
    assert_eq!(first["purged"], 3, "{first}");
    assert_eq!(first["stopped_early"], false, "{first}");
    assert_eq!(row(&c, "stripe", "evt_flaky").await.unwrap().0, "done");
    assert_eq!(
        row(&c, "stripe", "evt_poison").await.unwrap().0,
        "failed",
        "attempt 2 of {MAX_ATTEMPTS}"
    );

    // Stripe redelivers the poison: attempt 3 fails too.
    let redelivered = deliver(&emu, "evt_poison", "panic");
    assert_eq!(redelivered.0, 503, "{redelivered:?}");
    let (status, attempt, _) = row(&c, "stripe", "evt_poison").await.unwrap();
    assert_eq!((status.as_str(), attempt), ("failed", 3));

    // The next run takes the last attempt: dead, listed in the report with the panic's message.
    let last = scheduled_run(&emu);
    assert_eq!(last["redriven"]["dead"], 1, "{last}");
    assert_eq!(last["dead"][0]["delivery_id"], "evt_poison", "{last}");
    let (status, attempt, error) = row(&c, "stripe", "evt_poison").await.unwrap();
    assert_eq!((status.as_str(), attempt), ("dead", MAX_ATTEMPTS));
    let error = error.unwrap_or_default();
    assert!(
        error.contains("processor panicked: cannot handle delivery evt_poison"),
        "{error}"
    );

    // Dead is final: the sender's next redelivery is told to stop (a duplicate of a finished
    // delivery), and runs leave it alone.
    let after = deliver(&emu, "evt_poison", "panic");
    assert_eq!(after.0, 200, "{after:?}");
    assert!(after.1.contains(r#""status":"duplicate""#), "{after:?}");
    let idle = scheduled_run(&emu);
    assert_eq!(idle["reclaimed"], 0, "{idle}");
    assert_eq!(
        row(&c, "stripe", "evt_poison").await.unwrap().1,
        MAX_ATTEMPTS
    );

    // Every panic was caught where it happened: both processes are the ones started above, and
    // they still serve.
    assert!(emu.is_running("faulty-webhook") && emu.is_running("faulty-retention"));
    let fresh = deliver(&emu, "evt_after", "none");
    assert_eq!(fresh.0, 200, "{fresh:?}");
    assert!(fresh.1.contains(r#""status":"processed""#), "{fresh:?}");
    for function in ["faulty-webhook", "faulty-retention"] {
        assert!(
            emu.logs(function).contains("processor panicked"),
            "{function} logs its caught panics"
        );
    }
}
