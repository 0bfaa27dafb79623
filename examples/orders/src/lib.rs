//! A webhook function of your own, built on hookclaim's public API only: [`Orders`] records each
//! paid Stripe Checkout order once, in its own table, in the delivery's transaction. The binaries
//! `orders-webhook` and `orders-retention` run it as the two Lambda functions.

use hookclaim::tokio_postgres::{self, Transaction};
use hookclaim::{Delivery, ProcessError, Processor, Work};

/// Records each paid Stripe Checkout order once in `example_orders`. The order id is the key and
/// the insert commits with the delivery's "done", so neither a redelivery nor a second event
/// about the same order records it twice.
pub struct Orders;

/// The processor's own table, created by the first cold start.
const CREATE_ORDERS: &str = "CREATE TABLE example_orders (
    order_id    text PRIMARY KEY,
    amount      bigint,
    currency    text,
    source      text NOT NULL,
    delivery_id text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
)";

/// One paid order; the same order again changes nothing.
const RECORD_ORDER: &str = "INSERT INTO example_orders
    (order_id, amount, currency, source, delivery_id) VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (order_id) DO NOTHING";

/// The Stripe events that can say a Checkout session is paid.
const PAID_EVENTS: &[&str] = &[
    "checkout.session.completed",
    "checkout.session.async_payment_succeeded",
];

impl Processor for Orders {
    fn name(&self) -> &'static str {
        "orders"
    }

    async fn setup(&self, tx: &Transaction<'_>) -> Result<(), tokio_postgres::Error> {
        // Checked first so that a role without CREATE can start once the table exists.
        let exists: bool = tx
            .query_typed_one("SELECT to_regclass('example_orders') IS NOT NULL", &[])
            .await?
            .get(0);
        if !exists {
            tx.batch_execute(CREATE_ORDERS).await?;
        }
        Ok(())
    }

    async fn process(&self, d: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        // Other events are kept in hookclaim's table; there is nothing more to do for them.
        if !PAID_EVENTS.contains(&d.event_type.as_deref().unwrap_or_default()) {
            return Ok(());
        }
        // `?` makes a parse error a retryable failure. Stripe bodies always parse here: hookclaim
        // has read the delivery id from them already.
        let event: serde_json::Value = d.json()?;
        let session = &event["data"]["object"];
        let Some(order_id) = session["id"].as_str().filter(|id| !id.is_empty()) else {
            // No retry can add the id: dead at once, the payload kept for a replay.
            return Err(ProcessError::permanent("checkout session without an id"));
        };
        // A delayed payment method completes the session unpaid; async_payment_succeeded follows.
        if session["payment_status"] != "paid" {
            return Ok(());
        }
        let amount = session["amount_total"].as_i64();
        let currency = session["currency"].as_str();
        work.queue(
            RECORD_ORDER,
            &[&order_id, &amount, &currency, &d.source, &d.delivery_id],
        );
        Ok(())
    }
}
