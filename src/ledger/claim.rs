//! The claim: one call of `hookclaim_claim` (`migrations/0001_ledger.sql`), which inserts a new
//! delivery, takes over an expired or due one, or says why this invocation may not run it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use tokio_postgres::types::Type;
use tokio_postgres::{Error, GenericClient};

use crate::verify::IdOrigin;

/// What a claim stores with the row so the delivery can be re-driven without the sender.
#[derive(Debug, Clone)]
pub struct NewDelivery<'a> {
    /// Configured source name.
    pub source: &'a str,
    /// The sender's delivery id.
    pub delivery_id: &'a str,
    /// Where the id came from.
    pub id_origin: IdOrigin,
    /// Event type, where known.
    pub event_type: Option<&'a str>,
    /// The raw body exactly as signed.
    pub payload: &'a [u8],
    /// SHA-256 of `payload`.
    pub payload_sha256: &'a [u8],
    /// The request headers worth keeping (signature headers and ids), lower-case names.
    pub headers: &'a BTreeMap<String, String>,
    /// Its key is kept to `KEY_RETENTION_DAYS`, past its payload: its source's signatures do not
    /// expire.
    pub long_key_retention: bool,
}

/// The claimant: who asks, and how long its claim may last.
#[derive(Debug, Clone, Copy)]
pub struct Claimant<'a> {
    /// Unique per invocation; finishing is fenced on it, and a claim retried with the same owner
    /// finds its own earlier claim.
    pub owner: &'a str,
    /// Lease length from the database's `now()`: the invocation's remaining time plus a margin.
    pub lease: Duration,
    /// An expired lease at this attempt or later is not taken over but made dead: every attempt
    /// so far died without recording anything (a poison payload that kills the process), so
    /// the cap holds even where no failure could be written.
    pub max_attempts: i32,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This invocation owns the delivery at this attempt. A store-only claim of a new delivery
    /// (attempt 1) has already stored it done.
    Claimed {
        /// 1 for a new delivery, previous attempt + 1 for a takeover.
        attempt: i32,
    },
    /// Already processed; a duplicate.
    Done {
        /// Whether the stored payload hash equals this request's.
        same_payload: bool,
    },
    /// Already given up on (permanent failure or attempts exhausted); a duplicate.
    Dead {
        /// Whether the stored payload hash equals this request's.
        same_payload: bool,
    },
    /// Another invocation holds a live lease, or is inserting or taking over the row right now.
    InProgress,
    /// This claim found an expired lease at the attempt cap and made the delivery dead instead
    /// of taking it over: every attempt so far died without recording an outcome.
    GaveUp,
    /// A failed attempt whose next try is not due yet.
    RetryLater {
        /// When the next attempt becomes due.
        next_attempt_at: SystemTime,
    },
}

/// Claims `delivery` for `claimant` in one statement; see [`Claim`] for the answers. With
/// `store_only`, a new delivery is stored as done at once: there is nothing to process. (One
/// taken over from an earlier attempt is processing again and is finished like any other.)
///
/// Idempotent for the same owner: when a first try committed but its answer was lost, the retry
/// finds the row held by the same owner and answers `Claimed` again with the same attempt.
pub async fn claim(
    c: &impl GenericClient,
    delivery: &NewDelivery<'_>,
    claimant: &Claimant<'_>,
    store_only: bool,
) -> Result<Claim, Error> {
    // A map of strings always serialises; the claim parses it only when it stores a new row.
    let headers = serde_json::to_string(delivery.headers).unwrap_or_else(|_| "{}".into());
    let row = c
        .query_typed_one(
            include_str!("sql/claim.sql"),
            &[
                (&delivery.source, Type::TEXT),
                (&delivery.delivery_id, Type::TEXT),
                (&claimant.owner, Type::TEXT),
                (&claimant.lease.as_secs_f64(), Type::FLOAT8),
                (&delivery.payload, Type::BYTEA),
                (&delivery.payload_sha256, Type::BYTEA),
                (&headers, Type::TEXT),
                (&delivery.event_type, Type::TEXT),
                (&delivery.id_origin.as_str(), Type::TEXT),
                (&store_only, Type::BOOL),
                (&delivery.long_key_retention, Type::BOOL),
                (&claimant.max_attempts, Type::INT4),
            ],
        )
        .await?;
    let attempt: Option<i32> = row.get("attempt");
    let same_payload: Option<bool> = row.get("same_payload");
    let retry_at: Option<SystemTime> = row.get("retry_at");
    Ok(match (row.get("state"), attempt, retry_at) {
        ("claimed", Some(attempt), _) => Claim::Claimed { attempt },
        ("done", ..) => Claim::Done {
            same_payload: same_payload == Some(true),
        },
        ("dead", ..) => Claim::Dead {
            same_payload: same_payload == Some(true),
        },
        ("gave_up", ..) => Claim::GaveUp,
        ("retry_later", _, Some(next_attempt_at)) => Claim::RetryLater { next_attempt_at },
        ("in_progress", ..) => Claim::InProgress,
        (state, ..) => {
            // Not an answer this build knows: never run the delivery on it.
            tracing::error!(state, "unknown claim answer; treated as in progress");
            Claim::InProgress
        }
    })
}
