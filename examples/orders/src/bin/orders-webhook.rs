//! The webhook function: hookclaim verifies, claims and answers; `Orders` records the order.

// Lambda sends an environment one invocation at a time: one thread is enough.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), hookclaim::Error> {
    hookclaim::run_webhook(hookclaim_example_orders::Orders).await
}
