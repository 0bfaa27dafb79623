//! A test processor whose behaviour each delivery's body chooses, shared by the webhook tests
//! and the role tests (which run the same response rows as the application role).

use hookclaim::processor::{Delivery, ProcessError, Processor};
use hookclaim::work::Work;

/// A processor whose behaviour the body chooses: `{"behaviour": "retry" | "retry-once" |
/// "permanent" | "ok" | "panic" | "hang" | …}` (`retry-once` fails the first attempt only).
/// It writes an effect that a failure must roll back, and reads it back inside the transaction
/// before deciding, so both the queued write and the in-transaction read are exercised.
pub struct Scripted;

impl Processor for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }

    async fn setup(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
    ) -> Result<(), tokio_postgres::Error> {
        // Checked first, as the licence example does, so that a role without CREATE (the
        // application role) can run the setup once the owner has made the table.
        let exists: bool = tx
            .query_typed_one("SELECT to_regclass('effects') IS NOT NULL", &[])
            .await?
            .get(0);
        if !exists {
            tx.batch_execute("CREATE TABLE effects (id text)").await?;
        }
        Ok(())
    }

    async fn process(&self, delivery: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        work.queue("INSERT INTO effects VALUES ($1)", &[&delivery.delivery_id]);
        let seen = work
            .query(
                "SELECT count(*) FROM effects WHERE id = $1",
                &[&delivery.delivery_id],
            )
            .await?;
        let seen: i64 = seen[0].get(0);
        assert!(seen >= 1, "the queued write is visible to a read after it");
        let body: serde_json::Value = delivery.json().unwrap_or_default();
        match body["behaviour"].as_str() {
            Some("bad-write") => {
                // Fails only when the batch is committed, after the write above.
                work.queue("SELECT 1 / 0", &[]);
                Ok(())
            }
            Some("panic") => panic!("simulated bug inside the transaction"),
            Some("hang") => std::future::pending().await,
            Some("deallocate") => {
                // What a session-mode pooler's reset or an operator's DISCARD does to the
                // connection's prepared statements.
                work.query("DEALLOCATE ALL", &[]).await?;
                Err(ProcessError::new("statements deallocated"))
            }
            Some("retry") => Err(ProcessError::new("downstream unavailable")),
            Some("retry-in") => Err(ProcessError::retry_in(
                "downstream asked for a minute",
                std::time::Duration::from_secs(60),
            )),
            Some("retry-once") if delivery.attempt == 1 => {
                Err(ProcessError::new("downstream unavailable"))
            }
            Some("permanent") => Err(ProcessError::permanent("order was cancelled")),
            _ => Ok(()),
        }
    }
}
