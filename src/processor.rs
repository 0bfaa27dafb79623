//! The user's processing: the [`Processor`] trait, the default store-only processor, and a
//! worked example from the field (a licence key issued once per order, in the transaction).

use std::collections::BTreeMap;
use std::future::Future;

use sha2::{Digest, Sha256};
use tokio_postgres::types::Type;
use tokio_postgres::Client;

use crate::work::Work;

/// A verified, claimed delivery, as the processor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Configured source name.
    pub source: String,
    /// The sender's delivery id.
    pub delivery_id: String,
    /// Event type, where the scheme has one.
    pub event_type: Option<String>,
    /// The raw body exactly as the sender signed it.
    pub payload: Vec<u8>,
    /// The headers kept with the delivery (lower-case names).
    pub headers: BTreeMap<String, String>,
    /// 1 on the first attempt; higher on re-drives and redeliveries after failures.
    pub attempt: i32,
}

impl Delivery {
    /// A key that is the same for every attempt at this delivery and differs between
    /// deliveries: hand it to external APIs (Stripe, payment providers…) so a repeated call after
    /// a crash is recognised there (Strategy B).
    pub fn idempotency_key(&self) -> String {
        idempotency_key(&self.source, &self.delivery_id)
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_slice(&self.payload)
    }
}

/// `hookclaim-` and 40 hex digits of SHA-256 over source and delivery id: fixed length, safe in
/// any header, and within every provider's idempotency-key limit.
pub fn idempotency_key(source: &str, delivery_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(source.as_bytes());
    h.update([0u8]);
    h.update(delivery_id.as_bytes());
    format!("hookclaim-{}", &hex::encode(h.finalize())[..40])
}

/// What processing concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done: commit the transaction and mark the delivery done.
    Done,
    /// Failed for now: roll back, keep the payload, let the sender or the re-drive try again.
    Retry(String),
    /// Can never succeed: roll back, keep the payload for a manual replay, tell the sender to stop.
    Permanent(String),
}

/// The user's processing of one delivery.
///
/// `process` works in a transaction on the function's own connection: statements queued on
/// `work` commit atomically with "done", in the same round trip, or not at all (Strategy A).
/// Work at another service happens inside the call too, keyed by
/// [`Delivery::idempotency_key`] (Strategy B). A database error returned with `?` counts as a
/// retryable failure.
pub trait Processor: Send + Sync + 'static {
    /// Name for logs and configuration.
    fn name(&self) -> &'static str;

    /// True when there is nothing to do beyond storing the delivery: the claim then records it as
    /// done in the same statement, one round trip per new delivery.
    fn store_only(&self) -> bool {
        false
    }

    /// Creates whatever the processor keeps in the database; idempotent, run at cold start.
    fn setup(
        &self,
        client: &mut Client,
    ) -> impl Future<Output = Result<(), tokio_postgres::Error>> + Send {
        let _ = client;
        async { Ok(()) }
    }

    /// Processes one delivery: queues its writes on `work` and says how it went.
    fn process(
        &self,
        delivery: &Delivery,
        work: &mut Work<'_>,
    ) -> impl Future<Output = Result<Outcome, tokio_postgres::Error>> + Send;
}

/// The default: the table is the inbox. Deliveries are stored, deduplicated and marked done;
/// downstream consumers read `hookclaim_deliveries`.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreOnly;

impl Processor for StoreOnly {
    fn name(&self) -> &'static str {
        "store"
    }

    fn store_only(&self) -> bool {
        true
    }

    async fn process(
        &self,
        _delivery: &Delivery,
        _work: &mut Work<'_>,
    ) -> Result<Outcome, tokio_postgres::Error> {
        Ok(Outcome::Done)
    }
}

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

const CREATE_LICENCES: &str = "CREATE TABLE IF NOT EXISTS hookclaim_example_licences (
    order_id     text PRIMARY KEY,
    licence_key  text NOT NULL UNIQUE,
    source       text NOT NULL,
    delivery_id  text NOT NULL,
    issued_at    timestamptz NOT NULL DEFAULT now()
)";

const ISSUE_LICENCE: &str = "INSERT INTO hookclaim_example_licences
    (order_id, licence_key, source, delivery_id) VALUES ($1, $2, $3, $4)
    ON CONFLICT (order_id) DO NOTHING";

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

    async fn setup(&self, client: &mut Client) -> Result<(), tokio_postgres::Error> {
        let exists: bool = client
            .query_typed_one(
                "SELECT to_regclass('hookclaim_example_licences') IS NOT NULL",
                &[],
            )
            .await?
            .get(0);
        if exists {
            return Ok(());
        }
        // Concurrent cold starts may race CREATE TABLE IF NOT EXISTS; the schema lock orders them.
        let tx = client.transaction().await?;
        tx.batch_execute(&format!(
            "SELECT pg_advisory_xact_lock({}); {CREATE_LICENCES}",
            crate::schema::MIGRATION_LOCK_KEY
        ))
        .await?;
        tx.commit().await
    }

    async fn process(
        &self,
        delivery: &Delivery,
        work: &mut Work<'_>,
    ) -> Result<Outcome, tokio_postgres::Error> {
        let Ok(body) = delivery.json() else {
            return Ok(Outcome::Permanent("body is not JSON".into()));
        };
        let Some(order) = order_id(&body) else {
            return Ok(Outcome::Permanent("no order id in the event".into()));
        };
        let key = format!(
            "LIC-{}",
            hex::encode(fastrand::u128(..).to_be_bytes()).to_uppercase()
        );
        work.execute(ISSUE_LICENCE)
            .bind(order, Type::TEXT)
            .bind(key, Type::TEXT)
            .bind(delivery.source.clone(), Type::TEXT)
            .bind(delivery.delivery_id.clone(), Type::TEXT);
        Ok(Outcome::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_key_is_stable_and_separates_sources() {
        let a = idempotency_key("stripe", "evt_1");
        assert_eq!(a, idempotency_key("stripe", "evt_1"));
        assert_ne!(a, idempotency_key("github", "evt_1"));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(idempotency_key("ab", "c"), idempotency_key("a", "bc"));
        assert_eq!(a.len(), "hookclaim-".len() + 40);
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
}
