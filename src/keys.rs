//! The webhook secrets an execution environment verifies with: loaded once, cached, and
//! refetched (at most once per interval) when a signature fails with cached secrets, so rotating
//! a secret in Secrets Manager needs no redeploy, while a flood of forged deliveries costs at
//! most one Secrets Manager call per interval.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, RwLock};

#[cfg(feature = "secrets-manager")]
use crate::aws::Aws;
use crate::config::Source;
use crate::secret::{Secret, SecretError, SecretsDocument};

/// Secrets by source name, ready for verification. A source whose secret is unusable is kept
/// apart, so it alone is disabled and every other source keeps verifying.
#[derive(Debug, Default)]
pub struct Keyring {
    secrets: BTreeMap<String, Vec<Secret>>,
    unusable: BTreeMap<String, SecretError>,
}

impl Keyring {
    /// Builds the keyring for the configured `sources` from a secrets document. Secrets of
    /// sources that are not configured are ignored; a source whose secret cannot be parsed is
    /// logged and refused until the document is fixed.
    pub fn build(sources: &BTreeMap<String, Source>, doc: &SecretsDocument) -> Self {
        let mut ring = Keyring::default();
        for (name, source) in sources {
            let format = source.scheme.secret_format();
            let parsed = doc.secrets_for(name, format);
            match parsed {
                Ok(secrets) => {
                    ring.secrets.insert(name.clone(), secrets);
                }
                Err(error) => {
                    tracing::error!(
                        source = %name,
                        %error,
                        "webhook secret unusable: deliveries to this source answer 503 until it \
                         is fixed"
                    );
                    ring.unusable.insert(name.clone(), error);
                }
            }
        }
        ring
    }

    /// The secrets for `source`, newest first; empty when none is configured, an error when
    /// the configured one is unusable.
    pub fn for_source(&self, source: &str) -> Result<&[Secret], KeysError> {
        if let Some(error) = self.unusable.get(source) {
            return Err(KeysError::Invalid {
                source_name: source.to_owned(),
                error: error.clone(),
            });
        }
        Ok(self.secrets.get(source).map_or(&[], Vec::as_slice))
    }

    /// Configured sources that have no secret at all: every delivery to them is refused.
    pub fn sources_without_secrets(&self) -> impl Iterator<Item = &str> {
        self.secrets
            .iter()
            .filter(|(_, secrets)| secrets.is_empty())
            .map(|(name, _)| name.as_str())
    }
}

/// Why secrets could not be had. Never carries a secret.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The document is not the expected JSON shape.
    #[error("webhook secrets document: {0}")]
    Document(SecretError),
    /// One source's secret is unusable.
    #[error("webhook secret for source {source_name:?}: {error}")]
    Invalid {
        /// The source whose secret is bad.
        source_name: String,
        /// What is wrong with it.
        error: SecretError,
    },
    /// Secrets Manager could not be read.
    #[error("cannot read webhook secrets from Secrets Manager: {0}")]
    Fetch(String),
    /// The cached secrets are too old to use and could not be read again.
    #[error(
        "webhook secrets are {age_secs} s old, past {STALE_AFTER_MAX_AGES} times \
         HOOKCLAIM_SECRETS_MAX_AGE_SECS, and reading them again failed: not verifying with them"
    )]
    Stale {
        /// Seconds since they were read.
        age_secs: u64,
    },
}

/// How many maximum ages old cached secrets may grow while they cannot be read again, before
/// they are refused: the maximum age itself, and a grace period as long again for a Secrets
/// Manager outage.
pub const STALE_AFTER_MAX_AGES: u32 = 2;

enum Loader {
    Env(String),
    #[cfg(feature = "secrets-manager")]
    SecretsManager { arn: String, aws: Arc<Aws> },
}

/// After a failed first load, how long before the next request may try again (or less, with a
/// shorter refresh interval): a flood of requests while Secrets Manager fails must not become a
/// flood of calls.
const LOAD_RETRY_INTERVAL: Duration = Duration::from_secs(1);

struct Loaded {
    ring: Arc<Keyring>,
    at: Instant,
}

/// The environment's cached secrets.
pub struct Keys {
    sources: Arc<BTreeMap<String, Source>>,
    loader: Loader,
    min_refresh_interval: Duration,
    /// Cached secrets older than this are read again before use, so a revoked one stops
    /// verifying without waiting for a failed signature; when that fails, they are refused
    /// once [`STALE_AFTER_MAX_AGES`] times as old.
    max_age: Duration,
    loaded: RwLock<Option<Loaded>>,
    /// When the first load last failed.
    load_failed: std::sync::Mutex<Option<Instant>>,
    /// When a refresh was last tried; held while one is in flight.
    refresh_gate: Mutex<Option<Instant>>,
    fetches: AtomicU64,
}

impl Keys {
    /// Secrets for `sources` from the document in `HOOKCLAIM_SECRETS`, which never changes.
    pub fn from_document(sources: Arc<BTreeMap<String, Source>>, document: &str) -> Self {
        Self::with_loader(
            sources,
            Loader::Env(document.to_owned()),
            Duration::MAX,
            Duration::MAX,
        )
    }

    #[cfg(feature = "secrets-manager")]
    /// Secrets for `sources` from the Secrets Manager secret `arn`, read through the
    /// environment's shared `aws`: refreshed after a failed verification at most once per
    /// `min_refresh_interval`, and once older than `max_age`. Nothing is fetched until first use.
    pub fn from_secrets_manager(
        sources: Arc<BTreeMap<String, Source>>,
        arn: &str,
        min_refresh_interval: Duration,
        max_age: Duration,
        aws: Arc<Aws>,
    ) -> Self {
        let loader = Loader::SecretsManager {
            arn: arn.to_owned(),
            aws,
        };
        Self::with_loader(sources, loader, min_refresh_interval, max_age)
    }

    fn with_loader(
        sources: Arc<BTreeMap<String, Source>>,
        loader: Loader,
        min_refresh_interval: Duration,
        max_age: Duration,
    ) -> Self {
        Keys {
            sources,
            loader,
            min_refresh_interval,
            max_age,
            loaded: RwLock::new(None),
            load_failed: std::sync::Mutex::new(None),
            refresh_gate: Mutex::new(None),
            fetches: AtomicU64::new(0),
        }
    }

    #[cfg(feature = "internals")]
    /// How many times the secrets were read from their store (the document or Secrets Manager).
    pub fn fetch_count(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// The cached keyring, loading it on first use and reading it again once it is older than
    /// the maximum age (rate-limited; the cached one serves when that is not possible). After a
    /// failed first load, the next one waits out a short interval (failing at once meanwhile).
    pub async fn current(&self) -> Result<Arc<Keyring>, KeysError> {
        let cached = self
            .loaded
            .read()
            .await
            .as_ref()
            .map(|l| (l.ring.clone(), l.at));
        match cached {
            Some((ring, at)) if at.elapsed() < self.max_age => return Ok(ring),
            Some(_) => return self.past_max_age().await,
            None => {}
        }
        let mut slot = self.loaded.write().await;
        if let Some(l) = slot.as_ref() {
            return Ok(l.ring.clone());
        }
        let retry_interval = self.min_refresh_interval.min(LOAD_RETRY_INTERVAL);
        if let Some(failed) = *self.lock_load_failed() {
            if failed.elapsed() < retry_interval {
                return Err(KeysError::Fetch(
                    "the last attempt failed moments ago; not retried yet".into(),
                ));
            }
        }
        match self.fetch().await {
            Ok(ring) => {
                let ring = Arc::new(ring);
                *slot = Some(Loaded {
                    ring: ring.clone(),
                    at: Instant::now(),
                });
                Ok(ring)
            }
            Err(e) => {
                *self.lock_load_failed() = Some(Instant::now());
                Err(e)
            }
        }
    }

    /// After a failed verification: refetches the secrets if the cached ones are older than the
    /// minimum interval and no other refresh was tried within it. Returns the keyring to verify
    /// with again: the one just fetched, or, when no refresh was allowed (or it failed, which is
    /// logged), the cached one, which another request may have refreshed meanwhile. `None` only
    /// where secrets never change (environment variables).
    ///
    /// Concurrent callers queue behind one refresh and then get its result, so a delivery
    /// signed with a rotated secret is not refused for arriving during another's refresh.
    pub async fn refresh_after_failure(&self) -> Option<Arc<Keyring>> {
        let (ring, _) = self.refresh("after a failed verification").await?;
        Some(ring)
    }

    /// Cached secrets past their maximum age: reads them again (rate-limited). While that
    /// fails, the cached ones keep serving until they are [`STALE_AFTER_MAX_AGES`] maximum ages
    /// old, so a short Secrets Manager outage does not stop deliveries; after that they are
    /// refused (503), so a revoked secret cannot keep verifying for as long as the reads fail.
    async fn past_max_age(&self) -> Result<Arc<Keyring>, KeysError> {
        let Some((ring, at)) = self.refresh("past their maximum age").await else {
            // Only secrets that never change have nothing to refresh, and they never age.
            return Err(KeysError::Fetch("the secrets cannot be read again".into()));
        };
        let age = at.elapsed();
        if age >= self.max_age.saturating_mul(STALE_AFTER_MAX_AGES) {
            return Err(KeysError::Stale {
                age_secs: age.as_secs(),
            });
        }
        Ok(ring)
    }

    /// Refetches unless that was done or tried within the minimum interval; see
    /// [`Keys::refresh_after_failure`]. The keyring to use and when it was read.
    async fn refresh(&self, why: &'static str) -> Option<(Arc<Keyring>, Instant)> {
        if matches!(self.loader, Loader::Env(_)) {
            return None;
        }
        let mut gate = self.refresh_gate.lock().await;
        let now = Instant::now();
        let cached = self
            .loaded
            .read()
            .await
            .as_ref()
            .map(|l| (l.ring.clone(), l.at));
        let recent = |t: Option<Instant>| {
            t.is_some_and(|t| now.duration_since(t) < self.min_refresh_interval)
        };
        if recent(cached.as_ref().map(|(_, at)| *at)) || recent(*gate) {
            return cached;
        }
        *gate = Some(now);
        match self.fetch().await {
            Ok(ring) => {
                let ring = Arc::new(ring);
                let at = Instant::now();
                *self.loaded.write().await = Some(Loaded {
                    ring: ring.clone(),
                    at,
                });
                tracing::info!(why, "webhook secrets refreshed");
                Some((ring, at))
            }
            Err(e) => {
                tracing::warn!(error = %e, why, "webhook secrets refresh failed");
                cached
            }
        }
    }

    fn lock_load_failed(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.load_failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn fetch(&self) -> Result<Keyring, KeysError> {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let doc = match &self.loader {
            Loader::Env(doc) => doc.clone(),
            #[cfg(feature = "secrets-manager")]
            Loader::SecretsManager { arn, aws } => {
                aws.secret_string(arn).await.map_err(KeysError::Fetch)?
            }
        };
        let doc = SecretsDocument::parse(&doc).map_err(KeysError::Document)?;
        Ok(Keyring::build(&self.sources, &doc))
    }
}
