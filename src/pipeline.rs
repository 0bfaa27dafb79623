//! Runs a claimed delivery through the processor and records the outcome, fenced on the attempt.
//! The webhook function and the retention re-drive share this, so a delivery is handled the same
//! way whichever of them holds the claim.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, SystemTime};

use futures_util::FutureExt as _;

use crate::config::RetryPolicy;
use crate::db::{classify, is_connection_error, DbError};
use crate::invocation;
use crate::processor::{Delivery, ProcessError, Processor, Retry};
use crate::ledger::{Attempt, Claim, Claimant, Finish, Ledger, NewDelivery, StoredDelivery};
use crate::work::{Work, WorkError};

/// How a claimed delivery ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// Processed and recorded as done.
    Done,
    /// Failed; recorded as failed, due again after the delay.
    Failed {
        /// Why it failed.
        error: String,
        /// When the next attempt becomes due.
        retry_in: Duration,
    },
    /// Failed permanently or ran out of attempts; recorded as dead.
    Dead {
        /// Why it was given up.
        error: String,
    },
    /// Another attempt took the delivery over while this one ran: this one's work was rolled
    /// back and nothing it concluded was recorded.
    Fenced,
}

impl Settled {
    /// The outcome's name in logs and reports: `done`, `failed`, `dead` or `fenced`.
    pub fn name(&self) -> &'static str {
        match self {
            Settled::Done => "done",
            Settled::Failed { .. } => "failed",
            Settled::Dead { .. } => "dead",
            Settled::Fenced => "fenced",
        }
    }

    /// Why it did not end done, where there is a reason.
    pub fn error(&self) -> Option<&str> {
        match self {
            Settled::Failed { error, .. } | Settled::Dead { error } => Some(error),
            Settled::Done | Settled::Fenced => None,
        }
    }
}

/// Time kept back from the invocation's deadline for recording a failed attempt and answering:
/// processing that is not finished by then is abandoned.
pub const PROCESSING_RESERVE: Duration = Duration::from_millis(500);

/// The shortest wait a processor's [`ProcessError::retry_in`] gets: `Retry-After` counts whole
/// seconds.
const MIN_RETRY_IN: Duration = Duration::from_secs(1);

/// How a delivery's claim ended, and its processing where this invocation won it.
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    /// Not this invocation's to run: the claim's answer (a duplicate, a delivery another
    /// invocation or transaction holds, one not due yet, or given up on).
    NotRun(Claim),
    /// A new delivery a store-only claim stored as done: nothing to process.
    Stored,
    /// Won at `attempt` and processed.
    Ran {
        /// The attempt this invocation held.
        attempt: i32,
        /// How processing ended.
        settled: Settled,
        /// The request's body differed from the row's (a takeover), and the stored one ran.
        stored_body: bool,
    },
}

/// Claims `new` for `claimant` and, when this invocation wins it, runs it through `processor`
/// before `deadline`: the request's delivery, or, on a takeover by a request with another body,
/// the delivery stored with the row (the ledger's body is the delivery). The webhook function
/// and the test harness both deliver through this.
pub async fn claim_and_run<P: Processor>(
    ledger: &mut Ledger<'_>,
    processor: &P,
    new: &NewDelivery<'_>,
    claimant: &Claimant<'_>,
    policy: &RetryPolicy,
    deadline: SystemTime,
) -> Result<Handled, DbError> {
    let store_only = processor.stores_only();
    let claim = ledger.claim(new, claimant, store_only).await?;
    let Claim::Claimed {
        attempt,
        same_payload,
    } = claim
    else {
        return Ok(Handled::NotRun(claim));
    };
    // A store-only claim stores a new delivery as done; one it took over (attempt 2 or later)
    // is finished here like any other.
    if store_only && attempt == 1 {
        return Ok(Handled::Stored);
    }
    let delivery = if same_payload {
        Delivery {
            source: new.source.to_owned(),
            delivery_id: new.delivery_id.to_owned(),
            event_type: new.event_type.map(str::to_owned),
            payload: new.payload.to_vec(),
            headers: new.headers.clone(),
            attempt,
        }
    } else {
        let at = Attempt {
            source: new.source,
            delivery_id: new.delivery_id,
            attempt,
            owner: claimant.owner,
        };
        let held = ledger.held(&at).await?;
        match held.as_ref().and_then(delivery_of) {
            Some(stored) => stored,
            // No longer held (the lease ran out already): the retention function or a later
            // redelivery runs it from the row.
            None => return Ok(Handled::NotRun(Claim::Busy)),
        }
    };
    let settled = run_claimed(
        ledger,
        processor,
        &delivery,
        claimant.owner,
        policy,
        deadline,
    )
    .await?;
    Ok(Handled::Ran {
        attempt,
        settled,
        stored_body: !same_payload,
    })
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
) -> Result<Settled, DbError> {
    let at = Attempt {
        source: &delivery.source,
        delivery_id: &delivery.delivery_id,
        attempt: delivery.attempt,
        owner,
    };
    let budget = invocation::remaining(deadline).saturating_sub(PROCESSING_RESERVE);
    let processed = tokio::time::timeout(
        budget,
        process_in_transaction(ledger, processor, delivery, &at),
    )
    .await
    .unwrap_or_else(|_| {
        ledger.session().abandon();
        Err(Failure::OutOfTime)
    });
    let verdict = match processed {
        Ok(settled) => return Ok(settled),
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
) -> Result<Settled, Failure> {
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
        Finish::Applied => Ok(Settled::Done),
        Finish::Fenced => Ok(Settled::Fenced),
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

/// Records a failed attempt as failed (with backoff) or dead (permanent, or out of attempts).
async fn record_failure(
    ledger: &mut Ledger<'_>,
    at: &Attempt<'_>,
    verdict: Verdict,
    policy: &RetryPolicy,
) -> Result<Settled, DbError> {
    let Verdict { error, retry } = verdict;
    let settled = match retry {
        Retry::Never => Settled::Dead { error },
        _ if at.attempt >= policy.max_attempts => Settled::Dead {
            error: format!("gave up after {} attempts: {error}", at.attempt),
        },
        Retry::Backoff => Settled::Failed {
            error,
            retry_in: policy.backoff(at.attempt),
        },
        Retry::In(after) => Settled::Failed {
            error,
            retry_in: after.max(MIN_RETRY_IN),
        },
    };
    let finish = match &settled {
        Settled::Failed { error, retry_in } => ledger.finish_failed(at, error, *retry_in).await?,
        Settled::Dead { error } => ledger.finish_dead(at, error).await?,
        Settled::Done | Settled::Fenced => Finish::Applied,
    };
    Ok(match finish {
        Finish::Applied => settled,
        Finish::Fenced => Settled::Fenced,
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
