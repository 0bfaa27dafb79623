//! The retention function: re-drives run the same `Orders` processor as the webhook function.

// One invocation at a time, as for the webhook function.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), hookclaim::Error> {
    hookclaim::run_retention(hookclaim_example_orders::Orders).await
}
