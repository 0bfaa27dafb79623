//! Whether an execution environment is ready to handle deliveries: the schema is up to date and
//! the processor's setup has run. Both functions make sure of it once per environment, at cold
//! start or, if the database was not reachable then, before their first use of it.
//!
//! With `HOOKCLAIM_MIGRATE=auto` the function applies what is missing itself, which needs a role
//! that may create tables: the owner's login when one is configured (`DATABASE_OWNER_*`, the
//! deployed retention function), on a connection of its own that is closed once done, so the
//! environment's everyday connection stays the application role's; otherwise its one login.
//! With `never` (the deployed webhook function, whose role has data rights only) it only reads
//! the schema version: a database that is behind makes every delivery answer 503 (the sender
//! retries) with a log line naming the fix, until the owner has migrated. The cold start never
//! fails for it, so Lambda does not restart the environment over and over.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::MigrateMode;
use crate::db::{classify, Database, DbError, Session};
use crate::processor::Processor;
use crate::schema;

/// Set once this environment has migrated (or found the schema current) and run the
/// processor's setup.
pub struct Readiness {
    mode: MigrateMode,
    /// The schema owner's database, which migrates when set.
    owner: Option<Database>,
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
            owner: None,
            ready: AtomicBool::new(false),
            reported_behind: AtomicBool::new(false),
        }
    }

    /// The same, migrating with the schema owner's `owner` database when it is `Some`.
    pub fn with_owner(mut self, owner: Option<Database>) -> Self {
        self.owner = owner;
        self
    }

    /// Makes sure the schema is current and `processor`'s setup has run, unless that already
    /// succeeded in this environment. `auto`: [`Self::migrate`]. `never`: fails with
    /// [`DbError::SchemaBehind`] when the schema is behind, and otherwise runs the setup (which,
    /// for a role without `CREATE`, must find its tables made by the owner).
    pub async fn ensure<P: Processor>(
        &self,
        session: &mut Session<'_>,
        processor: &P,
    ) -> Result<(), DbError> {
        if self.ready.load(Ordering::Acquire) {
            return Ok(());
        }
        check_server(session).await?;
        if self.mode == MigrateMode::Auto {
            self.migrate(session, processor).await?;
            return Ok(());
        }
        let client = session.client().await?;
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
        self.ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Applies the missing migrations and runs `processor`'s setup, in one transaction under
    /// the migration lock, as the owner when its login is configured and otherwise on
    /// `session`; returns the versions applied. Whatever the mode: the `migrate` command runs
    /// it too.
    pub async fn migrate<P: Processor>(
        &self,
        session: &mut Session<'_>,
        processor: &P,
    ) -> Result<Vec<i32>, DbError> {
        let applied = match &self.owner {
            Some(owner) => {
                let mut owner_session = owner.session().await;
                let applied = migrate_and_set_up(&mut owner_session, processor).await;
                // The owner's connection is for this alone, not held for the environment's life.
                owner_session.discard();
                applied?
            }
            None => migrate_and_set_up(session, processor).await?,
        };
        if !applied.is_empty() {
            tracing::info!(versions = ?applied, "schema migrations applied");
        }
        self.ready.store(true, Ordering::Release);
        Ok(applied)
    }
}

/// Refuses a server older than the schema needs, naming its version.
async fn check_server(session: &mut Session<'_>) -> Result<(), DbError> {
    let client = session.client().await?;
    let row = client
        .query_typed_one(include_str!("schema/server_version.sql"), &[])
        .await
        .map_err(classify)?;
    supported(row.get(0), row.get(1)).inspect_err(|e| {
        tracing::error!(error = %e, "database server too old");
    })
}

/// Whether a server of `server_version_num` `number` (named `found`) can hold the schema.
fn supported(number: i32, found: String) -> Result<(), DbError> {
    if number < schema::MIN_SERVER_VERSION_NUM {
        return Err(DbError::ServerTooOld { found });
    }
    Ok(())
}

/// The migrations and the processor's setup in one transaction on `session`'s connection.
async fn migrate_and_set_up<P: Processor>(
    session: &mut Session<'_>,
    processor: &P,
) -> Result<Vec<i32>, DbError> {
    let client = session.client().await?;
    let tx = client.transaction().await.map_err(classify)?;
    let applied = schema::migrate_in(&tx).await.map_err(classify)?;
    processor.setup(&tx).await.map_err(classify)?;
    tx.commit().await.map_err(classify)?;
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_older_than_14_is_refused_naming_its_version_and_the_floor() {
        for (number, found) in [(130_012, "13.12"), (120_000, "12.0"), (139_999, "13.99")] {
            let e = supported(number, found.into()).unwrap_err();
            let text = e.to_string();
            assert!(
                text.contains(&format!("PostgreSQL {found};")) && text.contains("14 or later"),
                "{text}"
            );
        }
        for (number, found) in [(140_000, "14.0"), (150_018, "15.18"), (170_002, "17.2")] {
            assert!(supported(number, found.into()).is_ok(), "{found}");
        }
    }
}
