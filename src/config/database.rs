//! Database settings: where the login comes from, where the server is, TLS, timeouts, IAM
//! authentication, pooling, and whether this function may migrate the schema.

use std::path::PathBuf;
use std::time::Duration;

use super::{bad, choice, flag, int, ConfigError, Lookup};

/// Where database credentials come from.
#[derive(Debug, Clone)]
pub enum DatabaseFrom {
    /// `DATABASE_URL`.
    Url(Box<tokio_postgres::Config>),
    /// `DATABASE_SECRET_ARN`: a secret in the RDS format. An RDS-managed secret holds only
    /// `username` and `password`; the full format adds `host`, `port` and `dbname`. What the
    /// secret lacks comes from [`Endpoint`].
    SecretsManager {
        /// The secret's ARN or name.
        arn: String,
        /// `DATABASE_SECRET_REFRESH_SECS`: after a refused login, the secret is read again only
        /// if it was last read longer ago than this.
        min_refresh_interval: Duration,
    },
}

/// `DATABASE_HOST`, `DATABASE_PORT`, `DATABASE_NAME`: where the server is, for secrets that do
/// not say (RDS-managed secrets hold only `username` and `password`) or to send the connection
/// elsewhere (an RDS Proxy endpoint). Each one that is set wins over the secret or URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// `DATABASE_HOST`: the instance, cluster or proxy endpoint, without the port.
    pub host: Option<String>,
    /// `DATABASE_PORT`.
    pub port: Option<u16>,
    /// `DATABASE_NAME`.
    pub dbname: Option<String>,
}

/// The parts of a login as a secret or URL holds them; any of them may be missing.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LoginParts {
    /// The database user.
    pub user: Option<String>,
    /// Its password.
    pub password: Option<String>,
    /// Host name.
    pub host: Option<String>,
    /// Port.
    pub port: Option<u16>,
    /// Database name.
    pub dbname: Option<String>,
}

impl std::fmt::Debug for LoginParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginParts")
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "[redacted]"))
            .field("host", &self.host)
            .field("port", &self.port)
            .field("dbname", &self.dbname)
            .finish()
    }
}

/// The port when neither the secret nor `DATABASE_PORT` gives one.
pub const DEFAULT_PORT: u16 = 5432;
/// The database when neither the secret nor `DATABASE_NAME` names one (RDS's default database).
pub const DEFAULT_DBNAME: &str = "postgres";

impl Endpoint {
    fn read(get: Lookup<'_>) -> Result<Self, ConfigError> {
        let host = get("DATABASE_HOST").map(|h| h.trim().to_string());
        if let Some(h) = &host {
            if h.contains(['/', ':', ' ', '@']) {
                return Err(bad(
                    "DATABASE_HOST",
                    format!("{h:?} is not a host name; give the endpoint alone (the port goes in DATABASE_PORT)"),
                ));
            }
        }
        let port = match get("DATABASE_PORT") {
            None => None,
            Some(_) => Some(int(get, "DATABASE_PORT", 0, 1, 65_535)? as u16),
        };
        Ok(Endpoint {
            host,
            port,
            dbname: get("DATABASE_NAME").map(|n| n.trim().to_string()),
        })
    }

    /// True when any of the three settings is given.
    pub fn is_set(&self) -> bool {
        self.host.is_some() || self.port.is_some() || self.dbname.is_some()
    }

    /// The connection settings for `login` with these settings applied over it. `source` names
    /// the setting the login came from, for the error when it lacks a user or password; a
    /// password is not needed with IAM authentication (a token stands in for it). A missing
    /// host is an error naming `DATABASE_HOST`.
    pub fn apply(
        &self,
        login: LoginParts,
        source: &'static str,
        need_password: bool,
    ) -> Result<tokio_postgres::Config, ConfigError> {
        let host = self.host.clone().or(login.host).ok_or_else(|| {
            bad(
                "DATABASE_HOST",
                format!(
                    "not set, and {source} gives no host (an RDS-managed secret holds only \
                     username and password): set DATABASE_HOST to the instance, cluster or \
                     proxy endpoint"
                ),
            )
        })?;
        let user = login
            .user
            .ok_or_else(|| bad(source, "the login has no username"))?;
        let mut pg = tokio_postgres::Config::new();
        pg.user(user)
            .host(host)
            .port(self.port.or(login.port).unwrap_or(DEFAULT_PORT))
            .dbname(
                self.dbname
                    .clone()
                    .or(login.dbname)
                    .unwrap_or_else(|| DEFAULT_DBNAME.into()),
            )
            .application_name("hookclaim");
        match login.password {
            Some(password) => {
                pg.password(password);
            }
            None if need_password => return Err(bad(source, "the login has no password")),
            None => {}
        }
        Ok(pg)
    }
}

/// Whether this function brings the schema up to date itself (`HOOKCLAIM_MIGRATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MigrateMode {
    /// `auto` (the default): apply pending migrations and the processor's setup at cold start,
    /// under the migration lock. Needs a role that may create tables (the owner).
    Auto,
    /// `never`: only check that the schema is up to date, and answer 503 with a log line naming
    /// the fix until it is. For a role with data rights only (the deployed webhook function);
    /// the owner applies migrations (the retention function's `migrate` command).
    Never,
}

/// The database settings as configured.
#[derive(Debug, Clone)]
pub struct DatabaseConfig {
    /// Where the credentials come from: the application role's login, which every delivery,
    /// re-drive, replay, purge and report runs with.
    pub from: DatabaseFrom,
    /// `DATABASE_OWNER_SECRET_ARN` or `DATABASE_OWNER_URL`: the schema owner's login, used only
    /// to apply the migrations and the processor's setup (which need DDL), on a connection of
    /// its own that is closed again once they are done. `None`: the one login does that too
    /// (a single role, as locally). Refused with `HOOKCLAIM_MIGRATE=never`.
    pub owner: Option<DatabaseFrom>,
    /// Where the server is, over what the secret or URL says.
    pub endpoint: Endpoint,
    /// `HOOKCLAIM_MIGRATE`.
    pub migrate: MigrateMode,
    /// `DATABASE_TLS`.
    pub tls: TlsMode,
    /// `DATABASE_CA_FILE`: CA bundle for `verify-full`.
    pub ca_file: Option<PathBuf>,
    /// `DATABASE_CONNECT_TIMEOUT_MS`.
    pub connect_timeout: Duration,
    /// `DATABASE_STATEMENT_TIMEOUT_MS`.
    pub statement_timeout: Duration,
    /// `DATABASE_IAM_AUTH`: RDS IAM authentication tokens instead of a password.
    pub iam_auth: bool,
    /// `DATABASE_IAM_USER`: with IAM authentication, the database user to connect as, in place
    /// of the user in `DATABASE_URL` or the secret.
    pub iam_user: Option<String>,
    /// `DATABASE_POOLED`: the database is reached through a transaction pooler (PgBouncer in
    /// transaction mode, RDS Proxy); see [`DbSettings::pooled`].
    pub pooled: bool,
}

impl DatabaseConfig {
    /// Reads the `DATABASE_*` settings.
    pub(super) fn read(get: Lookup<'_>) -> Result<Self, ConfigError> {
        let refresh = Duration::from_secs(int(get, "DATABASE_SECRET_REFRESH_SECS", 10, 1, 86_400)?);
        let config = DatabaseConfig {
            from: login(get, ("DATABASE_SECRET_ARN", "DATABASE_URL"), refresh)?.ok_or_else(
                || {
                    bad(
                        "DATABASE_URL",
                        "neither DATABASE_URL nor DATABASE_SECRET_ARN is set",
                    )
                },
            )?,
            owner: login(
                get,
                ("DATABASE_OWNER_SECRET_ARN", "DATABASE_OWNER_URL"),
                refresh,
            )?,
            endpoint: Endpoint::read(get)?,
            migrate: choice(get, "HOOKCLAIM_MIGRATE", MigrateMode::Auto)?,
            tls: choice(get, "DATABASE_TLS", TlsMode::Require)?,
            ca_file: get("DATABASE_CA_FILE").map(PathBuf::from),
            connect_timeout: Duration::from_millis(int(
                get,
                "DATABASE_CONNECT_TIMEOUT_MS",
                3000,
                100,
                60_000,
            )?),
            statement_timeout: Duration::from_millis(int(
                get,
                "DATABASE_STATEMENT_TIMEOUT_MS",
                5000,
                100,
                600_000,
            )?),
            iam_auth: flag(get, "DATABASE_IAM_AUTH")?,
            iam_user: get("DATABASE_IAM_USER"),
            pooled: flag(get, "DATABASE_POOLED")?,
        };
        config.check()?;
        Ok(config)
    }

    /// The rules that span settings.
    fn check(&self) -> Result<(), ConfigError> {
        if self.tls == TlsMode::VerifyFull && self.ca_file.is_none() {
            return Err(bad(
                "DATABASE_CA_FILE",
                "required when DATABASE_TLS is verify-full",
            ));
        }
        if self.iam_auth && self.tls == TlsMode::Disable {
            return Err(bad("DATABASE_TLS", "IAM authentication requires TLS"));
        }
        if self.iam_user.is_some() && !self.iam_auth {
            return Err(bad(
                "DATABASE_IAM_USER",
                "only applies with DATABASE_IAM_AUTH=true",
            ));
        }
        if let (Some(owner), MigrateMode::Never) = (&self.owner, self.migrate) {
            let setting = match owner {
                DatabaseFrom::SecretsManager { .. } => "DATABASE_OWNER_SECRET_ARN",
                DatabaseFrom::Url(_) => "DATABASE_OWNER_URL",
            };
            return Err(bad(
                setting,
                "only applies with HOOKCLAIM_MIGRATE=auto: a function that never migrates must \
                 not hold the owner's login",
            ));
        }
        Ok(())
    }

    /// The connection settings for a login read from `DATABASE_URL`: as written, or with
    /// [`Endpoint`]'s settings applied over it when any is set.
    pub fn url_login(
        &self,
        url: &tokio_postgres::Config,
    ) -> Result<tokio_postgres::Config, ConfigError> {
        self.url_login_from(url, "DATABASE_URL")
    }

    /// Like [`Self::url_login`], for the URL in `setting` (`DATABASE_OWNER_URL`), which an
    /// error names.
    pub fn url_login_from(
        &self,
        url: &tokio_postgres::Config,
        setting: &'static str,
    ) -> Result<tokio_postgres::Config, ConfigError> {
        if !self.endpoint.is_set() {
            return Ok(url.clone());
        }
        let host = match url.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => Some(h.clone()),
            _ => None,
        };
        let parts = LoginParts {
            user: url.get_user().map(str::to_owned),
            password: url
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            host,
            port: url.get_ports().first().copied(),
            dbname: url.get_dbname().map(str::to_owned),
        };
        self.endpoint.apply(parts, setting, false)
    }

    /// Connection settings for `pg` credentials.
    pub fn settings(&self, pg: tokio_postgres::Config) -> DbSettings {
        DbSettings {
            pg,
            tls: self.tls,
            ca_file: self.ca_file.clone(),
            connect_timeout: self.connect_timeout,
            statement_timeout: self.statement_timeout,
            keepalive_idle: Duration::from_secs(30),
            pooled: self.pooled,
        }
    }
}

/// A login from the secret named by the first of `(secret_arn, url)` that is set, or the URL
/// in the second; `None` when neither is.
fn login(
    get: Lookup<'_>,
    (secret_arn, url): (&'static str, &'static str),
    min_refresh_interval: Duration,
) -> Result<Option<DatabaseFrom>, ConfigError> {
    Ok(match (get(secret_arn), get(url)) {
        (Some(arn), _) => Some(DatabaseFrom::SecretsManager {
            arn,
            min_refresh_interval,
        }),
        (_, Some(text)) => Some(DatabaseFrom::Url(Box::new(text.parse().map_err(|_| {
            bad(
                url,
                "not a valid postgres:// URL or key=value connection string",
            )
        })?))),
        _ => None,
    })
}

/// How the connection is encrypted (`DATABASE_TLS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlsMode {
    /// Plain TCP (local development only).
    Disable,
    /// TLS without certificate checks: encrypted, but not protected from impersonation.
    Require,
    /// TLS with the server certificate checked against a CA bundle and the host name.
    VerifyFull,
}

/// Everything needed to open a connection.
#[derive(Clone)]
pub struct DbSettings {
    /// Host, port, user, password, database (from `DATABASE_URL` or a secret); a secret or an
    /// IAM token replaces the login part at each connect.
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
    /// The endpoint is a transaction pooler (PgBouncer `pool_mode = transaction`, RDS Proxy):
    /// send no startup `options`, which poolers refuse or drop. The server-side timeouts must
    /// then be set on the role; the first connection checks and warns when they are not.
    pub pooled: bool,
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
            .field("pooled", &self.pooled)
            .finish()
    }
}
