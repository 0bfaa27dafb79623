//! The webhook Lambda function, running the shipped processor `HOOKCLAIM_PROCESSOR` names.

// Lambda sends an environment one invocation at a time: a single-threaded runtime keeps the
// handler and its database connection's I/O on one thread, with no cross-thread wake-up on each
// round trip.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), hookclaim::Error> {
    hookclaim::run_webhook_with(hookclaim::Shipped::from_config).await
}
