//! A test harness for your own processor: runs it on a delivery built in memory, against a
//! real PostgreSQL, through the same claim, transaction and fenced finish the webhook function
//! uses, so a test proves the processor's effects happen once.
//!
//! ```no_run
//! # use hookclaim::{Delivery, ProcessError, Processor, Work};
//! # struct Orders;
//! # impl Processor for Orders {
//! #     fn name(&self) -> &'static str { "orders" }
//! #     async fn process(&self, _: &Delivery, _: &mut Work<'_>) -> Result<(), ProcessError> { Ok(()) }
//! # }
//! use hookclaim::testing::{Harness, Happened};
//!
//! # async fn test() -> Result<(), Box<dyn std::error::Error>> {
//! let harness = Harness::connect("postgres://postgres@localhost/test", Orders).await?;
//! let paid = Delivery::new("stripe", "evt_1", r#"{"type":"checkout.session.completed"}"#)
//!     .with_event_type("checkout.session.completed");
//! assert_eq!(harness.deliver(&paid).await?.happened, Happened::Done);
//! // The sender's redelivery:
//! assert_eq!(harness.deliver(&paid).await?.happened, Happened::Duplicate);
//! // Run again: still one effect?
//! assert_eq!(harness.redrive(&paid).await?.happened, Happened::Done);
//! // …then read your own tables.
//! # Ok(()) }
//! ```

use std::time::{Duration, SystemTime};

use crate::config::{Config, ConfigError, RetryPolicy};
use crate::db::{Database, DbError};
use crate::environment;
use crate::error::StartupError;
use crate::ledger::{owner_token, Claimant, Ledger};
use crate::pipeline::{self, Keying};
pub use crate::pipeline::{Happened, Outcome};
use crate::processor::{Delivery, Processor};
use crate::readiness::Readiness;
use crate::verify::IdOrigin;

/// How long a harness run may take, as an invocation's remaining time.
const RUN_TIME: Duration = Duration::from_secs(30);

/// Why the harness could not run a delivery (not the processor's failures: those are an
/// [`Outcome`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The database URL or a setting is not usable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database could not be reached or migrated, or a statement failed.
    #[error(transparent)]
    Database(#[from] DbError),
}

impl From<StartupError> for HarnessError {
    fn from(e: StartupError) -> Self {
        match e {
            StartupError::Config(e) => HarnessError::Config(e),
            StartupError::Database(e) => HarnessError::Database(e),
            // The harness's database comes from its URL alone: no secret, no processor made.
            other => HarnessError::Config(ConfigError {
                setting: "DATABASE_URL",
                problem: other.to_string(),
            }),
        }
    }
}

/// A processor, a database, and the webhook function's way of running one on the other.
pub struct Harness<P> {
    db: Database,
    processor: P,
    retry: RetryPolicy,
}

impl<P: Processor> Harness<P> {
    /// Connects to `database_url` (a test database; no TLS), applies hookclaim's migrations
    /// and runs the processor's [`Processor::setup`] and [`Processor::start`]. The retry policy
    /// is the default one (`MAX_ATTEMPTS` 8, `RETRY_BASE_SECS` 30).
    pub async fn connect(database_url: &str, processor: P) -> Result<Self, HarnessError> {
        let config = Config::from_lookup(|name| match name {
            "DATABASE_URL" => Some(database_url.to_owned()),
            "DATABASE_TLS" => Some("disable".into()),
            // A placeholder the configuration requires: the harness verifies nothing.
            "HOOKCLAIM_SOURCES" => Some(r#"{"harness":{"kind":"github"}}"#.into()),
            _ => None,
        })?;
        let db = environment::database(&config).await?;
        processor.start().await;
        Readiness::default()
            .ensure(Ledger::open(&db).await.session(), &processor)
            .await?;
        Ok(Harness {
            db,
            processor,
            retry: config.retry,
        })
    }

    /// Delivers `delivery` as the webhook function does a request that carries it: the claim
    /// decides (a new delivery, or a failed one that is due, runs; a done one is a duplicate),
    /// then the processor runs and its work commits with "done", or the failure is recorded.
    /// Call it again with the same delivery for the sender's redelivery.
    pub async fn deliver(&self, delivery: &Delivery) -> Result<Outcome, HarnessError> {
        let mut ledger = Ledger::open(&self.db).await;
        let owner = owner_token();
        let claimant = Claimant {
            owner: &owner,
            lease: RUN_TIME,
            max_attempts: self.retry.max_attempts,
        };
        let keying = Keying {
            id_origin: IdOrigin::Header,
            long_key_retention: false,
            replay_guard: false,
        };
        let deadline = SystemTime::now() + RUN_TIME;
        Ok(pipeline::claim_and_run(
            &mut ledger,
            &self.processor,
            delivery.clone(),
            keying,
            &claimant,
            &self.retry,
            deadline,
        )
        .await?)
    }

    /// Runs `delivery` again as the retention function's re-drive does, as the next attempt,
    /// whatever its row says: even after a run that was done, which a real re-drive never
    /// repeats. It is the run that follows an attempt whose work succeeded but whose finish was
    /// lost (work at another service, a step recorded, a crash before "done"), so a processor
    /// that passes it has effects that stand any repeat.
    pub async fn redrive(&self, delivery: &Delivery) -> Result<Outcome, HarnessError> {
        Ledger::open(&self.db)
            .await
            .make_due(&delivery.source, &delivery.delivery_id)
            .await?;
        self.deliver(delivery).await
    }

    /// The processor under test.
    pub fn processor(&self) -> &P {
        &self.processor
    }
}
