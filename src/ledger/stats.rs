//! Reads for operators and reports: one delivery's state, the ledger at a glance (`stats`), and
//! how long the oldest waiting work has waited (every retention run's metrics).

use std::collections::BTreeMap;

use tokio_postgres::types::Type;
use tokio_postgres::{Error, GenericClient};

/// One row's current state, for operators and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryState {
    /// processing / done / failed / dead.
    pub status: String,
    /// Current attempt number.
    pub attempt: i32,
    /// Last recorded error.
    pub last_error: Option<String>,
    /// Whether the payload is still stored.
    pub has_payload: bool,
}

/// Reads one row's state.
pub async fn state(
    c: &impl GenericClient,
    source: &str,
    delivery_id: &str,
) -> Result<Option<DeliveryState>, Error> {
    let row = c
        .query_typed_opt(
            include_str!("sql/state.sql"),
            &[(&source, Type::TEXT), (&delivery_id, Type::TEXT)],
        )
        .await?;
    Ok(row.map(|r| DeliveryState {
        status: r.get(0),
        attempt: r.get(1),
        last_error: r.get(2),
        has_payload: r.get(3),
    }))
}

/// The in-progress row whose lease ends first.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OldestLease {
    /// Source name.
    pub source: String,
    /// Delivery id.
    pub delivery_id: String,
    /// Attempt holding the lease.
    pub attempt: i32,
    /// When the lease ends (UTC, ISO 8601).
    pub lease_until: String,
    /// Whether it has already ended (the row is reclaimable).
    pub expired: bool,
    /// When this attempt claimed it (UTC, ISO 8601).
    pub claimed_at: String,
}

/// The ledger at a glance, for the operators' `stats` command.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LedgerStats {
    /// Row counts by source, then by status.
    pub by_source: BTreeMap<String, BTreeMap<String, u64>>,
    /// All rows.
    pub total: u64,
    /// The in-progress lease that ends first, if any row is in progress.
    pub oldest_lease: Option<OldestLease>,
    /// When the oldest row was received (UTC, ISO 8601).
    pub oldest_received_at: Option<String>,
    /// Its age in seconds.
    pub oldest_age_secs: Option<f64>,
    /// The oldest deliveries waiting on retention or an operator (failed, dead, or holding an
    /// expired lease), oldest first, at most [`MAX_STUCK_LISTED`].
    pub stuck: Vec<StuckDelivery>,
}

/// At most this many stuck deliveries are listed by `stats`.
pub const MAX_STUCK_LISTED: i64 = 10;

/// Stored errors are cut to this many characters in the stuck list.
const STUCK_ERROR_CHARS: i32 = 200;

/// A delivery that is not done and not being worked on now.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StuckDelivery {
    /// Source name.
    pub source: String,
    /// Delivery id: what `replay` takes.
    pub delivery_id: String,
    /// `failed` (waiting for its next attempt), `dead`, or `processing` (its lease expired).
    pub status: String,
    /// Attempts so far.
    pub attempt: i32,
    /// When it was first received (UTC, ISO 8601).
    pub received_at: String,
    /// Seconds since then.
    pub age_secs: f64,
    /// For `failed`: when the next attempt is due (UTC, ISO 8601).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
    /// The last error, shortened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Counts rows by source and status and finds the oldest lease, row and stuck deliveries. Scans
/// the table: an operator's command, not for the hot path.
pub async fn stats(c: &impl GenericClient) -> Result<LedgerStats, Error> {
    let mut by_source: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut total = 0;
    for row in c
        .query_typed(include_str!("sql/stats_counts.sql"), &[])
        .await?
    {
        let n = row.get::<_, i64>(2).unsigned_abs();
        total += n;
        by_source
            .entry(row.get(0))
            .or_default()
            .insert(row.get(1), n);
    }
    let row = c
        .query_typed_one(include_str!("sql/stats_oldest.sql"), &[])
        .await?;
    let oldest_lease = row.get::<_, Option<String>>(0).map(|source| OldestLease {
        source,
        delivery_id: row.get(1),
        attempt: row.get(2),
        lease_until: row.get(3),
        expired: row.get(4),
        claimed_at: row.get(5),
    });
    let stuck = c
        .query_typed(
            include_str!("sql/stats_stuck.sql"),
            &[
                (&MAX_STUCK_LISTED, Type::INT8),
                (&STUCK_ERROR_CHARS, Type::INT4),
            ],
        )
        .await?
        .iter()
        .map(|r| StuckDelivery {
            source: r.get(0),
            delivery_id: r.get(1),
            status: r.get(2),
            attempt: r.get(3),
            received_at: r.get(4),
            age_secs: r.get(5),
            next_attempt_at: r.get(6),
            last_error: r.get(7),
        })
        .collect();
    Ok(LedgerStats {
        by_source,
        total,
        oldest_lease,
        oldest_received_at: row.get(6),
        oldest_age_secs: row.get(7),
        stuck,
    })
}

/// The age of the oldest waiting work, in seconds (0 when there is none).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Waiting {
    /// Since the oldest expired lease ended (the delivery is reclaimable since then).
    pub expired_lease_secs: f64,
    /// Since the oldest due failed delivery became due.
    pub due_retry_secs: f64,
}

/// Measures [`Waiting`]: two lookups in the reclaim's index, cheap enough for every run.
pub async fn waiting(c: &impl GenericClient) -> Result<Waiting, Error> {
    let row = c
        .query_typed_one(include_str!("sql/waiting.sql"), &[])
        .await?;
    Ok(Waiting {
        expired_lease_secs: row.get(0),
        due_retry_secs: row.get(1),
    })
}
