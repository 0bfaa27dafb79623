//! Which destinations have taken a delivery (`hookclaim_destination_progress`): read once per
//! attempt, and written as each destination answers, fenced on the claim.
//!
//! Both statements run on the connection outside the delivery's transaction, so a record
//! commits at once and stays whatever the delivery concludes (it may still fail at the next
//! destination). The rows go when their delivery is purged (the foreign key's cascade).

use std::collections::BTreeSet;

use tokio_postgres::types::Type;
use tokio_postgres::{Client, Error};

use crate::ledger::Attempt;

/// The destinations recorded for one delivery.
const RECORDED: &str = "SELECT destination FROM hookclaim_destination_progress
 WHERE source = $1 AND delivery_id = $2";

/// Records one destination, but only while the delivery is still held by this attempt and
/// owner: a zombie whose lease was taken over records nothing. `FOR SHARE` makes a concurrent
/// takeover either wait for this insert or be seen by it, so the fence cannot be passed on a
/// row version that a takeover has already replaced.
const RECORD: &str = "INSERT INTO hookclaim_destination_progress
    (source, delivery_id, destination, attempt, detail)
SELECT d.source, d.delivery_id, $5, d.attempt, $6
  FROM hookclaim_deliveries d
 WHERE d.source = $1 AND d.delivery_id = $2 AND d.attempt = $3 AND d.lease_owner = $4
   AND d.status = 'processing'
   FOR SHARE
ON CONFLICT (source, delivery_id, destination) DO NOTHING";

/// The names of the destinations that have taken delivery `source`/`delivery_id`.
pub(super) async fn recorded(
    on: &Client,
    source: &str,
    delivery_id: &str,
) -> Result<BTreeSet<String>, Error> {
    let rows = on.query_typed(
        RECORDED,
        &[(&source, Type::TEXT), (&delivery_id, Type::TEXT)],
    )
    .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Records that `destination` took the delivery `at` holds, with what it answered. False when
/// the claim is no longer this attempt's: nothing was recorded.
pub(super) async fn record(
    on: &Client,
    at: &Attempt<'_>,
    destination: &str,
    detail: Option<&str>,
) -> Result<bool, Error> {
    let n = on.execute_typed(
        RECORD,
        &[
            (&at.source, Type::TEXT),
            (&at.delivery_id, Type::TEXT),
            (&at.attempt, Type::INT4),
            (&at.owner, Type::TEXT),
            (&destination, Type::TEXT),
            (&detail, Type::TEXT),
        ],
    )
    .await?;
    Ok(n == 1)
}
