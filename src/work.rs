//! The processor's side of a delivery's transaction: [`Work`].

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use futures_util::TryFutureExt as _;
use tokio_postgres::types::{IsNull, ToSql, Type};
use tokio_postgres::{Client, Row};

use crate::ledger::{self, Attempt, Finish};

/// Why queued work, a query or a step record failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkError {
    /// The database refused a statement, or the connection failed.
    #[error(transparent)]
    Database(#[from] tokio_postgres::Error),
    /// A parameter has no PostgreSQL built-in type (see [`Work`] for the types taken): nothing
    /// was sent.
    #[error("parameter ${index} of `{sql}`: no PostgreSQL built-in type takes this Rust type; pass it as text and cast in SQL")]
    Parameter {
        /// 1-based, as `$1` in the statement.
        index: usize,
        /// The statement's first line.
        sql: String,
    },
    /// [`Work::record_step`] after the claim was lost to a newer attempt: nothing was recorded,
    /// and whatever this attempt concludes will not be either.
    #[error("step {0:?}: the claim was lost to a newer attempt before it was recorded")]
    ClaimLost(String),
    /// [`Work::record_step`] or [`Work::steps_done`] after [`Work::query`] opened the delivery's
    /// transaction: a step must commit on its own, so record steps before querying.
    #[error("steps are recorded outside the delivery's transaction, before any query")]
    InTransaction,
}

/// The PostgreSQL types a parameter may be sent as, in order of preference: the first its
/// `ToSql` implementation accepts is the one used.
const PARAM_TYPES: &[Type] = &[
    Type::BOOL,
    Type::INT8,
    Type::INT4,
    Type::INT2,
    Type::CHAR,
    Type::OID,
    Type::FLOAT8,
    Type::FLOAT4,
    Type::NUMERIC,
    Type::TEXT,
    Type::BYTEA,
    Type::JSONB,
    Type::TIMESTAMPTZ,
    Type::TIMESTAMP,
    Type::DATE,
    Type::TIME,
    Type::INTERVAL,
    Type::UUID,
    Type::INET,
    Type::BOOL_ARRAY,
    Type::INT8_ARRAY,
    Type::INT4_ARRAY,
    Type::INT2_ARRAY,
    Type::FLOAT8_ARRAY,
    Type::FLOAT4_ARRAY,
    Type::NUMERIC_ARRAY,
    Type::TEXT_ARRAY,
    Type::BYTEA_ARRAY,
    Type::JSONB_ARRAY,
    Type::TIMESTAMPTZ_ARRAY,
    Type::TIMESTAMP_ARRAY,
    Type::DATE_ARRAY,
    Type::UUID_ARRAY,
];

/// A parameter encoded when it was passed: its type and its bytes (`None` for NULL).
#[derive(Debug)]
struct Encoded {
    ty: Type,
    value: Option<Vec<u8>>,
}

impl Encoded {
    /// `value` with the first of [`PARAM_TYPES`] it accepts; `None` when it accepts none.
    fn new(value: &(dyn ToSql + Sync)) -> Option<Self> {
        let mut buf = BytesMut::new();
        PARAM_TYPES.iter().find_map(|ty| {
            buf.clear();
            match value.to_sql_checked(ty, &mut buf) {
                Ok(IsNull::Yes) => Some(Encoded { ty: ty.clone(), value: None }),
                Ok(IsNull::No) => Some(Encoded { ty: ty.clone(), value: Some(buf.to_vec()) }),
                Err(_) => None,
            }
        })
    }
}

impl ToSql for Encoded {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match &self.value {
            Some(bytes) => {
                out.extend_from_slice(bytes);
                Ok(IsNull::No)
            }
            None => Ok(IsNull::Yes),
        }
    }

    // The type was checked when the value was encoded.
    fn accepts(_ty: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// A statement and its encoded parameters.
struct Statement {
    sql: String,
    params: Vec<Encoded>,
}

impl Statement {
    fn new(sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Self, WorkError> {
        let params = params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                Encoded::new(*p).ok_or_else(|| WorkError::Parameter {
                    index: i + 1,
                    sql: sql.trim().lines().next().unwrap_or_default().to_owned(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Statement {
            sql: sql.to_owned(),
            params,
        })
    }

    fn param_refs(&self) -> Vec<(&(dyn ToSql + Sync), Type)> {
        self.params
            .iter()
            .map(|p| (p as &(dyn ToSql + Sync), p.ty.clone()))
            .collect()
    }
}

/// The transaction a processor works in, under the claim of the delivery it processes.
/// hookclaim makes it (the webhook function, the retention re-drive, `hookclaim::testing`) and
/// commits it when the processor succeeds.
///
/// A processor's writes are queued, not sent: when it succeeds, BEGIN, its writes, the fenced
/// finish and COMMIT go to the server back to back and are answered together, so an
/// in-transaction processor costs one round trip after the claim. The fence fails the
/// transaction when another attempt has taken the delivery over, which turns the COMMIT sent
/// with it into a rollback. A processor that has to read before it writes uses
/// [`Work::query`], which costs one more round trip and sees the writes queued before it.
///
/// Parameters are ordinary [`ToSql`] values, encoded when they are passed, so a value borrowed
/// from the delivery or a local variable needs to live only for the call. Each value is sent
/// with the first PostgreSQL built-in type its `ToSql` implementation accepts, scalars before
/// arrays (`bool`, `int8`, `int4`, `int2`, `"char"`, `oid`, `float8`, `float4`, `numeric`,
/// `text`, `bytea`, `jsonb`, `timestamptz`, `timestamp`, `date`, `time`, `interval`, `uuid`,
/// `inet`; so `i64` as `int8`, `&str` and `String` as `text`, `serde_json::Value` as `jsonb`,
/// `SystemTime` as `timestamptz`, `Option<T>` as `T`'s); the server converts it where
/// the statement needs another type an assignment cast reaches (`text` into a `varchar`
/// column, `int4` into a `bigint` one). A value of no built-in type (an enum of your own) is
/// passed as text and cast in SQL (`$1::text::mood`).
pub struct Work<'c> {
    conn: &'c mut Client,
    /// BEGIN has been sent and the transaction has not been ended.
    open: bool,
    queued: Vec<Statement>,
    /// The first parameter that could not be encoded: the work fails at commit, unsent.
    unencodable: Option<WorkError>,
    /// The claim this work runs under, for the finish and for steps that commit on their own.
    attempt: Attempt<'c>,
}

impl<'c> Work<'c> {
    /// Work on `conn`, which must not be inside a transaction, under `attempt`'s claim.
    pub(crate) fn new(conn: &'c mut Client, attempt: Attempt<'c>) -> Self {
        Work {
            conn,
            open: false,
            queued: Vec::new(),
            unencodable: None,
            attempt,
        }
    }

    /// Queues a write that runs at commit, in the delivery's transaction: only if processing
    /// succeeds, and committed with "done" or not at all. Parameters are `$1`, `$2`… in order
    /// (`work.queue(sql, &[&order_id, &amount])`). A statement that fails (or a parameter
    /// of no PostgreSQL type) makes the attempt fail, retryable, with nothing committed.
    pub fn queue(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) {
        match Statement::new(sql, params) {
            Ok(statement) => self.queued.push(statement),
            Err(e) => {
                self.unencodable.get_or_insert(e);
            }
        }
    }

    /// Runs a query in the delivery's transaction now, after the writes queued so far, and
    /// returns its rows: for processing that decides on what it reads. One round trip; the
    /// transaction stays open until the work is committed or rolled back.
    pub async fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, WorkError> {
        if let Some(e) = self.unencodable.take() {
            return Err(e);
        }
        let statement = Statement::new(sql, params)?;
        let queued = std::mem::take(&mut self.queued);
        let refs: Vec<_> = queued.iter().map(Statement::param_refs).collect();
        let query_refs = statement.param_refs();
        let begin = !std::mem::replace(&mut self.open, true);
        let conn: &Client = self.conn;
        let mut batch = writes(conn, begin, &queued, &refs);
        batch.push(Box::pin(conn.query_typed(&statement.sql, &query_refs)));
        let mut results = pipelined(batch).await;
        let rows = results.pop().unwrap_or_else(|| Ok(Vec::new()));
        match results.into_iter().find_map(Result::err) {
            Some(e) => Err(e.into()),
            None => Ok(rows?),
        }
    }

    /// Records that `step` of this delivery is done (an external call that took it, with
    /// `detail`, e.g. the id it answered), in a statement of its own that commits at once,
    /// whatever the delivery concludes. Fenced on the claim: an attempt that lost its claim
    /// records nothing and gets [`WorkError::ClaimLost`]. Recording a step again is a no-op.
    /// Before any [`Work::query`]: a step must not join the delivery's transaction.
    pub async fn record_step(&self, step: &str, detail: Option<&str>) -> Result<(), WorkError> {
        if self.open {
            return Err(WorkError::InTransaction);
        }
        let [source, id, attempt, owner] = self.attempt.params();
        let n = self
            .conn
            .execute_typed(
                include_str!("work/record_step.sql"),
                &[
                    source,
                    id,
                    attempt,
                    owner,
                    (&step, Type::TEXT),
                    (&detail, Type::TEXT),
                ],
            )
            .await?;
        match n {
            1 => Ok(()),
            // Already recorded, by this attempt or an earlier one, or the claim is lost.
            _ if self.steps_done().await?.contains(step) && self.holds_claim().await? => Ok(()),
            _ => Err(WorkError::ClaimLost(step.to_owned())),
        }
    }

    /// The steps recorded for this delivery so far, by this attempt or earlier ones: what a
    /// re-drive skips. Before any [`Work::query`], like [`Work::record_step`].
    pub async fn steps_done(&self) -> Result<BTreeSet<String>, WorkError> {
        if self.open {
            return Err(WorkError::InTransaction);
        }
        let rows = self
            .conn
            .query_typed(
                include_str!("work/steps_done.sql"),
                &[
                    (&self.attempt.source, Type::TEXT),
                    (&self.attempt.delivery_id, Type::TEXT),
                ],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Whether this attempt still holds the claim.
    async fn holds_claim(&self) -> Result<bool, WorkError> {
        let row = self
            .conn
            .query_typed_one(include_str!("work/holds_claim.sql"), &self.attempt.params())
            .await?;
        Ok(row.get(0))
    }

    /// Sends BEGIN (unless already open), the queued writes, the fenced finish and COMMIT in one
    /// batch. `Fenced` means another attempt holds the delivery, and the finish's failure turned
    /// the COMMIT into a rollback of everything; an error means a statement failed and
    /// everything was rolled back. With nothing sent or queued, no transaction is needed: the
    /// fenced finish alone, one statement.
    pub(crate) async fn commit(mut self) -> Result<Finish, WorkError> {
        if let Some(e) = self.unencodable.take() {
            return Err(e);
        }
        let at = self.attempt;
        if !self.open && self.queued.is_empty() {
            return Ok(ledger::finish_done(&*self.conn, &at).await?);
        }
        let queued = std::mem::take(&mut self.queued);
        let refs: Vec<_> = queued.iter().map(Statement::param_refs).collect();
        let begin = !std::mem::replace(&mut self.open, true);
        let conn: &Client = self.conn;
        // Each request answers `None`, but for the finish's `Some`.
        let mut batch: Vec<Pending<'_, Option<Finish>>> = writes(conn, begin, &queued, &refs)
            .into_iter()
            .map(|w| Box::pin(w.map_ok(|_| None)) as Pending<'_, Option<Finish>>)
            .collect();
        batch.push(Box::pin(ledger::finish_done(conn, &at).map_ok(Some)));
        batch.push(Box::pin(conn.query_typed("COMMIT", &[]).map_ok(|_| None)));
        let results = pipelined(batch).await;
        self.open = false;
        // The first error decides: the statements after it failed only because the transaction
        // had aborted, and the COMMIT then rolled it back.
        let mut finish = Finish::Fenced;
        for result in results {
            if let Some(f) = result? {
                finish = f;
            }
        }
        Ok(finish)
    }

    /// Ends the transaction without committing anything queued or sent.
    pub(crate) async fn rollback(mut self) -> Result<(), tokio_postgres::Error> {
        if !self.open {
            return Ok(());
        }
        self.conn.batch_execute("ROLLBACK").await?;
        self.open = false;
        Ok(())
    }
}

/// BEGIN (when `begin`) and the queued writes, as the start of a batch to send.
fn writes<'a>(
    conn: &'a Client,
    begin: bool,
    queued: &'a [Statement],
    refs: &'a [Vec<(&'a (dyn ToSql + Sync), Type)>],
) -> Vec<Pending<'a, Vec<Row>>> {
    let mut batch: Vec<Pending<'a, Vec<Row>>> = Vec::with_capacity(queued.len() + 3);
    if begin {
        batch.push(Box::pin(conn.query_typed("BEGIN", &[])));
    }
    for (q, params) in queued.iter().zip(refs) {
        batch.push(Box::pin(conn.query_typed(&q.sql, params)));
    }
    batch
}

impl Drop for Work<'_> {
    /// A processor that panicked or was cancelled mid-transaction leaves the connection inside
    /// it; queue a ROLLBACK so the next delivery on this connection starts clean. The first poll
    /// of a request writes it to the connection's queue, so one poll is enough and the answer
    /// can be dropped.
    fn drop(&mut self) {
        if self.open {
            let mut rollback = std::pin::pin!(self.conn.batch_execute("ROLLBACK"));
            let _ = rollback
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()));
        }
    }
}

/// A request in a pipelined batch.
type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, tokio_postgres::Error>> + Send + 'a>>;

/// Polls every request in order until all are answered. tokio-postgres writes a request when
/// its future is first polled and answers requests in the order written, so the whole batch
/// goes out before the first answer is awaited: one round trip.
async fn pipelined<T>(
    mut batch: Vec<Pending<'_, T>>,
) -> Vec<Result<T, tokio_postgres::Error>> {
    let mut done: Vec<Option<Result<T, tokio_postgres::Error>>> = batch.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (request, slot) in batch.iter_mut().zip(done.iter_mut()) {
            if slot.is_none() {
                match request.as_mut().poll(cx) {
                    Poll::Ready(v) => *slot = Some(v),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    done.into_iter().flatten().collect()
}
