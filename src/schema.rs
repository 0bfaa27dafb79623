//! Versioned schema migrations, embedded in the binaries.
//!
//! A fresh database gets the schema at cold start without a manual step. Concurrent cold starts
//! serialise on a transaction-level advisory lock (released at commit, so it also works through
//! a transaction pooler), and an up-to-date database costs one read with no lock at all, so the
//! hot path never takes a session-level lock.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio_postgres::types::Type;
use tokio_postgres::{Client, GenericClient};

use crate::db::{classify, DbError, Session};
use crate::processor::Processor;

/// One migration: a version, a name for the log, and its SQL.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Strictly increasing version number.
    pub version: i32,
    /// Short name, stored alongside the version.
    pub name: &'static str,
    /// The statements, run in one transaction.
    pub sql: &'static str,
}

/// Every migration, oldest first.
pub const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "deliveries",
    sql: include_str!("../migrations/0001_deliveries.sql"),
}];

/// The version a fully migrated database is at.
pub fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Arbitrary constant naming hookclaim's migration lock among the database's advisory locks.
pub const MIGRATION_LOCK_KEY: i64 = 0x686f_6f6b_636c_6169; // "hookclai"

const CREATE_MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS hookclaim_schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)";

const CURRENT_VERSION: &str = "SELECT coalesce(max(version), 0) FROM hookclaim_schema_migrations";

const TABLE_EXISTS: &str = "SELECT to_regclass('hookclaim_schema_migrations') IS NOT NULL";

/// Reads the applied version without locking; 0 for a database hookclaim has never touched.
pub async fn current_version(client: &impl GenericClient) -> Result<i32, tokio_postgres::Error> {
    // query_typed: no named prepared statement, so this also works through a transaction pooler.
    let exists: bool = client.query_typed_one(TABLE_EXISTS, &[]).await?.get(0);
    if !exists {
        return Ok(0);
    }
    Ok(client.query_typed_one(CURRENT_VERSION, &[]).await?.get(0))
}

/// Brings the schema to [`latest_version`] and returns the versions this call applied.
///
/// Safe to call from any number of processes at once: the first takes the advisory lock and
/// migrates, the others wait for its commit and then find nothing left to do.
pub async fn migrate(client: &mut Client) -> Result<Vec<i32>, tokio_postgres::Error> {
    if current_version(client).await? >= latest_version() {
        return Ok(Vec::new());
    }
    let tx = client.transaction().await?;
    tx.execute_typed(
        "SELECT pg_advisory_xact_lock($1)",
        &[(&MIGRATION_LOCK_KEY, Type::INT8)],
    )
    .await?;
    tx.batch_execute(CREATE_MIGRATIONS_TABLE).await?;
    let current: i32 = tx.query_typed_one(CURRENT_VERSION, &[]).await?.get(0);
    let mut applied = Vec::new();
    for migration in MIGRATIONS.iter().filter(|m| m.version > current) {
        tx.batch_execute(migration.sql).await?;
        tx.execute_typed(
            "INSERT INTO hookclaim_schema_migrations (version, name) VALUES ($1, $2)",
            &[
                (&migration.version, Type::INT4),
                (&migration.name, Type::TEXT),
            ],
        )
        .await?;
        applied.push(migration.version);
    }
    tx.commit().await?;
    Ok(applied)
}

/// Whether this environment has brought the schema up to date and run the processor's setup.
/// Both functions do it once per environment, at cold start or, if the database was not
/// reachable then, before their first use of it.
#[derive(Debug, Default)]
pub struct Readiness(AtomicBool);

impl Readiness {
    /// Migrates and runs `processor`'s setup unless that already succeeded here.
    pub async fn ensure<P: Processor>(
        &self,
        session: &mut Session<'_>,
        processor: &P,
    ) -> Result<(), DbError> {
        if self.0.load(Ordering::Acquire) {
            return Ok(());
        }
        let client = session.client().await?;
        let applied = migrate(client).await.map_err(classify)?;
        if !applied.is_empty() {
            tracing::info!(versions = ?applied, "schema migrations applied");
        }
        processor.setup(client).await.map_err(classify)?;
        self.0.store(true, Ordering::Release);
        Ok(())
    }
}
