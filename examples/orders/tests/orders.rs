//! The example's processor through `hookclaim::testing`: against a real PostgreSQL, as the
//! webhook function runs it, with the sender's redelivery, the retention function's re-drive
//! and a second event about the same order. `DATABASE_URL` names a database the test may create
//! a schema in (`scripts/test` starts a throwaway one); each harness works in a schema of its
//! own, so the tests use plain ids and run in parallel.

use hookclaim::testing::{Happened, Harness};
use hookclaim::Delivery;
use hookclaim_example_orders::Orders;

/// The database the tests write to: required, so a missing one fails loudly.
fn database_url() -> String {
    std::env::var("DATABASE_URL").expect(
        "DATABASE_URL must name a PostgreSQL database these tests may write to \
         (scripts/test starts one)",
    )
}

/// A harness for the example's processor, with the function's Stripe source and a test secret
/// for it.
async fn harness() -> Harness<Orders> {
    Harness::builder(Orders)
        .sources(r#"{"stripe":{"kind":"stripe"}}"#)
        .secrets(r#"{"stripe":"whsec_orders_example_test"}"#)
        .connect(&database_url())
        .await
        .expect("harness")
}

/// Stripe's `kind` event `event_id` about Checkout session `session`, paid or not.
fn checkout(event_id: &str, kind: &str, session: &str, paid: bool) -> Delivery {
    let body = serde_json::json!({
        "id": event_id,
        "type": kind,
        "data": {"object": {
            "id": session,
            "amount_total": 4900,
            "currency": "eur",
            "payment_status": if paid { "paid" } else { "unpaid" },
        }},
    });
    Delivery::new("stripe", event_id, body.to_string()).with_event_type(kind)
}

/// The rows recorded for `order`: (amount, currency, delivery id).
async fn recorded(
    harness: &Harness<Orders>,
    order: &str,
) -> Vec<(Option<i64>, Option<String>, String)> {
    harness
        .client()
        .query(
            "SELECT amount, currency, delivery_id FROM example_orders WHERE order_id = $1",
            &[&order],
        )
        .await
        .expect("read example_orders")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

#[tokio::test]
async fn a_paid_order_is_recorded_once_under_redelivery_redrive_and_a_second_event() {
    let harness = harness().await;
    let completed = checkout("evt_a", "checkout.session.completed", "cs_1", true);

    let done = harness.deliver(&completed).await.unwrap();
    assert_eq!(done.outcome.happened, Happened::Done);
    let once = vec![(Some(4900), Some("eur".to_string()), "evt_a".to_string())];
    assert_eq!(recorded(&harness, "cs_1").await, once);

    // The sender's redelivery of the same event: a duplicate, the processor does not run.
    let again = harness.deliver(&completed).await.unwrap();
    assert_eq!(again.outcome.happened, Happened::Duplicate);
    // The retention function's re-drive runs it again: still one row.
    let redriven = harness.redrive(&completed).await.unwrap();
    assert_eq!(redriven.outcome.happened, Happened::Done);
    assert_eq!(redriven.row.map(|r| r.attempt), Some(2));
    // Another event about the same order: done, and still one row, the first event's.
    let succeeded = checkout(
        "evt_b",
        "checkout.session.async_payment_succeeded",
        "cs_1",
        true,
    );
    let done = harness.deliver(&succeeded).await.unwrap();
    assert_eq!(done.outcome.happened, Happened::Done);
    assert_eq!(recorded(&harness, "cs_1").await, once);
}

#[tokio::test]
async fn an_unpaid_session_records_nothing_and_a_session_without_an_id_is_dead() {
    let harness = harness().await;
    let unpaid = checkout("evt_a", "checkout.session.completed", "cs_1", false);
    let done = harness.deliver(&unpaid).await.unwrap();
    assert_eq!(done.outcome.happened, Happened::Done);
    assert_eq!(recorded(&harness, "cs_1").await, vec![]);

    let no_id = checkout("evt_n", "checkout.session.completed", "", true);
    let dead = harness.deliver(&no_id).await.unwrap();
    assert_eq!(dead.outcome.happened, Happened::Dead, "{dead:?}");
    let error = dead.outcome.reason.unwrap_or_default();
    assert!(error.contains("without an id"), "{error}");
}

#[tokio::test]
async fn a_signed_stripe_request_through_the_webhook_records_the_order_once() {
    let harness = harness().await;
    let paid = checkout("evt_w", "checkout.session.completed", "cs_w", true);
    let send = || {
        harness
            .request("stripe")
            .body(paid.payload.clone())
            .build()
            .expect("a signed request")
    };

    assert_eq!(harness.webhook().handle(send()).await.status(), 200);
    // Stripe's redelivery: 200 again, and still one order.
    assert_eq!(harness.webhook().handle(send()).await.status(), 200);
    let row = harness
        .row("stripe", "evt_w")
        .await
        .unwrap()
        .expect("its row");
    assert_eq!(row.attempt, 1);
    assert_eq!(recorded(&harness, "cs_w").await.len(), 1);
}
