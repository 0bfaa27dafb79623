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
//! use hookclaim::{Delivery, Outcome, ProcessError, Processor, Work};
//! use hookclaim::tokio_postgres::types::Type;
//!
//! struct Orders;
//!
//! impl Processor for Orders {
//!     fn name(&self) -> &'static str {
//!         "orders"
//!     }
//!
//!     async fn process(&self, d: &Delivery, work: &mut Work<'_>) -> Result<Outcome, ProcessError> {
//!         let event = d.json()?;
//!         let Some(order) = event["data"]["object"]["id"].as_str() else {
//!             return Ok(Outcome::Permanent("no order id".into()));
//!         };
//!         work.execute("INSERT INTO orders (order_id) VALUES ($1) ON CONFLICT DO NOTHING")
//!             .bind(order.to_owned(), Type::TEXT);
//!         Ok(Outcome::Done)
//!     }
//! }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), hookclaim::Error> {
//!     hookclaim::run_webhook(Orders).await // and hookclaim::run_retention(Orders) in the other
//! }
//! ```
//!
//! Configuration is read from environment variables at cold start ([`config`]); signature
//! verification can also be used on its own ([`verify`]).

#![warn(missing_docs)]

/// Declares the crate's internal modules: private, or public and hidden from the documentation
/// with the `internals` feature, which only hookclaim's own tests, benchmarks and fuzz targets
/// enable. Nothing behind that feature is part of the API.
macro_rules! internal_modules {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}

pub mod config;
pub mod handshake;
pub mod verify;

internal_modules!(
    aws,
    db,
    destinations,
    environment,
    forward,
    function,
    invocation,
    keys,
    ledger,
    licence,
    observe,
    pipeline,
    processor,
    readiness,
    retention,
    schema,
    secret,
    shipped,
    webhook,
    work,
);

pub use config::{Config, ConfigError};
pub use destinations::Destinations;
pub use forward::{ForwardConflict, Forwarder};
pub use function::{run_retention, run_retention_with, run_webhook, run_webhook_with, Error};
pub use licence::Licences;
pub use processor::{
    idempotency_key, BoxError, Delivery, Outcome, ProcessError, Processor, StoreOnly,
};
pub use secret::{Secret, SecretFormat};
pub use shipped::Shipped;
pub use work::{Queued, Work};

/// The PostgreSQL driver hookclaim uses, so processors name the same version's types
/// (`hookclaim::tokio_postgres::types::Type` for [`Queued::bind`]).
pub use tokio_postgres;

/// The README's code blocks, compiled as doctests so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
