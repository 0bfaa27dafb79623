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
    let row = finish(c, at, "done", None, None, None, None).await?;
    Ok(if row.is_some() { Finish::Applied } else { Finish::Fenced })
}

/// Marks the attempt failed with `error`, due again after `retry_in` whatever its attempts, unless
/// fenced: for hookclaim's own tests, which decide the retry themselves.
#[cfg(feature = "internals")]
pub async fn finish_failed(
    c: &impl GenericClient,
    at: &Attempt<'_>,
    error: &str,
    retry_in: Duration,
) -> Result<Finish, Error> {
    let retry_in = Some(retry_in.as_secs_f64());
    let row = finish(c, at, "failed", Some(truncate(error)), retry_in, None, None).await?;
    Ok(if row.is_some() { Finish::Applied } else { Finish::Fenced })
}

/// Marks the attempt dead with `error` (the payload stays for a replay), unless fenced.
pub async fn finish_dead(
    c: &impl GenericClient,
    at: &Attempt<'_>,
    error: &str,
) -> Result<Finish, Error> {
    let row = finish(c, at, "dead", Some(truncate(error)), None, None, None).await?;
    Ok(if row.is_some() { Finish::Applied } else { Finish::Fenced })
}

/// How a failed attempt is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Again {
    /// A counted failure, due again after `retry_in`; dead instead once the delivery's attempts,
    /// but the deferred ones, reach `max_attempts`.
    Failed {
        /// When it is due again.
        retry_in: Duration,
        /// The attempt cap.
        max_attempts: i32,
    },
    /// A throttling downstream's deferral, due again after `retry_in` and not counted toward
    /// the attempt cap; dead instead when that would fall past `max_age` from the delivery's
    /// first receipt.
    Deferred {
        /// When it is due again.
        retry_in: Duration,
        /// The delivery's age bound.
        max_age: Duration,
    },
}

/// What the finish of a failed attempt recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Made dead (out of attempts, or past its age bound) rather than due again.
    pub dead: bool,
    /// The error recorded as the row's `last_error`.
    pub error: String,
}

/// Records a failed attempt as `again` says, unless fenced (`None`).
pub async fn finish_again(
    c: &impl GenericClient,
    at: &Attempt<'_>,
    error: &str,
    again: Again,
) -> Result<Option<Recorded>, Error> {
    let error = truncate(error);
    let row = match again {
        Again::Failed {
            retry_in,
            max_attempts,
        } => {
            let retry_in = Some(retry_in.as_secs_f64());
            finish(c, at, "failed", Some(error), retry_in, Some(max_attempts), None).await?
        }
        Again::Deferred { retry_in, max_age } => {
            let retry_in = Some(retry_in.as_secs_f64());
            let max_age = Some(max_age.as_secs_f64());
            finish(c, at, "deferred", Some(error), retry_in, None, max_age).await?
        }
    };
    Ok(row.map(|row| match row.get::<_, Option<String>>(0) {
        Some(gave_up) => Recorded {
            dead: true,
            error: gave_up,
        },
        None => Recorded {
            dead: false,
            error: error.to_string(),
        },
    }))
}

/// One call of `hookclaim_finish`: the row it answers (the error it recorded when it made the
/// delivery dead instead, or NULL), or `None` for its fenced error (SQLSTATE HC002).
async fn finish(
    c: &impl GenericClient,
    at: &Attempt<'_>,
    outcome: &str,
    error: Option<&str>,
    retry_in_secs: Option<f64>,
    max_attempts: Option<i32>,
    max_age_secs: Option<f64>,
) -> Result<Option<tokio_postgres::Row>, Error> {
    let [source, id, attempt, owner] = at.params();
    let params: [(&(dyn ToSql + Sync), Type); 9] = [
        source,
        id,
        attempt,
        owner,
        (&outcome, Type::TEXT),
        (&error, Type::TEXT),
        (&retry_in_secs, Type::FLOAT8),
        (&max_attempts, Type::INT4),
        (&max_age_secs, Type::FLOAT8),
    ];
    match c.query_typed(include_str!("sql/finish.sql"), &params).await {
        Ok(mut rows) => Ok(rows.pop()),
        Err(e) if e.code().map(|c| c.code()) == Some(FENCED) => Ok(None),
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
