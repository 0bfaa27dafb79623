//! Runs a claimed delivery through the processor and records the outcome, fenced on the attempt.
//! The webhook function and the retention re-drive share this, so a delivery is handled the same
//! way whichever of them holds the claim.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, SystemTime};

use futures_util::FutureExt as _;
use sha2::{Digest, Sha256};

use crate::config::RetryPolicy;
use crate::db::{classify, is_connection_error, DbError};
use crate::invocation;
use crate::ledger::{
    Again, Attempt, Claim, Claimant, Finish, Ledger, NewDelivery, Recorded, StoredDelivery,
};
use crate::processor::{Delivery, ProcessError, Processor, Retry};
use crate::verify::IdOrigin;
use crate::work::{Work, WorkError};

/// What became of one delivery: the one value each boundary maps. The webhook function turns it
/// into its answer and its log line, the test harness returns it, the retention run reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// What happened.
    pub happened: Happened,
    /// The attempt this invocation held, when it won the claim.
    pub attempt: Option<i32>,
    /// Why it did not end done (the error recorded), or what else is worth knowing about it.
    pub reason: Option<String>,
    /// The request's body was not the one stored under its key: a duplicate or redelivery with
    /// another body, or a takeover that ran the stored one.
    pub payload_mismatch: bool,
    /// The replay guard found this body stored under another delivery id and answered from
    /// that delivery; nothing was claimed or run.
    pub replayed_body: bool,
}

/// What happened to a delivery, as the sender is answered and the ledger records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Happened {
    /// Processed now and recorded done (a store-only claim stores it done itself).
    Done,
    /// Already done or dead: nothing ran.
    Duplicate,
    /// Another invocation holds it: a committed claim under a live lease. Nothing ran.
    InProgress,
    /// Another transaction holds the row's lock (a takeover or a finish not yet committed), or
    /// the row was no longer held when its stored body was read: nothing committed to answer
    /// from yet.
    Busy,
    /// A failed delivery whose next attempt is due at this time (or due, but not this
    /// request's to take): nothing ran.
    RetryLater(SystemTime),
    /// Processing failed and is recorded failed, due again after this: an attempt spent.
    Failed(Duration),
    /// A downstream throttled and the processor deferred it ([`ProcessError::defer`]): due
    /// again after this, no attempt spent.
    Deferred(Duration),
    /// Failed permanently, ran out of attempts, or every attempt died before it finished:
    /// recorded dead.
    Dead,
    /// Another attempt took the delivery over while this one ran: this one's work was rolled
    /// back and nothing it concluded was recorded.
    Fenced,
}

impl Outcome {
    fn of(happened: Happened) -> Self {
        Outcome {
            happened,
            attempt: None,
            reason: None,
            payload_mismatch: false,
            replayed_body: false,
        }
    }

    /// A delivery made dead at `attempt` without running, for `error`: its payload was
    /// trimmed, or its attempts kept dying before they could record anything.
    pub fn dead(attempt: i32, error: String) -> Self {
        Outcome {
            attempt: Some(attempt),
            reason: Some(error),
            ..Outcome::of(Happened::Dead)
        }
    }

    /// An attempt at `attempt` whose finish was fenced: another attempt holds the row.
    pub fn fenced(attempt: i32) -> Self {
        Outcome {
            attempt: Some(attempt),
            ..Outcome::of(Happened::Fenced)
        }
    }

    /// The outcome's name in the retention report and its logs: `done`, `duplicate`,
    /// `in_progress`, `busy`, `retry_later`, `failed`, `deferred`, `dead` or `fenced`.
    pub fn name(&self) -> &'static str {
        match self.happened {
            Happened::Done => "done",
            Happened::Duplicate => "duplicate",
            Happened::InProgress => "in_progress",
            Happened::Busy => "busy",
            Happened::RetryLater(_) => "retry_later",
            Happened::Failed(_) => "failed",
            Happened::Deferred(_) => "deferred",
            Happened::Dead => "dead",
            Happened::Fenced => "fenced",
        }
    }

    /// The outcome of a claim this invocation does not run: a duplicate, a delivery another
    /// invocation or transaction holds, one not due again yet, or given up on.
    fn of_claim(claim: Claim) -> Self {
        let mismatch = |mut outcome: Outcome, same_payload: bool, why: &str| {
            if !same_payload {
                outcome.payload_mismatch = true;
                outcome.reason = Some(why.into());
            }
            outcome
        };
        match claim {
            // A claim this invocation won is run; it never comes here.
            Claim::Claimed { attempt, .. } => Outcome {
                attempt: Some(attempt),
                ..Outcome::of(Happened::Done)
            },
            Claim::Done { same_payload } | Claim::Dead { same_payload } => mismatch(
                Outcome::of(Happened::Duplicate),
                same_payload,
                "duplicate with a different payload",
            ),
            Claim::GaveUp => Outcome {
                reason: Some(GAVE_UP.into()),
                ..Outcome::of(Happened::Dead)
            },
            Claim::InProgress => Outcome::of(Happened::InProgress),
            Claim::Busy => Outcome::of(Happened::Busy),
            Claim::RetryLater {
                next_attempt_at,
                same_payload,
            } => mismatch(
                Outcome::of(Happened::RetryLater(next_attempt_at)),
                same_payload,
                "redelivery with a different payload",
            ),
            // Answered as that delivery stands; what is logged is why.
            Claim::Resent { of, answer } => Outcome {
                replayed_body: true,
                reason: Some(format!(
                    "replay guard: this signed body was delivered as {of}"
                )),
                ..Outcome::of_claim(*answer)
            },
        }
    }
}

/// Why a delivery was made dead without running: every attempt so far died before it could
/// record anything (an expired lease at the attempt cap).
pub const GAVE_UP: &str = "gave up: every attempt died before it finished";

/// Time kept back from the invocation's deadline for recording a failed attempt and answering:
/// processing that is not finished by then is abandoned.
pub const PROCESSING_RESERVE: Duration = Duration::from_millis(500);

/// The shortest wait a processor's [`ProcessError::retry_in`] or [`ProcessError::defer`] gets:
/// `Retry-After` counts whole seconds.
const MIN_RETRY_IN: Duration = Duration::from_secs(1);

/// How a delivery is keyed in the ledger besides its source and id: what its source says.
#[derive(Debug, Clone, Copy)]
pub struct Keying {
    /// Where the delivery id came from.
    pub id_origin: IdOrigin,
    /// Its key is kept past its payload (see [`NewDelivery::long_key_retention`]).
    pub long_key_retention: bool,
    /// Its source's replay guard (see [`NewDelivery::replay_guard`]).
    pub replay_guard: bool,
}

/// Claims `delivery` for `claimant` and, when this invocation wins it, runs it through
/// `processor` before `deadline`: the request's delivery, or, on a takeover by a request with
/// another body, the delivery stored with the row (the ledger's body is the delivery). The
/// webhook function and the test harness both deliver through this.
pub async fn claim_and_run<P: Processor>(
    ledger: &mut Ledger<'_>,
    processor: &P,
    delivery: Delivery,
    keying: Keying,
    claimant: &Claimant<'_>,
    policy: &RetryPolicy,
    deadline: SystemTime,
) -> Result<Outcome, DbError> {
    let store_only = processor.stores_only();
    let payload_sha256 = Sha256::digest(&delivery.payload);
    let new = NewDelivery {
        source: &delivery.source,
        delivery_id: &delivery.delivery_id,
        id_origin: keying.id_origin,
        event_type: delivery.event_type.as_deref(),
        payload: &delivery.payload,
        payload_sha256: &payload_sha256,
        headers: &delivery.headers,
        long_key_retention: keying.long_key_retention,
        replay_guard: keying.replay_guard,
    };
    let claim = ledger.claim(&new, claimant, store_only).await?;
    let Claim::Claimed {
        attempt,
        same_payload,
    } = claim
    else {
        return Ok(Outcome::of_claim(claim));
    };
    // A store-only claim stores a new delivery as done; one it took over (attempt 2 or later)
    // is finished here like any other.
    if store_only && attempt == 1 {
        return Ok(Outcome {
            attempt: Some(1),
            ..Outcome::of(Happened::Done)
        });
    }
    let delivery = if same_payload {
        Delivery {
            attempt,
            ..delivery
        }
    } else {
        let at = Attempt {
            source: &delivery.source,
            delivery_id: &delivery.delivery_id,
            attempt,
            owner: claimant.owner,
        };
        let held = ledger.held(&at).await?;
        match held.as_ref().and_then(delivery_of) {
            Some(stored) => stored,
            // No longer held (the lease ran out already): the retention function or a later
            // redelivery runs it from the row.
            None => return Ok(Outcome::of(Happened::Busy)),
        }
    };
    let mut outcome = run_claimed(
        ledger,
        processor,
        &delivery,
        claimant.owner,
        policy,
        deadline,
    )
    .await?;
    if !same_payload {
        outcome.payload_mismatch = true;
        // A fenced attempt's reason is that, whatever body it ran.
        if outcome.happened != Happened::Fenced {
            outcome.reason.get_or_insert_with(|| {
                "takeover with a different payload: the stored one ran".into()
            });
        }
    }
    Ok(outcome)
}

/// Processes `delivery` (already claimed at `delivery.attempt` by `owner`) in a transaction and
/// records the outcome, all before the invocation's `deadline`.
///
/// On a connection failure mid-way, the transaction is lost (rolled back by the server), the
/// connection is remade once and the attempt is recorded as failed so it can be retried. The
/// same happens when processing (the processor's own calls or the commit) is still running
/// [`PROCESSING_RESERVE`] before the deadline: the statement is cancelled on the server and the
/// connection let go, so the sender hears 503 before Lambda ends the invocation. `Err` only when
/// even the failure cannot be written, in which case the lease still protects the delivery.
pub async fn run_claimed<P: Processor>(
    ledger: &mut Ledger<'_>,
    processor: &P,
    delivery: &Delivery,
    owner: &str,
    policy: &RetryPolicy,
    deadline: SystemTime,
) -> Result<Outcome, DbError> {
    let at = Attempt {
        source: &delivery.source,
        delivery_id: &delivery.delivery_id,
        attempt: delivery.attempt,
        owner,
    };
    let budget = invocation::remaining(deadline).saturating_sub(PROCESSING_RESERVE);
    let processing = process_in_transaction(ledger, processor, delivery, &at);
    let processing_deadline = SystemTime::now() + budget;
    let processed = tokio::time::timeout(
        budget,
        invocation::processing_until(processing_deadline, processing),
    )
    .await
    .unwrap_or_else(|_| {
        ledger.session().abandon();
        Err(Failure::OutOfTime)
    });
    let verdict = match processed {
        Ok(happened) => {
            return Ok(Outcome {
                attempt: Some(delivery.attempt),
                ..Outcome::of(happened)
            })
        }
        Err(Failure::Processor(e)) => {
            // A processor that chose its retry over a broken connection still gets a new one.
            if e.database_error().is_some_and(is_connection_error) {
                ledger.session().discard();
            }
            Verdict {
                error: e.to_string(),
                retry: e.retry(),
            }
        }
        Err(Failure::Database(e)) => {
            if matches!(e, DbError::Connection(_) | DbError::Timeout) {
                ledger.session().discard();
            }
            Verdict::backoff(format!("database error during processing: {e}"))
        }
        Err(Failure::OutOfTime) => {
            Verdict::backoff("processing did not finish within the invocation's time".into())
        }
    };
    record_failure(ledger, &at, verdict, policy).await
}

/// The processor's view of a stored delivery; `None` when its payload was trimmed.
pub fn delivery_of(stored: &StoredDelivery) -> Option<Delivery> {
    Some(Delivery {
        source: stored.source.clone(),
        delivery_id: stored.delivery_id.clone(),
        event_type: stored.event_type.clone(),
        payload: stored.payload.clone()?,
        headers: stored.headers.clone(),
        attempt: stored.attempt,
    })
}

/// Why processing did not end done.
enum Failure {
    /// The processor's error, saying when to try again.
    Processor(ProcessError),
    /// A database error, the processor's own or at commit.
    Database(DbError),
    /// Processing was still running when the invocation's time ran short.
    OutOfTime,
}

impl From<ProcessError> for Failure {
    /// A database error under the policy's backoff is the database's failure (the usual `?`
    /// on a query): recorded as such, and a connection-level one remakes the connection.
    fn from(e: ProcessError) -> Self {
        if e.retry() != Retry::Backoff || e.database_error().is_none() {
            return Failure::Processor(e);
        }
        let inner = e.into_inner();
        let db = match inner.downcast::<WorkError>() {
            Ok(work) => match *work {
                WorkError::Database(db) => db,
                other => return Failure::Processor(ProcessError::new(other)),
            },
            Err(other) => match other.downcast::<tokio_postgres::Error>() {
                Ok(db) => *db,
                Err(other) => return Failure::Processor(ProcessError::new(other)),
            },
        };
        Failure::Database(classify(db))
    }
}

impl From<WorkError> for Failure {
    fn from(e: WorkError) -> Self {
        match e {
            WorkError::Database(db) => Failure::Database(classify(db)),
            other => Failure::Processor(ProcessError::new(other)),
        }
    }
}

/// A failed attempt to record: why, and when to try again.
struct Verdict {
    error: String,
    retry: Retry,
}

impl Verdict {
    fn backoff(error: String) -> Self {
        Verdict {
            error,
            retry: Retry::Backoff,
        }
    }
}

/// Runs the processor and, on success, finishes in the same transaction. Returns done or fenced,
/// and the failure to record otherwise.
async fn process_in_transaction<P: Processor>(
    ledger: &mut Ledger<'_>,
    processor: &P,
    delivery: &Delivery,
    at: &Attempt<'_>,
) -> Result<Happened, Failure> {
    let client = ledger.session().client().await.map_err(Failure::Database)?;
    let mut work = Work::new(client, *at);
    // A panic is a failed attempt, retried and in the end dead like any other, so one poisoned
    // payload cannot take the function down with it. Only where panics unwind: with
    // `panic = "abort"` the process ends, and the claim's attempt cap decides.
    let processed = AssertUnwindSafe(processor.process(delivery, &mut work))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(ProcessError::new(panic_message(panic.as_ref()))));
    if let Err(e) = processed {
        // The processor's own failure is the one to report; a failed rollback only means
        // the connection is gone, which the caller's reconnect handles.
        let _ = work.rollback().await;
        return Err(e.into());
    }
    match work.commit().await? {
        Finish::Applied => Ok(Happened::Done),
        Finish::Fenced => Ok(Happened::Fenced),
    }
}

/// What a caught panic said, for the attempt's recorded error.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-text payload");
    format!("processor panicked: {text}")
}

/// Records a failed attempt as failed (with backoff, or no sooner than the processor said),
/// deferred (not counted), or dead (permanent, out of attempts, or past its age bound: the
/// ledger decides the last two, as it holds the counts).
async fn record_failure(
    ledger: &mut Ledger<'_>,
    at: &Attempt<'_>,
    verdict: Verdict,
    policy: &RetryPolicy,
) -> Result<Outcome, DbError> {
    let Verdict { error, retry } = verdict;
    let counted = |retry_in| Again::Failed {
        retry_in,
        max_attempts: policy.max_attempts,
    };
    let again = match retry {
        Retry::Never => {
            let finish = ledger.finish_dead(at, &error).await?;
            return Ok(match finish {
                Finish::Applied => Outcome {
                    attempt: Some(at.attempt),
                    reason: Some(error),
                    ..Outcome::of(Happened::Dead)
                },
                Finish::Fenced => Outcome::fenced(at.attempt),
            });
        }
        Retry::Backoff => counted(policy.backoff(at.attempt)),
        Retry::In(after) => counted(after.max(MIN_RETRY_IN)),
        Retry::Defer(after) => Again::Deferred {
            retry_in: after.max(MIN_RETRY_IN),
            max_age: policy.max_delivery_age,
        },
    };
    let Some(Recorded { dead, error }) = ledger.finish_again(at, &error, again).await? else {
        return Ok(Outcome::fenced(at.attempt));
    };
    let happened = match again {
        _ if dead => Happened::Dead,
        Again::Failed { retry_in, .. } => Happened::Failed(retry_in),
        Again::Deferred { retry_in, .. } => Happened::Deferred(retry_in),
    };
    Ok(Outcome {
        attempt: Some(at.attempt),
        reason: Some(error),
        ..Outcome::of(happened)
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_trimmed_delivery_has_no_processor_view() {
        let mut stored = StoredDelivery {
            source: "s".into(),
            delivery_id: "d".into(),
            attempt: 2,
            event_type: Some("t".into()),
            payload: None,
            headers: BTreeMap::from([("h".into(), "v".into())]),
            last_error: None,
            gave_up: false,
        };
        assert!(delivery_of(&stored).is_none());
        stored.payload = Some(b"{}".to_vec());
        let d = delivery_of(&stored).unwrap();
        assert_eq!((d.attempt, d.payload.as_slice()), (2, &b"{}"[..]));
    }
}
