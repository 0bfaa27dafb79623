//! The example function (examples/orders), a user's own function on hookclaim's public API:
//! its compiled binaries under the cargo-lambda emulator, against the harness's PostgreSQL,
//! sent Stripe events signed here; and the README's processor compared with the example's.

use crate::support;

use support::emulator::Emulator;
use support::{TestDb, STRIPE_SECRET};

const WEBHOOK_URL: &str = "/lambda-url/orders-webhook/webhooks/stripe";

/// `Stripe-Signature` for `body`, signed now with the test secret.
fn stripe_signature(body: &str) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    support::stripe_signature(STRIPE_SECRET, t, body.as_bytes())
}

/// A Stripe event `id` of type `kind` about Checkout session `session`.
fn stripe_event(id: &str, kind: &str, session: serde_json::Value) -> String {
    serde_json::json!({
        "id": id,
        "object": "event",
        "type": kind,
        "data": {"object": session},
        "livemode": false,
    })
    .to_string()
}

/// A paid Checkout session.
fn paid_session(id: &str, amount: i64) -> serde_json::Value {
    serde_json::json!({
        "id": id,
        "object": "checkout.session",
        "amount_total": amount,
        "currency": "eur",
        "payment_status": "paid",
        "status": "complete",
    })
}

/// Posts `body` to the webhook function's URL with `signature`: (status, response body).
fn post(emu: &Emulator, body: &str, signature: &str) -> (u16, String) {
    emu.http(
        "POST",
        WEBHOOK_URL,
        &[
            ("content-type", "application/json"),
            ("stripe-signature", signature),
        ],
        body.as_bytes(),
    )
}

/// (order id, amount, currency, source, delivery id) of every recorded order.
async fn orders(
    c: &tokio_postgres::Client,
) -> Vec<(String, Option<i64>, Option<String>, String, String)> {
    c.query(
        "SELECT order_id, amount, currency, source, delivery_id FROM example_orders ORDER BY order_id",
        &[],
    )
    .await
    .expect("read example_orders")
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
    .collect()
}

#[tokio::test]
async fn the_example_function_records_each_paid_order_once_through_the_emulator() {
    let bins = support::emulator::build_binaries(
        "hookclaim-example-orders",
        &["orders-webhook", "orders-retention"],
        false,
    );
    let db = TestDb::empty().await;
    let mut env = support::local_env();
    env.insert("DATABASE_URL".into(), db.url.clone());
    let mut emu = Emulator::start();
    emu.run_function(
        "orders-webhook",
        bins["orders-webhook"].to_str().unwrap(),
        &env,
    );
    let c = db.client().await;

    // A paid order: processed, recorded once with its amount.
    let paid = stripe_event(
        "evt_orders_paid",
        "checkout.session.completed",
        paid_session("cs_orders_1", 4900),
    );
    let first = post(&emu, &paid, &stripe_signature(&paid));
    assert_eq!(first.0, 200, "{first:?}");
    assert!(first.1.contains(r#""status":"processed""#), "{first:?}");
    let recorded = vec![(
        "cs_orders_1".to_string(),
        Some(4900),
        Some("eur".to_string()),
        "stripe".to_string(),
        "evt_orders_paid".to_string(),
    )];
    assert_eq!(orders(&c).await, recorded);

    // Stripe's redelivery of the same event (signed again): a duplicate, nothing recorded twice.
    let again = post(&emu, &paid, &stripe_signature(&paid));
    assert_eq!(again.0, 200, "{again:?}");
    assert!(again.1.contains(r#""status":"duplicate""#), "{again:?}");
    assert_eq!(orders(&c).await, recorded);

    // A body changed after signing: refused, nothing stored anywhere.
    let genuine = stripe_event(
        "evt_orders_tampered",
        "checkout.session.completed",
        paid_session("cs_orders_2", 100),
    );
    let tampered = genuine.replace("100", "1");
    assert_ne!(tampered, genuine);
    let refused = post(&emu, &tampered, &stripe_signature(&genuine));
    assert_eq!(refused.0, 401, "{refused:?}");
    assert_eq!(orders(&c).await, recorded);
    assert_eq!(
        support::row(&c, "stripe", "evt_orders_tampered").await,
        None
    );

    // A completed session without an id can never be recorded: dead (the sender stops), with
    // the processor's reason kept.
    let mut no_id = paid_session("", 700);
    no_id.as_object_mut().unwrap().remove("id");
    let no_id = stripe_event("evt_orders_no_id", "checkout.session.completed", no_id);
    let dead = post(&emu, &no_id, &stripe_signature(&no_id));
    assert_eq!(dead.0, 200, "{dead:?}");
    assert!(dead.1.contains(r#""status":"dead""#), "{dead:?}");
    assert_eq!(orders(&c).await, recorded);
    let (status, _, error) = support::row(&c, "stripe", "evt_orders_no_id")
        .await
        .expect("the dead delivery is kept");
    assert_eq!(status, "dead");
    assert!(
        error.unwrap_or_default().contains("without an id"),
        "the processor's reason is recorded"
    );

    // A session completed but not paid yet, and an event of another type: done, not recorded.
    let mut unpaid = paid_session("cs_orders_3", 300);
    unpaid["payment_status"] = "unpaid".into();
    let unpaid = stripe_event("evt_orders_unpaid", "checkout.session.completed", unpaid);
    let other = stripe_event(
        "evt_orders_other",
        "customer.created",
        serde_json::json!({"id": "cus_1", "object": "customer"}),
    );
    for body in [&unpaid, &other] {
        let done = post(&emu, body, &stripe_signature(body));
        assert_eq!(done.0, 200, "{done:?}");
        assert!(done.1.contains(r#""status":"processed""#), "{done:?}");
    }
    assert_eq!(orders(&c).await, recorded);
    assert!(
        emu.is_running("orders-webhook"),
        "one process served every request"
    );

    // The retention binary, as its own process: its stats count what the webhook stored.
    let mut retention_env = support::local_env();
    retention_env.insert("DATABASE_URL".into(), db.url.clone());
    retention_env.remove("HOOKCLAIM_SECRETS");
    emu.run_function(
        "orders-retention",
        bins["orders-retention"].to_str().unwrap(),
        &retention_env,
    );
    let stats_event = concat!(env!("CARGO_MANIFEST_DIR"), "/events/retention-stats.json");
    let report = emu.invoke("orders-retention", stats_event.as_ref());
    assert_eq!(report["command"], "stats", "{report}");
    let stats = &report["stats"];
    assert_eq!(
        stats["by_source"],
        serde_json::json!({"stripe": {"done": 3, "dead": 1}}),
        "{report}"
    );
    assert_eq!(stats["total"], 4, "{report}");
    assert!(emu.is_running("orders-retention"));
}

/// The text from `async fn process` to the end of that method, as indented in `source`.
fn process_method(source: &str) -> &str {
    let start = source
        .find("    async fn process(")
        .expect("an `async fn process` method");
    let end = source[start..]
        .find("\n    }\n")
        .expect("the end of `process`");
    &source[start..start + end + "\n    }\n".len()]
}

/// The whole definition of constant `name` in `source`, up to its `;`.
fn constant<'a>(source: &'a str, name: &str) -> &'a str {
    let start = source
        .find(&format!("const {name}: "))
        .unwrap_or_else(|| panic!("const {name}"));
    let end = source[start..]
        .find(";\n")
        .expect("the end of the constant");
    &source[start..start + end]
}

/// The README's processor is the example's: its `process` method and the constants it uses,
/// as they are in examples/orders/src/lib.rs (the README's block is also compiled, as a
/// doctest of the crate).
#[test]
fn the_readme_shows_the_example_processor_as_it_is() {
    let root = env!("CARGO_MANIFEST_DIR");
    let lib = std::fs::read_to_string(format!("{root}/examples/orders/src/lib.rs")).unwrap();
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Your own processing"))
        .expect("README section \"Your own processing\"");
    let block = section
        .split("```rust,no_run\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a rust,no_run block in that section");
    assert_eq!(
        process_method(block),
        process_method(&lib),
        "the README's `process` is not examples/orders/src/lib.rs's"
    );
    for name in ["RECORD_ORDER", "PAID_EVENTS"] {
        assert_eq!(constant(block, name), constant(&lib, name), "{name}");
    }
}
