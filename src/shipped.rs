//! The processors hookclaim ships, as one choice made from the configuration
//! (`HOOKCLAIM_PROCESSOR`). Both shipped binaries run [`Shipped::from_config`], so the webhook
//! and retention functions can never run different processors.

use tokio_postgres::Transaction;

use crate::config::{Config, ConfigError, ProcessorChoice};
use crate::error::StartupError;
#[cfg(feature = "destinations")]
use crate::observe::Telemetry;
#[cfg(not(all(feature = "forward", feature = "destinations")))]
use crate::config::features::{missing as missing_part, Part};
#[cfg(feature = "destinations")]
use crate::destinations::Destinations;
#[cfg(feature = "forward")]
use crate::forward::{ForwardConflict, Forwarder};
#[cfg(feature = "forward")]
use crate::keyed::ClientError;
use crate::processor::{Delivery, ProcessError, Processor, StoreOnly};
use crate::work::Work;

/// One of the shipped processors.
#[non_exhaustive]
pub enum Shipped {
    /// The table is the inbox.
    Store(StoreOnly),
    /// Posts each delivery to `FORWARD_URL` with an idempotency key.
    #[cfg(feature = "forward")]
    Forward(Box<Forwarder>),
    /// Fans each delivery out to its source's destinations (`HOOKCLAIM_DESTINATIONS`).
    #[cfg(feature = "destinations")]
    Destinations(Box<Destinations>),
}

/// Why the shipped processor could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShippedError {
    /// The HTTP client of the forwarder (`FORWARD_URL`) or of an HTTP destination
    /// (`HOOKCLAIM_DESTINATIONS`) could not be made.
    #[cfg(feature = "forward")]
    #[error("{setting}: {source}")]
    Http {
        /// The setting whose client it is.
        setting: &'static str,
        /// Why.
        #[source]
        source: ClientError,
    },
    /// A setting asks for a part this build left out.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl From<ShippedError> for StartupError {
    fn from(e: ShippedError) -> Self {
        match e {
            #[cfg(feature = "forward")]
            ShippedError::Http { setting, source } => StartupError::processor(setting, source),
            ShippedError::Config(e) => StartupError::Config(e),
        }
    }
}

impl Shipped {
    /// The processor `HOOKCLAIM_PROCESSOR` names.
    pub fn from_config(config: &Config) -> Result<Self, ShippedError> {
        Ok(match &config.processor {
            ProcessorChoice::Store => Shipped::Store(StoreOnly),
            #[cfg(feature = "forward")]
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
                let mut forwarder = Forwarder::new(url.clone(), *timeout)
                    .map_err(|source| ShippedError::Http {
                        setting: "FORWARD_URL",
                        source,
                    })?
                    .with_conflict(conflict);
                if let Some(secret) = signing_secret {
                    forwarder = forwarder.with_signing(secret.clone());
                }
                Shipped::Forward(Box::new(forwarder))
            }
            #[cfg(feature = "destinations")]
            ProcessorChoice::Destinations(destinations) => Shipped::Destinations(Box::new(
                Destinations::new(destinations, std::sync::Arc::default())
                    .map_err(|source| ShippedError::Http {
                        setting: "HOOKCLAIM_DESTINATIONS",
                        source,
                    })?
                    .with_telemetry(Telemetry::new(&config.metrics_namespace)),
            )),
            // A configuration read by `Config::from_lookup` never gets here: it refuses these
            // settings in a build without their part.
            #[cfg(not(feature = "forward"))]
            ProcessorChoice::Forward { .. } => {
                return Err(missing_part("HOOKCLAIM_PROCESSOR", Part::Forward).into())
            }
            #[cfg(not(feature = "destinations"))]
            ProcessorChoice::Destinations(_) => {
                return Err(missing_part("HOOKCLAIM_PROCESSOR", Part::Destinations).into())
            }
        })
    }
}

/// Runs `$body` with `$p` bound to the processor `$shipped` holds, whichever it is.
macro_rules! each {
    ($shipped:expr, $p:ident => $body:expr) => {
        match $shipped {
            Shipped::Store($p) => $body,
            #[cfg(feature = "forward")]
            Shipped::Forward($p) => $body,
            #[cfg(feature = "destinations")]
            Shipped::Destinations($p) => $body,
        }
    };
}

impl Processor for Shipped {
    fn name(&self) -> &'static str {
        each!(self, p => p.name())
    }

    fn stores_only(&self) -> bool {
        each!(self, p => p.stores_only())
    }

    async fn start(&self) -> Result<(), StartupError> {
        each!(self, p => p.start().await)
    }

    async fn setup(&self, tx: &Transaction<'_>) -> Result<(), tokio_postgres::Error> {
        each!(self, p => p.setup(tx).await)
    }

    async fn process(
        &self,
        delivery: &Delivery,
        work: &mut Work<'_>,
    ) -> Result<(), ProcessError> {
        each!(self, p => p.process(delivery, work).await)
    }
}
