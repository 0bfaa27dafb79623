//! The processors hookclaim ships, as one choice made from the configuration
//! (`HOOKCLAIM_PROCESSOR`). Both shipped binaries run [`Shipped::from_config`], so the webhook
//! and retention functions can never run different processors.

use std::sync::Arc;

use tokio_postgres::Transaction;

use crate::aws::Aws;
use crate::config::{Config, ProcessorChoice};
use crate::destinations::Destinations;
use crate::forward::{ForwardConflict, Forwarder};
use crate::licence::Licences;
use crate::processor::{BoxError, Delivery, Outcome, ProcessError, Processor, StoreOnly};
use crate::work::Work;

/// One of the shipped processors.
pub enum Shipped {
    /// The table is the inbox.
    Store(StoreOnly),
    /// The in-transaction example: one licence key per order.
    Licence(Licences),
    /// Posts each delivery to `FORWARD_URL` with an idempotency key.
    Forward(Box<Forwarder>),
    /// Fans each delivery out to its source's destinations (`HOOKCLAIM_DESTINATIONS`).
    Destinations(Box<Destinations>),
}

impl Shipped {
    /// The processor `HOOKCLAIM_PROCESSOR` names.
    pub fn from_config(config: &Config) -> Result<Self, BoxError> {
        Ok(match &config.processor {
            ProcessorChoice::Store => Shipped::Store(StoreOnly),
            ProcessorChoice::Licence => Shipped::Licence(Licences),
            ProcessorChoice::Forward {
                url,
                timeout,
                conflict_is_done,
                signing_secret,
            } => {
                let conflict = match conflict_is_done {
                    true => ForwardConflict::Done,
                    false => ForwardConflict::Retry,
                };
                let mut forwarder = Forwarder::new(url.clone(), *timeout)?.with_conflict(conflict);
                if let Some(secret) = signing_secret {
                    forwarder = forwarder.with_signing(secret.clone());
                }
                Shipped::Forward(Box::new(forwarder))
            }
            ProcessorChoice::Destinations(destinations) => Shipped::Destinations(Box::new(
                Destinations::new(destinations, Arc::new(Aws::default()))?,
            )),
        })
    }
}

impl Processor for Shipped {
    fn name(&self) -> &'static str {
        match self {
            Shipped::Store(p) => p.name(),
            Shipped::Licence(p) => p.name(),
            Shipped::Forward(p) => p.name(),
            Shipped::Destinations(p) => p.name(),
        }
    }

    fn store_only(&self) -> bool {
        match self {
            Shipped::Store(p) => p.store_only(),
            Shipped::Licence(p) => p.store_only(),
            Shipped::Forward(p) => p.store_only(),
            Shipped::Destinations(p) => p.store_only(),
        }
    }

    async fn start(&self) {
        match self {
            Shipped::Store(p) => p.start().await,
            Shipped::Licence(p) => p.start().await,
            Shipped::Forward(p) => p.start().await,
            Shipped::Destinations(p) => p.start().await,
        }
    }

    async fn setup(&self, tx: &Transaction<'_>) -> Result<(), tokio_postgres::Error> {
        match self {
            Shipped::Store(p) => p.setup(tx).await,
            Shipped::Licence(p) => p.setup(tx).await,
            Shipped::Forward(p) => p.setup(tx).await,
            Shipped::Destinations(p) => p.setup(tx).await,
        }
    }

    async fn process(
        &self,
        delivery: &Delivery,
        work: &mut Work<'_>,
    ) -> Result<Outcome, ProcessError> {
        match self {
            Shipped::Store(p) => p.process(delivery, work).await,
            Shipped::Licence(p) => p.process(delivery, work).await,
            Shipped::Forward(p) => p.process(delivery, work).await,
            Shipped::Destinations(p) => p.process(delivery, work).await,
        }
    }
}
