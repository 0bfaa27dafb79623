//! Why a function could not start or stopped: the errors of cold start and of the entry points,
//! in a module of their own so that the environment, both functions and their entry points
//! share them without using each other.

use crate::config::ConfigError;
use crate::db::DbError;

/// Why a function stopped: a cold start that failed (a bad setting, an unreadable CA bundle…)
/// or the runtime loop ending. The message names the setting at fault.
pub type Error = lambda_runtime::Error;

/// Why an execution environment could not be set up. Stops the cold start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// A setting is missing or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database settings cannot work (e.g. an unreadable CA bundle).
    #[error(transparent)]
    Database(#[from] DbError),
    /// A database credentials secret could not be read or parsed.
    #[cfg(feature = "secrets-manager")]
    #[error("{setting}: {why}")]
    DatabaseSecret {
        /// The setting naming the secret.
        setting: &'static str,
        /// What went wrong.
        why: String,
    },
}
