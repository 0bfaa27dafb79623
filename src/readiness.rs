//! Whether an execution environment is ready to handle deliveries: the schema is up to date and
//! the processor's setup has run. Both functions make sure of it once per environment, at cold
//! start or, if the database was not reachable then, before their first use of it.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::db::{classify, DbError, Session};
use crate::processor::Processor;
use crate::schema;

/// Set once this environment has migrated and run the processor's setup.
#[derive(Debug, Default)]
pub struct Readiness(AtomicBool);

impl Readiness {
    /// Migrates and runs `processor`'s setup, in one transaction under the migration lock, unless
    /// that already succeeded in this environment.
    pub async fn ensure<P: Processor>(
        &self,
        session: &mut Session<'_>,
        processor: &P,
    ) -> Result<(), DbError> {
        if self.0.load(Ordering::Acquire) {
            return Ok(());
        }
        let client = session.client().await?;
        let tx = client.transaction().await.map_err(classify)?;
        let applied = schema::migrate_in(&tx).await.map_err(classify)?;
        processor.setup(&tx).await.map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        if !applied.is_empty() {
            tracing::info!(versions = ?applied, "schema migrations applied");
        }
        self.0.store(true, Ordering::Release);
        Ok(())
    }
}
