//! One live connection and the statements prepared on it, and how statements are sent: as
//! prepared statements where the connection has them, otherwise as unnamed ones, and in
//! pipelined batches.
//!
//! An unnamed statement (`query_typed`) is parsed, analysed and planned by PostgreSQL on every
//! execution; for the claim that is most of the database's work per delivery. A direct
//! connection therefore prepares the hot statements once and binds them afterwards, in the same
//! single round trip. A transaction pooler (PgBouncer in transaction mode, RDS Proxy) cannot
//! keep a named statement on the server connection a client happens to get, so a pooled
//! connection prepares nothing and every statement stays unnamed.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Error, Row, Statement};

/// A statement the ledger runs often: its SQL text and its parameter types.
pub type Hot = (&'static str, &'static [Type]);

/// A live connection: the client and what it has prepared.
pub struct Conn {
    client: Client,
    /// Whether this connection may prepare statements (not through a transaction pooler).
    prepares: bool,
    /// Prepared statements with their SQL text. Only `'static` texts are kept, so the set stays
    /// bounded: a handful (the ledger's hot statements), found by a scan of a few address and
    /// length comparisons where a hash map would hash a text of several hundred bytes at every
    /// statement.
    prepared: Vec<(&'static str, Statement)>,
}

impl Conn {
    /// Wraps a new connection; `prepares` is false behind a transaction pooler.
    pub fn new(client: Client, prepares: bool) -> Self {
        Conn {
            client,
            prepares,
            prepared: Vec::new(),
        }
    }

    /// Prepares whichever of `statements` this connection has not prepared yet, all in one round
    /// trip; nothing at all when it may not prepare. On an error nothing new is kept and the
    /// statements keep running unnamed.
    pub async fn prepare(&mut self, statements: &[(&'static str, &[Type])]) -> Result<(), Error> {
        if !self.prepares {
            return Ok(());
        }
        let missing: Vec<&(&'static str, &[Type])> = statements
            .iter()
            .filter(|(sql, _)| self.find(sql).is_none())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let batch: Vec<Pending<'_, Statement>> = missing
            .iter()
            .map(|(sql, types)| {
                Box::pin(self.client.prepare_typed(sql, types)) as Pending<'_, Statement>
            })
            .collect();
        let prepared = pipelined(batch)
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        for ((sql, _), statement) in missing.into_iter().zip(prepared) {
            self.prepared.push((sql, statement));
        }
        Ok(())
    }

    /// The prepared form of `sql`. The text is nearly always the very constant it was prepared
    /// from, so its address settles it; otherwise the bytes do.
    fn find(&self, sql: &str) -> Option<&Statement> {
        self.prepared
            .iter()
            .find(|(text, _)| std::ptr::eq(*text, sql) || *text == sql)
            .map(|(_, statement)| statement)
    }

    /// Forgets every prepared statement, so they are prepared again at next use: after an error,
    /// which may mean the schema changed under them ("cached plan must not change result type").
    pub fn forget_prepared(&mut self) {
        self.prepared.clear();
    }
}

impl std::ops::Deref for Conn {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
    }
}

/// What the ledger's statements run on: a [`Conn`], which may have them prepared, or a bare
/// client, which runs everything unnamed.
pub trait Runner: Sync {
    /// The client underneath.
    fn client(&self) -> &Client;

    /// The prepared form of `sql`, when this connection has one.
    fn prepared(&self, sql: &str) -> Option<&Statement>;
}

impl Runner for Client {
    fn client(&self) -> &Client {
        self
    }

    fn prepared(&self, _sql: &str) -> Option<&Statement> {
        None
    }
}

impl Runner for Conn {
    fn client(&self) -> &Client {
        &self.client
    }

    fn prepared(&self, sql: &str) -> Option<&Statement> {
        self.find(sql)
    }
}

/// Runs `sql` with typed `params` and returns its rows: bound to the prepared statement when
/// `on` has one, otherwise as an unnamed statement. One round trip either way.
pub async fn query(
    on: &impl Runner,
    sql: &str,
    params: &[(&(dyn ToSql + Sync), Type)],
) -> Result<Vec<Row>, Error> {
    match on.prepared(sql) {
        Some(statement) => on.client().query(statement, &values(params)).await,
        None => on.client().query_typed(sql, params).await,
    }
}

/// Like [`query`], for a statement whose affected-row count is the answer.
pub async fn execute(
    on: &impl Runner,
    sql: &str,
    params: &[(&(dyn ToSql + Sync), Type)],
) -> Result<u64, Error> {
    match on.prepared(sql) {
        Some(statement) => on.client().execute(statement, &values(params)).await,
        None => on.client().execute_typed(sql, params).await,
    }
}

fn values<'a>(params: &[(&'a (dyn ToSql + Sync), Type)]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|(v, _)| *v).collect()
}

/// A request in a pipelined batch.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// Polls every request in order until all are answered. tokio-postgres writes a request when
/// its future is first polled and answers requests in the order written, so the whole batch
/// goes out before the first answer is awaited: one round trip.
pub async fn pipelined<T>(mut batch: Vec<Pending<'_, T>>) -> Vec<Result<T, Error>> {
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
