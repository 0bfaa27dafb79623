//! The example's processor through `hookclaim::testing`: against a real PostgreSQL, as the
//! webhook function runs it, with the sender's redelivery, the retention function's re-drive
//! and a second event about the same order. `DATABASE_URL` names a database the test may write
//! to (`scripts/test` starts a throwaway one); each run uses order ids of its own.

use hookclaim::testing::{Happened, Harness};
use hookclaim::tokio_postgres::{self, NoTls};
use hookclaim::Delivery;
use hookclaim_example_orders::Orders;

/// The database the tests write to: required, so a missing one fails loudly.
fn database_url() -> String {
    std::env::var("DATABASE_URL").expect(
        "DATABASE_URL must name a PostgreSQL database these tests may write to \
         (scripts/test starts one)",
    )
}

/// A suffix that keeps this run's ids apart from earlier runs' in the same database.
fn run_id() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
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
async fn recorded(url: &str, order: &str) -> Vec<(Option<i64>, Option<String>, String)> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("connect");
    tokio::spawn(connection);
    client
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
    let url = database_url();
    let harness = Harness::connect(&url, Orders).await.expect("harness");
    let run = run_id();
    let order = format!("cs_{run}");
    let completed = checkout(
        &format!("evt_a_{run}"),
        "checkout.session.completed",
        &order,
        true,
    );

    assert_eq!(
        harness.deliver(&completed).await.unwrap().happened,
        Happened::Done
    );
    let once = vec![(
        Some(4900),
        Some("eur".to_string()),
        completed.delivery_id.clone(),
    )];
    assert_eq!(recorded(&url, &order).await, once);

    // The sender's redelivery of the same event: a duplicate, the processor does not run.
    assert_eq!(
        harness.deliver(&completed).await.unwrap().happened,
        Happened::Duplicate
    );
    // The retention function's re-drive runs it again: still one row.
    assert_eq!(
        harness.redrive(&completed).await.unwrap().happened,
        Happened::Done
    );
    // Another event about the same order: done, and still one row, the first event's.
    let succeeded = checkout(
        &format!("evt_b_{run}"),
        "checkout.session.async_payment_succeeded",
        &order,
        true,
    );
    assert_eq!(
        harness.deliver(&succeeded).await.unwrap().happened,
        Happened::Done
    );
    assert_eq!(recorded(&url, &order).await, once);
}

#[tokio::test]
async fn an_unpaid_session_records_nothing_and_a_session_without_an_id_is_dead() {
    let url = database_url();
    let harness = Harness::connect(&url, Orders).await.expect("harness");
    let run = run_id();
    let order = format!("cs_unpaid_{run}");
    let unpaid = checkout(
        &format!("evt_u_{run}"),
        "checkout.session.completed",
        &order,
        false,
    );
    assert_eq!(
        harness.deliver(&unpaid).await.unwrap().happened,
        Happened::Done
    );
    assert_eq!(recorded(&url, &order).await, vec![]);

    let no_id = checkout(
        &format!("evt_n_{run}"),
        "checkout.session.completed",
        "",
        true,
    );
    let dead = harness.deliver(&no_id).await.unwrap();
    assert_eq!(dead.happened, Happened::Dead, "{dead:?}");
    let error = dead.reason.unwrap_or_default();
    assert!(error.contains("without an id"), "{error}");
}
