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

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Error, Row};

use crate::store::{self, Attempt, Finish};

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
    client: &'c Client,
    /// BEGIN has been sent and the transaction has not been ended.
    open: bool,
    queued: Vec<Queued>,
}

type Pending<'a> = Pin<Box<dyn Future<Output = Result<Vec<Row>, Error>> + Send + 'a>>;

impl<'c> Work<'c> {
    /// Work on `client`, which must not be inside a transaction.
    pub fn new(client: &'c Client) -> Self {
        Work {
            client,
            open: false,
            queued: Vec::new(),
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
        let mut batch = self.begin_and(&queued, &refs);
        batch.push(Box::pin(self.client.query_typed(sql, params)));
        let mut results = in_order(batch).await;
        let rows = results.pop().unwrap_or_else(|| Ok(Vec::new()));
        match results.into_iter().find_map(Result::err) {
            Some(e) => Err(e),
            None => rows,
        }
    }

    /// Whether nothing has been sent or queued: finishing needs no transaction.
    pub(crate) fn is_empty(&self) -> bool {
        !self.open && self.queued.is_empty()
    }

    /// Sends BEGIN (unless already open), the queued writes, the fenced finish and COMMIT in one
    /// batch. `Fenced` means another attempt holds the delivery and everything was rolled back;
    /// an error means a statement failed and everything was rolled back.
    pub(crate) async fn commit(mut self, at: &Attempt<'_>) -> Result<Finish, Error> {
        let queued = std::mem::take(&mut self.queued);
        let refs: Vec<_> = queued.iter().map(Queued::param_refs).collect();
        let fence = store::attempt_params(at);
        let mut batch = self.begin_and(&queued, &refs);
        let fence_at = batch.len();
        batch.push(Box::pin(
            self.client.query_typed(store::FINISH_DONE_OR_FAIL, &fence),
        ));
        batch.push(Box::pin(self.client.query_typed("COMMIT", &[])));
        let results = in_order(batch).await;
        self.open = false;
        // The first error decides: the statements after it failed only because the transaction
        // had aborted, and the COMMIT then rolled it back.
        match results
            .into_iter()
            .enumerate()
            .find_map(|(i, r)| r.err().map(|e| (i, e)))
        {
            None => Ok(Finish::Applied),
            Some((i, e)) if i == fence_at && store::is_fenced(&e) => Ok(Finish::Fenced),
            Some((_, e)) => Err(e),
        }
    }

    /// Ends the transaction without committing anything queued or sent.
    pub(crate) async fn rollback(mut self) -> Result<(), Error> {
        if !self.open {
            return Ok(());
        }
        self.client.batch_execute("ROLLBACK").await?;
        self.open = false;
        Ok(())
    }

    /// BEGIN (when the transaction is not open yet) and the queued writes, as a batch to send.
    fn begin_and<'a>(
        &mut self,
        queued: &'a [Queued],
        refs: &'a [Vec<(&'a (dyn ToSql + Sync), Type)>],
    ) -> Vec<Pending<'a>>
    where
        'c: 'a,
    {
        let mut batch: Vec<Pending<'a>> = Vec::with_capacity(queued.len() + 3);
        if !self.open {
            self.open = true;
            batch.push(Box::pin(self.client.query_typed("BEGIN", &[])));
        }
        for (q, params) in queued.iter().zip(refs) {
            batch.push(Box::pin(self.client.query_typed(&q.sql, params)));
        }
        batch
    }
}

impl Drop for Work<'_> {
    /// A processor that panicked or was cancelled mid-transaction leaves the connection inside
    /// it; queue a ROLLBACK so the next delivery on this connection starts clean. The first poll
    /// of a request writes it to the connection's queue, so one poll is enough and the answer
    /// can be dropped.
    fn drop(&mut self) {
        if self.open {
            let mut rollback = std::pin::pin!(self.client.batch_execute("ROLLBACK"));
            let _ = rollback
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()));
        }
    }
}

/// Polls every request in order until all are answered. tokio-postgres writes a request when
/// its future is first polled and answers requests in the order written, so the whole batch
/// goes out before the first answer is awaited: one round trip.
async fn in_order<T>(mut batch: Vec<Pin<Box<dyn Future<Output = T> + Send + '_>>>) -> Vec<T> {
    let mut done: Vec<Option<T>> = batch.iter().map(|_| None).collect();
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
