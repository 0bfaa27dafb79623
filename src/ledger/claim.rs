//! The claim: one call of `hookclaim_claim` (`migrations/0001_ledger.sql`), which inserts a new
//! delivery, takes over an expired or due one, or says why this invocation may not run it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use tokio_postgres::types::Type;
use tokio_postgres::{Error, GenericClient};

use super::{Attempt, StoredDelivery};
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
    /// Its source's replay guard: the body is a key too, so a body stored under another id is
    /// answered from that delivery ([`Claim::Resent`]) and never run under this one, and a row
    /// is taken over only by its own body.
    pub replay_guard: bool,
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
        /// Whether the stored payload, the one to process, is this request's. Only a takeover of
        /// a row stored from another body (a source without the replay guard) says `false`.
        same_payload: bool,
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
    /// Another invocation holds the delivery: a committed `processing` row under a live lease.
    InProgress,
    /// Another transaction holds the row's lock right now (taking it over or finishing it): its
    /// outcome is not committed yet, so nothing can be promised; ask again shortly.
    Busy,
    /// This claim found an expired lease at the attempt cap and made the delivery dead instead
    /// of taking it over: every attempt so far died without recording an outcome.
    GaveUp,
    /// A failed attempt whose next try is not due yet, or (with the replay guard) one that is
    /// due but holds another body: left for its own redelivery or re-drive.
    RetryLater {
        /// When the next attempt becomes due (already past for a due row left to its re-drive).
        next_attempt_at: SystemTime,
        /// Whether the stored payload hash equals this request's.
        same_payload: bool,
    },
    /// The replay guard found this body stored under another delivery id: a signed body re-sent
    /// under a new id. It is answered as a redelivery of that delivery would be, but nothing is
    /// taken over or run: `answer` is that delivery's `Done`, `Dead`, `InProgress`, `Busy` or
    /// `RetryLater`.
    Resent {
        /// The delivery id the body is stored under.
        of: String,
        /// How that delivery stands.
        answer: Box<Claim>,
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
                (&delivery.replay_guard, Type::BOOL),
                (&claimant.max_attempts, Type::INT4),
            ],
        )
        .await?;
    let attempt: Option<i32> = row.get("attempt");
    let same_payload: Option<bool> = row.get("same_payload");
    let retry_at: Option<SystemTime> = row.get("retry_at");
    let body_of: Option<String> = row.get("body_of");
    let same_payload = same_payload == Some(true);
    let answer = match (row.get("state"), attempt, retry_at) {
        ("claimed", Some(attempt), _) if body_of.is_none() => Claim::Claimed {
            attempt,
            same_payload,
        },
        ("done", ..) => Claim::Done { same_payload },
        ("dead", ..) => Claim::Dead { same_payload },
        ("gave_up", ..) => Claim::GaveUp,
        ("retry_later", _, Some(next_attempt_at)) => Claim::RetryLater {
            next_attempt_at,
            same_payload,
        },
        ("in_progress", ..) => Claim::InProgress,
        ("busy", ..) => Claim::Busy,
        (state, ..) => {
            // Not an answer this build knows: never run the delivery on it, and promise nothing.
            tracing::error!(state, "unknown claim answer; treated as busy");
            Claim::Busy
        }
    };
    Ok(match body_of {
        Some(of) => Claim::Resent {
            of,
            answer: Box::new(answer),
        },
        None => answer,
    })
}

/// The stored delivery `at` holds, as a takeover runs it: the row's body, headers and event
/// type, which a request with another body does not replace. `None` once the attempt no longer
/// holds the row.
pub async fn held(
    c: &impl GenericClient,
    at: &Attempt<'_>,
) -> Result<Option<StoredDelivery>, Error> {
    let row = c
        .query_typed_opt(include_str!("sql/held.sql"), &at.params())
        .await?;
    Ok(row.as_ref().map(StoredDelivery::from_row))
}
