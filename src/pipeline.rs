//! Runs a claimed delivery through the processor and records the outcome, fenced on the attempt.
//! The webhook function and the retention re-drive share this, so a delivery is handled the same
//! way whichever of them holds the claim.

use std::time::Duration;

use crate::db::{classify, DbError, Session};
use crate::processor::{Delivery, Outcome, Processor};
use crate::store::{self, Attempt, Finish};
use crate::work::Work;

/// Exponential backoff with a cap, jitter and a maximum number of attempts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts after which a failing delivery becomes dead.
    pub max_attempts: i32,
    /// Delay after the first failure.
    pub base: Duration,
    /// Longest delay between attempts.
    pub cap: Duration,
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

/// Processes `delivery` (already claimed at `delivery.attempt` by `owner`) in a transaction and
/// records the outcome.
///
/// On a connection failure mid-way, the transaction is lost (rolled back by the server), the
/// connection is remade once and the attempt is recorded as failed so it can be retried;
/// `Err` only when even that cannot be written, in which case the lease still protects it.
pub async fn run_claimed<P: Processor>(
    session: &mut Session<'_>,
    processor: &P,
    delivery: &Delivery,
    owner: &str,
    policy: &RetryPolicy,
) -> Result<Settled, DbError> {
    let at = Attempt {
        source: &delivery.source,
        delivery_id: &delivery.delivery_id,
        attempt: delivery.attempt,
        owner,
    };
    let concluded = process_in_transaction(session, processor, delivery, &at).await;
    let outcome = match concluded {
        Ok(settled) => return Ok(settled),
        Err(Failure::Processor(outcome)) => outcome,
        Err(Failure::Database(e)) => {
            if matches!(e, DbError::Connection(_) | DbError::Timeout) {
                session.discard();
            }
            Outcome::Retry(format!("database error during processing: {e}"))
        }
    };
    record_failure(session, &at, outcome, policy).await
}

enum Failure {
    Processor(Outcome),
    Database(DbError),
}

/// Runs the processor and, on success, finishes in the same transaction. Returns done or fenced,
/// and the failure to record otherwise.
async fn process_in_transaction<P: Processor>(
    session: &mut Session<'_>,
    processor: &P,
    delivery: &Delivery,
    at: &Attempt<'_>,
) -> Result<Settled, Failure> {
    let client = session.client().await.map_err(Failure::Database)?;
    let mut work = Work::new(client);
    let outcome = match processor.process(delivery, &mut work).await {
        Ok(outcome) => outcome,
        Err(e) => {
            // The processor's own failure is the one to report; a failed rollback only means
            // the connection is gone, which the caller's reconnect handles.
            let _ = work.rollback().await;
            return Err(Failure::Database(classify(e)));
        }
    };
    if outcome != Outcome::Done {
        work.rollback()
            .await
            .map_err(|e| Failure::Database(classify(e)))?;
        return Err(Failure::Processor(outcome));
    }
    match work
        .commit(at)
        .await
        .map_err(|e| Failure::Database(classify(e)))?
    {
        Finish::Applied => Ok(Settled::Done),
        Finish::Fenced => Ok(Settled::Fenced),
    }
}

/// Records a failed attempt as failed (with backoff) or dead (permanent, or out of attempts).
async fn record_failure(
    session: &mut Session<'_>,
    at: &Attempt<'_>,
    outcome: Outcome,
    policy: &RetryPolicy,
) -> Result<Settled, DbError> {
    let settled = match outcome {
        Outcome::Retry(error) if at.attempt < policy.max_attempts => Settled::Failed {
            error,
            retry_in: policy.backoff(at.attempt),
        },
        Outcome::Retry(error) => Settled::Dead {
            error: format!("gave up after {} attempts: {error}", at.attempt),
        },
        Outcome::Permanent(error) => Settled::Dead { error },
        Outcome::Done => Settled::Done,
    };
    let finish = match &settled {
        Settled::Failed { error, retry_in } => {
            session
                .run(|c, _| Box::pin(store::finish_failed(c, at, error, *retry_in)))
                .await?
        }
        Settled::Dead { error } => {
            session
                .run(|c, _| Box::pin(store::finish_dead(c, at, error)))
                .await?
        }
        Settled::Done | Settled::Fenced => Finish::Applied,
    };
    Ok(match finish {
        Finish::Applied => settled,
        Finish::Fenced => Settled::Fenced,
    })
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
