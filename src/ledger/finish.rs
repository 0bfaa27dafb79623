//! Fenced finishing: an attempt's outcome is recorded only while the row is still held by that
//! attempt and owner, so an invocation whose lease was taken over cannot overwrite the newer
//! owner's result.

use std::time::Duration;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Error, GenericClient};

use super::FENCED;

/// How long an error text may be when it is stored; longer texts are cut at a char boundary.
const MAX_ERROR_LEN: usize = 2000;

/// Identifies one attempt at one delivery, for fenced finishing.
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    /// Source name.
    pub source: &'a str,
    /// Delivery id.
    pub delivery_id: &'a str,
    /// Attempt number the claim returned.
    pub attempt: i32,
    /// The claimant's owner token.
    pub owner: &'a str,
}

impl Attempt<'_> {
    /// The fence's parameters, `$1` to `$4` of every statement fenced on an attempt: source,
    /// delivery id, attempt, owner.
    pub(crate) fn params(&self) -> [(&(dyn ToSql + Sync), Type); 4] {
        [
            (&self.source, Type::TEXT),
            (&self.delivery_id, Type::TEXT),
            (&self.attempt, Type::INT4),
            (&self.owner, Type::TEXT),
        ]
    }
}

/// The result of a fenced finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The row was still held by this attempt and now records the outcome.
    Applied,
    /// Another attempt took the row over; nothing was changed.
    Fenced,
}

/// Marks the attempt done, unless another attempt has taken the row over. Inside a transaction,
/// a fenced finish fails and so aborts it: a COMMIT that follows rolls back what the processor
/// wrote.
pub async fn finish_done(c: &impl GenericClient, at: &Attempt<'_>) -> Result<Finish, Error> {
    finish(c, at, "done", None, None).await
}

/// Marks the attempt failed with `error`, due again after `retry_in`, unless fenced.
pub async fn finish_failed(
    c: &impl GenericClient,
    at: &Attempt<'_>,
    error: &str,
    retry_in: Duration,
) -> Result<Finish, Error> {
    let error = truncate(error);
    finish(c, at, "failed", Some(error), Some(retry_in.as_secs_f64())).await
}

/// Marks the attempt dead with `error` (the payload stays for a replay), unless fenced.
pub async fn finish_dead(
    c: &impl GenericClient,
    at: &Attempt<'_>,
    error: &str,
) -> Result<Finish, Error> {
    finish(c, at, "dead", Some(truncate(error)), None).await
}

/// One call of `hookclaim_finish`; its fenced error (SQLSTATE HC002) is [`Finish::Fenced`].
async fn finish(
    c: &impl GenericClient,
    at: &Attempt<'_>,
    outcome: &str,
    error: Option<&str>,
    retry_in_secs: Option<f64>,
) -> Result<Finish, Error> {
    let [source, id, attempt, owner] = at.params();
    let params: [(&(dyn ToSql + Sync), Type); 7] = [
        source,
        id,
        attempt,
        owner,
        (&outcome, Type::TEXT),
        (&error, Type::TEXT),
        (&retry_in_secs, Type::FLOAT8),
    ];
    match c.query_typed(include_str!("sql/finish.sql"), &params).await {
        Ok(_) => Ok(Finish::Applied),
        Err(e) if e.code().map(|c| c.code()) == Some(FENCED) => Ok(Finish::Fenced),
        Err(e) => Err(e),
    }
}

fn truncate(error: &str) -> &str {
    if error.len() <= MAX_ERROR_LEN {
        return error;
    }
    let mut end = MAX_ERROR_LEN;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    &error[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_error_is_cut_at_a_char_boundary() {
        assert_eq!(truncate("short"), "short");
        let long = "é".repeat(MAX_ERROR_LEN);
        let cut = truncate(&long);
        assert!(cut.len() <= MAX_ERROR_LEN && cut.len() >= MAX_ERROR_LEN - 1);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
