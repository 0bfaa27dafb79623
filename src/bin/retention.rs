//! The retention Lambda function, running the shipped processor `HOOKCLAIM_PROCESSOR` names.

// Single-threaded for the same reason as the webhook function.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), hookclaim::Error> {
    hookclaim::run_retention_with(hookclaim::Shipped::from_config).await
}
