//! The delivery ledger in PostgreSQL, one job per file: the claim, the fenced finishes, the
//! retention reclaim, operators' replays, purge and trim, and the reads for reports.
//!
//! The schema and the claim itself are SQL (`migrations/0001_ledger.sql`); every statement the
//! ledger sends is a whole `.sql` file in `sql/`, run as an unnamed statement in one round trip,
//! which also works through a transaction pooler. Each function takes a
//! [`tokio_postgres::GenericClient`], so production passes its connection and tests a
//! transaction; [`Ledger`] runs the same operations on the environment's connection, each under
//! the statement deadline with its one reconnect.

mod claim;
mod finish;
mod ops;
mod purge;
mod reclaim;
mod replay;
mod stats;

use std::collections::BTreeMap;

use tokio_postgres::types::Json;
use tokio_postgres::Row;

pub use claim::{Claim, Claimant, NewDelivery};
pub use finish::{finish_done, Again, Attempt, Finish, Recorded};
pub use ops::Ledger;
pub use purge::Trimmed;
pub use reclaim::{ReclaimCursor, Reclaimed};
pub use replay::{ReplayCursor, ReplayFilter};
pub use stats::{DeliveryState, LedgerStats, Waiting};
/// Each operation as a function of a client, for hookclaim's own tests, which run them on a
/// connection or transaction of their own; the functions use [`Ledger`].
#[cfg(feature = "internals")]
pub use {
    claim::{claim, held},
    finish::{finish_again, finish_dead, finish_failed},
    purge::{
        count_dead_trimmable, count_purgeable, count_trimmable, purge_batch, trim_batch,
        trim_dead_batch,
    },
    reclaim::{count_reclaimable, reclaim_next},
    replay::{count_replayable, replay_page, take_for_replay},
    stats::{state, stats, waiting},
};

/// A new owner token, unique per invocation (128 random bits): what its claims are held by and
/// its finishes fenced on.
pub fn owner_token() -> String {
    format!("{:032x}", fastrand::u128(..))
}

/// SQLSTATE of a finish whose attempt no longer holds its row (`hookclaim_finish`).
const FENCED: &str = "HC002";

/// A stored delivery as the retention function re-drives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDelivery {
    /// Source name.
    pub source: String,
    /// Delivery id.
    pub delivery_id: String,
    /// Attempt number this claim holds.
    pub attempt: i32,
    /// Event type, where known.
    pub event_type: Option<String>,
    /// The raw body; `None` once trimmed.
    pub payload: Option<Vec<u8>>,
    /// The kept headers.
    pub headers: BTreeMap<String, String>,
    /// The last error recorded by an earlier attempt.
    pub last_error: Option<String>,
    /// Not taken over but made dead: its attempts kept dying unrecorded (see
    /// [`Claimant::max_attempts`]). Nothing is to run.
    pub gave_up: bool,
}

impl StoredDelivery {
    /// From a row of `reclaim.sql`, `take_for_replay.sql` or `held.sql`.
    fn from_row(row: &Row) -> Self {
        let headers: Json<BTreeMap<String, String>> = row.get("headers");
        StoredDelivery {
            source: row.get("source"),
            delivery_id: row.get("delivery_id"),
            attempt: row.get("attempt"),
            event_type: row.get("event_type"),
            payload: row.get("payload"),
            headers: headers.0,
            last_error: row.get("last_error"),
            gave_up: row.get::<_, &str>("status") == "dead",
        }
    }
}
