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

/// The names of the destinations that have taken delivery `source`/`delivery_id`.
pub(super) async fn recorded(
    on: &Client,
    source: &str,
    delivery_id: &str,
) -> Result<BTreeSet<String>, Error> {
    let rows = on.query_typed(
        include_str!("sql/recorded.sql"),
        &[(&source, Type::TEXT), (&delivery_id, Type::TEXT)],
    )
    .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Records that `destination` took the delivery `at` holds, with what it answered. False when
/// the claim is no longer this attempt's: nothing was recorded (`sql/record.sql` says how the
/// fence holds against a concurrent takeover).
pub(super) async fn record(
    on: &Client,
    at: &Attempt<'_>,
    destination: &str,
    detail: Option<&str>,
) -> Result<bool, Error> {
    let n = on.execute_typed(
        include_str!("sql/record.sql"),
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
