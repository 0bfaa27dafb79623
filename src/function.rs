//! The entry points: what a Lambda function's `main` calls. Each sets up JSON logging, reads the
//! configuration, builds the execution environment's shared resources once (cold start), and
//! runs the Lambda runtime loop with them.

use std::time::{Duration, SystemTime};

use crate::config::Config;
use crate::error::{Error, StartupError};
use crate::observe::{self, Telemetry};
use crate::processor::Processor;
use crate::retention::{self, Progress, Retention, RetentionError};
use crate::webhook::Webhook;

/// Logging, configuration and the processor: what both functions do first. Only the entry
/// points install logging; a function of its own that builds [`Webhook`] keeps its subscriber.
fn cold_start<P, E>(
    make: impl FnOnce(&Config) -> Result<P, E>,
    to_stderr: bool,
) -> Result<(Config, P), StartupError>
where
    StartupError: From<E>,
{
    observe::init_logging(to_stderr);
    let config =
        Config::from_env().inspect_err(|e| tracing::error!(error = %e, "bad configuration"))?;
    let processor = make(&config).map_err(StartupError::from).inspect_err(|e| {
        tracing::error!(
            error = %e,
            error_type = e.error_type(),
            setting = e.setting(),
            "processor not built"
        )
    })?;
    Ok((config, processor))
}

/// Runs the webhook function with `processor`: verify, claim, process, answer.
///
/// ```no_run
/// # use hookclaim::StoreOnly;
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() -> Result<(), hookclaim::Error> {
///     hookclaim::run_webhook(StoreOnly).await
/// }
/// ```
pub async fn run_webhook<P: Processor>(processor: P) -> Result<(), Error> {
    run_webhook_with(|_| Ok::<_, StartupError>(processor)).await
}

/// Runs the retention function with `processor`, which must be the webhook function's: re-drives
/// run the same processing.
///
/// Outside Lambda (no `AWS_LAMBDA_RUNTIME_API` in the environment) it runs the command its
/// arguments name once instead, from a terminal, with the same configuration and code as an
/// invocation: `retention stats`, `retention replay-all --source github --dry-run`,
/// `retention '{"command":"stats"}'` (docs/operations.md lists them). No arguments is a
/// normal run; `--deadline-secs N` (default 300) bounds it as the function's timeout would.
/// The report is printed on stdout, logs go to stderr, and an error is printed as Lambda
/// returns it (`errorType`, `errorMessage`) and ends the process with a failure status.
pub async fn run_retention<P: Processor>(processor: P) -> Result<(), Error> {
    run_retention_with(|_| Ok::<_, StartupError>(processor)).await
}

/// Like [`run_webhook`], with the processor made from the configuration, for processors that
/// need settings (the shipped binaries use [`crate::Shipped::from_config`]). `make` fails with
/// anything a [`StartupError`] is made from: [`StartupError::processor`] for a setting of the
/// processor's own, which stops the cold start naming it (`errorType` `hookclaim.Processor`).
///
/// ```no_run
/// use hookclaim::{StartupError, StoreOnly};
///
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() -> Result<(), hookclaim::Error> {
///     hookclaim::run_webhook_with(|_config| {
///         let url = std::env::var("ORDERS_API_URL")
///             .map_err(|e| StartupError::processor("ORDERS_API_URL", e))?;
///         # let _ = url;
///         Ok::<_, StartupError>(StoreOnly)
///     })
///     .await
/// }
/// ```
pub async fn run_webhook_with<P: Processor, E>(
    make: impl FnOnce(&Config) -> Result<P, E>,
) -> Result<(), Error>
where
    StartupError: From<E>,
{
    let (config, processor) = cold_start(make, false)?;
    let webhook = Webhook::from_config(&config, processor).await?;
    lambda_http::run(&webhook).await.map_err(Error::Runtime)
}

/// Like [`run_retention`], with the processor made from the configuration.
pub async fn run_retention_with<P: Processor, E>(
    make: impl FnOnce(&Config) -> Result<P, E>,
) -> Result<(), Error>
where
    StartupError: From<E>,
{
    if std::env::var_os(RUNTIME_API).is_none() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        // Boxed, as `Retention::handle` boxes its commands: their futures nest deep enough to
        // exceed the compiler's layout query depth in a caller's `main`.
        return Box::pin(run_retention_once(make, &args)).await;
    }
    let (config, processor) = cold_start(make, false)?;
    let retention = Retention::from_config(&config, processor).await?;
    lambda_runtime::run(&retention).await.map_err(Error::Runtime)
}

/// Set by Lambda (and by emulators) for the runtime loop; a terminal has no such thing.
const RUNTIME_API: &str = "AWS_LAMBDA_RUNTIME_API";

/// How long a command from a terminal may run by default: the template's retention timeout.
const TERMINAL_DEADLINE: Duration = Duration::from_secs(300);

/// The retention function's command from a terminal: one invocation's work, answered on stdout.
async fn run_retention_once<P: Processor, E>(
    make: impl FnOnce(&Config) -> Result<P, E>,
    args: &[String],
) -> Result<(), Error>
where
    StartupError: From<E>,
{
    let (config, processor) = cold_start(make, true)?;
    let parsed = terminal_deadline(args).and_then(|(within, args)| {
        Ok((within, retention::payload_from_args(&args)?))
    });
    let answer = match parsed {
        Ok((within, payload)) => {
            // A failed cold start fails here as it fails a function's: with the setting at fault.
            let retention = Retention::from_config(&config, processor)
                .await?
                .with_telemetry(Telemetry::new(&config.metrics_namespace).on_stderr())
                .with_progress(Progress::on_stderr());
            retention.handle(payload, SystemTime::now() + within).await
        }
        Err(e) => Err(e),
    };
    match answer {
        Ok(report) => {
            let report = serde_json::to_string_pretty(&report).map_err(|e| Error::Runtime(e.into()))?;
            println!("{report}");
            Ok(())
        }
        Err(e) => {
            let diagnostic = lambda_runtime::Diagnostic::from(e);
            let answer = serde_json::json!({
                "errorType": diagnostic.error_type,
                "errorMessage": diagnostic.error_message,
            });
            println!("{answer:#}");
            Err(Error::Runtime(diagnostic.error_message.into()))
        }
    }
}

/// Takes `--deadline-secs N` (a terminal's stand-in for the function's timeout) out of `args`.
fn terminal_deadline(args: &[String]) -> Result<(Duration, Vec<String>), RetentionError> {
    let bad = |msg: &str| RetentionError::BadCommand(msg.to_string());
    let mut within = TERMINAL_DEADLINE;
    let mut rest = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let value = match arg.strip_prefix("--deadline-secs") {
            Some("") => args.next().map(String::as_str),
            Some(inline) => match inline.strip_prefix('=') {
                Some(v) => Some(v),
                None => {
                    rest.push(arg.clone());
                    continue;
                }
            },
            None => {
                rest.push(arg.clone());
                continue;
            }
        };
        let secs: u64 = value
            .and_then(|v| v.parse().ok())
            .filter(|s| (1..=86_400).contains(s))
            .ok_or_else(|| bad("--deadline-secs needs a number of seconds, 1 to 86400"))?;
        within = Duration::from_secs(secs);
    }
    Ok((within, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_terminal_deadline_is_taken_out_of_the_arguments() {
        let (within, rest) = terminal_deadline(&strings(&["stats"])).unwrap();
        assert_eq!((within, rest), (TERMINAL_DEADLINE, strings(&["stats"])));
        let args = strings(&["replay-all", "--deadline-secs", "3600", "--source", "github"]);
        let (within, rest) = terminal_deadline(&args).unwrap();
        assert_eq!(within, Duration::from_secs(3600));
        assert_eq!(rest, strings(&["replay-all", "--source", "github"]));
        let (within, _) = terminal_deadline(&strings(&["run", "--deadline-secs=5"])).unwrap();
        assert_eq!(within, Duration::from_secs(5));
        for bad in [&["--deadline-secs"][..], &["--deadline-secs", "0"], &["--deadline-secs=x"]] {
            let e = terminal_deadline(&strings(bad)).unwrap_err();
            assert_eq!(e.error_type(), "hookclaim.BadCommand", "{bad:?}");
        }
        // Another option that merely starts the same way is left alone.
        let (_, rest) = terminal_deadline(&strings(&["--deadline-secsx"])).unwrap();
        assert_eq!(rest, strings(&["--deadline-secsx"]));
    }
}
