//! The processor's side of a delivery's transaction.
//!
//! A processor's writes are queued, not sent: when it concludes "done", BEGIN, its writes, the
//! fenced finish and COMMIT go to the server back to back and are answered together, so an
//! in-transaction processor costs one round trip after the claim. The fence fails the
//! transaction when another attempt has taken the delivery over, which turns the COMMIT sent
//! with it into a rollback. A processor that has to read before it writes uses
//! [`Work::query`], which costs one more round trip and sees the writes queued before it.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use futures_util::TryFutureExt as _;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Error, Row};

use crate::ledger::{self, Attempt, Finish};

/// A statement queued by [`Work::execute`], with its parameters.
pub struct Queued {
    sql: Cow<'static, str>,
    params: Vec<(Box<dyn ToSql + Send + Sync>, Type)>,
}

impl Queued {
    /// Binds the next parameter (`$1`, `$2`, … in order) with its PostgreSQL type.
    pub fn bind<T: ToSql + Send + Sync + 'static>(&mut self, value: T, ty: Type) -> &mut Self {
        self.params.push((Box::new(value), ty));
        self
    }

    fn param_refs(&self) -> Vec<(&(dyn ToSql + Sync), Type)> {
        self.params
            .iter()
            .map(|(v, t)| (v.as_ref() as &(dyn ToSql + Sync), t.clone()))
            .collect()
    }
}

/// The transaction a processor works in; see the module documentation.
pub struct Work<'c> {
    conn: &'c mut Client,
    /// BEGIN has been sent and the transaction has not been ended.
    open: bool,
    queued: Vec<Queued>,
    /// The claim this work runs under, for records that commit on their own.
    attempt: Option<Attempt<'c>>,
}

impl<'c> Work<'c> {
    /// Work on `conn`, which must not be inside a transaction.
    pub fn new(conn: &'c mut Client) -> Self {
        Work {
            conn,
            open: false,
            queued: Vec::new(),
            attempt: None,
        }
    }

    /// The same work, held under `attempt`'s claim.
    pub(crate) fn under(mut self, attempt: Attempt<'c>) -> Self {
        self.attempt = Some(attempt);
        self
    }

    /// The connection and the claim, for a statement that must commit on its own, before and
    /// whatever the delivery's transaction concludes (a destination's progress). `None` once the
    /// transaction is open, when such a statement would join it, or without a claim.
    #[cfg(feature = "destinations")]
    pub(crate) fn outside(&self) -> Option<(&Client, &Attempt<'c>)> {
        match (&self.attempt, self.open) {
            (Some(at), false) => Some((&*self.conn, at)),
            _ => None,
        }
    }

    /// Queues a statement to run in the delivery's transaction; bind its parameters on the
    /// result. It runs only if processing concludes done, and commits with "done" or not at
    /// all. A statement that fails makes the attempt fail (retryable), with nothing committed.
    pub fn execute(&mut self, sql: impl Into<Cow<'static, str>>) -> &mut Queued {
        self.queued.push(Queued {
            sql: sql.into(),
            params: Vec::new(),
        });
        let last = self.queued.len() - 1;
        &mut self.queued[last]
    }

    /// Runs a query in the delivery's transaction now, after the statements queued so far, and
    /// returns its rows: for processing that decides on what it reads. One round trip.
    pub async fn query(
        &mut self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, Error> {
        let queued = std::mem::take(&mut self.queued);
        let refs: Vec<_> = queued.iter().map(Queued::param_refs).collect();
        let begin = !std::mem::replace(&mut self.open, true);
        let conn: &Client = self.conn;
        let mut batch = writes(conn, begin, &queued, &refs);
        batch.push(Box::pin(conn.query_typed(sql, params)));
        let mut results = pipelined(batch).await;
        let rows = results.pop().unwrap_or_else(|| Ok(Vec::new()));
        match results.into_iter().find_map(Result::err) {
            Some(e) => Err(e),
            None => rows,
        }
    }

    /// Sends BEGIN (unless already open), the queued writes, the fenced finish and COMMIT in one
    /// batch. `Fenced` means another attempt holds the delivery, and the finish's failure turned
    /// the COMMIT into a rollback of everything; an error means a statement failed and
    /// everything was rolled back. With nothing sent or queued, no transaction is needed: the
    /// fenced finish alone, one statement.
    pub(crate) async fn commit(mut self, at: &Attempt<'_>) -> Result<Finish, Error> {
        if !self.open && self.queued.is_empty() {
            return ledger::finish_done(&*self.conn, at).await;
        }
        let queued = std::mem::take(&mut self.queued);
        let refs: Vec<_> = queued.iter().map(Queued::param_refs).collect();
        let begin = !std::mem::replace(&mut self.open, true);
        let conn: &Client = self.conn;
        // Each request answers `None`, but for the finish's `Some`.
        let mut batch: Vec<Pending<'_, Option<Finish>>> = writes(conn, begin, &queued, &refs)
            .into_iter()
            .map(|w| Box::pin(w.map_ok(|_| None)) as Pending<'_, Option<Finish>>)
            .collect();
        batch.push(Box::pin(ledger::finish_done(conn, at).map_ok(Some)));
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
    pub(crate) async fn rollback(mut self) -> Result<(), Error> {
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
    queued: &'a [Queued],
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
type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// Polls every request in order until all are answered. tokio-postgres writes a request when
/// its future is first polled and answers requests in the order written, so the whole batch
/// goes out before the first answer is awaited: one round trip.
async fn pipelined<T>(mut batch: Vec<Pending<'_, T>>) -> Vec<Result<T, Error>> {
    let mut done: Vec<Option<Result<T, Error>>> = batch.iter().map(|_| None).collect();
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
