//! Versioned schema migrations, embedded in the binaries.
//!
//! A fresh database gets the schema at cold start without a manual step. Concurrent cold starts
//! serialise on a transaction-level advisory lock (released at commit, so it also works through
//! a transaction pooler, and nothing on the hot path ever takes a session-level lock). An
//! up-to-date database costs one short transaction per execution environment.

use tokio_postgres::types::Type;
use tokio_postgres::{Client, GenericClient, Transaction};

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
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "deliveries",
        sql: include_str!("../migrations/0001_deliveries.sql"),
    },
    Migration {
        version: 2,
        name: "lean_retention_indexes",
        sql: include_str!("../migrations/0002_lean_retention_indexes.sql"),
    },
    Migration {
        version: 3,
        name: "key_retention",
        sql: include_str!("../migrations/0003_key_retention.sql"),
    },
    Migration {
        version: 4,
        name: "destination_progress",
        sql: include_str!("../migrations/0004_destination_progress.sql"),
    },
    Migration {
        version: 5,
        name: "claim_function",
        sql: include_str!("../migrations/0005_claim_function.sql"),
    },
    Migration {
        version: 6,
        name: "claim_reads_first",
        sql: include_str!("../migrations/0006_claim_reads_first.sql"),
    },
    Migration {
        version: 7,
        name: "no_check_constraints",
        sql: include_str!("../migrations/0007_no_check_constraints.sql"),
    },
    Migration {
        version: 8,
        name: "claim_binds_six",
        sql: include_str!("../migrations/0008_claim_binds_six.sql"),
    },
    Migration {
        version: 9,
        name: "one_index_per_job",
        sql: include_str!("../migrations/0009_one_index_per_job.sql"),
    },
    Migration {
        version: 10,
        name: "stored_answer",
        sql: include_str!("../migrations/0010_stored_answer.sql"),
    },
];

/// The version a fully migrated database is at.
pub fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Arbitrary constant naming hookclaim's migration lock among the database's advisory locks.
const MIGRATION_LOCK_KEY: i64 = 0x686f_6f6b_636c_6169; // "hookclai"

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

/// Brings the schema to [`latest_version`] in its own transaction and returns the versions this
/// call applied.
///
/// Safe to call from any number of processes at once: the first takes the advisory lock and
/// migrates, the others wait for its commit and then find nothing left to do.
pub async fn migrate(client: &mut Client) -> Result<Vec<i32>, tokio_postgres::Error> {
    if current_version(client).await? >= latest_version() {
        return Ok(Vec::new());
    }
    let tx = client.transaction().await?;
    let applied = migrate_in(&tx).await?;
    tx.commit().await?;
    Ok(applied)
}

/// Takes the migration lock in `tx` (held until `tx` ends) and applies what is missing; returns
/// the versions applied. Work that must not race other cold starts runs in `tx` after it.
pub async fn migrate_in(tx: &Transaction<'_>) -> Result<Vec<i32>, tokio_postgres::Error> {
    tx.execute_typed(
        "SELECT pg_advisory_xact_lock($1)",
        &[(&MIGRATION_LOCK_KEY, Type::INT8)],
    )
    .await?;
    if current_version(tx).await? >= latest_version() {
        return Ok(Vec::new());
    }
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
    Ok(applied)
}
