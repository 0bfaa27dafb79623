//! Database settings: where the login comes from, TLS, timeouts, IAM authentication, pooling.

use std::path::PathBuf;
use std::time::Duration;

use super::{bad, flag, int, ConfigError, Lookup};

/// Where database credentials come from.
#[derive(Debug, Clone)]
pub enum DatabaseFrom {
    /// `DATABASE_URL`.
    Url(Box<tokio_postgres::Config>),
    /// `DATABASE_SECRET_ARN`: an RDS-managed secret (username, password, host, port, dbname).
    SecretsManager {
        /// The secret's ARN or name.
        arn: String,
        /// `DATABASE_SECRET_REFRESH_SECS`: after a refused login, the secret is read again only
        /// if it was last read longer ago than this.
        min_refresh_interval: Duration,
    },
}

/// The database settings as configured.
#[derive(Debug, Clone)]
pub struct DatabaseConfig {
    /// Where the credentials come from.
    pub from: DatabaseFrom,
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
        let from = match (get("DATABASE_SECRET_ARN"), get("DATABASE_URL")) {
            (Some(arn), _) => DatabaseFrom::SecretsManager {
                arn,
                min_refresh_interval: Duration::from_secs(int(
                    get,
                    "DATABASE_SECRET_REFRESH_SECS",
                    10,
                    1,
                    86_400,
                )?),
            },
            (_, Some(url)) => DatabaseFrom::Url(Box::new(url.parse().map_err(|_| {
                bad(
                    "DATABASE_URL",
                    "not a valid postgres:// URL or key=value connection string",
                )
            })?)),
            _ => {
                return Err(bad(
                    "DATABASE_URL",
                    "neither DATABASE_URL nor DATABASE_SECRET_ARN is set",
                ))
            }
        };
        let tls: TlsMode = get("DATABASE_TLS")
            .as_deref()
            .unwrap_or("require")
            .parse()
            .map_err(|e| bad("DATABASE_TLS", e))?;
        let ca_file = get("DATABASE_CA_FILE").map(PathBuf::from);
        if tls == TlsMode::VerifyFull && ca_file.is_none() {
            return Err(bad(
                "DATABASE_CA_FILE",
                "required when DATABASE_TLS is verify-full",
            ));
        }
        let iam_auth = flag(get, "DATABASE_IAM_AUTH")?;
        if iam_auth && tls == TlsMode::Disable {
            return Err(bad("DATABASE_TLS", "IAM authentication requires TLS"));
        }
        let iam_user = get("DATABASE_IAM_USER");
        if iam_user.is_some() && !iam_auth {
            return Err(bad(
                "DATABASE_IAM_USER",
                "only applies with DATABASE_IAM_AUTH=true",
            ));
        }
        Ok(DatabaseConfig {
            from,
            tls,
            ca_file,
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
            iam_auth,
            iam_user,
            pooled: flag(get, "DATABASE_POOLED")?,
        })
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
}
