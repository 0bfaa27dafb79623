//! Operators' replays: one named delivery, or a source's failed and dead deliveries page by page.

use std::time::SystemTime;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Error, GenericClient};

use super::{Claimant, StoredDelivery};

/// Claims one named delivery for an operator's replay: a failed, dead or expired row, or a done
/// row when `force` is set. Never takes a row under a live lease or without its payload.
pub async fn take_for_replay(
    c: &impl GenericClient,
    source: &str,
    delivery_id: &str,
    claimant: &Claimant<'_>,
    force: bool,
) -> Result<Option<StoredDelivery>, Error> {
    let row = c
        .query_typed_opt(
            include_str!("sql/take_for_replay.sql"),
            &[
                (&source, Type::TEXT),
                (&delivery_id, Type::TEXT),
                (&claimant.owner, Type::TEXT),
                (&claimant.lease.as_secs_f64(), Type::FLOAT8),
                (&force, Type::BOOL),
            ],
        )
        .await?;
    Ok(row.as_ref().map(StoredDelivery::from_row))
}

/// Which deliveries a bulk replay takes: failed or dead ones of one source, optionally of one
/// event type and received within `[received_after, received_before)`
/// (`hookclaim_replay_selection` in `migrations/0001_ledger.sql`).
#[derive(Debug, Clone, Copy)]
pub struct ReplayFilter<'a> {
    /// Source name.
    pub source: &'a str,
    /// Only this event type.
    pub event_type: Option<&'a str>,
    /// Received at or after this.
    pub received_after: Option<SystemTime>,
    /// Received before this.
    pub received_before: Option<SystemTime>,
}

impl ReplayFilter<'_> {
    /// `$1` to `$4` of the statements that select by the filter.
    fn params(&self) -> [(&(dyn ToSql + Sync), Type); 4] {
        [
            (&self.source, Type::TEXT),
            (&self.event_type, Type::TEXT),
            (&self.received_after, Type::TIMESTAMPTZ),
            (&self.received_before, Type::TIMESTAMPTZ),
        ]
    }
}

/// Where a bulk replay has got to: the last key it listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayCursor {
    /// Its `received_at`; `None` before the first page.
    pub received_at: Option<SystemTime>,
    /// Its delivery id.
    pub delivery_id: String,
}

/// The next up to `limit` replayable delivery ids `filter` selects after `cursor`, and the cursor
/// after them. Nothing is locked: each is then claimed with [`take_for_replay`], which checks its
/// state again, so a page may go stale without harm.
pub async fn replay_page(
    c: &impl GenericClient,
    filter: &ReplayFilter<'_>,
    cursor: &ReplayCursor,
    limit: i64,
) -> Result<(Vec<String>, ReplayCursor), Error> {
    let [source, event_type, after, before] = filter.params();
    let rows = c
        .query_typed(
            include_str!("sql/replay_page.sql"),
            &[
                source,
                event_type,
                after,
                before,
                (&cursor.received_at, Type::TIMESTAMPTZ),
                (&cursor.delivery_id, Type::TEXT),
                (&limit, Type::INT8),
            ],
        )
        .await?;
    let next = match rows.last() {
        Some(last) => ReplayCursor {
            received_at: Some(last.get(0)),
            delivery_id: last.get(1),
        },
        None => cursor.clone(),
    };
    Ok((rows.iter().map(|r| r.get(1)).collect(), next))
}

/// How many deliveries `filter` selects: (with their payload, so replayable; without it).
pub async fn count_replayable(
    c: &impl GenericClient,
    filter: &ReplayFilter<'_>,
) -> Result<(u64, u64), Error> {
    let row = c
        .query_typed_one(include_str!("sql/count_replayable.sql"), &filter.params())
        .await?;
    Ok((
        row.get::<_, i64>(0).unsigned_abs(),
        row.get::<_, i64>(1).unsigned_abs(),
    ))
}
