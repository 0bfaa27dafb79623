//! The retention reclaim: expired leases and due retries taken over one at a time, in the order
//! they fell due, under the takeover rule the claim uses (`hookclaim_take_over` in
//! `migrations/0001_ledger.sql`).

use std::time::SystemTime;

use tokio_postgres::types::Type;
use tokio_postgres::{Error, GenericClient};

use super::{Claimant, StoredDelivery};

/// Where a run's reclaim resumes: the due time and key of the last row it looked at, and the
/// run's start. Each call starts after that row, so the rows a run has passed over are not read
/// again and finding the next one costs the same at any backlog; and it takes only rows that
/// were due when the run started, so a delivery it re-drove and that failed again waits for the
/// next run, however short its backoff.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReclaimCursor {
    /// The database's time at the run's first reclaim; `None` before it.
    run_started: Option<SystemTime>,
    /// `None`: from the first due row.
    due_at: Option<SystemTime>,
    source: String,
    delivery_id: String,
}

/// The row a reclaim looked at: where the next one resumes, and the delivery if it took it
/// (`None` when another transaction held the row or had just taken it).
#[derive(Debug)]
pub struct Reclaimed {
    /// Resumes after this row.
    pub cursor: ReclaimCursor,
    /// The delivery taken over, or made dead at the attempt cap ([`StoredDelivery::gave_up`]).
    pub taken: Option<StoredDelivery>,
}

/// Looks at the next expired lease or due retry after `after` and takes it over; `None` when
/// nothing more was due at the run's start. Rows another transaction holds are passed over
/// rather than waited for. Each due delivery gets at most one attempt per run, so a poison
/// delivery cannot spin through all its attempts in one run.
pub async fn reclaim_next(
    c: &impl GenericClient,
    claimant: &Claimant<'_>,
    after: &ReclaimCursor,
) -> Result<Option<Reclaimed>, Error> {
    let row = c
        .query_typed_opt(
            include_str!("sql/reclaim.sql"),
            &[
                (&claimant.owner, Type::TEXT),
                (&claimant.lease.as_secs_f64(), Type::FLOAT8),
                (&claimant.max_attempts, Type::INT4),
                (&after.run_started, Type::TIMESTAMPTZ),
                (&after.due_at, Type::TIMESTAMPTZ),
                (&after.source, Type::TEXT),
                (&after.delivery_id, Type::TEXT),
            ],
        )
        .await?;
    Ok(row.map(|row| Reclaimed {
        cursor: ReclaimCursor {
            run_started: row.get("run_started"),
            due_at: row.get("due_at"),
            source: row.get("source"),
            delivery_id: row.get("delivery_id"),
        },
        taken: row
            .get::<_, Option<i32>>("attempt")
            .map(|_| StoredDelivery::from_row(&row)),
    }))
}

/// How many rows a reclaim could take over now (expired leases and due retries).
pub async fn count_reclaimable(c: &impl GenericClient) -> Result<u64, Error> {
    let row = c
        .query_typed_one(include_str!("sql/count_reclaimable.sql"), &[])
        .await?;
    Ok(row.get::<_, i64>(0).unsigned_abs())
}
