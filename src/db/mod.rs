//! The execution environment's one database connection: made at first use, reused by every
//! later invocation, and remade once when it turns out to be dead.
//!
//! Lambda freezes an idle environment; when it thaws, the socket may have been closed by the
//! server, a NAT or a proxy. Every operation therefore runs under a client-side deadline, and a
//! connection-level failure drops the connection, connects again and retries the operation once.
//! That is safe because the claim is idempotent per owner and finishing is fenced.
//!
//! The login comes from [`Credentials`], consulted at every connect: fixed settings, an
//! RDS-format secret that is read again once when the server refuses its password (a rotation),
//! or an RDS IAM token signed afresh for each connection.
//!
//! Server-side timeouts travel in the startup `options` on a direct connection. A transaction
//! pooler refuses that parameter (PgBouncer: "unsupported startup parameter: options"; RDS
//! Proxy: "doesn't support command-line options") or, configured to ignore it, drops it, so with
//! [`DbSettings::pooled`] none is sent and the timeouts come from the database role
//! (`ALTER ROLE … SET statement_timeout`), which every pooled server connection logs in with.
//! The client-side deadline applies either way, and when it fires the statement is cancelled on
//! the server before the connection is let go, so it cannot keep running (and keep its locks)
//! on a server connection behind the pooler.

mod cancel;
mod tls;

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(feature = "secrets-manager")]
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};
use tokio::task::JoinHandle;
use tokio_postgres::config::Host;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

#[cfg(feature = "secrets-manager")]
use crate::aws::DatabaseSecret;
#[cfg(feature = "rds-iam")]
use crate::aws::RdsIamAuth;
use crate::config::DbSettings;

/// Why a database operation failed, as the caller needs to tell it apart.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The connection could not be made (refused, timed out, TLS or authentication failed).
    #[error("cannot connect to the database: {0}")]
    Connect(String),
    /// The operation ran past its deadline even after one reconnect.
    #[error("database operation timed out")]
    Timeout,
    /// The connection broke and the one retry did not succeed either.
    #[error("database connection lost: {}", describe(.0))]
    Connection(tokio_postgres::Error),
    /// The server rejected the statement (a bug, a constraint, or a server-side timeout).
    #[error("database error: {}", describe(.0))]
    Query(tokio_postgres::Error),
    /// The TLS setup could not be built (unreadable or invalid CA file).
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// The server is older than the schema needs ([`crate::schema::MIN_SERVER_VERSION_NUM`]).
    #[error(
        "the database server is PostgreSQL {found}; hookclaim needs PostgreSQL 14 or later (its \
         schema's SQL functions have SQL-standard bodies)"
    )]
    ServerTooOld {
        /// The server's `server_version`.
        found: String,
    },
    /// The schema is older than this build and the function may not migrate it
    /// (`HOOKCLAIM_MIGRATE=never`).
    #[error(
        "the database schema is at version {current} and this build needs {required}; this \
         function does not migrate (HOOKCLAIM_MIGRATE=never): apply the migrations with the owner \
         role by invoking the retention function with {{\"command\":\"migrate\"}}"
    )]
    SchemaBehind {
        /// The version the database is at (0: hookclaim's tables do not exist).
        current: i32,
        /// The version this build needs.
        required: i32,
    },
}

impl DbError {
    /// True when the database could not be reached or broke off: the caller answers "try later".
    pub fn is_unavailable(&self) -> bool {
        !matches!(self, DbError::Tls(_))
    }

    /// True when a statement ran out of time: the client's deadline, or the server's statement
    /// timeout (SQLSTATE 57014).
    pub fn is_timeout(&self) -> bool {
        match self {
            DbError::Timeout => true,
            DbError::Query(e) => e.code() == Some(&SqlState::QUERY_CANCELED),
            _ => false,
        }
    }
}

/// A database operation for [`Session::run`]: a future borrowing the connection (`'c`) and the
/// caller's data, boxed so that it can be made again for a retry.
pub type Op<'c, T> = Pin<Box<dyn Future<Output = Result<T, tokio_postgres::Error>> + Send + 'c>>;

/// The second argument of an operation: its type tells the compiler that the caller's data
/// (`'a`) outlives the connection's borrow (`'c`), so the operation's future may hold both.
pub type Borrows<'c, 'a> = PhantomData<&'c &'a ()>;

/// Where the connection's login comes from; consulted at every connect.
pub enum Credentials {
    /// The user and password in [`DbSettings::pg`] (`DATABASE_URL`).
    Fixed,
    /// The login in an RDS-format secret (`DATABASE_SECRET_ARN`), which replaces
    /// [`DbSettings::pg`]'s host, port, user, password and database. When the server refuses
    /// it, the secret is read again (rate-limited) and the connect is tried once more.
    #[cfg(feature = "secrets-manager")]
    Secret(Arc<DatabaseSecret>),
    /// RDS IAM authentication (`DATABASE_IAM_AUTH`): a token signed at each connect for
    /// [`DbSettings::pg`]'s user, host and port is the password, so it is never older than the
    /// connection attempt.
    #[cfg(feature = "rds-iam")]
    IamToken(RdsIamAuth),
}

impl Credentials {
    /// The settings the next connect uses: `base` with this login applied.
    pub async fn login(
        &self,
        base: &tokio_postgres::Config,
    ) -> Result<tokio_postgres::Config, DbError> {
        match self {
            Credentials::Fixed => Ok(base.clone()),
            #[cfg(feature = "secrets-manager")]
            Credentials::Secret(secret) => Ok(secret.login()),
            #[cfg(feature = "rds-iam")]
            Credentials::IamToken(iam) => {
                let (Some(Host::Tcp(host)), Some(user)) =
                    (base.get_hosts().first(), base.get_user())
                else {
                    return Err(DbError::Connect(
                        "RDS IAM authentication needs a TCP host and a user".into(),
                    ));
                };
                let port = base.get_ports().first().copied().unwrap_or(5432);
                let token = iam
                    .token(host, port, user)
                    .await
                    .map_err(DbError::Connect)?;
                let mut pg = base.clone();
                pg.password(token);
                Ok(pg)
            }
        }
    }

    /// After the server refused the login: true when a different login is now to be had.
    async fn renew(&self) -> bool {
        match self {
            #[cfg(feature = "secrets-manager")]
            Credentials::Secret(secret) => secret.refresh().await,
            Credentials::Fixed => false,
            // A token is already signed afresh for every attempt.
            #[cfg(feature = "rds-iam")]
            Credentials::IamToken(_) => false,
        }
    }
}

/// The execution environment's database: one connection, lent to one invocation at a time.
pub struct Database {
    settings: DbSettings,
    credentials: Credentials,
    tls: Option<tls::Connector>,
    conn: Mutex<Option<Client>>,
    connects: AtomicU64,
    /// Pooled mode: whether the role's server-side timeouts have been checked (once).
    timeouts_checked: AtomicBool,
    /// Host and port of the last connection made, where a cancel request goes.
    target: std::sync::Mutex<Option<(String, u16)>>,
}

/// How one connection attempt ended.
enum ConnectAttempt {
    Connected(Client),
    /// The server refused the login (SQLSTATE 28P01 or 28000).
    Refused(tokio_postgres::Error),
    Failed(DbError),
}

impl Database {
    #[cfg(feature = "internals")]
    /// Prepares (but does not open) the connection with the login in `settings`; reads the CA
    /// file now so a bad one fails the cold start rather than the first delivery.
    pub fn new(settings: DbSettings) -> Result<Self, DbError> {
        Self::with_credentials(settings, Credentials::Fixed)
    }

    /// Like [`Database::new`], with the login from `credentials`.
    pub fn with_credentials(
        settings: DbSettings,
        credentials: Credentials,
    ) -> Result<Self, DbError> {
        let tls = tls::connector(settings.tls, settings.ca_file.as_deref())?;
        Ok(Database {
            settings,
            credentials,
            tls,
            conn: Mutex::new(None),
            connects: AtomicU64::new(0),
            timeouts_checked: AtomicBool::new(false),
            target: std::sync::Mutex::new(None),
        })
    }

    #[cfg(feature = "internals")]
    /// Where the login comes from.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    #[cfg(feature = "internals")]
    /// The settings this database was made with.
    pub fn settings(&self) -> &DbSettings {
        &self.settings
    }

    fn target(&self) -> Option<(String, u16)> {
        self.target.lock().ok()?.clone()
    }

    #[cfg(feature = "internals")]
    /// How many connections this environment has opened so far.
    pub fn connect_count(&self) -> u64 {
        self.connects.load(Ordering::Relaxed)
    }

    /// Borrows the connection for one invocation.
    pub async fn session(&self) -> Session<'_> {
        Session {
            db: self,
            guard: self.conn.lock().await,
            abandoned: None,
        }
    }

    /// Opens a connection. A refused login is tried once more if the credentials can be
    /// renewed (a rotated password in the secret).
    async fn connect(&self) -> Result<Client, DbError> {
        let client = self.connect_with_renewal().await?;
        if self.settings.pooled && !self.timeouts_checked.swap(true, Ordering::Relaxed) {
            self.check_role_timeouts(&client).await;
        }
        Ok(client)
    }

    async fn connect_with_renewal(&self) -> Result<Client, DbError> {
        let refused = match self.attempt().await {
            ConnectAttempt::Connected(client) => return Ok(client),
            ConnectAttempt::Failed(e) => return Err(e),
            ConnectAttempt::Refused(e) => e,
        };
        if !self.credentials.renew().await {
            return Err(DbError::Connect(describe(&refused)));
        }
        match self.attempt().await {
            ConnectAttempt::Connected(client) => Ok(client),
            ConnectAttempt::Refused(e) => Err(DbError::Connect(describe(&e))),
            ConnectAttempt::Failed(e) => Err(e),
        }
    }

    /// Pooled mode sends no startup options, so the server-side timeouts are whatever the role
    /// (or database) defaults say. Warns, once per environment, when they are off: a runaway
    /// statement or an abandoned transaction would then hold a pooled server connection until
    /// the client's cancel reaches it, or forever if the client died.
    async fn check_role_timeouts(&self, client: &Client) {
        let read = client.query_typed_one(include_str!("sql/role_timeouts.sql"), &[]);
        let Ok(Ok(row)) = tokio::time::timeout(self.settings.statement_timeout, read).await else {
            // The first real statement will meet whatever is wrong with the connection.
            return;
        };
        let statement: String = row.get(0);
        let idle_in_transaction: String = row.get(1);
        if statement == "0" || idle_in_transaction == "0" {
            tracing::warn!(
                statement_timeout = %statement,
                idle_in_transaction_session_timeout = %idle_in_transaction,
                "DATABASE_POOLED: the server applies no timeout to this role; set them on it, e.g. \
                 ALTER ROLE <user> SET statement_timeout = '{}ms'; \
                 ALTER ROLE <user> SET idle_in_transaction_session_timeout = '{}ms'",
                self.settings.statement_timeout.as_millis(),
                self.settings.statement_timeout.as_millis() * 4,
            );
        }
    }

    async fn attempt(&self) -> ConnectAttempt {
        let mut pg = match self.credentials.login(&self.settings.pg).await {
            Ok(pg) => pg,
            Err(e) => return ConnectAttempt::Failed(e),
        };
        // read-write: a node that is read-only (a standby, or a primary being demoted) is
        // refused at connect, so a reconnect after a failover never settles on it.
        pg.connect_timeout(self.settings.connect_timeout)
            .keepalives(true)
            .keepalives_idle(self.settings.keepalive_idle)
            .target_session_attrs(tokio_postgres::config::TargetSessionAttrs::ReadWrite);
        // The URL's own options (a `search_path`, say) follow the timeouts, so they are kept
        // and win where both set one.
        if let Some(options) = startup_options(&self.settings) {
            let options = match pg.get_options() {
                Some(own) => format!("{options} {own}"),
                None => options,
            };
            pg.options(options);
        }
        let connect = async {
            match &self.tls {
                None => {
                    let (client, conn) = pg.connect(NoTls).await?;
                    tokio::spawn(drive(conn));
                    Ok(client)
                }
                Some(tls) => {
                    pg.ssl_mode(tokio_postgres::config::SslMode::Require);
                    let (client, conn) = pg.connect(tls.clone()).await?;
                    tokio::spawn(drive(conn));
                    Ok::<_, tokio_postgres::Error>(client)
                }
            }
        };
        match tokio::time::timeout(self.settings.connect_timeout, connect).await {
            Err(_) => ConnectAttempt::Failed(DbError::Connect("timed out".into())),
            Ok(Err(e)) if is_login_refused(&e) => ConnectAttempt::Refused(e),
            Ok(Err(e)) => ConnectAttempt::Failed(DbError::Connect(with_pooler_hint(
                describe(&e),
                self.settings.pooled,
            ))),
            Ok(Ok(client)) => {
                self.connects.fetch_add(1, Ordering::Relaxed);
                if let (Some(Host::Tcp(host)), Ok(mut target)) =
                    (pg.get_hosts().first(), self.target.lock())
                {
                    let port = pg.get_ports().first().copied().unwrap_or(5432);
                    *target = Some((host.clone(), port));
                }
                ConnectAttempt::Connected(client)
            }
        }
    }
}

/// Runs a connection's I/O until it ends. A connection future that is not polled makes every
/// query on its client hang, so it is always spawned, and its end is logged.
async fn drive<S, T>(conn: tokio_postgres::Connection<S, T>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if let Err(e) = conn.await {
        tracing::warn!(error = %describe(&e), "database connection closed");
    }
}

/// The connection, lent to one invocation. Holding it serialises invocations that share an
/// environment (Lambda sends one at a time anyway).
pub struct Session<'a> {
    db: &'a Database,
    guard: MutexGuard<'a, Option<Client>>,
    /// The cancel of a statement given up at a deadline; true once that statement has ended.
    abandoned: Option<JoinHandle<bool>>,
}

impl Session<'_> {
    /// The live connection, connecting first if there is none or it has closed.
    pub async fn client(&mut self) -> Result<&mut Client, DbError> {
        if self.guard.as_ref().is_none_or(|c| c.is_closed()) {
            *self.guard = None;
            *self.guard = Some(self.db.connect().await?);
        }
        self.guard.as_mut().ok_or(DbError::Timeout)
    }

    /// Forgets the connection, so the next use connects afresh. For use after a failure in the
    /// middle of a transaction, when the connection's state is unknown.
    pub fn discard(&mut self) {
        *self.guard = None;
    }

    /// Runs `op` on the connection under the statement deadline; on a connection-level failure
    /// (or a deadline, which may mean a dead socket), reconnects once and runs it again. Every
    /// ledger operation may run twice: the claim is idempotent per owner, finishing is fenced,
    /// and the rest are reads or batches. For example
    /// `session.run(|c, _| Box::pin(ledger::claim(c, &delivery, &claimant, false)))`.
    ///
    /// After a deadline the retry first waits, up to [`SETTLE_WAIT`], until the server has ended
    /// the first try: until then that try holds its key's locks, and a claim meeting them
    /// answers "in progress" although the first try is about to roll back. An end that is never
    /// confirmed (the socket is dead, or only its answers are lost) is not waited for longer:
    /// by then the cancel has reached the server, and the retry is the only way to an answer.
    pub async fn run<'a, T>(
        &mut self,
        op: impl for<'c> Fn(&'c Client, Borrows<'c, 'a>) -> Op<'c, T>,
    ) -> Result<T, DbError> {
        // Only the cancel of this call's own first try matters to its retry.
        self.abandoned = None;
        match self.try_once(&op).await {
            Err(e) if is_retryable(&e) => {
                self.settle().await;
                tracing::info!(error = %e, "database connection failed; reconnecting once");
                self.discard();
                self.try_once(&op).await
            }
            other => other,
        }
    }

    /// Waits, up to [`SETTLE_WAIT`], for the statement abandoned at the last deadline (if any)
    /// to have ended on the server.
    async fn settle(&mut self) {
        let Some(cancel) = self.abandoned.take() else {
            return;
        };
        if !matches!(tokio::time::timeout(SETTLE_WAIT, cancel).await, Ok(Ok(true))) {
            tracing::info!("the end of the statement given up on is not confirmed; retrying");
        }
    }

    /// Runs `op` under the client-side deadline, once.
    async fn try_once<'a, T>(
        &mut self,
        op: &impl for<'c> Fn(&'c Client, Borrows<'c, 'a>) -> Op<'c, T>,
    ) -> Result<T, DbError> {
        let deadline = self.db.settings.statement_timeout + CLIENT_SLACK;
        let client = self.client().await?;
        match tokio::time::timeout(deadline, op(client, PhantomData)).await {
            Err(_) => {
                // The socket may be dead; its state is unknown either way.
                self.cancel_and_discard();
                Err(DbError::Timeout)
            }
            Ok(result) => result.map_err(classify),
        }
    }

    /// Lets go of the connection in whatever state it is, asking the server to cancel a
    /// statement that may still be running on it: for work abandoned at a deadline.
    pub fn abandon(&mut self) {
        self.cancel_and_discard();
    }

    /// Forgets the connection after its statement overran the client deadline, asking the
    /// server to cancel that statement first. Closing the socket alone does not stop it: behind
    /// a pooler the server connection keeps running it (and holding its locks) after the pooler
    /// lets go of the client, and a direct backend only notices when it next writes. The old
    /// client stays open until the cancelled statement and its transaction have ended (all
    /// bounded by the connect timeout), so the pooler gets its server connection back instead of
    /// having to close it; [`Session::settle`] waits for that.
    fn cancel_and_discard(&mut self) {
        let Some(client) = self.guard.take() else {
            return;
        };
        let Some(target) = self.db.target() else {
            return;
        };
        let token = client.cancel_token();
        let tls = self.db.tls.clone();
        let limit = self.db.settings.connect_timeout;
        self.abandoned = Some(tokio::spawn(async move {
            let settle = async {
                cancel::cancel(&token, tls, target).await?;
                // Requests are answered in order: this returns once the cancelled statement
                // has ended, and with it any transaction it was in.
                client.batch_execute("ROLLBACK").await.map_err(cancel::io_error)
            };
            match tokio::time::timeout(limit, settle).await {
                Ok(Ok(())) => true,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "cancel after the client deadline not confirmed");
                    false
                }
                Err(_) => false,
            }
        }));
    }
}

/// Extra time the client allows beyond the server's statement timeout before it gives up on the
/// socket: the server's own cancellation should normally win.
const CLIENT_SLACK: Duration = Duration::from_millis(500);

/// How long a retry after a deadline waits for the server to confirm the first try has ended: a
/// cancel on a live connection is confirmed in milliseconds; a dead socket never confirms.
const SETTLE_WAIT: Duration = Duration::from_millis(500);

/// The startup `options` for a direct connection: the server-side timeouts, so the server ends a
/// runaway statement or an abandoned transaction on its own. `None` behind a pooler, which
/// refuses or drops them.
fn startup_options(settings: &DbSettings) -> Option<String> {
    if settings.pooled {
        return None;
    }
    let ms = settings.statement_timeout.as_millis();
    Some(format!(
        "-c statement_timeout={ms} -c idle_in_transaction_session_timeout={}",
        ms * 4
    ))
}

/// A connect error, with the fix named when it is a pooler refusing the startup options.
fn with_pooler_hint(message: String, pooled: bool) -> String {
    let refused_options = message.contains("unsupported startup parameter")
        || message.contains("command-line options");
    if pooled || !refused_options {
        return message;
    }
    format!(
        "{message}; a connection pooler (PgBouncer, RDS Proxy) refuses startup options: \
         set DATABASE_POOLED=true"
    )
}

/// Wraps a driver error as a connection failure or a statement failure.
pub fn classify(e: tokio_postgres::Error) -> DbError {
    if is_connection_error(&e) {
        DbError::Connection(e)
    } else {
        DbError::Query(e)
    }
}

/// True for errors that mean the connection is unusable: closed sockets, I/O errors, the
/// server's shutdown and connection-exception codes (including `pg_terminate_backend`), and a
/// server that no longer accepts writes (25006: after a failover the old primary is read-only or
/// a standby in recovery, while the endpoint's name already leads to the new primary).
pub fn is_connection_error(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        return code == &SqlState::ADMIN_SHUTDOWN
            || code == &SqlState::CRASH_SHUTDOWN
            || code == &SqlState::CANNOT_CONNECT_NOW
            || code == &SqlState::READ_ONLY_SQL_TRANSACTION
            || code.code().starts_with("08");
    }
    // No SQLSTATE: an I/O or protocol failure underneath.
    std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

/// True when the server refused the login: a wrong password (28P01), or an authorization
/// failure such as a failed IAM token (28000).
fn is_login_refused(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|code| {
        code == &SqlState::INVALID_PASSWORD
            || code == &SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    })
}

fn is_retryable(e: &DbError) -> bool {
    matches!(e, DbError::Connection(_) | DbError::Timeout)
}

/// A driver error as one line, including the server's message and code where there is one.
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => match std::error::Error::source(e) {
            Some(src) => format!("{e}: {src}"),
            None => e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TlsMode;

    fn settings(pooled: bool) -> DbSettings {
        DbSettings {
            pg: tokio_postgres::Config::new(),
            tls: TlsMode::Disable,
            ca_file: None,
            connect_timeout: Duration::from_secs(3),
            statement_timeout: Duration::from_millis(5000),
            keepalive_idle: Duration::from_secs(30),
            pooled,
        }
    }

    #[test]
    fn direct_connections_carry_the_timeouts_and_pooled_ones_send_no_options() {
        assert_eq!(
            startup_options(&settings(false)).as_deref(),
            Some("-c statement_timeout=5000 -c idle_in_transaction_session_timeout=20000")
        );
        assert_eq!(startup_options(&settings(true)), None);
    }

    #[test]
    fn a_pooler_refusing_startup_options_is_answered_with_the_setting_to_use() {
        let pgbouncer = "unsupported startup parameter: options (08P01)".to_string();
        let rds_proxy = "Feature not supported: RDS Proxy currently doesn't support \
                         command-line options. (0A000)"
            .to_string();
        for refusal in [pgbouncer, rds_proxy] {
            assert!(with_pooler_hint(refusal.clone(), false).ends_with("set DATABASE_POOLED=true"));
            assert_eq!(with_pooler_hint(refusal.clone(), true), refusal);
        }
        let other = "connection refused".to_string();
        assert_eq!(with_pooler_hint(other.clone(), false), other);
    }
}
