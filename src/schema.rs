//! Versioned schema migrations, embedded in the binaries.
//!
//! A fresh database gets the schema at cold start without a manual step. Concurrent cold starts
//! serialise on a transaction-level advisory lock (released at commit, so it also works through
//! a transaction pooler, and nothing on the hot path ever takes a session-level lock). An
//! up-to-date database costs one short transaction per execution environment.
//!
//! Before the first release the schema is one migration that reads as the current design; from
//! the first release on, migrations are only appended, never edited (`migrations/released.sha256`
//! holds what was released, and the tests compare).

use tokio_postgres::types::Type;
use tokio_postgres::{GenericClient, Transaction};

/// One migration: a version, a name for the log, and its SQL.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Strictly increasing version number.
    pub version: i32,
    /// Short name, stored alongside the version; the file is `migrations/{version:04}_{name}.sql`.
    pub name: &'static str,
    /// The statements, run in one transaction.
    pub sql: &'static str,
}

/// Every migration, oldest first.
pub const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "ledger",
    sql: include_str!("../migrations/0001_ledger.sql"),
}];

/// The oldest server the schema runs on, as `server_version_num`: PostgreSQL 14, whose SQL
/// functions may have SQL-standard bodies (`RETURN …`, `BEGIN ATOMIC`).
pub const MIN_SERVER_VERSION_NUM: i32 = 140_000;

/// The version a fully migrated database is at.
pub fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Arbitrary constant naming hookclaim's migration lock among the database's advisory locks.
const MIGRATION_LOCK_KEY: i64 = 0x686f_6f6b_636c_6169; // "hookclai"

/// Reads the applied version without locking; 0 for a database hookclaim has never touched.
pub async fn current_version(client: &impl GenericClient) -> Result<i32, tokio_postgres::Error> {
    let exists: bool = client
        .query_typed_one(include_str!("schema/migrations_table_exists.sql"), &[])
        .await?
        .get(0);
    if !exists {
        return Ok(0);
    }
    Ok(client
        .query_typed_one(include_str!("schema/current_version.sql"), &[])
        .await?
        .get(0))
}

/// Brings the schema to [`latest_version`] in its own transaction and returns the versions this
/// call applied.
///
/// Safe to call from any number of processes at once: the first takes the advisory lock and
/// migrates, the others wait for its commit and then find nothing left to do. For tools and
/// tests: the functions migrate through `readiness`, with the processor's setup.
#[cfg(feature = "internals")]
pub async fn migrate(client: &mut tokio_postgres::Client) -> Result<Vec<i32>, tokio_postgres::Error> {
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
        include_str!("schema/lock.sql"),
        &[(&MIGRATION_LOCK_KEY, Type::INT8)],
    )
    .await?;
    if current_version(tx).await? >= latest_version() {
        return Ok(Vec::new());
    }
    // Read again once the table is certain to exist: the check above may not yet see a table
    // that a concurrent migration created and committed while this one waited for the lock.
    tx.batch_execute(include_str!("schema/create_migrations_table.sql"))
        .await?;
    let current: i32 = tx
        .query_typed_one(include_str!("schema/current_version.sql"), &[])
        .await?
        .get(0);
    let mut applied = Vec::new();
    for migration in MIGRATIONS.iter().filter(|m| m.version > current) {
        tx.batch_execute(migration.sql).await?;
        tx.execute_typed(
            include_str!("schema/record_migration.sql"),
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

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    /// Checks `released` (lines of `migrations/released.sha256`) against `migrations`: every
    /// released migration is still there, at the same place, with the same text. Returns what
    /// is wrong, if anything.
    fn check_released(released: &str, migrations: &[Migration]) -> Result<(), String> {
        let lines = released
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
        for (i, line) in lines.enumerate() {
            let (hash, path) = line
                .split_once("  ")
                .ok_or_else(|| format!("not `<sha256>  <path>`: {line:?}"))?;
            let Some(m) = migrations.get(i) else {
                return Err(format!("{path} was released and is gone"));
            };
            let file = format!("migrations/{:04}_{}.sql", m.version, m.name);
            if file != path {
                return Err(format!(
                    "released migration {} is {path}, but the list has {file} there",
                    i + 1
                ));
            }
            if hex::encode(Sha256::digest(m.sql)) != hash {
                return Err(format!(
                    "{path} was released and has been edited since; add a new migration instead"
                ));
            }
        }
        Ok(())
    }

    #[test]
    fn released_migrations_are_unchanged() {
        let released = include_str!("../migrations/released.sha256");
        assert_eq!(check_released(released, MIGRATIONS), Ok(()));
    }

    #[test]
    fn the_released_check_fails_on_an_edited_missing_or_moved_migration() {
        let m = |version, name, sql| Migration { version, name, sql };
        let first = m(1, "ledger", "CREATE TABLE t (a int);\n");
        let second = m(2, "more", "ALTER TABLE t ADD b int;\n");
        let line = |m: &Migration| {
            format!(
                "{}  migrations/{:04}_{}.sql\n",
                hex::encode(Sha256::digest(m.sql)),
                m.version,
                m.name
            )
        };
        let released = format!("# comment\n{}", line(&first));
        let edited = m(1, "ledger", "CREATE TABLE t (a bigint);\n");
        let cases: [(&str, &[Migration], bool); 6] = [
            ("as released", &[first, second], true),
            ("nothing released", &[first], true),
            ("edited", &[edited, second], false),
            ("removed", &[], false),
            ("renamed", &[m(1, "other", first.sql)], false),
            ("another first", &[second], false),
        ];
        for (case, migrations, ok) in cases {
            let list = if case == "nothing released" {
                "# nothing yet\n"
            } else {
                &released
            };
            assert_eq!(check_released(list, migrations).is_ok(), ok, "{case}");
        }
        let malformed = "0123 migrations/0001_ledger.sql\n";
        assert!(check_released(malformed, &[first]).is_err(), "malformed");
    }

    #[test]
    fn migration_versions_start_at_one_and_go_up_by_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i32 + 1, "{}", m.name);
        }
    }
}
