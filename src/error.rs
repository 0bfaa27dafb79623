//! Why a function could not start or stopped: the errors of cold start and of the entry points,
//! in a module of their own so that the environment, both functions and their entry points
//! share them without using each other. Both convert into the Lambda runtime's [`Diagnostic`]
//! with a stable `error_type`.

use lambda_runtime::Diagnostic;

use crate::config::ConfigError;
use crate::db::DbError;

/// Any error, boxed: what [`crate::ProcessError`] and [`StartupError::Processor`] carry.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an execution environment could not be set up: which part, and the setting at fault.
/// Stops the cold start. A processor made from the configuration
/// ([`crate::run_webhook_with`]) fails with [`StartupError::processor`] for a setting of its
/// own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartupError {
    /// A setting is missing or invalid, or asks for a part this build left out.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database settings cannot work: an unreadable or invalid CA bundle
    /// (`DATABASE_CA_FILE`), or another database error at cold start.
    #[error(transparent)]
    Database(#[from] DbError),
    /// A secret holding the database login could not be read or parsed.
    #[error("{setting}: {why}")]
    Secrets {
        /// The setting naming the secret.
        setting: &'static str,
        /// What went wrong (never the secret's value).
        why: String,
    },
    /// The processor could not be made: a setting of its own, or a part of a shipped
    /// processor (the forwarder's HTTP client…).
    #[error("{setting}: {source}")]
    Processor {
        /// The setting at fault.
        setting: String,
        /// Why.
        #[source]
        source: BoxError,
    },
}

impl StartupError {
    /// The processor's own `setting` could not be used, because of `error`: what a `make`
    /// closure given to [`crate::run_webhook_with`] returns for a setting of its own.
    pub fn processor(setting: impl Into<String>, error: impl Into<BoxError>) -> Self {
        StartupError::Processor {
            setting: setting.into(),
            source: error.into(),
        }
    }

    /// The setting at fault, where one is.
    pub fn setting(&self) -> Option<&str> {
        match self {
            StartupError::Config(e) => Some(e.setting),
            StartupError::Database(DbError::Tls(_)) => Some("DATABASE_CA_FILE"),
            StartupError::Database(_) => None,
            StartupError::Secrets { setting, .. } => Some(setting),
            StartupError::Processor { setting, .. } => Some(setting),
        }
    }

    /// The Lambda `errorType`: `hookclaim.Config`, `hookclaim.Tls`, `hookclaim.Database`,
    /// `hookclaim.Secrets` or `hookclaim.Processor`.
    pub fn error_type(&self) -> &'static str {
        match self {
            StartupError::Config(_) => "hookclaim.Config",
            StartupError::Database(DbError::Tls(_)) => "hookclaim.Tls",
            StartupError::Database(_) => "hookclaim.Database",
            StartupError::Secrets { .. } => "hookclaim.Secrets",
            StartupError::Processor { .. } => "hookclaim.Processor",
        }
    }
}

impl From<StartupError> for Diagnostic {
    fn from(e: StartupError) -> Self {
        Diagnostic {
            error_type: e.error_type().into(),
            error_message: e.to_string(),
        }
    }
}

/// Why a function stopped: its cold start failed, or the runtime loop (or a command run from a
/// terminal) ended with an error. Its `Debug` is its message, so a `main` that returns it
/// prints the setting at fault.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The cold start failed.
    #[error(transparent)]
    Startup(#[from] StartupError),
    /// The runtime loop, or a command from a terminal, ended with an error.
    #[error(transparent)]
    Runtime(BoxError),
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl Error {
    /// The Lambda `errorType`: the cold start's ([`StartupError::error_type`]), or
    /// `hookclaim.Runtime`.
    pub fn error_type(&self) -> &'static str {
        match self {
            Error::Startup(e) => e.error_type(),
            Error::Runtime(_) => "hookclaim.Runtime",
        }
    }
}

impl From<Error> for Diagnostic {
    fn from(e: Error) -> Self {
        Diagnostic {
            error_type: e.error_type().into(),
            error_message: e.to_string(),
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Startup(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_has_its_error_type_and_names_its_setting() {
        let cases = [
            (
                StartupError::Config(ConfigError {
                    setting: "HOOKCLAIM_SOURCES",
                    problem: "not set".into(),
                }),
                "hookclaim.Config",
                Some("HOOKCLAIM_SOURCES"),
            ),
            (
                StartupError::Database(DbError::Tls("unreadable".into())),
                "hookclaim.Tls",
                Some("DATABASE_CA_FILE"),
            ),
            (
                StartupError::Database(DbError::Timeout),
                "hookclaim.Database",
                None,
            ),
            (
                StartupError::Secrets {
                    setting: "DATABASE_SECRET_ARN",
                    why: "access denied".into(),
                },
                "hookclaim.Secrets",
                Some("DATABASE_SECRET_ARN"),
            ),
            (
                StartupError::processor("ORDERS_API_URL", "not set"),
                "hookclaim.Processor",
                Some("ORDERS_API_URL"),
            ),
        ];
        for (e, error_type, setting) in cases {
            assert_eq!((e.error_type(), e.setting()), (error_type, setting), "{e}");
            let message = e.to_string();
            let d = Diagnostic::from(Error::from(e));
            assert_eq!((d.error_type.as_str(), d.error_message), (error_type, message));
        }
    }

    #[test]
    fn a_processors_own_setting_keeps_its_cause() {
        let cause = std::io::Error::other("connection refused");
        let e = StartupError::processor("ORDERS_API_URL", cause);
        assert_eq!(e.to_string(), "ORDERS_API_URL: connection refused");
        let source = std::error::Error::source(&e).expect("the cause is kept");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(format!("{:?}", Error::from(e)), "ORDERS_API_URL: connection refused");
    }
}
