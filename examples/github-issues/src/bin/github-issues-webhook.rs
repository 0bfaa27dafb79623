//! The webhook function: hookclaim verifies, claims and answers; `Issues` does the rest.

use hookclaim::KeyedHttp;
use hookclaim_example_github_issues::Issues;

// Lambda sends an environment one invocation at a time: one thread is enough.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let chat_url =
        std::env::var("CHAT_URL").map_err(|_| "CHAT_URL: the chat API's URL is not set")?;
    hookclaim::run_webhook(Issues::new(KeyedHttp::new()?, chat_url)).await?;
    Ok(())
}
