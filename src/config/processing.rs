//! How deliveries are processed and kept: the shipped processor, retries, leases, retention.

use std::time::Duration;

use super::destinations::{self, Destinations};
use super::destinations::Conflict;
use super::{bad, choice, days, int, secs, ConfigError, Lookup};
use crate::secret::{Secret, SecretFormat};

/// Which shipped processor the `webhook` and `retention` binaries run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessorChoice {
    /// [`crate::StoreOnly`].
    Store,
    /// [`crate::Forwarder`] to `FORWARD_URL`.
    Forward {
        /// Where deliveries are posted.
        url: http::Uri,
        /// Bound on one call.
        timeout: Duration,
        /// `FORWARD_CONFLICT=done`: a 409 from the endpoint means done; otherwise it is retried.
        conflict_is_done: bool,
        /// `FORWARD_SIGNING_SECRET`: signs each call with Standard Webhooks headers.
        signing_secret: Option<Secret>,
    },
    /// The fan-out to each source's destinations (`HOOKCLAIM_DESTINATIONS`).
    Destinations(Destinations),
}

/// Exponential backoff with a cap, jitter and a maximum number of attempts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts after which a failing delivery becomes dead.
    pub max_attempts: i32,
    /// Delay after the first failure.
    pub base: Duration,
    /// Longest delay between attempts.
    pub cap: Duration,
    /// How long after its first receipt a delivery may still be deferred
    /// ([`crate::ProcessError::defer`]): a deferral that would fall due past it makes the
    /// delivery dead instead, so a downstream that never stops throttling ends it.
    pub max_delivery_age: Duration,
}

impl RetryPolicy {
    /// The delay before the attempt after `attempt` failed: `base * 2^(attempt-1)`, capped, then
    /// scaled by a random factor in [0.5, 1] so a burst of failures does not retry in lockstep.
    pub fn backoff(&self, attempt: i32) -> Duration {
        let exp = attempt.clamp(1, 31) as u32 - 1;
        let raw = self.base.saturating_mul(1u32 << exp.min(20));
        let capped = raw.min(self.cap);
        capped.mul_f64(0.5 + fastrand::f64() * 0.5)
    }
}

/// What the retention function does on a scheduled run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionSettings {
    /// Finished rows older than this are deleted; rows whose key is kept longer lose their
    /// payload at this age instead.
    pub retention: Duration,
    /// Finished rows of sources with a long key retention are deleted at this age.
    pub key_retention: Duration,
    /// Payloads of done rows older than this are dropped (the key stays); `None` keeps them.
    pub trim_after: Option<Duration>,
    /// Payloads of dead rows older than this are dropped; `None` keeps them for a manual replay
    /// until the row is purged.
    pub trim_dead_after: Option<Duration>,
    /// Rows per purge or trim statement.
    pub batch_size: i64,
    /// The run stops this long before the invocation's deadline.
    pub deadline_margin: Duration,
    /// How long one re-driven or replayed delivery may take (`REDRIVE_TIMEOUT_SECS`): its
    /// processing deadline is this from its claim (or the run's deadline, if sooner), and its
    /// lease that plus the lease margin, however long the run itself may last. A run that dies
    /// mid-delivery leaves it reclaimable within that time.
    pub redrive_timeout: Duration,
}

/// The default of `REDRIVE_TIMEOUT_SECS`: the webhook function's timeout (template.yaml,
/// Cargo.toml), so a re-drive gets the time a live delivery gets.
pub const DEFAULT_REDRIVE_TIMEOUT_SECS: u64 = 10;

/// The default of `MAX_DELIVERY_AGE_SECS`: three days, as long as senders such as Stripe keep
/// retrying a delivery themselves.
pub const DEFAULT_MAX_DELIVERY_AGE_SECS: u64 = 3 * 86_400;

/// Reads `MAX_ATTEMPTS`, `RETRY_BASE_SECS`, `RETRY_MAX_SECS` and `MAX_DELIVERY_AGE_SECS` (a
/// minute to a year: the ledger's bound on a retry time).
pub(super) fn read_retry(get: Lookup<'_>) -> Result<RetryPolicy, ConfigError> {
    Ok(RetryPolicy {
        max_attempts: int(get, "MAX_ATTEMPTS", 8, 1, 1000)? as i32,
        base: Duration::from_secs(secs(get, "RETRY_BASE_SECS", 30)?),
        cap: Duration::from_secs(secs(get, "RETRY_MAX_SECS", 3600)?),
        max_delivery_age: Duration::from_secs(int(
            get,
            "MAX_DELIVERY_AGE_SECS",
            DEFAULT_MAX_DELIVERY_AGE_SECS,
            60,
            31_622_400,
        )?),
    })
}

/// How long, by default, the keys of sources whose signatures do not expire are kept: a year,
/// past any sender's retry schedule and the usual life of a webhook secret.
pub const DEFAULT_KEY_RETENTION_DAYS: u64 = 365;

/// Reads the retention function's settings.
pub(super) fn read_retention(get: Lookup<'_>) -> Result<RetentionSettings, ConfigError> {
    let retention_days = int(get, "RETENTION_DAYS", 30, 1, 36500)?;
    let key_days = int(
        get,
        "KEY_RETENTION_DAYS",
        DEFAULT_KEY_RETENTION_DAYS.max(retention_days),
        retention_days,
        36500,
    )?;
    let optional_days = |setting| match get(setting) {
        None => Ok(None),
        Some(_) => int(get, setting, 0, 0, retention_days).map(|d| Some(days(d))),
    };
    Ok(RetentionSettings {
        retention: days(retention_days),
        key_retention: days(key_days),
        trim_after: optional_days("TRIM_PAYLOAD_AFTER_DAYS")?,
        trim_dead_after: optional_days("TRIM_DEAD_PAYLOAD_AFTER_DAYS")?,
        batch_size: int(get, "PURGE_BATCH_SIZE", 5000, 1, 100_000)? as i64,
        deadline_margin: Duration::from_secs(secs(get, "RETENTION_DEADLINE_MARGIN_SECS", 5)?),
        // Up to Lambda's longest timeout: a delivery that needs longer cannot be processed by
        // the webhook function either.
        redrive_timeout: Duration::from_secs(int(
            get,
            "REDRIVE_TIMEOUT_SECS",
            DEFAULT_REDRIVE_TIMEOUT_SECS,
            1,
            900,
        )?),
    })
}

/// Reads `HOOKCLAIM_PROCESSOR` and what the chosen processor needs.
pub(super) fn read_processor(get: Lookup<'_>) -> Result<ProcessorChoice, ConfigError> {
    Ok(
        match get("HOOKCLAIM_PROCESSOR").as_deref().unwrap_or("store") {
            "store" => ProcessorChoice::Store,
            "forward" => ProcessorChoice::Forward {
                url: get("FORWARD_URL")
                    .and_then(|u| u.parse::<http::Uri>().ok())
                    .filter(|u| matches!(u.scheme_str(), Some("http" | "https")))
                    .ok_or_else(|| {
                        bad(
                            "FORWARD_URL",
                            "HOOKCLAIM_PROCESSOR=forward needs an http:// or https:// URL",
                        )
                    })?,
                timeout: Duration::from_millis(int(get, "FORWARD_TIMEOUT_MS", 5000, 100, 60_000)?),
                conflict_is_done: choice(get, "FORWARD_CONFLICT", Conflict::Retry)?
                    == Conflict::Done,
                signing_secret: match get("FORWARD_SIGNING_SECRET") {
                    None => None,
                    Some(text) => Some(
                        Secret::parse(&text, SecretFormat::StandardWebhooks)
                            .ok()
                            .filter(|s| !s.is_public_key())
                            .ok_or_else(|| {
                                bad(
                                    "FORWARD_SIGNING_SECRET",
                                    "not a Standard Webhooks secret (whsec_ and base64)",
                                )
                            })?,
                    ),
                },
            },
            "destinations" => ProcessorChoice::Destinations(destinations::read(get)?),
            other => {
                return Err(bad(
                    "HOOKCLAIM_PROCESSOR",
                    format!("{other:?} is not one of store, forward, destinations"),
                ))
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jittered_within_half() {
        let p = RetryPolicy {
            max_attempts: 5,
            base: Duration::from_secs(10),
            cap: Duration::from_secs(60),
            max_delivery_age: Duration::from_secs(3600),
        };
        for _ in 0..200 {
            let first = p.backoff(1);
            assert!(first >= Duration::from_secs(5) && first <= Duration::from_secs(10));
            let third = p.backoff(3);
            assert!(third >= Duration::from_secs(20) && third <= Duration::from_secs(40));
            let late = p.backoff(30);
            assert!(late >= Duration::from_secs(30) && late <= Duration::from_secs(60));
        }
    }
}
