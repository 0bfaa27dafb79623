//! The user's processing: the [`Processor`] trait, what it is given ([`Delivery`]) and what it
//! concludes ([`Outcome`] or a [`ProcessError`]), and the default store-only processor.

use std::collections::BTreeMap;
use std::future::Future;

use sha2::{Digest, Sha256};
use tokio_postgres::Transaction;

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

/// Any error, boxed: what [`ProcessError`] carries.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A processor's failure that it did not turn into an [`Outcome`] itself: any error, so `?`
/// works on database, AWS SDK and HTTP calls alike.
///
/// It counts as a retryable failure, recorded with the error's text and its causes. A
/// connection-level database error also makes the connection be remade before the failure is
/// recorded. Like `anyhow::Error`, it does not implement `std::error::Error` itself, which is
/// what lets every error type convert into it.
pub struct ProcessError(BoxError);

impl ProcessError {
    /// Wraps any error, or a message (`ProcessError::new("no such customer")`).
    pub fn new(error: impl Into<BoxError>) -> Self {
        ProcessError(error.into())
    }

    /// The database error underneath, when there is one.
    pub fn database_error(&self) -> Option<&tokio_postgres::Error> {
        self.0.downcast_ref()
    }

    /// Takes the error out.
    pub fn into_inner(self) -> BoxError {
        self.0
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ProcessError {
    fn from(error: E) -> Self {
        ProcessError(Box::new(error))
    }
}

impl std::fmt::Display for ProcessError {
    /// The error and its causes, `: `-separated, as recorded in `last_error`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

impl std::fmt::Debug for ProcessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

/// The user's processing of one delivery.
///
/// `process` works in a transaction on the function's own connection: statements queued on
/// `work` commit atomically with "done", in the same round trip, or not at all (Strategy A).
/// Work at another service happens inside the call too, keyed by
/// [`Delivery::idempotency_key`] (Strategy B). An error returned with `?` counts as a
/// retryable failure (see [`ProcessError`]).
pub trait Processor: Send + Sync + 'static {
    /// Name for logs.
    fn name(&self) -> &'static str;

    /// True when there is nothing to do beyond storing the delivery: the claim then records it as
    /// done in the same statement, one round trip per new delivery.
    fn store_only(&self) -> bool {
        false
    }

    /// Creates whatever the processor keeps in the database. Runs once per execution
    /// environment, before the first delivery, inside hookclaim's migration transaction (which
    /// holds the migration lock, so concurrent cold starts cannot race it); make it idempotent
    /// (`CREATE TABLE IF NOT EXISTS …`).
    fn setup(
        &self,
        tx: &Transaction<'_>,
    ) -> impl Future<Output = Result<(), tokio_postgres::Error>> + Send {
        let _ = tx;
        async { Ok(()) }
    }

    /// Makes what the processor keeps for the execution environment's lifetime (clients of
    /// other services). Runs once, at cold start, before the first delivery; nothing by default.
    fn start(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Processes one delivery: queues its writes on `work` and says how it went.
    fn process(
        &self,
        delivery: &Delivery,
        work: &mut Work<'_>,
    ) -> impl Future<Output = Result<Outcome, ProcessError>> + Send;
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
    ) -> Result<Outcome, ProcessError> {
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

    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("calling the CRM")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    fn fails_with_question_mark() -> Result<(), ProcessError> {
        Err(Outer(std::io::Error::other("connection reset")))?;
        Ok(())
    }

    #[test]
    fn any_error_converts_and_is_recorded_with_its_causes() {
        let e = fails_with_question_mark().unwrap_err();
        assert_eq!(e.to_string(), "calling the CRM: connection reset");
        assert!(e.database_error().is_none());
        assert_eq!(ProcessError::new("no such customer").to_string(), "no such customer");
    }
}
