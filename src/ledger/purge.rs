//! Purge and trim: finished rows deleted past their retention, payloads dropped past theirs, in
//! batches that skip whatever a concurrent claim holds, and the counts of what is left.
//!
//! Each statement takes `long_key_retention`, which picks the rows of one key retention: the
//! finished index leads with it, so a purge at `RETENTION_DAYS` never steps over the keys kept to
//! `KEY_RETENTION_DAYS`.

use std::time::{Duration, SystemTime};

use tokio_postgres::types::Type;
use tokio_postgres::{Error, GenericClient};

/// Deletes up to `limit` done or dead rows with `long_key_retention` that completed more than
/// `older_than` ago; returns how many. Fewer than `limit` means nothing more was purgeable (or
/// the rest was locked).
pub async fn purge_batch(
    c: &impl GenericClient,
    long_key_retention: bool,
    older_than: Duration,
    limit: i64,
) -> Result<u64, Error> {
    c.execute_typed(
        include_str!("sql/purge.sql"),
        &[
            (&long_key_retention, Type::BOOL),
            (&older_than.as_secs_f64(), Type::FLOAT8),
            (&limit, Type::INT8),
        ],
    )
    .await
}

/// How many rows [`purge_batch`] with the same `long_key_retention` and `older_than` would
/// delete in all.
pub async fn count_purgeable(
    c: &impl GenericClient,
    long_key_retention: bool,
    older_than: Duration,
) -> Result<u64, Error> {
    let row = c
        .query_typed_one(
            include_str!("sql/count_purgeable.sql"),
            &[
                (&long_key_retention, Type::BOOL),
                (&older_than.as_secs_f64(), Type::FLOAT8),
            ],
        )
        .await?;
    Ok(row.get::<_, i64>(0).unsigned_abs())
}

/// One trim batch's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trimmed {
    /// Payloads dropped.
    pub count: u64,
    /// The newest `completed_at` among them: the cursor for the next batch.
    pub cursor: Option<SystemTime>,
}

/// Drops up to `limit` payloads of done rows with `long_key_retention` that completed more than
/// `older_than` ago and not before `cursor` (the previous batch's [`Trimmed::cursor`]; `None`
/// for a run's first batch, which starts where the earlier runs stopped).
pub async fn trim_batch(
    c: &impl GenericClient,
    long_key_retention: bool,
    older_than: Duration,
    cursor: Option<SystemTime>,
    limit: i64,
) -> Result<Trimmed, Error> {
    let row = c
        .query_typed_one(
            include_str!("sql/trim_done.sql"),
            &[
                (&long_key_retention, Type::BOOL),
                (&older_than.as_secs_f64(), Type::FLOAT8),
                (&cursor, Type::TIMESTAMPTZ),
                (&limit, Type::INT8),
            ],
        )
        .await?;
    Ok(Trimmed {
        count: row.get::<_, i64>(0).unsigned_abs(),
        cursor: row.get(1),
    })
}

/// How many payloads [`trim_batch`] with `long_key_retention` and `older_than` would drop once
/// the rows past `purge_after` are purged.
pub async fn count_trimmable(
    c: &impl GenericClient,
    long_key_retention: bool,
    older_than: Duration,
    purge_after: Duration,
) -> Result<u64, Error> {
    let row = c
        .query_typed_one(
            include_str!("sql/count_trimmable.sql"),
            &[
                (&long_key_retention, Type::BOOL),
                (&older_than.as_secs_f64(), Type::FLOAT8),
                (&purge_after.as_secs_f64(), Type::FLOAT8),
            ],
        )
        .await?;
    Ok(row.get::<_, i64>(0).unsigned_abs())
}

/// Drops up to `limit` payloads of dead rows: after `long_key_after` where the key is kept
/// longer, after `older_than` elsewhere (`None`: never; they stay for a manual replay until
/// purged).
pub async fn trim_dead_batch(
    c: &impl GenericClient,
    older_than: Option<Duration>,
    long_key_after: Duration,
    limit: i64,
) -> Result<u64, Error> {
    let row = c
        .query_typed_one(
            include_str!("sql/trim_dead.sql"),
            &[
                (&older_than.map(|d| d.as_secs_f64()), Type::FLOAT8),
                (&long_key_after.as_secs_f64(), Type::FLOAT8),
                (&limit, Type::INT8),
            ],
        )
        .await?;
    Ok(row.get::<_, i64>(0).unsigned_abs())
}

/// How many payloads [`trim_dead_batch`] with the same horizons would drop in all.
pub async fn count_dead_trimmable(
    c: &impl GenericClient,
    older_than: Option<Duration>,
    long_key_after: Duration,
) -> Result<u64, Error> {
    let row = c
        .query_typed_one(
            include_str!("sql/count_dead_trimmable.sql"),
            &[
                (&older_than.map(|d| d.as_secs_f64()), Type::FLOAT8),
                (&long_key_after.as_secs_f64(), Type::FLOAT8),
            ],
        )
        .await?;
    Ok(row.get::<_, i64>(0).unsigned_abs())
}
