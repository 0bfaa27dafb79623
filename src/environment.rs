//! Cold start's resources: the webhook secrets, the database and the schema owner's database,
//! built from the configuration once per execution environment, with one AWS configuration
//! shared between them. Neutral: the webhook and retention functions assemble themselves from
//! these ([`crate::Webhook::from_config`], [`crate::Retention::from_config`]).

use std::sync::Arc;

#[cfg(any(feature = "secrets-manager", feature = "rds-iam"))]
use crate::aws::Aws;
use crate::config::{Config, ConfigError, DatabaseFrom, SecretsFrom};
use crate::error::StartupError;
#[cfg(not(all(feature = "secrets-manager", feature = "rds-iam")))]
use crate::config::features::{missing as missing_part, Part};
use crate::db::{Credentials, Database};
use crate::keys::Keys;

/// The execution environment's one AWS configuration, shared by the webhook secrets and the
/// database login (made on first use); a build with neither Secrets Manager nor RDS IAM
/// authentication has none.
#[cfg(any(feature = "secrets-manager", feature = "rds-iam"))]
type SharedAws = Arc<Aws>;
#[cfg(not(any(feature = "secrets-manager", feature = "rds-iam")))]
struct SharedAws;

/// A new [`SharedAws`]; making it calls nothing.
#[cfg(any(feature = "secrets-manager", feature = "rds-iam"))]
fn shared_aws() -> SharedAws {
    Arc::new(Aws::default())
}

#[cfg(not(any(feature = "secrets-manager", feature = "rds-iam")))]
fn shared_aws() -> SharedAws {
    SharedAws
}

/// The environment's database: the login from `DATABASE_URL` or from the RDS-format secret
/// (read now, once), with `DATABASE_HOST`/`DATABASE_PORT`/`DATABASE_NAME` applied over it, or
/// an RDS IAM token for the user, host and port those name. A login that lacks a piece (an
/// RDS-managed secret without `DATABASE_HOST`) stops the cold start naming the setting. Does
/// not connect; the first use does. For tools and tests: the functions build theirs from an
/// [`Environment`].
#[cfg(feature = "internals")]
pub async fn database(config: &Config) -> Result<Database, StartupError> {
    Environment::new().database(config).await
}

/// One execution environment's cold start: its resources, each built once from the
/// configuration, sharing one AWS configuration (made on first use).
pub struct Environment {
    aws: SharedAws,
}

impl Default for Environment {
    fn default() -> Self {
        Self::new()
    }
}

impl Environment {
    /// An environment that has built nothing yet; making it calls nothing.
    pub fn new() -> Self {
        Environment { aws: shared_aws() }
    }

    /// The webhook secrets from `HOOKCLAIM_SECRETS` or Secrets Manager (read on first use).
    pub fn keys(&self, config: &Config) -> Result<Keys, StartupError> {
        keys(config, config.require_secrets()?, &self.aws)
    }

    /// The application role's database (see [`database`]).
    pub async fn database(&self, config: &Config) -> Result<Database, StartupError> {
        database_with(config, &self.aws).await
    }

    /// The schema owner's database, when the configuration names its login.
    pub async fn owner(&self, config: &Config) -> Result<Option<Database>, StartupError> {
        owner_database(config, &self.aws).await
    }
}

async fn database_with(config: &Config, aws: &SharedAws) -> Result<Database, StartupError> {
    let (mut pg, mut credentials) = match &config.database.from {
        DatabaseFrom::Url(url) => (config.database.url_login(url)?, Credentials::Fixed),
        DatabaseFrom::SecretsManager {
            arn,
            min_refresh_interval,
        } => {
            // An IAM token stands in for the password.
            let need_password = !config.database.iam_auth;
            let secret = ("DATABASE_SECRET_ARN", arn.as_str(), need_password);
            secret_login(config, secret, *min_refresh_interval, aws).await?
        }
    };
    if config.database.iam_auth {
        if let Some(user) = &config.database.iam_user {
            pg.user(user);
        }
        if pg.get_user().is_none() {
            return Err(ConfigError {
                setting: "DATABASE_IAM_USER",
                problem: "IAM authentication needs a database user: set DATABASE_IAM_USER, \
                          or give one in DATABASE_URL or the secret"
                    .into(),
            }
            .into());
        }
        credentials = iam_credentials(aws).await?;
    }
    Ok(Database::with_credentials(
        config.database.settings(pg),
        credentials,
    )?)
}

/// The schema owner's database, when the configuration names its login
/// (`DATABASE_OWNER_SECRET_ARN`, read now, or `DATABASE_OWNER_URL`): the same host settings,
/// TLS and timeouts as the main login, and always the owner's password (never an IAM token).
/// Used only to migrate and to run the processor's setup; does not connect.
async fn owner_database(
    config: &Config,
    aws: &SharedAws,
) -> Result<Option<Database>, StartupError> {
    let Some(from) = &config.database.owner else {
        return Ok(None);
    };
    let (pg, credentials) = match from {
        DatabaseFrom::Url(url) => (
            config.database.url_login_from(url, "DATABASE_OWNER_URL")?,
            Credentials::Fixed,
        ),
        DatabaseFrom::SecretsManager {
            arn,
            min_refresh_interval,
        } => {
            let secret = ("DATABASE_OWNER_SECRET_ARN", arn.as_str(), true);
            secret_login(config, secret, *min_refresh_interval, aws).await?
        }
    };
    Ok(Some(Database::with_credentials(
        config.database.settings(pg),
        credentials,
    )?))
}

/// The login held in an RDS-format secret, `(setting, arn, need_password)`, read now, and the
/// credentials that read it again when the server refuses it.
#[cfg(feature = "secrets-manager")]
async fn secret_login(
    config: &Config,
    (setting, arn, need_password): (&'static str, &str, bool),
    min_refresh_interval: std::time::Duration,
    aws: &SharedAws,
) -> Result<(tokio_postgres::Config, Credentials), StartupError> {
    use crate::aws::{DatabaseSecret, SecretLoginError};
    let secret = DatabaseSecret::load(
        aws.clone(),
        setting,
        arn,
        min_refresh_interval,
        config.database.endpoint.clone(),
        need_password,
    )
    .await
    .map_err(|e| match e {
        SecretLoginError::Unreadable { setting, why } => {
            StartupError::Secrets { setting, why }
        }
        SecretLoginError::Incomplete(setting) => StartupError::Config(setting),
    })?;
    Ok((secret.login(), Credentials::Secret(Arc::new(secret))))
}

#[cfg(not(feature = "secrets-manager"))]
async fn secret_login(
    _: &Config,
    (setting, _, _): (&'static str, &str, bool),
    _: std::time::Duration,
    _: &SharedAws,
) -> Result<(tokio_postgres::Config, Credentials), StartupError> {
    Err(missing_part(setting, Part::SecretsManager).into())
}

/// RDS IAM authentication with the environment's region and credentials.
#[cfg(feature = "rds-iam")]
async fn iam_credentials(aws: &SharedAws) -> Result<Credentials, StartupError> {
    let iam = crate::aws::RdsIamAuth::new(aws.clone())
        .await
        .map_err(|problem| ConfigError {
            setting: "AWS_REGION",
            problem,
        })?;
    Ok(Credentials::IamToken(iam))
}

#[cfg(not(feature = "rds-iam"))]
async fn iam_credentials(_: &SharedAws) -> Result<Credentials, StartupError> {
    Err(missing_part("DATABASE_IAM_AUTH", Part::RdsIam).into())
}

/// The webhook secrets from where `from` says, Secrets Manager read through `aws`.
#[cfg_attr(not(feature = "secrets-manager"), allow(unused_variables))]
fn keys(config: &Config, from: &SecretsFrom, aws: &SharedAws) -> Result<Keys, StartupError> {
    let sources = Arc::new(config.sources.clone());
    Ok(match from {
        SecretsFrom::Env(document) => Keys::from_document(sources, document),
        #[cfg(feature = "secrets-manager")]
        SecretsFrom::SecretsManager {
            arn,
            min_refresh_interval,
            max_age,
        } => Keys::from_secrets_manager(
            sources,
            arn,
            *min_refresh_interval,
            *max_age,
            aws.clone(),
        ),
        #[cfg(not(feature = "secrets-manager"))]
        SecretsFrom::SecretsManager { .. } => {
            return Err(missing_part("HOOKCLAIM_SECRETS_ARN", Part::SecretsManager).into())
        }
    })
}
