//! The SQLite schema of the advisory DB, its migrations and connection
//! settings.
//!
//! Every schema change is a new entry at the end of [`MIGRATIONS`]; entries
//! are never edited once released. `open` applies the missing ones in order,
//! in one write transaction, and records each in `schema_version`. A file
//! whose recorded version is newer than this build knows is refused rather
//! than guessed at. Everything stored is derived from OSV exports, so a
//! migration that changes how records or keys are stored may simply empty
//! `records`, `affected_index`, `ecosystem_counts` and the counters in
//! `meta` (and clear `imports`): the next import then rebuilds them in full.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::Error;

/// One schema step.
struct Migration {
    /// The version the schema has after this step.
    version: i64,
    /// The SQL applied, in the migration's transaction.
    sql: &'static str,
}

/// Every schema step, oldest first.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: "
        -- One row per OSV record, withdrawn ones included (a later version of
        -- a withdrawn record must still compare against its `modified`).
        CREATE TABLE records (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            modified TEXT NOT NULL,          -- as published
            modified_ns INTEGER NOT NULL,    -- UTC nanoseconds since the epoch, for ordering
            withdrawn INTEGER NOT NULL,      -- 0 or 1
            body BLOB NOT NULL               -- codec::encode(record)
        );
        -- (ecosystem key, package key) -> record, for records not withdrawn.
        -- An affected entry has several ecosystem keys (see keys.rs).
        CREATE TABLE affected_index (
            ecosystem TEXT NOT NULL,
            name TEXT NOT NULL,
            record INTEGER NOT NULL,
            PRIMARY KEY (ecosystem, name, record)
        ) WITHOUT ROWID;
        -- Finds the index rows of a record being replaced.
        CREATE INDEX affected_index_by_record ON affected_index (record);
        -- Records not withdrawn per base ecosystem (`Debian`, `npm`...),
        -- kept up to date by imports so `status` reads them directly.
        CREATE TABLE ecosystem_counts (
            ecosystem TEXT PRIMARY KEY,
            records INTEGER NOT NULL
        ) WITHOUT ROWID;
        -- Counters and the content digest behind `version()`.
        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) WITHOUT ROWID;
        -- One row per finished import.
        CREATE TABLE imports (
            rowid INTEGER PRIMARY KEY,
            source TEXT NOT NULL,
            started_at TEXT NOT NULL,
            finished_at TEXT NOT NULL,
            inserted INTEGER NOT NULL,
            replaced INTEGER NOT NULL,
            skipped INTEGER NOT NULL,
            malformed INTEGER NOT NULL
        );
    ",
    },
    Migration {
        version: 2,
        sql: "
        -- Warnings about records an import stored with something left out
        -- or assumed (`malformed` counts those it refused).
        ALTER TABLE imports ADD COLUMN warnings INTEGER NOT NULL DEFAULT 0;
    ",
    },
];

/// The schema version this build writes.
pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Settings for every connection: WAL so that scans read while an import
/// writes, `synchronous=NORMAL` (durable at checkpoints, never corrupt, and
/// the data can always be re-imported), a WAL file cut back to 64 MiB after
/// checkpoints (one full import writes far more), a busy timeout so a scan
/// waits out an import's commit instead of failing, and a memory map for
/// reads.
pub(crate) fn configure(conn: &Connection, path: &Path) -> Result<(), Error> {
    let sqlite = |action| move |source| Error::Sqlite { path: path.to_owned(), action, source };
    conn.busy_timeout(Duration::from_secs(30)).map_err(sqlite("cannot set the busy timeout"))?;
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
        .map_err(sqlite("cannot switch to WAL journaling"))?;
    conn.execute_batch(
        "PRAGMA synchronous = NORMAL;
         PRAGMA journal_size_limit = 67108864;
         PRAGMA temp_store = MEMORY;
         PRAGMA mmap_size = 268435456;",
    )
    .map_err(sqlite("cannot set connection pragmas"))?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(())
}

/// Brings the schema up to [`latest_version`], or refuses a newer file.
/// Returns the version in force.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<i64, Error> {
    let sqlite = |action| move |source| Error::Sqlite { path: path.to_owned(), action, source };
    // The common case, an up-to-date file, takes no write lock.
    if let Some(current) = recorded_version(conn).map_err(sqlite("cannot read the schema version"))?
        && current >= latest_version()
    {
        return refuse_newer(path, current);
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite("cannot start the schema migration"))?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
            version INTEGER PRIMARY KEY,
            applied_at TEXT NOT NULL
        );",
    )
    .map_err(sqlite("cannot create the schema_version table"))?;
    // Read again under the write lock: another process may have migrated
    // between the first read and the lock.
    let current = recorded_version(&tx).map_err(sqlite("cannot read the schema version"))?.unwrap_or(0);
    refuse_newer(path, current)?;
    let now = super::time::now_text();
    for migration in MIGRATIONS.iter().filter(|m| m.version > current) {
        tx.execute_batch(migration.sql).map_err(sqlite("cannot apply a schema migration"))?;
        tx.execute(
            "INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)",
            rusqlite::params![migration.version, now],
        )
        .map_err(sqlite("cannot record a schema migration"))?;
    }
    tx.commit().map_err(sqlite("cannot commit the schema migration"))?;
    Ok(latest_version())
}

fn refuse_newer(path: &Path, current: i64) -> Result<i64, Error> {
    if current > latest_version() {
        return Err(Error::SchemaTooNew {
            path: path.to_owned(),
            found: current,
            supported: latest_version(),
        });
    }
    Ok(current)
}

/// The newest applied migration, `None` for a file without the table.
fn recorded_version(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    let has_table: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
            [],
            |row| row.get(0),
        )
        .optional()?;
    if has_table.is_none() {
        return Ok(None);
    }
    conn.query_row("SELECT MAX(version) FROM schema_version", [], |row| row.get::<_, Option<i64>>(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order() {
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version, index as i64 + 1);
        }
    }

    #[test]
    fn migrating_twice_is_a_no_op_and_newer_files_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.sqlite");
        let mut conn = Connection::open(&path).expect("open");
        configure(&conn, &path).expect("configure");
        assert_eq!(migrate(&mut conn, &path).expect("first"), latest_version());
        assert_eq!(migrate(&mut conn, &path).expect("second"), latest_version());
        let rows: i64 =
            conn.query_row("SELECT COUNT(*) FROM schema_version", [], |r| r.get(0)).expect("count");
        assert_eq!(rows, latest_version());

        conn.execute("INSERT INTO schema_version VALUES (?1, 'later')", [latest_version() + 1])
            .expect("bump");
        match migrate(&mut conn, &path) {
            Err(Error::SchemaTooNew { found, supported, .. }) => {
                assert_eq!((found, supported), (latest_version() + 1, latest_version()));
            }
            other => panic!("expected SchemaTooNew, got {other:?}"),
        }
    }
}
