//! Cold start: builds an execution environment's shared resources (database, secrets cache,
//! handler state) from the configuration, once, before the runtime loop starts.

use std::sync::Arc;

use crate::config::{Config, ConfigError, DatabaseFrom};
use crate::db::{Database, DbError};
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

/// The environment's database: credentials from `DATABASE_URL` or from the RDS-format secret.
/// Does not connect; the first use does.
pub async fn database(config: &Config) -> Result<Database, StartupError> {
    let pg = match &config.database {
        DatabaseFrom::Url(pg) => (**pg).clone(),
        DatabaseFrom::SecretsManager { arn } => {
            let client = crate::aws::secrets_manager().await;
            let text = crate::aws::secret_string(&client, arn)
                .await
                .map_err(StartupError::DatabaseSecret)?;
            crate::aws::rds_secret_config(&text).map_err(StartupError::DatabaseSecret)?
        }
    };
    Ok(Database::new(config.db_settings(pg))?)
}

/// The webhook function's state. Tries to connect and bring the schema up to date now, so the
/// first delivery does not pay for it; if the database is not reachable yet, that is logged and
/// left to the first delivery, which answers 503 until it is.
pub async fn webhook<P: Processor>(
    config: &Config,
    processor: P,
) -> Result<Webhook<P>, StartupError> {
    let secrets = config.require_secrets()?;
    let keys = Keys::new(Arc::new(config.sources.clone()), secrets);
    let db = database(config).await?;
    let webhook = Webhook::new(config, keys, db, processor);
    if let Err(e) = webhook.prepare().await {
        tracing::warn!(error = %e, "database not ready at cold start; will retry on first delivery");
    }
    Ok(webhook)
}
