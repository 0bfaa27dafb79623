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

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};
use tokio_postgres::config::Host;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

use crate::aws::{DatabaseSecret, RdsIamAuth};

/// How the connection is encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain TCP (local development only).
    Disable,
    /// TLS without certificate checks: encrypted, but not protected from impersonation.
    Require,
    /// TLS with the server certificate checked against a CA bundle and the host name.
    VerifyFull,
}

impl std::str::FromStr for TlsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "disable" => Ok(TlsMode::Disable),
            "require" => Ok(TlsMode::Require),
            "verify-full" => Ok(TlsMode::VerifyFull),
            other => Err(format!(
                "{other:?} is not one of disable, require, verify-full"
            )),
        }
    }
}

/// Everything needed to open a connection.
#[derive(Clone)]
pub struct DbSettings {
    /// Host, port, user, password, database (from `DATABASE_URL` or a secret); see
    /// [`Credentials`] for what replaces which part at connect.
    pub pg: tokio_postgres::Config,
    /// Encryption mode.
    pub tls: TlsMode,
    /// PEM bundle of trusted CAs for `verify-full` (the RDS global bundle in production).
    pub ca_file: Option<PathBuf>,
    /// Bound on TCP connect plus TLS and startup.
    pub connect_timeout: Duration,
    /// Bound on any one operation, enforced both by the server and by the client.
    pub statement_timeout: Duration,
    /// TCP keepalive idle time, so a dead peer is noticed while the environment is warm.
    pub keepalive_idle: Duration,
}

impl std::fmt::Debug for DbSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // tokio_postgres::Config's Debug already redacts the password.
        f.debug_struct("DbSettings")
            .field("pg", &self.pg)
            .field("tls", &self.tls)
            .field("ca_file", &self.ca_file)
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .finish()
    }
}

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
}

impl DbError {
    /// True when the database could not be reached or broke off: the caller answers "try later".
    pub fn is_unavailable(&self) -> bool {
        !matches!(self, DbError::Tls(_))
    }
}

/// A boxed future borrowing the client, for operations that may be retried.
pub type Op<'c, T> = Pin<Box<dyn Future<Output = Result<T, tokio_postgres::Error>> + Send + 'c>>;

/// Marker argument whose type proves `'a: 'c`, so an operation's future may borrow both the
/// client (`'c`) and the caller's data (`'a`).
pub type Borrows<'c, 'a> = std::marker::PhantomData<&'c &'a ()>;

/// Where the connection's login comes from; consulted at every connect.
pub enum Credentials {
    /// The user and password in [`DbSettings::pg`] (`DATABASE_URL`).
    Fixed,
    /// The login in an RDS-format secret (`DATABASE_SECRET_ARN`), which replaces
    /// [`DbSettings::pg`]'s host, port, user, password and database. When the server refuses
    /// it, the secret is read again (rate-limited) and the connect is tried once more.
    Secret(Arc<DatabaseSecret>),
    /// RDS IAM authentication (`DATABASE_IAM_AUTH`): a token signed at each connect for
    /// [`DbSettings::pg`]'s user, host and port is the password, so it is never older than the
    /// connection attempt.
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
            Credentials::Secret(secret) => Ok(secret.login()),
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
            Credentials::Secret(secret) => secret.refresh().await,
            // A token is already signed afresh for every attempt.
            Credentials::Fixed | Credentials::IamToken(_) => false,
        }
    }
}

/// The execution environment's database: one connection, lent to one invocation at a time.
pub struct Database {
    settings: DbSettings,
    credentials: Credentials,
    tls: Option<postgres_native_tls::MakeTlsConnector>,
    conn: Mutex<Option<Client>>,
    connects: AtomicU64,
}

/// How one connection attempt ended.
enum Attempt {
    Connected(Client),
    /// The server refused the login (SQLSTATE 28P01 or 28000).
    Refused(tokio_postgres::Error),
    Failed(DbError),
}

impl Database {
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
        let tls = match settings.tls {
            TlsMode::Disable => None,
            mode => Some(tls_connector(mode, settings.ca_file.as_deref())?),
        };
        Ok(Database {
            settings,
            credentials,
            tls,
            conn: Mutex::new(None),
            connects: AtomicU64::new(0),
        })
    }

    /// Where the login comes from.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// The settings this database was made with.
    pub fn settings(&self) -> &DbSettings {
        &self.settings
    }

    /// How many connections this environment has opened so far.
    pub fn connect_count(&self) -> u64 {
        self.connects.load(Ordering::Relaxed)
    }

    /// Borrows the connection for one invocation.
    pub async fn session(&self) -> Session<'_> {
        Session {
            db: self,
            guard: self.conn.lock().await,
        }
    }

    /// Opens a connection. A refused login is tried once more if the credentials can be
    /// renewed (a rotated password in the secret).
    async fn connect(&self) -> Result<Client, DbError> {
        let refused = match self.attempt().await {
            Attempt::Connected(client) => return Ok(client),
            Attempt::Failed(e) => return Err(e),
            Attempt::Refused(e) => e,
        };
        if !self.credentials.renew().await {
            return Err(DbError::Connect(describe(&refused)));
        }
        match self.attempt().await {
            Attempt::Connected(client) => Ok(client),
            Attempt::Refused(e) => Err(DbError::Connect(describe(&e))),
            Attempt::Failed(e) => Err(e),
        }
    }

    async fn attempt(&self) -> Attempt {
        let mut pg = match self.credentials.login(&self.settings.pg).await {
            Ok(pg) => pg,
            Err(e) => return Attempt::Failed(e),
        };
        pg.connect_timeout(self.settings.connect_timeout)
            .keepalives(true)
            .keepalives_idle(self.settings.keepalive_idle)
            .options(format!(
                "-c statement_timeout={} -c idle_in_transaction_session_timeout={}",
                self.settings.statement_timeout.as_millis(),
                self.settings.statement_timeout.as_millis() * 4
            ));
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
            Err(_) => Attempt::Failed(DbError::Connect("timed out".into())),
            Ok(Err(e)) if is_login_refused(&e) => Attempt::Refused(e),
            Ok(Err(e)) => Attempt::Failed(DbError::Connect(describe(&e))),
            Ok(Ok(client)) => {
                self.connects.fetch_add(1, Ordering::Relaxed);
                Attempt::Connected(client)
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
}

impl Session<'_> {
    /// The live connection, connecting first if there is none or it has closed.
    pub async fn client(&mut self) -> Result<&mut Client, DbError> {
        if self.guard.as_ref().is_none_or(Client::is_closed) {
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

    /// Runs `op` under the statement deadline; on a connection-level failure (or a deadline,
    /// which may mean a dead socket), reconnects once and runs it again.
    pub async fn run<'a, T>(
        &mut self,
        op: impl for<'c> Fn(&'c Client, Borrows<'c, 'a>) -> Op<'c, T>,
    ) -> Result<T, DbError> {
        match self.try_once(&op).await {
            Err(e) if is_retryable(&e) => {
                tracing::info!(error = %e, "database connection failed; reconnecting once");
                self.discard();
                self.try_once(&op).await
            }
            other => other,
        }
    }

    /// Runs `op` under the client-side deadline, once.
    pub async fn try_once<'a, T>(
        &mut self,
        op: &impl for<'c> Fn(&'c Client, Borrows<'c, 'a>) -> Op<'c, T>,
    ) -> Result<T, DbError> {
        let deadline = self.db.settings.statement_timeout + CLIENT_SLACK;
        let client = self.client().await?;
        match tokio::time::timeout(deadline, op(client, std::marker::PhantomData)).await {
            Err(_) => {
                // The socket may be dead; its state is unknown either way.
                self.discard();
                Err(DbError::Timeout)
            }
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(classify(e)),
        }
    }
}

/// Extra time the client allows beyond the server's statement timeout before it gives up on the
/// socket: the server's own cancellation should normally win.
const CLIENT_SLACK: Duration = Duration::from_millis(500);

/// Wraps a driver error as a connection failure or a statement failure.
pub fn classify(e: tokio_postgres::Error) -> DbError {
    if is_connection_error(&e) {
        DbError::Connection(e)
    } else {
        DbError::Query(e)
    }
}

/// True for errors that mean the connection is unusable: closed sockets, I/O errors, and the
/// server's shutdown and connection-exception codes (including `pg_terminate_backend`).
pub fn is_connection_error(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        return code == &SqlState::ADMIN_SHUTDOWN
            || code == &SqlState::CRASH_SHUTDOWN
            || code == &SqlState::CANNOT_CONNECT_NOW
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

fn tls_connector(
    mode: TlsMode,
    ca_file: Option<&std::path::Path>,
) -> Result<postgres_native_tls::MakeTlsConnector, DbError> {
    let mut builder = native_tls::TlsConnector::builder();
    match mode {
        TlsMode::Disable => {}
        TlsMode::Require => {
            builder
                .danger_accept_invalid_certs(true)
                .danger_accept_invalid_hostnames(true);
        }
        TlsMode::VerifyFull => {
            let path = ca_file.ok_or_else(|| {
                DbError::Tls("verify-full needs a CA bundle file (DATABASE_CA_FILE)".into())
            })?;
            let pem = std::fs::read(path)
                .map_err(|e| DbError::Tls(format!("cannot read {}: {e}", path.display())))?;
            let certs = pem_certificates(&pem);
            if certs.is_empty() {
                return Err(DbError::Tls(format!(
                    "{} holds no PEM certificate",
                    path.display()
                )));
            }
            // Trust exactly the bundle: a public CA must not vouch for the database.
            builder.disable_built_in_roots(true);
            for cert in certs {
                let cert = native_tls::Certificate::from_pem(cert.as_bytes()).map_err(|e| {
                    DbError::Tls(format!("invalid certificate in {}: {e}", path.display()))
                })?;
                builder.add_root_certificate(cert);
            }
        }
    }
    let connector = builder
        .build()
        .map_err(|e| DbError::Tls(format!("cannot build TLS connector: {e}")))?;
    Ok(postgres_native_tls::MakeTlsConnector::new(connector))
}

/// Splits a PEM bundle (such as the RDS global bundle) into its certificates.
fn pem_certificates(pem: &[u8]) -> Vec<String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let text = String::from_utf8_lossy(pem);
    let mut certs = Vec::new();
    let mut rest = text.as_ref();
    while let Some(start) = rest.find(BEGIN) {
        let Some(len) = rest[start..].find(END) else {
            break;
        };
        let end = start + len + END.len();
        certs.push(rest[start..end].to_string());
        rest = &rest[end..];
    }
    certs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_modes_parse_and_bad_ones_are_named() {
        assert_eq!("verify-full".parse::<TlsMode>(), Ok(TlsMode::VerifyFull));
        assert!("verify_full"
            .parse::<TlsMode>()
            .unwrap_err()
            .contains("verify_full"));
    }

    #[test]
    fn pem_bundle_is_split_into_certificates() {
        let one = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let bundle = format!("junk\n{one}{one}-----BEGIN CERTIFICATE-----\ntruncated");
        assert_eq!(pem_certificates(bundle.as_bytes()).len(), 2);
        assert!(pem_certificates(b"nothing").is_empty());
    }

    #[test]
    fn verify_full_without_ca_file_is_refused() {
        let err = tls_connector(TlsMode::VerifyFull, None).err().unwrap();
        assert!(err.to_string().contains("DATABASE_CA_FILE"));
    }
}
