//! The retention function: re-drives run the same `Issues` processor as the webhook function.

use hookclaim::KeyedHttp;
use hookclaim_example_github_issues::Issues;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let chat_url =
        std::env::var("CHAT_URL").map_err(|_| "CHAT_URL: the chat API's URL is not set")?;
    hookclaim::run_retention(Issues::new(KeyedHttp::new()?, chat_url)).await?;
    Ok(())
}
