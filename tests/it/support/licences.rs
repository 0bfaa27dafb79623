//! The tests' worked example from the field: a paid order gets exactly one licence key, issued
//! in the delivery's transaction (Strategy A). The tests use it to prove exactly-once effects.

use hookclaim::{Delivery, ProcessError, Processor, Work};
use tokio_postgres::Transaction;

/// Worked example: a paid order gets exactly one licence key.
///
/// The order id is the business key (`UNIQUE` on `order_id`), and the insert runs in the
/// delivery's transaction, so neither a redelivery of the same event nor a second event about
/// the same order can issue a second key.
#[derive(Debug, Clone, Copy, Default)]
pub struct Licences;

/// Where the example looks for an order id, in order: Stripe Checkout metadata, Stripe object
/// id, Polar/Standard Webhooks `data.id`, and a top-level `order_id`.
const ORDER_ID_POINTERS: &[&str] = &[
    "/data/object/metadata/order_id",
    "/data/object/id",
    "/data/id",
    "/order_id",
];

/// Finds the order id in a delivery body, as [`Licences`] does.
pub fn order_id(body: &serde_json::Value) -> Option<String> {
    ORDER_ID_POINTERS
        .iter()
        .filter_map(|p| body.pointer(p))
        .find_map(|v| match v {
            serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
}

impl Processor for Licences {
    fn name(&self) -> &'static str {
        "licence"
    }

    async fn setup(&self, tx: &Transaction<'_>) -> Result<(), tokio_postgres::Error> {
        // Checked first so that a role without CREATE can start once the table exists.
        let exists: bool = tx
            .query_typed_one(include_str!("licence/table_exists.sql"), &[])
            .await?
            .get(0);
        if !exists {
            tx.batch_execute(include_str!("licence/create_table.sql"))
                .await?;
        }
        Ok(())
    }

    async fn process(&self, delivery: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        let body = delivery
            .json()
            .map_err(|_| ProcessError::permanent("body is not JSON"))?;
        let order =
            order_id(&body).ok_or_else(|| ProcessError::permanent("no order id in the event"))?;
        let key = format!(
            "LIC-{}",
            hex::encode(fastrand::u128(..).to_be_bytes()).to_uppercase()
        );
        work.queue(
            include_str!("licence/issue.sql"),
            &[&order, &key, &delivery.source, &delivery.delivery_id],
        );
        Ok(())
    }
}

#[test]
fn order_id_is_found_in_each_known_place() {
    let cases = [
        (
            r#"{"data":{"object":{"id":"cs_1","metadata":{"order_id":"o-1"}}}}"#,
            Some("o-1"),
        ),
        (r#"{"data":{"object":{"id":"cs_1"}}}"#, Some("cs_1")),
        (r#"{"data":{"id":"ord_9"}}"#, Some("ord_9")),
        (r#"{"order_id":42}"#, Some("42")),
        (r#"{"order_id":""}"#, None),
        (r#"{"nothing":true}"#, None),
    ];
    for (json, want) in cases {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(order_id(&v).as_deref(), want, "{json}");
    }
}
