//! The user's processing: the [`Processor`] trait, what it is given ([`Delivery`]), how it fails
//! ([`ProcessError`]), and the default store-only processor.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_postgres::Transaction;

use crate::error::StartupError;
use crate::work::Work;

/// A verified, claimed delivery, as the processor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    /// 1 on the first attempt; higher on re-drives and redeliveries after failures and
    /// deferrals (a deferred attempt advances it too, though it does not count toward
    /// `MAX_ATTEMPTS`).
    pub attempt: i32,
}

impl Delivery {
    /// A first attempt at delivery `delivery_id` of `source` with `payload`, no event type and
    /// no headers: for tests (`hookclaim::testing`) and tools.
    pub fn new(
        source: impl Into<String>,
        delivery_id: impl Into<String>,
        payload: impl Into<Vec<u8>>,
    ) -> Self {
        Delivery {
            source: source.into(),
            delivery_id: delivery_id.into(),
            event_type: None,
            payload: payload.into(),
            headers: BTreeMap::new(),
            attempt: 1,
        }
    }

    /// The same delivery with event type `event_type`.
    pub fn with_event_type(mut self, event_type: impl Into<String>) -> Self {
        self.event_type = Some(event_type.into());
        self
    }

    /// The same delivery with header `name` (stored lower-case) set to `value`.
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.insert(name.to_ascii_lowercase(), value.into());
        self
    }

    /// A key that is the same for every attempt at this delivery and differs between
    /// deliveries: hand it to external APIs (Stripe, payment providers…) so a repeated call after
    /// a crash is recognised there (Strategy B).
    pub fn idempotency_key(&self) -> String {
        idempotency_key(&self.source, &self.delivery_id)
    }

    /// The body parsed as JSON into `T` (`serde_json::Value` for any JSON). With `?`, a body
    /// that does not parse is a retryable failure; `.map_err(ProcessError::permanent)?` makes it
    /// dead at once.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
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

pub use crate::error::BoxError;

/// Why processing did not succeed, and what to do about it. Nothing the processor queued is
/// committed; the payload is kept.
///
/// - Any error with `?` (or [`ProcessError::new`]): retried on the retry policy's backoff
///   (`RETRY_BASE_SECS`…), the sender answered 503 with that `Retry-After`, dead after
///   `MAX_ATTEMPTS`.
/// - [`ProcessError::retry_in`]: a failure that knows when to try again, retried no sooner than
///   the time given: the row's next attempt is due then, and the 503 says so. It counts toward
///   `MAX_ATTEMPTS` like any failure.
/// - [`ProcessError::defer`]: nothing failed, a downstream is throttling (its `Retry-After`):
///   tried again no sooner than the time given, the 503 says so, and no attempt is spent. The
///   delivery's age bounds it instead: a deferral that would fall due more than
///   `MAX_DELIVERY_AGE_SECS` after the delivery was first received makes it dead.
/// - [`ProcessError::permanent`]: dead at once, the sender answered 200 so that it stops; kept
///   for a replay.
///
/// Recorded with the error's text and its causes. A connection-level database error also makes
/// the connection be remade. Like `anyhow::Error`, it does not implement `std::error::Error`
/// itself, which is what lets every error type convert into it.
pub struct ProcessError {
    error: BoxError,
    retry: Retry,
}

/// When a failed delivery is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// On the retry policy's backoff.
    Backoff,
    /// No sooner than this, counted toward the attempt cap.
    In(Duration),
    /// No sooner than this, not counted: deferred, bounded by the delivery's age.
    Defer(Duration),
    /// Never: dead.
    Never,
}

impl ProcessError {
    /// Any error, or a message (`ProcessError::new("CRM unavailable")`), retried on the policy's
    /// backoff: what `?` makes of an error.
    pub fn new(error: impl Into<BoxError>) -> Self {
        ProcessError {
            error: error.into(),
            retry: Retry::Backoff,
        }
    }

    /// Retried no sooner than `after`: the failed row's next attempt is due then, and the
    /// sender's 503 carries it as `Retry-After` (whole seconds, at least 1). The attempt counts
    /// toward the cap: this is a failure whose retry time is known. For a downstream that is
    /// only throttling, use [`ProcessError::defer`].
    pub fn retry_in(error: impl Into<BoxError>, after: Duration) -> Self {
        ProcessError {
            error: error.into(),
            retry: Retry::In(after),
        }
    }

    /// Deferred, not failed: a downstream throttles (429, or 503 with `Retry-After`) and says
    /// when to come back. Tried again no sooner than `after` (the sender's 503 carries it as
    /// `Retry-After`, whole seconds, at least 1) without spending an attempt: a delivery
    /// deferred any number of times still has all its attempts. Bounded by the delivery's age
    /// instead: a deferral that would fall due more than `MAX_DELIVERY_AGE_SECS` after the
    /// delivery was first received makes it dead, with this error in its recorded reason.
    pub fn defer(error: impl Into<BoxError>, after: Duration) -> Self {
        ProcessError {
            error: error.into(),
            retry: Retry::Defer(after),
        }
    }

    /// Can never succeed: the delivery is dead at once and the sender told to stop (200); the
    /// payload is kept for a replay.
    pub fn permanent(error: impl Into<BoxError>) -> Self {
        ProcessError {
            error: error.into(),
            retry: Retry::Never,
        }
    }

    /// True for [`ProcessError::permanent`].
    pub fn is_permanent(&self) -> bool {
        self.retry == Retry::Never
    }

    /// True for [`ProcessError::defer`].
    pub fn is_deferral(&self) -> bool {
        matches!(self.retry, Retry::Defer(_))
    }

    /// The time given to [`ProcessError::retry_in`] or [`ProcessError::defer`].
    pub fn retry_after(&self) -> Option<Duration> {
        match self.retry {
            Retry::In(after) | Retry::Defer(after) => Some(after),
            Retry::Backoff | Retry::Never => None,
        }
    }

    /// The database error underneath, when there is one.
    pub fn database_error(&self) -> Option<&tokio_postgres::Error> {
        match self.error.downcast_ref::<crate::work::WorkError>() {
            Some(crate::work::WorkError::Database(e)) => Some(e),
            _ => self.error.downcast_ref(),
        }
    }

    /// Takes the error out.
    pub fn into_inner(self) -> BoxError {
        self.error
    }

    pub(crate) fn retry(&self) -> Retry {
        self.retry
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ProcessError {
    fn from(error: E) -> Self {
        ProcessError::new(error)
    }
}

impl std::fmt::Display for ProcessError {
    /// The error and its causes, `: `-separated, as recorded in `last_error`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.error)?;
        let mut cause = self.error.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

impl std::fmt::Debug for ProcessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessError")
            .field("error", &self.error)
            .field("retry", &self.retry)
            .finish()
    }
}

/// The user's processing of one delivery.
///
/// `process` works in a transaction on the function's own connection: statements queued on
/// `work` commit atomically with "done", in the same round trip, or not at all (Strategy A).
/// Work at another service happens inside the call too, keyed by
/// [`Delivery::idempotency_key`] (Strategy B), each step recorded with
/// [`Work::record_step`] where a re-drive must not repeat it. `Ok(())` is done; an error says
/// when to try again ([`ProcessError`]).
pub trait Processor: Send + Sync + 'static {
    /// Name for logs.
    fn name(&self) -> &'static str;

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
    /// An error stops the cold start ([`StartupError::processor`] names the setting at fault),
    /// as a bad setting does.
    fn start(&self) -> impl Future<Output = Result<(), StartupError>> + Send {
        async { Ok(()) }
    }

    /// Whether this processor does nothing beyond storing the delivery (the table is the inbox):
    /// then the claim records a new delivery done in the same statement, one round trip, and
    /// [`Processor::process`] is not called for it. False unless the processor says so;
    /// [`StoreOnly`] does.
    fn stores_only(&self) -> bool {
        false
    }

    /// Processes one delivery: queues its writes on `work`; `Ok(())` commits them with "done".
    fn process(
        &self,
        delivery: &Delivery,
        work: &mut Work<'_>,
    ) -> impl Future<Output = Result<(), ProcessError>> + Send;
}

/// The default: the table is the inbox. Deliveries are stored, deduplicated and marked done by
/// the claim itself, in one statement; downstream consumers read `hookclaim_deliveries`.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreOnly;

impl Processor for StoreOnly {
    fn name(&self) -> &'static str {
        "store"
    }

    fn stores_only(&self) -> bool {
        true
    }

    async fn process(&self, _delivery: &Delivery, _work: &mut Work<'_>) -> Result<(), ProcessError> {
        Ok(())
    }
}

/// A shared processor is the processor: one value can serve a [`crate::Webhook`] and a
/// [`crate::Retention`] in one process (the test harness runs both over one).
impl<P: Processor> Processor for std::sync::Arc<P> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn setup(
        &self,
        tx: &Transaction<'_>,
    ) -> impl Future<Output = Result<(), tokio_postgres::Error>> + Send {
        (**self).setup(tx)
    }

    fn start(&self) -> impl Future<Output = Result<(), StartupError>> + Send {
        (**self).start()
    }

    fn stores_only(&self) -> bool {
        (**self).stores_only()
    }

    fn process(
        &self,
        delivery: &Delivery,
        work: &mut Work<'_>,
    ) -> impl Future<Output = Result<(), ProcessError>> + Send {
        (**self).process(delivery, work)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_store_only_processor_says_it_stores_only() {
        struct Mine;
        impl Processor for Mine {
            fn name(&self) -> &'static str {
                "mine"
            }
            async fn process(&self, _: &Delivery, _: &mut Work<'_>) -> Result<(), ProcessError> {
                Ok(())
            }
        }
        assert!(StoreOnly.stores_only());
        assert!(!Mine.stores_only());
    }

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
        assert!(!e.is_permanent() && e.retry_after().is_none());
        assert_eq!(ProcessError::new("no such customer").to_string(), "no such customer");
        let later = ProcessError::retry_in("rate limited", Duration::from_secs(60));
        assert_eq!(later.retry_after(), Some(Duration::from_secs(60)));
        assert!(!later.is_deferral());
        let throttled = ProcessError::defer("429 from the CRM", Duration::from_secs(30));
        assert_eq!(throttled.retry_after(), Some(Duration::from_secs(30)));
        assert!(throttled.is_deferral() && !throttled.is_permanent());
        assert!(ProcessError::permanent("order cancelled").is_permanent());
    }
}
