//! Cold start: builds an execution environment's shared resources (database, secrets cache,
//! handler state) from the configuration, once, before the runtime loop starts.

use std::sync::Arc;

use crate::aws::{Aws, DatabaseSecret, RdsIamAuth, SecretLoginError};
use crate::config::{Config, ConfigError, DatabaseFrom};
use crate::db::{Credentials, Database, DbError};
use crate::keys::Keys;
use crate::processor::Processor;
use crate::webhook::Webhook;

/// Why an execution environment could not be set up. Stops the cold start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// A setting is missing or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database settings cannot work (e.g. an unreadable CA bundle).
    #[error(transparent)]
    Database(#[from] DbError),
    /// The database credentials secret could not be read or parsed.
    #[error("DATABASE_SECRET_ARN: {0}")]
    DatabaseSecret(String),
}

/// The environment's database: the login from `DATABASE_URL` or from the RDS-format secret
/// (read now, once), with `DATABASE_HOST`/`DATABASE_PORT`/`DATABASE_NAME` applied over it, or
/// an RDS IAM token for the user, host and port those name. A login that lacks a piece (an
/// RDS-managed secret without `DATABASE_HOST`) stops the cold start naming the setting. Does
/// not connect; the first use does.
pub async fn database(config: &Config) -> Result<Database, StartupError> {
    database_with(config, Arc::new(Aws::default())).await
}

async fn database_with(config: &Config, aws: Arc<Aws>) -> Result<Database, StartupError> {
    let (mut pg, secret) = match &config.database.from {
        DatabaseFrom::Url(url) => (config.database.url_login(url)?, None),
        DatabaseFrom::SecretsManager {
            arn,
            min_refresh_interval,
        } => {
            let secret = DatabaseSecret::load(
                aws.clone(),
                arn,
                *min_refresh_interval,
                config.database.endpoint.clone(),
                // An IAM token stands in for the password.
                !config.database.iam_auth,
            )
            .await
            .map_err(|e| match e {
                SecretLoginError::Unreadable(why) => StartupError::DatabaseSecret(why),
                SecretLoginError::Incomplete(setting) => StartupError::Config(setting),
            })?;
            (secret.login(), Some(secret))
        }
    };
    let credentials = if config.database.iam_auth {
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
        let iam = RdsIamAuth::new(aws).await.map_err(|problem| ConfigError {
            setting: "AWS_REGION",
            problem,
        })?;
        Credentials::IamToken(iam)
    } else {
        match secret {
            Some(secret) => Credentials::Secret(Arc::new(secret)),
            None => Credentials::Fixed,
        }
    };
    Ok(Database::with_credentials(
        config.database.settings(pg),
        credentials,
    )?)
}

/// The webhook function's state. Reads the webhook secrets, connects and brings the schema up to
/// date now, so the first delivery does not pay for it; what fails (an unreachable database or
/// Secrets Manager) is logged and left to the first delivery, which answers 503 until it works.
pub async fn webhook<P: Processor>(
    config: &Config,
    processor: P,
) -> Result<Webhook<P>, StartupError> {
    let secrets = config.require_secrets()?;
    processor.start().await;
    // One AWS configuration for the environment, shared by the secrets and the database.
    let aws = Arc::new(Aws::default());
    let keys = Keys::with_aws(Arc::new(config.sources.clone()), secrets, aws.clone());
    let db = database_with(config, aws).await?;
    let webhook = Webhook::new(config, keys, db, processor);
    match webhook.keys().current().await {
        Ok(ring) => {
            for source in ring.sources_without_secrets() {
                tracing::warn!(
                    source,
                    "no webhook secret configured for this source: its deliveries answer 401"
                );
            }
        }
        Err(e) => tracing::warn!(
            error = %e,
            "webhook secrets not loaded at cold start; will retry on first delivery"
        ),
    }
    if let Err(e) = webhook.ensure_ready().await {
        tracing::warn!(error = %e, "database not ready at cold start; will retry on first delivery");
    }
    Ok(webhook)
}

/// The retention function's state. Tries to connect, bring the schema up to date and run the
/// processor's setup now; if the database is not reachable yet, that is logged and left to the
/// first invocation.
pub async fn retention<P: Processor>(
    config: &Config,
    processor: P,
) -> Result<crate::retention::Retention<P>, StartupError> {
    let db = database(config).await?;
    processor.start().await;
    let retention = crate::retention::Retention::from_config(config, db, processor);
    if let Err(e) = retention.ensure_ready().await {
        tracing::warn!(error = %e, "database not ready at cold start; will retry on first invocation");
    }
    Ok(retention)
}
