//! The retention reclaim: expired leases and due retries taken over one at a time, under the
//! takeover rule the claim uses (`hookclaim_take_over` in `migrations/0001_ledger.sql`).

use tokio_postgres::types::Type;
use tokio_postgres::{Error, GenericClient};

use super::{Claimant, StoredDelivery};

/// Takes over one expired lease or due retry, if any, for a retention run that uses one owner
/// token for all its reclaims. Rows another transaction holds are skipped rather than waited
/// for; rows this owner already took are skipped too, so each due delivery gets at most one
/// attempt per run however short its backoff, and a poison delivery cannot spin through all its
/// attempts in one run. An expired lease at the attempt cap comes back made dead
/// ([`StoredDelivery::gave_up`]).
pub async fn reclaim_next(
    c: &impl GenericClient,
    claimant: &Claimant<'_>,
) -> Result<Option<StoredDelivery>, Error> {
    let row = c
        .query_typed_opt(
            include_str!("sql/reclaim.sql"),
            &[
                (&claimant.owner, Type::TEXT),
                (&claimant.lease.as_secs_f64(), Type::FLOAT8),
                (&claimant.max_attempts, Type::INT4),
            ],
        )
        .await?;
    Ok(row.as_ref().map(StoredDelivery::from_row))
}

/// How many rows a reclaim could take over now (expired leases and due retries).
pub async fn count_reclaimable(c: &impl GenericClient) -> Result<u64, Error> {
    let row = c
        .query_typed_one(include_str!("sql/count_reclaimable.sql"), &[])
        .await?;
    Ok(row.get::<_, i64>(0).unsigned_abs())
}
