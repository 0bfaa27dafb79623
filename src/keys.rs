//! The webhook secrets an execution environment verifies with: loaded once, cached, and
//! refetched (at most once per interval) when a signature fails with cached secrets, so rotating
//! a secret in Secrets Manager needs no redeploy, while a flood of forged deliveries costs at
//! most one Secrets Manager call per interval.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, RwLock};

use crate::aws::Aws;
use crate::config::{SecretsFrom, Source};
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
}

enum Loader {
    Env(String),
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
    /// verifying without waiting for a failed signature.
    max_age: Duration,
    loaded: RwLock<Option<Loaded>>,
    /// When the first load last failed.
    load_failed: std::sync::Mutex<Option<Instant>>,
    /// When a refresh was last tried; held while one is in flight.
    refresh_gate: Mutex<Option<Instant>>,
    fetches: AtomicU64,
}

impl Keys {
    #[cfg(feature = "internals")]
    /// Secrets for `sources` from `from`, with an AWS configuration of their own. Nothing is
    /// fetched until first use.
    pub fn new(sources: Arc<BTreeMap<String, Source>>, from: &SecretsFrom) -> Self {
        Self::with_aws(sources, from, Arc::new(Aws::default()))
    }

    /// Secrets for `sources` from `from`, read through the environment's shared `aws`. Nothing
    /// is fetched until first use.
    pub fn with_aws(
        sources: Arc<BTreeMap<String, Source>>,
        from: &SecretsFrom,
        aws: Arc<Aws>,
    ) -> Self {
        let (loader, min_refresh_interval, max_age) = match from {
            SecretsFrom::Env(doc) => (Loader::Env(doc.clone()), Duration::MAX, Duration::MAX),
            SecretsFrom::SecretsManager {
                arn,
                min_refresh_interval,
                max_age,
            } => (
                Loader::SecretsManager {
                    arn: arn.clone(),
                    aws,
                },
                *min_refresh_interval,
                *max_age,
            ),
        };
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
    /// How many times the secrets were fetched from their store.
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
            Some((ring, _)) => return Ok(self.refresh("past their maximum age").await.unwrap_or(ring)),
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
        self.refresh("after a failed verification").await
    }

    /// Refetches unless that was done or tried within the minimum interval; see
    /// [`Keys::refresh_after_failure`].
    async fn refresh(&self, why: &'static str) -> Option<Arc<Keyring>> {
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
            return cached.map(|(ring, _)| ring);
        }
        *gate = Some(now);
        match self.fetch().await {
            Ok(ring) => {
                let ring = Arc::new(ring);
                *self.loaded.write().await = Some(Loaded {
                    ring: ring.clone(),
                    at: Instant::now(),
                });
                tracing::info!(why, "webhook secrets refreshed");
                Some(ring)
            }
            Err(e) => {
                tracing::warn!(error = %e, "webhook secrets refresh failed");
                cached.map(|(ring, _)| ring)
            }
        }
    }

    fn lock_load_failed(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.load_failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn fetch(&self) -> Result<Keyring, KeysError> {
        let doc = match &self.loader {
            Loader::Env(doc) => doc.clone(),
            Loader::SecretsManager { arn, aws } => {
                self.fetches.fetch_add(1, Ordering::Relaxed);
                aws.secret_string(arn).await.map_err(KeysError::Fetch)?
            }
        };
        let doc = SecretsDocument::parse(&doc).map_err(KeysError::Document)?;
        Ok(Keyring::build(&self.sources, &doc))
    }
}
