//! Whether an execution environment is ready to handle deliveries: the schema is up to date and
//! the processor's setup has run. Both functions make sure of it once per environment, at cold
//! start or, if the database was not reachable then, before their first use of it.
//!
//! With `HOOKCLAIM_MIGRATE=auto` the function applies what is missing itself, which needs a role
//! that may create tables. With `never` (the deployed webhook function, whose role has data
//! rights only) it only reads the schema version: a database that is behind makes every
//! delivery answer 503 (the sender retries) with a log line naming the fix, until the owner has
//! migrated. The cold start never fails for it, so Lambda does not restart the environment over
//! and over.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::MigrateMode;
use crate::db::{classify, DbError, Session};
use crate::processor::Processor;
use crate::schema;

/// Set once this environment has migrated (or found the schema current) and run the
/// processor's setup.
#[derive(Debug)]
pub struct Readiness {
    mode: MigrateMode,
    ready: AtomicBool,
    /// The schema-behind error is logged once per environment; every delivery's own line
    /// carries it after that.
    reported_behind: AtomicBool,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness::new(MigrateMode::Auto)
    }
}

impl Readiness {
    /// Readiness checked the way `mode` says.
    pub fn new(mode: MigrateMode) -> Self {
        Readiness {
            mode,
            ready: AtomicBool::new(false),
            reported_behind: AtomicBool::new(false),
        }
    }

    /// Makes sure the schema is current and `processor`'s setup has run, unless that already
    /// succeeded in this environment. `auto`: migrates and runs the setup in one transaction
    /// under the migration lock. `never`: fails with [`DbError::SchemaBehind`] when the schema
    /// is behind, and otherwise runs the setup (which, for a role without `CREATE`, must find
    /// its tables made by the owner).
    pub async fn ensure<P: Processor>(
        &self,
        session: &mut Session<'_>,
        processor: &P,
    ) -> Result<(), DbError> {
        if self.ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let client = session.client().await?;
        match self.mode {
            MigrateMode::Auto => {
                let tx = client.transaction().await.map_err(classify)?;
                let applied = schema::migrate_in(&tx).await.map_err(classify)?;
                processor.setup(&tx).await.map_err(classify)?;
                tx.commit().await.map_err(classify)?;
                if !applied.is_empty() {
                    tracing::info!(versions = ?applied, "schema migrations applied");
                }
            }
            MigrateMode::Never => {
                let current = schema::current_version(&*client)
                    .await
                    .map_err(classify)?;
                let required = schema::latest_version();
                if current < required {
                    let behind = DbError::SchemaBehind { current, required };
                    if !self.reported_behind.swap(true, Ordering::Relaxed) {
                        tracing::error!(current, required, error = %behind, "database schema is behind");
                    }
                    return Err(behind);
                }
                let tx = client.transaction().await.map_err(classify)?;
                processor.setup(&tx).await.map_err(|e| {
                    tracing::error!(
                        error = %crate::db::describe(&e),
                        "the processor's setup failed with HOOKCLAIM_MIGRATE=never; run it with \
                         the owner role: invoke the retention function with {{\"command\":\"migrate\"}}"
                    );
                    classify(e)
                })?;
                tx.commit().await.map_err(classify)?;
            }
        }
        self.ready.store(true, Ordering::Release);
        Ok(())
    }
}
