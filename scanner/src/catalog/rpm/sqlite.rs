//! The SQLite rpm database (`rpmdb.sqlite`, rpm's `lib/backend/sqlite.c`,
//! the default since rpm 4.16).
//!
//! The file is loaded into an in-memory SQLite connection with
//! `sqlite3_deserialize` (never written anywhere), read-only, in defensive
//! mode and with the schema untrusted. Each row of the `Packages` table
//! (`hnum INTEGER PRIMARY KEY, blob BLOB`) is one header blob. A database
//! whose WAL (`rpmdb.sqlite-wal`) was not checkpointed is read as the main
//! file alone; rpm checkpoints when it closes the database.

use rusqlite::{Connection, config::DbConfig};

/// First 16 bytes of every SQLite 3 database file.
const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// Size of the SQLite file header; bytes 18 and 19 are the write and read
/// format versions (1 legacy, 2 WAL).
const SQLITE_HEADER_LEN: usize = 100;

/// An SQLite file that is not a readable rpm database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SqliteError {
    /// The file does not start with SQLite's magic.
    #[error("not an SQLite 3 database")]
    NotSqlite,
    /// SQLite refused the file or a query.
    #[error("SQLite: {0}")]
    Sqlite(String),
    /// There is no `Packages` table.
    #[error("no `Packages` table: not an rpm database")]
    NoPackagesTable,
    /// `Packages` is a view, an index…
    #[error("`Packages` is a {0}, not a table")]
    PackagesNotATable(String),
    /// A row's `blob` column holds something else.
    #[error("Packages row {0}: `blob` is not a BLOB")]
    NotABlob(i64),
}

impl From<rusqlite::Error> for SqliteError {
    fn from(err: rusqlite::Error) -> SqliteError {
        SqliteError::Sqlite(err.to_string())
    }
}

/// Every `(hnum, blob)` of the `Packages` table, by `hnum`.
pub fn read_headers(data: &[u8]) -> Result<Vec<(i64, Vec<u8>)>, SqliteError> {
    let connection = open_database(data)?;
    // Only a real table: a view could make the query arbitrarily expensive.
    let packages_type: Option<String> = connection
        .query_row("SELECT type FROM sqlite_schema WHERE name = 'Packages'", [], |row| row.get(0))
        .map(Some)
        .or_else(|err| match err {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            other => Err(other),
        })?;
    match packages_type.as_deref() {
        Some("table") => {}
        Some(other) => return Err(SqliteError::PackagesNotATable(other.to_owned())),
        None => return Err(SqliteError::NoPackagesTable),
    }
    let mut statement = connection.prepare("SELECT hnum, blob FROM Packages ORDER BY hnum")?;
    let rows = statement.query_map([], |row| {
        let hnum: i64 = row.get(0)?;
        let blob = match row.get_ref(1)? {
            rusqlite::types::ValueRef::Blob(blob) => Some(blob.to_vec()),
            _ => None,
        };
        Ok((hnum, blob))
    })?;
    let mut headers = Vec::new();
    for row in rows {
        let (hnum, blob) = row?;
        headers.push((hnum, blob.ok_or(SqliteError::NotABlob(hnum))?));
    }
    Ok(headers)
}

/// Loads `data` into a private in-memory, read-only connection.
fn open_database(data: &[u8]) -> Result<Connection, SqliteError> {
    let header = data
        .get(..SQLITE_HEADER_LEN)
        .filter(|header| header.starts_with(SQLITE_MAGIC))
        .ok_or(SqliteError::NotSqlite)?;
    // The in-memory VFS cannot open a database whose header asks for WAL
    // mode: present the copy as a rollback-journal database instead. The
    // pages are the same; only the journal mode recorded in bytes 18 and 19
    // differs.
    let mut patched_header = [0u8; SQLITE_HEADER_LEN];
    patched_header.copy_from_slice(header);
    patched_header[18] = 1;
    patched_header[19] = 1;
    let pages = data.get(SQLITE_HEADER_LEN..).unwrap_or_default();
    let mut connection = Connection::open_in_memory()?;
    // A hostile file's schema must not run anything: no functions from the
    // schema, no writes through special pragmas.
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    connection.deserialize_read_exact(
        rusqlite::MAIN_DB,
        std::io::Read::chain(&patched_header[..], pages),
        data.len(),
        true,
    )?;
    Ok(connection)
}
