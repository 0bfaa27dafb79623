//! The delivery ledger in PostgreSQL: the atomic claim, fenced finishing, and the reads and
//! batched deletes the retention function needs.
//!
//! Every statement carries its parameter types and runs in one round trip. The ones every
//! delivery runs ([`HOT`]) are prepared once per direct connection; behind a transaction pooler,
//! and for everything else, they run as unnamed statements (see [`crate::connection`]).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use tokio_postgres::types::{Json, ToSql, Type};
use tokio_postgres::{Error, Row};

use crate::connection::{self, Hot, Runner};
use crate::db::{DbError, Session};
use crate::verify::IdOrigin;

/// How long an error text may be when it is stored; longer texts are cut at a char boundary.
const MAX_ERROR_LEN: usize = 2000;

/// What a claim stores with the row so the delivery can be re-driven without the sender.
#[derive(Debug, Clone)]
pub struct NewDelivery<'a> {
    /// Configured source name.
    pub source: &'a str,
    /// The sender's delivery id.
    pub delivery_id: &'a str,
    /// Where the id came from.
    pub id_origin: IdOrigin,
    /// Event type, where known.
    pub event_type: Option<&'a str>,
    /// The raw body exactly as signed.
    pub payload: &'a [u8],
    /// SHA-256 of `payload`.
    pub payload_sha256: &'a [u8],
    /// The request headers worth keeping (signature headers and ids), lower-case names.
    pub headers: &'a BTreeMap<String, String>,
    /// Its key is kept past its payload (`KEY_RETENTION_DAYS`): its source's signatures do not
    /// expire.
    pub long_key_retention: bool,
}

/// The claimant: who asks, and how long its claim may last.
#[derive(Debug, Clone, Copy)]
pub struct Claimant<'a> {
    /// Unique per invocation; finishing is fenced on it.
    pub owner: &'a str,
    /// Lease length from the database's `now()`: the invocation's remaining time plus a margin.
    pub lease: Duration,
    /// An expired lease at this attempt or later is not taken over but made dead: every attempt
    /// so far died without recording anything (a poison payload that kills the process), so
    /// the cap holds even where no failure could be written.
    pub max_attempts: i32,
}

/// The error recorded on a delivery given up because its attempts kept dying unrecorded.
macro_rules! gave_up_unfinished {
    ($d:literal) => {
        concat!(
            "'gave up after ' || ",
            $d,
            ".attempt || ' attempts: processing never finished (the invocation died each time)'"
        )
    };
}

/// Whether an existing row's expired lease is at the attempt cap (`$n` holds the cap).
macro_rules! at_cap {
    ($d:literal, $n:literal) => {
        concat!("(", $d, ".status = 'processing' AND ", $d, ".attempt >= ", $n, ")")
    };
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This invocation owns the delivery at this attempt. With `finish_now`, it is already done.
    Claimed {
        /// 1 for a new delivery, previous attempt + 1 for a takeover.
        attempt: i32,
    },
    /// Already processed; a duplicate.
    Done {
        /// Whether the stored payload hash equals this request's.
        same_payload: bool,
    },
    /// Already given up on (permanent failure or attempts exhausted); a duplicate.
    Dead {
        /// Whether the stored payload hash equals this request's.
        same_payload: bool,
    },
    /// Another invocation holds a live lease (or committed its claim while this one ran).
    InProgress,
    /// This claim found an expired lease at the attempt cap and made the delivery dead instead
    /// of taking it over: every attempt so far died without recording an outcome.
    GaveUp,
    /// A failed attempt whose next try is not due yet.
    RetryLater {
        /// When the next attempt becomes due.
        next_attempt_at: SystemTime,
    },
}

/// The condition under which an existing row may be taken over, as the retention reclaim and its
/// count test it. The claim function writes the same rule in its own SQL (migration 10's
/// `hookclaim_claim`); `tests/it/claim.rs` arranges each state a row can be found in for both and
/// checks that they take over, or give up on, the same rows in the same way.
macro_rules! takeover_condition {
    ($d:literal) => {
        concat!(
            "((",
            $d,
            ".status = 'processing' AND ",
            $d,
            ".lease_until <= now())",
            " OR (",
            $d,
            ".status = 'failed' AND ",
            $d,
            ".next_attempt_at <= now()))"
        )
    };
}

/// Insert, take over, or only read, in one statement and one round trip.
///
/// The statement's answer is the row's stored `answer` if the read finds one, else the claim
/// function's:
/// - The scalar subquery reads the key. A duplicate of a done or dead row claimed by someone
///   else is answered from that one index lookup, in plain SQL, whatever its payload (some
///   senders count their attempts in the body): the row's stored answer, its payload hash (and a
///   marker if dead), which the client compares with its own ([`Claim::parse`]). No row lock, no
///   transaction id, no WAL, no function call. The answer counts only on a row with
///   `completed_at`, which every finishing statement of every release sets and every reopening
///   one clears (`migrations/0010_stored_answer.sql`).
/// - `coalesce` evaluates its second argument only when the first is NULL, so any other key (none
///   yet, a lease, a retry, a row finished without a stored answer, this owner's own earlier
///   try) goes to `hookclaim_claim_unanswered` (migration 10, where its SQL and the reasons for
///   each path are). That function inserts a new key and claims it at attempt 1, or hands the
///   key to `hookclaim_claim` (`migrations/0005_claim_function.sql`, as amended by migration
///   10), whose general statement lets the unique key decide: a row is taken over by
///   `ON CONFLICT DO UPDATE` only if the takeover condition (the same as [`RECLAIM_NEXT`]'s)
///   still holds on its latest version, so of several claimants racing for a new key or an
///   expired lease exactly one wins, and an expired lease at the attempt cap is made dead
///   instead.
///
/// PostgreSQL's work per execution grows with each parameter it binds and each expression it sets
/// up, used or not, so the statement binds only what the read needs (`$1`, `$2`, `$4`), the
/// payload, and, in `$5`, everything else as one text that only the function parses
/// ([`new_row_literal`]).
///
/// `lease_owner <> $4` is what recognises this owner's own earlier try: a store-only claim
/// retried after its answer was lost finds its row done under its own owner and must be told
/// `Claimed` again. An owner that has claimed nothing yet cannot have an earlier try, so its
/// first try runs [`CLAIM_FIRST`] instead, which binds one parameter and checks one condition
/// less.
const CLAIM: &str = "SELECT coalesce(
         (SELECT f.answer FROM hookclaim_deliveries AS f
           WHERE f.source = $1 AND f.delivery_id = $2 AND f.completed_at IS NOT NULL
             AND f.lease_owner <> $4),
         hookclaim_claim_unanswered($1, $2, $3, $5))";

/// [`CLAIM`]'s parameter types, in the order it binds them.
const CLAIM_TYPES: [Type; 5] = [
    Type::TEXT,  // source
    Type::TEXT,  // delivery id
    Type::BYTEA, // payload
    Type::TEXT,  // owner
    Type::TEXT,  // the rest: a `hookclaim_new_claim` literal
];

/// [`CLAIM`] for an owner's first try, when the owner token is new: no row can be its own.
const CLAIM_FIRST: &str = "SELECT coalesce(
         (SELECT f.answer FROM hookclaim_deliveries AS f
           WHERE f.source = $1 AND f.delivery_id = $2 AND f.completed_at IS NOT NULL),
         hookclaim_claim_unanswered($1, $2, $3, $4))";

/// [`CLAIM_FIRST`]'s parameter types, in the order it binds them.
const CLAIM_FIRST_TYPES: [Type; 4] = [
    Type::TEXT,  // source
    Type::TEXT,  // delivery id
    Type::BYTEA, // payload
    Type::TEXT,  // the rest: a `hookclaim_new_claim` literal
];

/// Everything the claim function needs besides the key and the payload, as a literal of the
/// composite type `hookclaim_new_claim` (migration 10):
/// `(owner,payload_sha256,id_origin,finish_now,lease_secs,event_type,headers,max_attempts,long_key)`.
///
/// Every text field is quoted, with `"` and `\` escaped, so any value reads back exactly; an
/// absent event type is an empty field, which PostgreSQL reads as NULL; the hash is in bytea's
/// hex form.
pub fn new_row_literal(
    delivery: &NewDelivery<'_>,
    claimant: Claimant<'_>,
    finish_now: bool,
) -> String {
    fn quoted(out: &mut String, text: &str) {
        out.push('"');
        for c in text.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    }
    let flag = |b: bool| if b { 't' } else { 'f' };
    // A map of strings always serialises.
    let headers = serde_json::to_string(delivery.headers).unwrap_or_default();
    let mut out = String::with_capacity(headers.len() + claimant.owner.len() + 140);
    out.push('(');
    quoted(&mut out, claimant.owner);
    out.push_str(",\"\\\\x");
    out.push_str(&hex::encode(delivery.payload_sha256));
    out.push_str("\",");
    quoted(&mut out, delivery.id_origin.as_str());
    out.push(',');
    out.push(flag(finish_now));
    out.push(',');
    out.push_str(&claimant.lease.as_secs_f64().to_string());
    out.push(',');
    if let Some(event_type) = delivery.event_type {
        quoted(&mut out, event_type);
    }
    out.push(',');
    quoted(&mut out, &headers);
    out.push(',');
    out.push_str(&claimant.max_attempts.to_string());
    out.push(',');
    out.push(flag(delivery.long_key_retention));
    out.push(')');
    out
}

/// The length of a SHA-256, the stored answer of a done row; a dead row's has one more byte.
const HASH_LEN: usize = 32;

/// A dead row's stored answer: its payload hash `$hash` and a zero byte ([`Claim::parse`]).
macro_rules! dead_answer {
    ($hash:literal) => {
        concat!($hash, " || E'\\\\x00'::bytea")
    };
}

impl Claim {
    /// Reads the claim statement's answer, given this request's payload hash:
    /// - a finished row's stored answer: its payload hash ([`Claim::Done`]) or the hash and a
    ///   zero byte ([`Claim::Dead`]), compared with `payload_sha256`;
    /// - else the claim function's ASCII word with its argument (migration 10 lists them), all
    ///   shorter than a hash.
    ///
    /// `None` for anything else, which the caller treats as busy rather than trusted.
    pub(crate) fn parse(answer: &[u8], payload_sha256: &[u8]) -> Option<Claim> {
        match answer.len() {
            HASH_LEN => {
                return Some(Claim::Done {
                    same_payload: answer == payload_sha256,
                })
            }
            n if n == HASH_LEN + 1 && answer[HASH_LEN] == 0 => {
                return Some(Claim::Dead {
                    same_payload: &answer[..HASH_LEN] == payload_sha256,
                })
            }
            n if n >= HASH_LEN => return None,
            _ => {}
        }
        let answer = std::str::from_utf8(answer).ok()?;
        let (word, argument) = match answer.split_once(' ') {
            Some((word, argument)) => (word, Some(argument)),
            None => (answer, None),
        };
        Some(match (word, argument) {
            ("claimed", Some(n)) => Claim::Claimed {
                attempt: n.parse().ok()?,
            },
            ("in_progress", None) => Claim::InProgress,
            ("gave_up", None) => Claim::GaveUp,
            ("retry_at", Some(epoch)) => {
                let secs: f64 = epoch.parse().ok()?;
                let since_epoch = Duration::try_from_secs_f64(secs).ok()?;
                Claim::RetryLater {
                    next_attempt_at: SystemTime::UNIX_EPOCH + since_epoch,
                }
            }
            _ => return None,
        })
    }
}

/// Whether the claimant's owner token may already have claimed this delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// A token made for this claim that has claimed nothing yet (the webhook makes a random one
    /// per request): no row can be its own earlier try.
    New,
    /// A token that may have claimed before: a retry of a claim whose answer was lost, or a
    /// caller reusing a token. Its own earlier claim is recognised and answered `Claimed`.
    MayHaveClaimed,
}

/// Claims `delivery` for `claimant` in one statement; see [`Claim`] for the answers.
///
/// Idempotent for the same owner: if the first try committed but its answer was lost, a retry
/// with [`Owner::MayHaveClaimed`] finds the row held by the same owner and answers `Claimed`
/// again with the same attempt.
pub async fn claim(
    on: &impl Runner,
    delivery: &NewDelivery<'_>,
    claimant: Claimant<'_>,
    finish_now: bool,
    owner: Owner,
) -> Result<Claim, Error> {
    let rest = new_row_literal(delivery, claimant, finish_now);
    let key_and_payload: [&(dyn ToSql + Sync); 3] =
        [&delivery.source, &delivery.delivery_id, &delivery.payload];
    let [source, id, payload] = key_and_payload;
    let rows = match owner {
        Owner::New => {
            let params = typed([source, id, payload, &rest], &CLAIM_FIRST_TYPES);
            connection::query(on, CLAIM_FIRST, &params).await?
        }
        Owner::MayHaveClaimed => {
            let params = typed([source, id, payload, &claimant.owner, &rest], &CLAIM_TYPES);
            connection::query(on, CLAIM, &params).await?
        }
    };
    let answer = rows
        .first()
        .and_then(|row| row.get::<_, Option<&[u8]>>(0))
        .and_then(|answer| Claim::parse(answer, delivery.payload_sha256))
        .unwrap_or(Claim::InProgress);
    if answer != Claim::InProgress || owner == Owner::New {
        return Ok(answer);
    }
    // "In progress" may be this claimant's own earlier try: a claim retried because its answer
    // was lost, whose first try committed after this statement's snapshot was taken. Only a
    // fresh statement sees that commit.
    let holder = on
        .client()
        .query_typed_opt(
            CURRENT_HOLDER,
            &[
                (&delivery.source, Type::TEXT),
                (&delivery.delivery_id, Type::TEXT),
            ],
        )
        .await?;
    Ok(match holder {
        Some(row) if row.get::<_, Option<&str>>(0) == Some(claimant.owner) => Claim::Claimed {
            attempt: row.get(1),
        },
        _ => Claim::InProgress,
    })
}

/// Pairs each value with its parameter type, in order.
fn typed<'a, const N: usize>(
    values: [&'a (dyn ToSql + Sync); N],
    types: &[Type; N],
) -> [(&'a (dyn ToSql + Sync), Type); N] {
    std::array::from_fn(|i| (values[i], types[i].clone()))
}

/// Who holds a delivery now, and at which attempt: for recognising a claimant's own claim.
const CURRENT_HOLDER: &str = "SELECT lease_owner, attempt FROM hookclaim_deliveries
 WHERE source = $1 AND delivery_id = $2 AND status IN ('processing', 'done')";

/// The result of a fenced finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The row was still held by this attempt and now records the outcome.
    Applied,
    /// Another attempt took the row over; nothing was changed.
    Fenced,
}

impl Finish {
    fn from_count(n: u64) -> Self {
        if n == 1 {
            Finish::Applied
        } else {
            Finish::Fenced
        }
    }
}

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

/// The fence every finish carries: the row must still be held by this attempt and owner.
macro_rules! fence {
    () => {
        "source = $1 AND delivery_id = $2 AND attempt = $3 AND lease_owner = $4
   AND status = 'processing'"
    };
}

macro_rules! finish_done {
    () => {
        concat!(
            "UPDATE hookclaim_deliveries
    SET status = 'done', lease_until = NULL, next_attempt_at = NULL, last_error = NULL,
        completed_at = now(), answer = payload_sha256, updated_at = now()
  WHERE ",
            fence!()
        )
    };
}

const FINISH_DONE: &str = finish_done!();

/// [`FINISH_DONE`] for the end of a processing transaction: when the fence matches no row it
/// fails (division by zero, SQLSTATE 22012) and so aborts the transaction, which turns the
/// COMMIT sent in the same batch into a rollback. See [`is_fenced`].
pub(crate) const FINISH_DONE_OR_FAIL: &str = concat!(
    "WITH finished AS (",
    finish_done!(),
    " RETURNING 1) SELECT 1 / count(*) FROM finished"
);

/// Parameter types of the fence ([`attempt_params`]): source, delivery id, attempt, owner; the
/// failed and dead finishes add the error (and the delay).
const ATTEMPT_TYPES: [Type; 4] = [Type::TEXT, Type::TEXT, Type::INT4, Type::TEXT];

/// The statements a delivery runs, with their parameter types in the order they are bound:
/// prepared once per direct connection.
pub const HOT: &[Hot] = &[
    (CLAIM_FIRST, &CLAIM_FIRST_TYPES),
    (CLAIM, &CLAIM_TYPES),
    (FINISH_DONE, &ATTEMPT_TYPES),
    (FINISH_DONE_OR_FAIL, &ATTEMPT_TYPES),
    (
        FINISH_FAILED,
        &[
            Type::TEXT,
            Type::TEXT,
            Type::INT4,
            Type::TEXT,
            Type::TEXT,
            Type::FLOAT8,
        ],
    ),
    (
        FINISH_DEAD,
        &[Type::TEXT, Type::TEXT, Type::INT4, Type::TEXT, Type::TEXT],
    ),
];

/// Whether `e`, returned by [`FINISH_DONE_OR_FAIL`], means "fenced".
pub(crate) fn is_fenced(e: &Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::DIVISION_BY_ZERO)
}

const FINISH_FAILED: &str = concat!(
    "UPDATE hookclaim_deliveries
    SET status = 'failed', lease_until = NULL, last_error = $5,
        next_attempt_at = now() + make_interval(secs => $6), answer = NULL, updated_at = now()
  WHERE ",
    fence!()
);

const FINISH_DEAD: &str = concat!(
    "UPDATE hookclaim_deliveries
    SET status = 'dead', lease_until = NULL, next_attempt_at = NULL, last_error = $5,
        completed_at = now(), answer = ",
    dead_answer!("payload_sha256"),
    ", updated_at = now()
  WHERE ",
    fence!()
);

pub(crate) fn attempt_params<'a>(at: &'a Attempt<'a>) -> [(&'a (dyn ToSql + Sync), Type); 4] {
    [
        (&at.source, Type::TEXT),
        (&at.delivery_id, Type::TEXT),
        (&at.attempt, Type::INT4),
        (&at.owner, Type::TEXT),
    ]
}

/// Marks the attempt done, unless another attempt has taken the row over.
pub async fn finish_done(on: &impl Runner, at: &Attempt<'_>) -> Result<Finish, Error> {
    let n = connection::execute(on, FINISH_DONE, &attempt_params(at)).await?;
    Ok(Finish::from_count(n))
}

/// Marks the attempt failed with `error`, due again after `retry_in`, unless fenced.
pub async fn finish_failed(
    on: &impl Runner,
    at: &Attempt<'_>,
    error: &str,
    retry_in: Duration,
) -> Result<Finish, Error> {
    let error = truncate(error);
    let secs = retry_in.as_secs_f64();
    let [a, b, c, d] = attempt_params(at);
    let n = connection::execute(
        on,
        FINISH_FAILED,
        &[a, b, c, d, (&error, Type::TEXT), (&secs, Type::FLOAT8)],
    )
    .await?;
    Ok(Finish::from_count(n))
}

/// Marks the attempt dead with `error` (kept for replay), unless fenced.
pub async fn finish_dead(on: &impl Runner, at: &Attempt<'_>, error: &str) -> Result<Finish, Error> {
    let error = truncate(error);
    let [a, b, c, d] = attempt_params(at);
    let n = connection::execute(on, FINISH_DEAD, &[a, b, c, d, (&error, Type::TEXT)]).await?;
    Ok(Finish::from_count(n))
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

const TAKE_ONE: &str = "UPDATE hookclaim_deliveries AS d
    SET status = 'processing', attempt = d.attempt + 1, lease_owner = $3,
        lease_until = now() + make_interval(secs => $4), next_attempt_at = NULL,
        completed_at = NULL, answer = NULL, updated_at = now()
  WHERE d.source = $1 AND d.delivery_id = $2
    AND d.payload IS NOT NULL
    AND (d.status IN ('failed', 'dead')
         OR (d.status = 'processing' AND d.lease_until <= now())
         OR (d.status = 'done' AND $5))
RETURNING d.source, d.delivery_id, d.attempt, d.event_type, d.payload, d.headers, d.last_error,
          d.status";

/// Claims one named delivery for an operator's replay: a failed, dead or expired row, or a done
/// row when `force` is set. Never takes a row under a live lease or without its payload.
pub async fn take_for_replay(
    on: &impl Runner,
    source: &str,
    delivery_id: &str,
    claimant: Claimant<'_>,
    force: bool,
) -> Result<Option<StoredDelivery>, Error> {
    let client = on.client();
    let lease_secs = claimant.lease.as_secs_f64();
    let row = client
        .query_typed_opt(
            TAKE_ONE,
            &[
                (&source, Type::TEXT),
                (&delivery_id, Type::TEXT),
                (&claimant.owner, Type::TEXT),
                (&lease_secs, Type::FLOAT8),
                (&force, Type::BOOL),
            ],
        )
        .await?;
    Ok(row.as_ref().map(StoredDelivery::from_row))
}

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

/// Reads one row's state (not on the hot path).
pub async fn state(
    on: &impl Runner,
    source: &str,
    delivery_id: &str,
) -> Result<Option<DeliveryState>, Error> {
    let client = on.client();
    let row = client
        .query_typed_opt(
            "SELECT status, attempt, last_error, payload IS NOT NULL
               FROM hookclaim_deliveries WHERE source = $1 AND delivery_id = $2",
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

const RECLAIM_NEXT: &str = concat!(
    "UPDATE hookclaim_deliveries AS d
    SET status = CASE WHEN ",
    at_cap!("d", "$3"),
    " THEN 'dead' ELSE 'processing' END,
        attempt = CASE WHEN ",
    at_cap!("d", "$3"),
    " THEN d.attempt ELSE d.attempt + 1 END,
        lease_owner = $1,
        lease_until = CASE WHEN ",
    at_cap!("d", "$3"),
    " THEN NULL ELSE now() + make_interval(secs => $2) END,
        next_attempt_at = NULL,
        last_error = CASE WHEN ",
    at_cap!("d", "$3"),
    " THEN ",
    gave_up_unfinished!("d"),
    " ELSE d.last_error END,
        completed_at = CASE WHEN ",
    at_cap!("d", "$3"),
    " THEN now() ELSE d.completed_at END,
        answer = CASE WHEN ",
    at_cap!("d", "$3"),
    " THEN ",
    dead_answer!("d.payload_sha256"),
    " END,
        updated_at = now()
  WHERE (d.source, d.delivery_id) = (
        SELECT source, delivery_id FROM hookclaim_deliveries AS c
         WHERE ",
    takeover_condition!("c"),
    "
           AND c.lease_owner IS DISTINCT FROM $1
         LIMIT 1
           FOR UPDATE SKIP LOCKED)
    AND ",
    takeover_condition!("d"),
    "
    AND d.lease_owner IS DISTINCT FROM $1
RETURNING d.source, d.delivery_id, d.attempt, d.event_type, d.payload, d.headers, d.last_error,
          d.status"
);

/// Takes over one expired lease or due retry, if any, under the same rule as [`claim`], for a
/// retention run that uses one owner token for all its reclaims. Rows locked by a concurrent
/// claimant are skipped rather than waited for; rows this owner already holds or held are
/// skipped too, so each due delivery gets at most one attempt per run however short its
/// backoff, and a poison delivery cannot spin through all its attempts in one run.
pub async fn reclaim_next(
    on: &impl Runner,
    claimant: Claimant<'_>,
) -> Result<Option<StoredDelivery>, Error> {
    let client = on.client();
    let lease_secs = claimant.lease.as_secs_f64();
    let row = client
        .query_typed_opt(
            RECLAIM_NEXT,
            &[
                (&claimant.owner, Type::TEXT),
                (&lease_secs, Type::FLOAT8),
                (&claimant.max_attempts, Type::INT4),
            ],
        )
        .await?;
    Ok(row.as_ref().map(StoredDelivery::from_row))
}

/// Deletes one batch of finished rows, oldest first.
///
/// Rows are addressed by `ctid`: the inner SELECT walks the partial `completed_at` index once and
/// locks what it picks, so the DELETE reaches each tuple directly (a TID scan) instead of a second
/// descent of the text primary key per row. The lock guarantees the picked tuples cannot move or
/// change before the DELETE in the same statement. A row another transaction updated and
/// committed after this statement's snapshot is locked at its newest version, whose new `ctid`
/// the TID scan cannot see under that snapshot, so such a row is left as it is for a later batch.
/// `SKIP LOCKED` steps over rows a concurrent claim holds (a redelivery of an old key), so the
/// purge never waits on a claim, and the batch is its own short autocommit statement, so a claim
/// never waits on the purge for longer than that.
macro_rules! purge_batch {
    ($kind:literal) => {
        concat!(
            "DELETE FROM hookclaim_deliveries
 WHERE ctid = ANY(ARRAY(
       SELECT ctid FROM hookclaim_deliveries
        WHERE status IN ('done', 'dead') AND ",
            $kind,
            "
          AND completed_at < now() - make_interval(secs => $1)
        ORDER BY completed_at
        LIMIT $2
          FOR UPDATE SKIP LOCKED))"
        )
    };
}

const PURGE_BATCH: [&str; 2] = [
    purge_batch!("NOT key_outlives_payload"),
    purge_batch!("key_outlives_payload"),
];

/// Which finished rows a purge or trim statement walks. Each kind has its own index, so a walk
/// never steps over rows of the other kind that are not due yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRetention {
    /// The key goes with the row at `RETENTION_DAYS`.
    WithPayload,
    /// The key is kept to `KEY_RETENTION_DAYS`; the payload goes at `RETENTION_DAYS`.
    Long,
}

impl KeyRetention {
    /// This kind's variant of a statement written for both: a partial index's predicate must be
    /// literal in the statement for the planner to use the index.
    fn pick(self, statements: [&'static str; 2]) -> &'static str {
        match self {
            KeyRetention::WithPayload => statements[0],
            KeyRetention::Long => statements[1],
        }
    }
}

/// Deletes up to `limit` `done`/`dead` rows of `kind` that completed more than `older_than` ago;
/// returns how many it deleted. Fewer than `limit` means nothing more was purgeable (or the rest
/// was locked).
pub async fn purge_batch(
    on: &impl Runner,
    kind: KeyRetention,
    older_than: Duration,
    limit: i64,
) -> Result<u64, Error> {
    let client = on.client();
    let secs = older_than.as_secs_f64();
    client
        .execute_typed(
            kind.pick(PURGE_BATCH),
            &[(&secs, Type::FLOAT8), (&limit, Type::INT8)],
        )
        .await
}

/// The newest `completed_at` of a `done` row whose payload is already dropped, among rows older
/// than the trim horizon `$1`: where a run's trim starts. Payloads are dropped oldest first, so
/// everything before it is trimmed already (but for a row a concurrent trim held and then rolled
/// back, which keeps its payload until it is purged). A backward walk of the purge index from
/// the horizon finds it after passing the rows this run is about to trim.
macro_rules! trimmed_up_to {
    ($kind:literal) => {
        concat!(
            "(SELECT max(completed_at) FROM hookclaim_deliveries
              WHERE status = 'done' AND payload IS NULL AND ",
            $kind,
            "
                AND completed_at < now() - make_interval(secs => $1))"
        )
    };
}

/// Drops the payloads of one batch of `done` rows, oldest first, keeping the key and the hash (a
/// redelivery is still recognised as a duplicate). Addressed by `ctid` for the same reasons as
/// [`PURGE_BATCH`]. It walks the purge index (`completed_at` of done and dead rows; trim has no
/// index of its own, which saves every new delivery an index entry) from a keyset cursor: `$2`,
/// the previous batch's last row, or for a run's first batch where earlier runs stopped. So a
/// run reads about what it trims instead of every already trimmed row younger than the purge
/// horizon.
macro_rules! trim_batch {
    ($kind:literal) => {
        concat!(
            "WITH trimmed AS (
    UPDATE hookclaim_deliveries
       SET payload = NULL, payload_trimmed_at = now(), updated_at = now()
     WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM hookclaim_deliveries
            WHERE status = 'done' AND ",
            $kind,
            " AND payload IS NOT NULL
              AND completed_at < now() - make_interval(secs => $1)
              AND completed_at >= coalesce($2, ",
            trimmed_up_to!($kind),
            ", '-infinity'::timestamptz)
            ORDER BY completed_at
            LIMIT $3
              FOR UPDATE SKIP LOCKED))
    RETURNING completed_at
)
SELECT count(*), max(completed_at) FROM trimmed"
        )
    };
}

const TRIM_BATCH: [&str; 2] = [
    trim_batch!("NOT key_outlives_payload"),
    trim_batch!("key_outlives_payload"),
];

/// One trim batch's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trimmed {
    /// Payloads dropped.
    pub count: u64,
    /// The newest `completed_at` among them: the cursor for the next batch.
    pub cursor: Option<SystemTime>,
}

/// Drops up to `limit` payloads of `done` rows of `kind` that completed more than `older_than`
/// ago and not before `cursor` (the previous batch's [`Trimmed::cursor`]; `None` for the first
/// batch).
pub async fn trim_batch(
    on: &impl Runner,
    kind: KeyRetention,
    older_than: Duration,
    cursor: Option<SystemTime>,
    limit: i64,
) -> Result<Trimmed, Error> {
    let client = on.client();
    let secs = older_than.as_secs_f64();
    let row = client
        .query_typed_one(
            kind.pick(TRIM_BATCH),
            &[
                (&secs, Type::FLOAT8),
                (&cursor, Type::TIMESTAMPTZ),
                (&limit, Type::INT8),
            ],
        )
        .await?;
    let count: i64 = row.get(0);
    Ok(Trimmed {
        count: count as u64,
        cursor: row.get(1),
    })
}

const COUNT_RECLAIMABLE: &str = concat!(
    "SELECT count(*) FROM hookclaim_deliveries AS d WHERE ",
    takeover_condition!("d")
);

/// How many rows a reclaim could take over now (expired leases and due retries).
pub async fn count_reclaimable(on: &impl Runner) -> Result<u64, Error> {
    let client = on.client();
    let n: i64 = client.query_typed_one(COUNT_RECLAIMABLE, &[]).await?.get(0);
    Ok(n as u64)
}

macro_rules! count_purgeable {
    ($kind:literal) => {
        concat!(
            "SELECT count(*) FROM hookclaim_deliveries
 WHERE status IN ('done', 'dead') AND ",
            $kind,
            " AND completed_at < now() - make_interval(secs => $1)"
        )
    };
}

const COUNT_PURGEABLE: [&str; 2] = [
    count_purgeable!("NOT key_outlives_payload"),
    count_purgeable!("key_outlives_payload"),
];

/// How many rows [`purge_batch`] with the same `kind` and `older_than` would delete in total.
pub async fn count_purgeable(
    on: &impl Runner,
    kind: KeyRetention,
    older_than: Duration,
) -> Result<u64, Error> {
    let client = on.client();
    let secs = older_than.as_secs_f64();
    let n: i64 = client
        .query_typed_one(kind.pick(COUNT_PURGEABLE), &[(&secs, Type::FLOAT8)])
        .await?
        .get(0);
    Ok(n as u64)
}

/// Rows past the purge horizon (`$2`) are left out: the purge deletes them first. Counted from
/// where the next trim starts, like [`TRIM_BATCH`], so the count reads what the trim would.
macro_rules! count_trimmable {
    ($kind:literal) => {
        concat!(
            "SELECT count(*) FROM hookclaim_deliveries
 WHERE status = 'done' AND ",
            $kind,
            " AND payload IS NOT NULL
   AND completed_at < now() - make_interval(secs => $1)
   AND completed_at >= now() - make_interval(secs => $2)
   AND completed_at >= coalesce(",
            trimmed_up_to!($kind),
            ", '-infinity'::timestamptz)"
        )
    };
}

const COUNT_TRIMMABLE: [&str; 2] = [
    count_trimmable!("NOT key_outlives_payload"),
    count_trimmable!("key_outlives_payload"),
];

/// How many payloads [`trim_batch`] with `kind` and `older_than` would drop once rows past
/// `purge_after` are purged.
pub async fn count_trimmable(
    on: &impl Runner,
    kind: KeyRetention,
    older_than: Duration,
    purge_after: Duration,
) -> Result<u64, Error> {
    let client = on.client();
    let trim_secs = older_than.as_secs_f64();
    let purge_secs = purge_after.as_secs_f64();
    let n: i64 = client
        .query_typed_one(
            kind.pick(COUNT_TRIMMABLE),
            &[(&trim_secs, Type::FLOAT8), (&purge_secs, Type::FLOAT8)],
        )
        .await?
        .get(0);
    Ok(n as u64)
}

/// Drops the payloads of one batch of dead rows, oldest first: those of rows with a long key
/// retention after `$2` (their payload retention), those of other rows after `$1` (`NULL`: never,
/// they stay for a manual replay until purged). Dead rows are few, and the partial index of dead
/// rows that still hold a payload has nothing else in it, so no cursor is needed.
const TRIM_DEAD_BATCH: &str = "WITH trimmed AS (
    UPDATE hookclaim_deliveries
       SET payload = NULL, payload_trimmed_at = now(), updated_at = now()
     WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM hookclaim_deliveries
            WHERE status = 'dead' AND payload IS NOT NULL
              AND completed_at < CASE WHEN key_outlives_payload
                                  THEN now() - make_interval(secs => $2)
                                  ELSE now() - make_interval(secs => $1) END
            ORDER BY completed_at
            LIMIT $3
              FOR UPDATE SKIP LOCKED))
    RETURNING 1
)
SELECT count(*) FROM trimmed";

/// Drops up to `limit` payloads of dead rows (see [`TRIM_DEAD_BATCH`]): after `older_than` where
/// the key goes with the row, after `long_key_after` where the key is kept longer.
pub async fn trim_dead_batch(
    on: &impl Runner,
    older_than: Option<Duration>,
    long_key_after: Duration,
    limit: i64,
) -> Result<u64, Error> {
    let client = on.client();
    let secs = older_than.map(|d| d.as_secs_f64());
    let long_secs = long_key_after.as_secs_f64();
    let n: i64 = client
        .query_typed_one(
            TRIM_DEAD_BATCH,
            &[
                (&secs, Type::FLOAT8),
                (&long_secs, Type::FLOAT8),
                (&limit, Type::INT8),
            ],
        )
        .await?
        .get(0);
    Ok(n as u64)
}

const COUNT_DEAD_TRIMMABLE: &str = "SELECT count(*) FROM hookclaim_deliveries
 WHERE status = 'dead' AND payload IS NOT NULL
   AND completed_at < CASE WHEN key_outlives_payload
                          THEN now() - make_interval(secs => $2)
                          ELSE now() - make_interval(secs => $1) END";

/// How many payloads [`trim_dead_batch`] with the same horizons would drop in total.
pub async fn count_dead_trimmable(
    on: &impl Runner,
    older_than: Option<Duration>,
    long_key_after: Duration,
) -> Result<u64, Error> {
    let client = on.client();
    let secs = older_than.map(|d| d.as_secs_f64());
    let long_secs = long_key_after.as_secs_f64();
    let n: i64 = client
        .query_typed_one(
            COUNT_DEAD_TRIMMABLE,
            &[(&secs, Type::FLOAT8), (&long_secs, Type::FLOAT8)],
        )
        .await?
        .get(0);
    Ok(n as u64)
}

/// Timestamps in reports: UTC, ISO 8601, to the millisecond.
macro_rules! iso {
    ($col:literal) => {
        concat!(
            "to_char(",
            $col,
            " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
        )
    };
}

const COUNT_BY_SOURCE_STATUS: &str = "SELECT source, status, count(*)
  FROM hookclaim_deliveries GROUP BY source, status ORDER BY source, status";

const OLDEST: &str = concat!(
    "SELECT l.source, l.delivery_id, l.attempt, ",
    iso!("l.lease_until"),
    ", l.lease_until <= now(), ",
    iso!("l.updated_at"),
    ",
       (SELECT ",
    iso!("min(received_at)"),
    " FROM hookclaim_deliveries),
       (SELECT extract(epoch FROM now() - min(received_at))::float8 FROM hookclaim_deliveries)
  FROM (SELECT 1) AS one
  LEFT JOIN LATERAL (
       SELECT source, delivery_id, attempt, lease_until, updated_at FROM hookclaim_deliveries
        WHERE status = 'processing' ORDER BY lease_until LIMIT 1) AS l ON true"
);

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

const STUCK: &str = concat!(
    "SELECT source, delivery_id, status, attempt, ",
    iso!("received_at"),
    ", extract(epoch FROM now() - received_at)::float8, ",
    iso!("next_attempt_at"),
    ", left(last_error, $2)
  FROM hookclaim_deliveries
 WHERE status IN ('failed', 'dead') OR (status = 'processing' AND lease_until <= now())
 ORDER BY received_at, source, delivery_id
 LIMIT $1"
);

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

/// Counts rows by source and status and finds the oldest lease and row. Scans the table: an
/// operator's command, not for the hot path.
pub async fn stats(on: &impl Runner) -> Result<LedgerStats, Error> {
    let client = on.client();
    let mut by_source: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut total = 0;
    for row in client.query_typed(COUNT_BY_SOURCE_STATUS, &[]).await? {
        let n = row.get::<_, i64>(2) as u64;
        total += n;
        by_source
            .entry(row.get(0))
            .or_default()
            .insert(row.get(1), n);
    }
    let row = client.query_typed_one(OLDEST, &[]).await?;
    let oldest_lease = row.get::<_, Option<String>>(0).map(|source| OldestLease {
        source,
        delivery_id: row.get(1),
        attempt: row.get(2),
        lease_until: row.get(3),
        expired: row.get(4),
        claimed_at: row.get(5),
    });
    let stuck = client
        .query_typed(
            STUCK,
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

/// How long the oldest work retention should have taken has been waiting (0 when there is none),
/// and how many rows it can never take: a processing row without a lease or a failed row without
/// a due time. hookclaim's statements never write such a row (the tests check every row after
/// each scenario); a hand-written UPDATE could, and that delivery would wait forever. Four index
/// lookups (the partial lease and retry indexes hold NULLs too), cheap enough for every run.
const WAITING: &str = "SELECT
    coalesce(extract(epoch FROM now() - (SELECT min(lease_until) FROM hookclaim_deliveries
         WHERE status = 'processing' AND lease_until <= now())), 0)::float8,
    coalesce(extract(epoch FROM now() - (SELECT min(next_attempt_at) FROM hookclaim_deliveries
         WHERE status = 'failed' AND next_attempt_at <= now())), 0)::float8,
    ((SELECT count(*) FROM hookclaim_deliveries WHERE status = 'processing' AND lease_until IS NULL)
     + (SELECT count(*) FROM hookclaim_deliveries
         WHERE status = 'failed' AND next_attempt_at IS NULL))::int8";

/// The age of the oldest waiting work, in seconds, and the rows no run can take.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Waiting {
    /// Since the oldest expired lease ended (the delivery is reclaimable since then).
    pub expired_lease_secs: f64,
    /// Since the oldest due failed delivery became due.
    pub due_retry_secs: f64,
    /// Processing rows without a lease and failed rows without a due time: never reclaimed.
    pub unreclaimable: u64,
}

/// Measures [`Waiting`].
pub async fn waiting(on: &impl Runner) -> Result<Waiting, Error> {
    let row = on.client().query_typed_one(WAITING, &[]).await?;
    Ok(Waiting {
        expired_lease_secs: row.get(0),
        due_retry_secs: row.get(1),
        unreclaimable: row.get::<_, i64>(2).unsigned_abs(),
    })
}

/// Which deliveries a bulk replay takes: failed or dead ones of one source, optionally of one
/// event type and received within `[received_after, received_before)`.
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
    fn params(&self) -> [(&(dyn ToSql + Sync), Type); 4] {
        [
            (&self.source, Type::TEXT),
            (&self.event_type, Type::TEXT),
            (&self.received_after, Type::TIMESTAMPTZ),
            (&self.received_before, Type::TIMESTAMPTZ),
        ]
    }
}

/// The rows a [`ReplayFilter`] selects: `$1` to `$4` are its fields.
macro_rules! replay_filter {
    () => {
        "source = $1 AND status IN ('failed', 'dead')
   AND ($2::text IS NULL OR event_type = $2)
   AND ($3::timestamptz IS NULL OR received_at >= $3)
   AND ($4::timestamptz IS NULL OR received_at < $4)"
    };
}

/// One page of a bulk replay's keys, in (received_at, delivery_id) order after the cursor
/// (`$5`, `$6`). Nothing is locked: each delivery is then claimed on its own with
/// [`take_for_replay`], which checks its state again, so a page may go stale without harm.
const REPLAY_PAGE: &str = concat!(
    "SELECT received_at, delivery_id FROM hookclaim_deliveries
 WHERE ",
    replay_filter!(),
    "
   AND payload IS NOT NULL
   AND (received_at, delivery_id) > (coalesce($5, '-infinity'::timestamptz), $6)
 ORDER BY received_at, delivery_id
 LIMIT $7"
);

/// Where a bulk replay has got to: the last key it listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayCursor {
    /// Its `received_at`; `None` before the first page.
    pub received_at: Option<SystemTime>,
    /// Its delivery id.
    pub delivery_id: String,
}

/// The next up to `limit` delivery ids `filter` selects after `cursor`, and the cursor after
/// them.
pub async fn replay_page(
    on: &impl Runner,
    filter: &ReplayFilter<'_>,
    cursor: &ReplayCursor,
    limit: i64,
) -> Result<(Vec<String>, ReplayCursor), Error> {
    let [p1, p2, p3, p4] = filter.params();
    let rows = on
        .client()
        .query_typed(
            REPLAY_PAGE,
            &[
                p1,
                p2,
                p3,
                p4,
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

const COUNT_REPLAYABLE: &str = concat!(
    "SELECT count(*) FILTER (WHERE payload IS NOT NULL), count(*) FILTER (WHERE payload IS NULL)
  FROM hookclaim_deliveries
 WHERE ",
    replay_filter!()
);

/// How many deliveries `filter` selects: (with their payload, so replayable; without it).
pub async fn count_replayable(
    on: &impl Runner,
    filter: &ReplayFilter<'_>,
) -> Result<(u64, u64), Error> {
    let row = on
        .client()
        .query_typed_one(COUNT_REPLAYABLE, &filter.params())
        .await?;
    Ok((row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64))
}

/// The ledger's operations on the environment's connection, each under the client-side deadline
/// and run again once on a new connection after a connection-level failure (safe: the claim is
/// idempotent per owner, finishing is fenced, and the rest are reads or batch-sized deletes).
impl Session<'_> {
    /// [`claim`]. A second try, after a connection-level failure, claims as
    /// [`Owner::MayHaveClaimed`] whatever `owner` says: the first may have committed.
    pub async fn claim(
        &mut self,
        delivery: &NewDelivery<'_>,
        claimant: Claimant<'_>,
        finish_now: bool,
        owner: Owner,
    ) -> Result<Claim, DbError> {
        let tried = std::sync::atomic::AtomicBool::new(false);
        self.run(|c, _| {
            let this_try = if tried.swap(true, std::sync::atomic::Ordering::Relaxed) {
                Owner::MayHaveClaimed
            } else {
                owner
            };
            Box::pin(claim(c, delivery, claimant, finish_now, this_try))
        })
        .await
    }

    /// [`finish_failed`].
    pub async fn finish_failed(
        &mut self,
        at: &Attempt<'_>,
        error: &str,
        retry_in: Duration,
    ) -> Result<Finish, DbError> {
        self.run(|c, _| Box::pin(finish_failed(c, at, error, retry_in)))
            .await
    }

    /// [`finish_dead`].
    pub async fn finish_dead(&mut self, at: &Attempt<'_>, error: &str) -> Result<Finish, DbError> {
        self.run(|c, _| Box::pin(finish_dead(c, at, error))).await
    }

    /// [`reclaim_next`].
    pub async fn reclaim_next(
        &mut self,
        claimant: Claimant<'_>,
    ) -> Result<Option<StoredDelivery>, DbError> {
        self.run(|c, _| Box::pin(reclaim_next(c, claimant))).await
    }

    /// [`take_for_replay`].
    pub async fn take_for_replay(
        &mut self,
        source: &str,
        delivery_id: &str,
        claimant: Claimant<'_>,
        force: bool,
    ) -> Result<Option<StoredDelivery>, DbError> {
        self.run(|c, _| Box::pin(take_for_replay(c, source, delivery_id, claimant, force)))
            .await
    }

    /// [`state`].
    pub async fn state(
        &mut self,
        source: &str,
        delivery_id: &str,
    ) -> Result<Option<DeliveryState>, DbError> {
        self.run(|c, _| Box::pin(state(c, source, delivery_id)))
            .await
    }

    /// [`purge_batch`].
    pub async fn purge_batch(
        &mut self,
        kind: KeyRetention,
        older_than: Duration,
        limit: i64,
    ) -> Result<u64, DbError> {
        self.run(|c, _| Box::pin(purge_batch(c, kind, older_than, limit)))
            .await
    }

    /// [`trim_batch`].
    pub async fn trim_batch(
        &mut self,
        kind: KeyRetention,
        older_than: Duration,
        cursor: Option<SystemTime>,
        limit: i64,
    ) -> Result<Trimmed, DbError> {
        self.run(|c, _| Box::pin(trim_batch(c, kind, older_than, cursor, limit)))
            .await
    }

    /// [`trim_dead_batch`].
    pub async fn trim_dead_batch(
        &mut self,
        older_than: Option<Duration>,
        long_key_after: Duration,
        limit: i64,
    ) -> Result<u64, DbError> {
        self.run(|c, _| Box::pin(trim_dead_batch(c, older_than, long_key_after, limit)))
            .await
    }

    /// [`count_dead_trimmable`].
    pub async fn count_dead_trimmable(
        &mut self,
        older_than: Option<Duration>,
        long_key_after: Duration,
    ) -> Result<u64, DbError> {
        self.run(|c, _| Box::pin(count_dead_trimmable(c, older_than, long_key_after)))
            .await
    }

    /// [`count_reclaimable`].
    pub async fn count_reclaimable(&mut self) -> Result<u64, DbError> {
        self.run(|c, _| Box::pin(count_reclaimable(c))).await
    }

    /// [`count_purgeable`].
    pub async fn count_purgeable(
        &mut self,
        kind: KeyRetention,
        older_than: Duration,
    ) -> Result<u64, DbError> {
        self.run(|c, _| Box::pin(count_purgeable(c, kind, older_than)))
            .await
    }

    /// [`count_trimmable`].
    pub async fn count_trimmable(
        &mut self,
        kind: KeyRetention,
        older_than: Duration,
        purge_after: Duration,
    ) -> Result<u64, DbError> {
        self.run(|c, _| Box::pin(count_trimmable(c, kind, older_than, purge_after)))
            .await
    }

    /// [`stats`].
    pub async fn stats(&mut self) -> Result<LedgerStats, DbError> {
        self.run(|c, _| Box::pin(stats(c))).await
    }

    /// [`waiting`].
    pub async fn waiting(&mut self) -> Result<Waiting, DbError> {
        self.run(|c, _| Box::pin(waiting(c))).await
    }

    /// [`replay_page`].
    pub async fn replay_page(
        &mut self,
        filter: &ReplayFilter<'_>,
        cursor: &ReplayCursor,
        limit: i64,
    ) -> Result<(Vec<String>, ReplayCursor), DbError> {
        self.run(|c, _| Box::pin(replay_page(c, filter, cursor, limit)))
            .await
    }

    /// [`count_replayable`].
    pub async fn count_replayable(
        &mut self,
        filter: &ReplayFilter<'_>,
    ) -> Result<(u64, u64), DbError> {
        self.run(|c, _| Box::pin(count_replayable(c, filter))).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_of_the_claim_statement_reads_as_its_claim() {
        let at = |secs: f64| SystemTime::UNIX_EPOCH + Duration::from_secs_f64(secs);
        let ours = [7u8; 32];
        let theirs = [8u8; 32];
        let dead = |hash: &[u8; 32]| [&hash[..], &[0]].concat();
        let binary = [
            (ours.to_vec(), Some(Claim::Done { same_payload: true })),
            (
                theirs.to_vec(),
                Some(Claim::Done {
                    same_payload: false,
                }),
            ),
            (dead(&ours), Some(Claim::Dead { same_payload: true })),
            (
                dead(&theirs),
                Some(Claim::Dead {
                    same_payload: false,
                }),
            ),
            // A hash with another marker, or a longer answer, is not trusted.
            ([&ours[..], &[1]].concat(), None),
            ([&ours[..], &[0, 0]].concat(), None),
        ];
        for (answer, want) in binary {
            assert_eq!(Claim::parse(&answer, &ours), want, "{answer:?}");
        }
        let words = [
            ("claimed 1", Some(Claim::Claimed { attempt: 1 })),
            ("claimed 12", Some(Claim::Claimed { attempt: 12 })),
            ("in_progress", Some(Claim::InProgress)),
            ("gave_up", Some(Claim::GaveUp)),
            (
                "retry_at 1764612345.25",
                Some(Claim::RetryLater {
                    next_attempt_at: at(1764612345.25),
                }),
            ),
            ("retry_at 1764612345", Some(Claim::RetryLater {
                next_attempt_at: at(1764612345.0),
            })),
            // Anything else is not trusted: a finished row is only ever answered by its hash.
            ("claimed", None),
            ("claimed x", None),
            ("done", None),
            ("dead", None),
            ("done payload_differs", None),
            ("processing", None),
            ("failed", None),
            ("retry_at", None),
            ("retry_at soon", None),
            ("retry_at -5", None),
            ("", None),
        ];
        for (answer, want) in words {
            assert_eq!(Claim::parse(answer.as_bytes(), &ours), want, "{answer:?}");
        }
        assert_eq!(Claim::parse(&[0xff, 0xfe], &ours), None, "not UTF-8");
    }

    fn delivery<'a>(
        event_type: Option<&'a str>,
        headers: &'a BTreeMap<String, String>,
    ) -> NewDelivery<'a> {
        NewDelivery {
            source: "github",
            delivery_id: "d-1",
            id_origin: IdOrigin::Header,
            event_type,
            payload: b"{}",
            payload_sha256: &[0; 32],
            headers,
            long_key_retention: true,
        }
    }

    const CLAIMANT: Claimant<'static> = Claimant {
        owner: "o",
        lease: Duration::from_millis(90_500),
        max_attempts: 8,
    };

    /// The test delivery's hash in hex: 32 zero bytes.
    macro_rules! zeros {
        () => {
            "0000000000000000000000000000000000000000000000000000000000000000"
        };
    }

    #[test]
    fn a_new_row_literal_lists_the_fields_in_the_order_of_the_type() {
        let headers = BTreeMap::from([("x-github-event".to_string(), "push".to_string())]);
        assert_eq!(
            new_row_literal(&delivery(Some("push"), &headers), CLAIMANT, false),
            concat!(r#"("o","\\x"#, zeros!(), r#"","header",f,90.5,"push","{\"x-github-event\":\"push\"}",8,t)"#)
        );
    }

    #[test]
    fn an_absent_event_type_is_an_empty_field_and_an_empty_one_is_quoted() {
        let headers = BTreeMap::new();
        assert_eq!(
            new_row_literal(&delivery(None, &headers), CLAIMANT, true),
            concat!(r#"("o","\\x"#, zeros!(), r#"","header",t,90.5,,"{}",8,t)"#)
        );
        assert_eq!(
            new_row_literal(&delivery(Some(""), &headers), CLAIMANT, true),
            concat!(r#"("o","\\x"#, zeros!(), r#"","header",t,90.5,"","{}",8,t)"#)
        );
    }

    #[test]
    fn quotes_and_backslashes_in_a_field_are_escaped() {
        let headers = BTreeMap::new();
        assert_eq!(
            new_row_literal(&delivery(Some(r#"a"b\c,(d)"#), &headers), CLAIMANT, true),
            concat!(r#"("o","\\x"#, zeros!(), r#"","header",t,90.5,"a\"b\\c,(d)","{}",8,t)"#)
        );
    }
}
