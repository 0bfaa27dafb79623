//! The webhook Lambda function: wiring only. See `hookclaim::webhook`.

use hookclaim::config::{Config, ProcessorChoice};
use hookclaim::forward::Forwarder;
use hookclaim::processor::{Licences, Processor, StoreOnly};
use lambda_http::{run, service_fn, Error, Request};

// Lambda sends an environment one invocation at a time: a single-threaded runtime keeps the
// handler and its database connection's I/O on one thread, with no cross-thread wake-up on each
// round trip.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    hookclaim::observe::init_logging();
    let config =
        Config::from_env().inspect_err(|e| tracing::error!(error = %e, "bad configuration"))?;
    match &config.processor {
        ProcessorChoice::Store => serve(&config, StoreOnly).await,
        ProcessorChoice::Licence => serve(&config, Licences).await,
        ProcessorChoice::Forward { url, timeout } => {
            serve(&config, Forwarder::new(url.clone(), *timeout)?).await
        }
    }
}

async fn serve<P: Processor>(config: &Config, processor: P) -> Result<(), Error> {
    let webhook = hookclaim::environment::webhook(config, processor)
        .await
        .inspect_err(|e| tracing::error!(error = %e, "cold start failed"))?;
    let webhook = &webhook;
    run(service_fn(move |req: Request| async move {
        Ok::<_, Error>(webhook.handle(req).await)
    }))
    .await
}
