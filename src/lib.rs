//! hookclaim: an exactly-once webhook receiver for AWS Lambda and PostgreSQL.
//!
//! Each delivery is verified over its raw bytes, claimed in PostgreSQL with one atomic statement
//! (a unique key decides, a lease covers crashes, finishing is fenced), run through your
//! [`Processor`] in a transaction on the same connection, and answered so that the sender stops
//! or retries as it should. The retention function re-drives what died and purges what is old.
//!
//! Your own Lambda function is a [`Processor`] and one call:
//!
//! ```no_run
//! use hookclaim::{Delivery, ProcessError, Processor, Work};
//!
//! struct Orders;
//!
//! impl Processor for Orders {
//!     fn name(&self) -> &'static str {
//!         "orders"
//!     }
//!
//!     async fn process(&self, d: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
//!         let event: serde_json::Value = d.json()?; // `?`: retried on the policy's backoff
//!         let Some(order) = event["data"]["object"]["id"].as_str() else {
//!             return Err(ProcessError::permanent("no order id")); // dead, kept for a replay
//!         };
//!         work.queue("INSERT INTO orders (order_id) VALUES ($1) ON CONFLICT DO NOTHING", &[&order]);
//!         Ok(()) // the queued write commits with "done"
//!     }
//! }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), hookclaim::Error> {
//!     hookclaim::run_webhook(Orders).await // and hookclaim::run_retention(Orders) in the other
//! }
//! ```
//!
//! [`Webhook`] is the same function as a value, to serve beside routes of your own or under
//! tower layers; [`testing`] runs a processor against a real PostgreSQL as the function would,
//! redelivery and re-drive included.
//!
//! Configuration is read from environment variables at cold start ([`Config`]). Signature
//! verification, the providers' presets and handshakes are the `hookclaim-verify` crate,
//! re-exported here as [`verify`] and [`handshake`], and usable on their own.
//!
//! # Features
//!
//! The parts not every function needs are Cargo features, all on by default: `secrets-manager`
//! (webhook secrets and the database login from Secrets Manager), `rds-iam` (RDS IAM
//! authentication), `destinations` (the fan-out to SQS, EventBridge, Step Functions and signed
//! HTTP endpoints) and `forward` (the HTTP forwarder). A function that reads its secrets and
//! login from environment variables and runs its own processor needs none of them: with
//! `default-features = false` it builds no AWS SDK and no HTTP client. A setting that asks for a
//! part the build left out stops the cold start with an error naming the setting and the
//! feature.
//!
//! One feature is off by default and belongs in your `[dev-dependencies]`: `testing`, the
//! signer behind [`testing::Harness::request`], which builds signed requests for your tests. A
//! function built without it carries no signing code.

#![warn(missing_docs)]

/// Declares the crate's internal modules: private, or public and hidden from the documentation
/// with the `internals` feature, which only hookclaim's own tests, benchmarks and fuzz targets
/// enable. Nothing behind that feature is part of the API.
/// A module's own attributes (the feature it belongs to) go before its name.
macro_rules! internal_modules {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {$(
        $(#[$attr])*
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}

/// Signature verification for every source kind and the providers' presets: the
/// `hookclaim-verify` crate.
pub use hookclaim_verify as verify;
/// Providers' handshakes (Slack, Zoom, Twitch, Meta, Discord), from `hookclaim-verify`.
pub use hookclaim_verify::handshake;
/// Signing secrets and the secrets document, from `hookclaim-verify`; only hookclaim's own tests,
/// benchmarks and fuzz targets name this path (the types are re-exported below).
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use hookclaim_verify::secret;
#[cfg(not(feature = "internals"))]
use hookclaim_verify::secret;
/// The `lambda_http` hookclaim is built with (1.x), for a `main` of your own that serves
/// [`Webhook`] beside routes of its own: `hookclaim::lambda_http::run(…)` needs no version of
/// it chosen to match.
pub use lambda_http;

internal_modules!(
    #[cfg(any(
        feature = "secrets-manager",
        feature = "rds-iam",
        feature = "destinations"
    ))]
    aws,
    config,
    db,
    #[cfg(feature = "destinations")]
    destinations,
    environment,
    error,
    #[cfg(feature = "forward")]
    forward,
    function,
    invocation,
    #[cfg(feature = "forward")]
    keyed,
    keys,
    ledger,
    observe,
    pipeline,
    processor,
    readiness,
    retention,
    schema,
    shipped,
    webhook,
    work,
);

pub mod testing;

pub use config::{Config, ConfigError};
#[cfg(feature = "destinations")]
pub use destinations::Destinations;
pub use error::{Error, StartupError};
#[cfg(feature = "forward")]
pub use forward::{ClientError, ForwardConflict, Forwarder};
pub use function::{run_retention, run_retention_with, run_webhook, run_webhook_with};
pub use hookclaim_verify::{Secret, SecretFormat};
#[cfg(feature = "forward")]
pub use keyed::KeyedHttp;
pub use processor::{idempotency_key, BoxError, Delivery, ProcessError, Processor, StoreOnly};
pub use retention::Retention;
pub use shipped::{Shipped, ShippedError};
pub use webhook::Webhook;
pub use work::{Work, WorkError};

/// The PostgreSQL driver hookclaim uses, so processors name the same version's types
/// (`hookclaim::tokio_postgres::Row` from [`Work::query`], `Transaction` in
/// [`Processor::setup`]).
pub use tokio_postgres;

/// The README's code blocks, compiled as doctests so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// docs/processing.md's code blocks, compiled as doctests like the README's.
#[cfg(doctest)]
#[doc = include_str!("../docs/processing.md")]
pub struct ProcessingDoctests;
