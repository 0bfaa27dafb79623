//! A webhook function of your own on hookclaim's public API: [`Issues`] keeps GitHub issues in a
//! table of its own as they are opened and closed, writes an audit row per delivery, and
//! announces each opened or closed issue to a chat API through hookclaim's keyed HTTP call, so
//! a repeated call carries the same idempotency key and a throttling chat API defers the
//! delivery without spending its attempts.

use hookclaim::tokio_postgres::{self, Transaction};
use hookclaim::{Delivery, KeyedHttp, ProcessError, Processor, Work};

/// Keeps `example_issues` and `example_issue_audit`, and posts to a chat API.
pub struct Issues {
    http: KeyedHttp,
    chat_url: String,
}

/// The processor's tables, created by the first cold start.
const CREATE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS example_issues (
    repository  text   NOT NULL,
    number      bigint NOT NULL,
    title       text   NOT NULL,
    state       text   NOT NULL,
    delivery_id text   NOT NULL,
    PRIMARY KEY (repository, number)
);
CREATE TABLE IF NOT EXISTS example_issue_audit (
    delivery_id text PRIMARY KEY,
    event_type  text,
    action      text,
    recorded_at timestamptz NOT NULL DEFAULT now()
)";

/// An issue as its latest opened or closed event says.
const UPSERT_ISSUE: &str = "INSERT INTO example_issues
    (repository, number, title, state, delivery_id) VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (repository, number)
    DO UPDATE SET title = excluded.title, state = excluded.state,
                  delivery_id = excluded.delivery_id";

/// One audit row per delivery, whatever its event.
const AUDIT: &str = "INSERT INTO example_issue_audit (delivery_id, event_type, action)
    VALUES ($1, $2, $3) ON CONFLICT (delivery_id) DO NOTHING";

impl Issues {
    /// Posts announcements to `chat_url` through `http` (built once, at cold start).
    pub fn new(http: KeyedHttp, chat_url: impl Into<String>) -> Self {
        Issues {
            http,
            chat_url: chat_url.into(),
        }
    }
}

impl Processor for Issues {
    fn name(&self) -> &'static str {
        "github-issues"
    }

    async fn setup(&self, tx: &Transaction<'_>) -> Result<(), tokio_postgres::Error> {
        tx.batch_execute(CREATE_TABLES).await
    }

    async fn process(&self, d: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        let event: serde_json::Value = d.json()?;
        let action = event["action"].as_str();
        work.queue(AUDIT, &[&d.delivery_id, &d.event_type, &action]);
        let (Some("issues"), Some(action @ ("opened" | "closed"))) =
            (d.event_type.as_deref(), action)
        else {
            return Ok(());
        };
        let issue = &event["issue"];
        let (Some(repository), Some(number)) = (
            event["repository"]["full_name"].as_str(),
            issue["number"].as_i64(),
        ) else {
            // No retry can add them: dead at once, the payload kept for a replay.
            return Err(ProcessError::permanent(
                "issues event without a repository or number",
            ));
        };
        let title = issue["title"].as_str().unwrap_or_default();
        // The chat API sees the delivery's idempotency key on every attempt; a 429 defers, a
        // 400 is dead, and either way nothing below is committed.
        let text = format!("{repository}#{number} {action}: {title}");
        self.http
            .post(
                &self.chat_url,
                d,
                serde_json::json!({ "text": text }).to_string(),
            )
            .await?;
        work.queue(
            UPSERT_ISSUE,
            &[&repository, &number, &title, &action, &d.delivery_id],
        );
        Ok(())
    }
}
