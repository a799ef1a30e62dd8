//! Errors of the advisory DB. Each names the file, record or setting it is
//! about; the underlying cause is its `source()`.

use std::io;
use std::path::PathBuf;

use crate::version::VersionError;

/// What went wrong with the advisory DB or an import source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The DB directory could not be created.
    #[error("{path}: cannot create the advisory DB directory")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// SQLite failed.
    #[error("{path}: {action}")]
    Sqlite {
        /// The DB file.
        path: PathBuf,
        /// What was being done, e.g. `cannot look up advisories`.
        action: &'static str,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
    /// SQLite failed while storing one imported record.
    #[error("{path}: cannot store record {id} (from {location})")]
    Store {
        /// The DB file.
        path: PathBuf,
        /// The record's id.
        id: String,
        /// Where the record came from in the import source.
        location: String,
        /// The cause.
        #[source]
        source: Box<rusqlite::Error>,
    },
    /// The DB was written by a newer PatchPilot.
    #[error(
        "{path}: schema version {found} is newer than the newest this PatchPilot knows ({supported}); \
         upgrade PatchPilot, or remove the file and import again"
    )]
    SchemaTooNew {
        /// The DB file.
        path: PathBuf,
        /// The version recorded in the file.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// A value PatchPilot itself stored cannot be read back.
    #[error("{path}: stored {what} is corrupt: {reason}")]
    Corrupt {
        /// The DB file.
        path: PathBuf,
        /// What: `record GHSA-…`, `meta key content_digest`…
        what: String,
        /// Why it cannot be read.
        reason: String,
    },
    /// An import source (or a file in it) could not be read.
    #[error("{path}: cannot read")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// An import source is a file but not a readable zip archive.
    #[error("{path}: not a readable zip archive")]
    Zip {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: zip::result::ZipError,
    },
    /// An import source is neither a directory, a zip archive nor a
    /// `.json` or `.yaml` record file.
    #[error("{path}: not a directory, a zip archive or a .json or .yaml record file")]
    UnknownSource {
        /// The path given.
        path: PathBuf,
    },
    /// PatchPilot cannot order versions of this ecosystem, so it cannot
    /// tell which advisories affect a version (the records are still
    /// available from `advisories_for`).
    #[error("no version ordering is known for OSV ecosystem `{ecosystem}`")]
    NoVersionScheme {
        /// The ecosystem queried.
        ecosystem: String,
    },
    /// The installed version cannot be parsed in its ecosystem's scheme.
    #[error("{ecosystem} package {package}: installed version `{version}` cannot be compared")]
    InstalledVersion {
        /// The ecosystem queried.
        ecosystem: String,
        /// The package queried.
        package: String,
        /// The version queried.
        version: String,
        /// The cause.
        #[source]
        source: Box<VersionError>,
    },
    /// No directory was configured and none can be derived from the
    /// environment.
    #[error(
        "no directory for the advisory DB: pass --db, set PATCHPILOT_DB, set it in the configuration, \
         or set XDG_DATA_HOME or HOME"
    )]
    NoDbDir,
}
