//! The entry points: what a Lambda function's `main` calls. Each sets up JSON logging, reads the
//! configuration, builds the execution environment's shared resources once (cold start), and
//! runs the Lambda runtime loop with them.

use lambda_http::{service_fn, Request};
use lambda_runtime::LambdaEvent;

use crate::config::Config;
use crate::processor::Processor;
use crate::{environment, invocation, observe};

/// Why a function stopped: a cold start that failed (a bad setting, an unreadable CA bundle…)
/// or the runtime loop ending. The message names the setting at fault.
pub type Error = lambda_runtime::Error;

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
    run_webhook_with(|_| Ok(processor)).await
}

/// Runs the retention function with `processor`, which must be the webhook function's: re-drives
/// run the same processing.
pub async fn run_retention<P: Processor>(processor: P) -> Result<(), Error> {
    run_retention_with(|_| Ok(processor)).await
}

/// Like [`run_webhook`], with the processor made from the configuration, for processors that
/// need settings (the shipped binaries use [`crate::Shipped::from_config`]).
pub async fn run_webhook_with<P: Processor>(
    make: impl FnOnce(&Config) -> Result<P, Error>,
) -> Result<(), Error> {
    let (config, processor) = cold_start(make)?;
    let webhook = environment::webhook(&config, processor)
        .await
        .inspect_err(|e| tracing::error!(error = %e, "cold start failed"))?;
    let webhook = &webhook;
    lambda_http::run(service_fn(move |req: Request| async move {
        Ok::<_, Error>(webhook.handle(req).await)
    }))
    .await
}

/// Like [`run_retention`], with the processor made from the configuration.
pub async fn run_retention_with<P: Processor>(
    make: impl FnOnce(&Config) -> Result<P, Error>,
) -> Result<(), Error> {
    let (config, processor) = cold_start(make)?;
    let retention = environment::retention(&config, processor)
        .await
        .inspect_err(|e| tracing::error!(error = %e, "cold start failed"))?;
    let retention = &retention;
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let deadline = invocation::deadline(Some(&event.context));
            retention.handle(event.payload, deadline).await
        },
    ))
    .await
}

/// Logging, configuration and the processor: what both functions do first.
fn cold_start<P>(make: impl FnOnce(&Config) -> Result<P, Error>) -> Result<(Config, P), Error> {
    observe::init_logging();
    let config =
        Config::from_env().inspect_err(|e| tracing::error!(error = %e, "bad configuration"))?;
    let processor =
        make(&config).inspect_err(|e| tracing::error!(error = %e, "processor not built"))?;
    Ok((config, processor))
}
