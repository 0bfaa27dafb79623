//! Secrets Manager: a secret's string value, and the database login held in an RDS-format
//! secret, read once and again when the server refuses it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Aws;
use crate::config::{ConfigError, Endpoint, LoginParts};

/// Reads a secret's string value. The error says why, never what the secret holds.
pub async fn secret_string(
    client: &aws_sdk_secretsmanager::Client,
    secret_id: &str,
) -> Result<String, String> {
    let out = client
        .get_secret_value()
        .secret_id(secret_id)
        .send()
        .await
        .map_err(|e| {
            format!(
                "GetSecretValue {secret_id}: {}",
                aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
            )
        })?;
    out.secret_string()
        .map(str::to_owned)
        .ok_or_else(|| format!("secret {secret_id} has no string value"))
}

/// Reads a secret in the format RDS uses: `{"username", "password"}` as RDS manages it, or the
/// full format with `host`, `port` and `dbname` too (`port` a number or a string). Whatever is
/// missing stays `None`, for [`Endpoint::apply`] to fill in or name. The error names the field,
/// never a value.
pub fn rds_secret_parts(text: &str) -> Result<LoginParts, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|_| "the secret is not a JSON object".to_string())?;
    if !v.is_object() {
        return Err("the secret is not a JSON object".into());
    }
    let field = |name: &str| -> Option<String> {
        match v.get(name) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        }
    };
    let port = match field("port") {
        None => None,
        Some(p) => Some(
            p.parse()
                .map_err(|_| "the secret's port is not a port number".to_string())?,
        ),
    };
    Ok(LoginParts {
        user: field("username"),
        password: field("password"),
        host: field("host"),
        port,
        dbname: field("dbname"),
    })
}

/// Why the database secret gave no usable login.
#[derive(Debug, thiserror::Error)]
pub enum SecretLoginError {
    /// The secret named by `setting` could not be read, or is not in the RDS format.
    #[error("{setting}: {why}")]
    Unreadable {
        /// The setting that names the secret (`DATABASE_SECRET_ARN`,
        /// `DATABASE_OWNER_SECRET_ARN`).
        setting: &'static str,
        /// What went wrong.
        why: String,
    },
    /// The secret and the settings together lack something (e.g. a host: `DATABASE_HOST`).
    #[error(transparent)]
    Incomplete(#[from] ConfigError),
}

/// The database login held in an RDS-format secret: read once at cold start, and read again
/// (at most once per interval) when the server refuses it, so a rotated password needs no
/// redeploy. The host settings ([`Endpoint`]) are applied over every read.
pub struct DatabaseSecret {
    aws: Arc<Aws>,
    setting: &'static str,
    arn: String,
    min_refresh_interval: Duration,
    endpoint: Endpoint,
    need_password: bool,
    state: Mutex<SecretState>,
    fetches: AtomicU64,
}

struct SecretState {
    text: String,
    login: tokio_postgres::Config,
    last_attempt: Instant,
}

impl DatabaseSecret {
    /// Reads the secret `arn`, named by `setting`, now. Fails when it cannot be read, is not in
    /// the RDS format, or lacks what the settings do not supply (a host without
    /// `DATABASE_HOST`; a password, unless `need_password` is false because an IAM token stands
    /// in for it).
    pub async fn load(
        aws: Arc<Aws>,
        setting: &'static str,
        arn: &str,
        min_refresh_interval: Duration,
        endpoint: Endpoint,
        need_password: bool,
    ) -> Result<Self, SecretLoginError> {
        let secret = DatabaseSecret {
            aws,
            setting,
            arn: arn.to_string(),
            min_refresh_interval,
            endpoint,
            need_password,
            state: Mutex::new(SecretState {
                text: String::new(),
                login: tokio_postgres::Config::new(),
                last_attempt: Instant::now(),
            }),
            fetches: AtomicU64::new(0),
        };
        let (text, login) = secret.fetch().await?;
        *secret.lock() = SecretState {
            text,
            login,
            last_attempt: Instant::now(),
        };
        Ok(secret)
    }

    /// The login as last read: host, port, user, password and database.
    pub fn login(&self) -> tokio_postgres::Config {
        self.lock().login.clone()
    }

    #[cfg(feature = "internals")]
    /// How many times the secret was read.
    pub fn fetch_count(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// After the server refused the login: reads the secret again, unless it was read less than
    /// the minimum interval ago. True when that produced a login different from the refused one.
    pub async fn refresh(&self) -> bool {
        {
            let mut state = self.lock();
            if state.last_attempt.elapsed() < self.min_refresh_interval {
                tracing::warn!(
                    "database login refused; its secret was read too recently to read again"
                );
                return false;
            }
            // Claimed before the call, so that the interval also holds while it is in flight.
            state.last_attempt = Instant::now();
        }
        match self.fetch().await {
            Ok((text, login)) => {
                let mut state = self.lock();
                if text == state.text {
                    tracing::warn!("database login refused; its secret has not changed");
                    return false;
                }
                state.text = text;
                state.login = login;
                tracing::info!("database login refused; read its secret again and got a new one");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "database login refused; reading its secret again failed");
                false
            }
        }
    }

    async fn fetch(&self) -> Result<(String, tokio_postgres::Config), SecretLoginError> {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let unreadable = |why| SecretLoginError::Unreadable {
            setting: self.setting,
            why,
        };
        let text = self
            .aws
            .secret_string(&self.arn)
            .await
            .map_err(unreadable)?;
        let parts = rds_secret_parts(&text).map_err(unreadable)?;
        let login = self
            .endpoint
            .apply(parts, self.setting, self.need_password)?;
        Ok((text, login))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SecretState> {
        // The state is replaced whole; a panic elsewhere cannot leave it half-written.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(secret: &str, endpoint: &Endpoint) -> Result<tokio_postgres::Config, ConfigError> {
        let parts = rds_secret_parts(secret).map_err(|problem| ConfigError {
            setting: "DATABASE_SECRET_ARN",
            problem,
        })?;
        endpoint.apply(parts, "DATABASE_SECRET_ARN", true)
    }

    #[test]
    fn full_format_secret_is_read_with_numeric_or_string_port() {
        let none = Endpoint::default();
        let pg = login(
            r#"{"username":"app","password":"pw","engine":"postgres","host":"db.example","port":5433,"dbname":"hooks"}"#,
            &none,
        )
        .unwrap();
        assert_eq!(pg.get_user(), Some("app"));
        assert_eq!(pg.get_ports(), &[5433]);
        assert_eq!(pg.get_dbname(), Some("hooks"));
        let pg = login(
            r#"{"username":"a","password":"p","host":"h","port":"6432"}"#,
            &none,
        )
        .unwrap();
        assert_eq!(pg.get_ports(), &[6432]);
        assert_eq!(pg.get_dbname(), Some("postgres"));
    }

    #[test]
    fn rds_managed_secret_takes_host_port_and_name_from_the_settings() {
        let managed = r#"{"username":"hookclaim_app","password":"pw"}"#;
        let endpoint = Endpoint {
            host: Some("db.cluster-x.eu-west-1.rds.amazonaws.com".into()),
            port: Some(5433),
            dbname: Some("hooks".into()),
        };
        let pg = login(managed, &endpoint).unwrap();
        assert_eq!(
            pg.get_hosts(),
            &[tokio_postgres::config::Host::Tcp(
                "db.cluster-x.eu-west-1.rds.amazonaws.com".into()
            )]
        );
        assert_eq!(pg.get_ports(), &[5433]);
        assert_eq!(pg.get_dbname(), Some("hooks"));
        // The settings also win over a full secret (an RDS Proxy endpoint in front of it).
        let full = r#"{"username":"a","password":"p","host":"instance","port":5432,"dbname":"d"}"#;
        let pg = login(full, &endpoint).unwrap();
        assert_eq!(pg.get_ports(), &[5433]);
        assert_eq!(pg.get_dbname(), Some("hooks"));
        // Without a host anywhere, the error names the setting to give.
        let err = login(managed, &Endpoint::default()).unwrap_err();
        assert_eq!(err.setting, "DATABASE_HOST");
        assert!(err.to_string().contains("DATABASE_SECRET_ARN"), "{err}");
    }

    #[test]
    fn rds_secret_errors_name_the_field_not_the_value() {
        let none = Endpoint::default();
        let err = login(r#"{"username":"a","host":"h"}"#, &none).unwrap_err();
        assert_eq!(err.setting, "DATABASE_SECRET_ARN");
        assert!(err.problem.contains("password"));
        let err = login(
            r#"{"username":"a","password":"hunter2","host":"h","port":"x"}"#,
            &none,
        )
        .unwrap_err();
        assert!(!err.to_string().contains("hunter2"));
        assert!(login("nope", &none).is_err());
        assert!(login("[1]", &none).is_err());
        // With IAM authentication the password is not needed.
        let parts = rds_secret_parts(r#"{"username":"a","host":"h"}"#).unwrap();
        assert!(none.apply(parts, "DATABASE_SECRET_ARN", false).is_ok());
    }
}
