//! The local OSV advisory database: a SQLite file (`advisories.sqlite`)
//! filled from OSV exports (<https://ossf.github.io/osv-schema/>) and read by
//! scans, which look up each installed package by (ecosystem, name).
//!
//! # Importing
//!
//! [`AdvisoryDb::import`] reads the per-ecosystem zip archives osv.dev
//! publishes (`https://osv-vulnerabilities.storage.googleapis.com/<Ecosystem>/all.zip`),
//! a directory tree of `*.json` records, or one `.json` file. As the OSV
//! schema says, of two entries with the same `id` the one with the later
//! `modified` is authoritative: a record is inserted when new, replaces the
//! stored one when its `modified` is later, and is skipped otherwise, so
//! importing the same archive again changes nothing. One import is one
//! transaction.
//!
//! Records are read as the real databases publish them
//! ([`crate::osv::read_record`]): only a candidate that cannot be stored at
//! all (not JSON or YAML, not an object, no `id`) is refused, and reported by
//! location, id when readable, field and reason. Anything less is stored
//! with a warning naming the field. A record whose `modified` is missing,
//! zero (golang/vulndb's checkout writes `0001-01-01T00:00:00Z`) or no time
//! is *undated*: older than any dated version of it, and, since two undated
//! versions cannot be ordered, replaced by another undated one only when
//! that differs, the last imported winning. `status` shows what the latest
//! import of each source refused and warned about.
//!
//! # Lookups
//!
//! [`AdvisoryDb::advisories_for`] answers from the `affected_index` table,
//! keyed by (ecosystem key, package key) and holding only records that are
//! not withdrawn; the records themselves are stored compactly (serde JSON of
//! [`Record`](crate::osv::Record) without `details`, DEFLATE-compressed) and
//! decoded only when looked up. [`AdvisoryDb::query`] evaluates the affected
//! ranges against an installed version with
//! [`Scheme::for_ecosystem`](crate::version::Scheme::for_ecosystem) and
//! [`crate::osv::evaluate`].
//!
//! Ecosystems match the way the osv.dev API matches them: a query for `E`
//! finds an `affected` entry whose ecosystem is `E`, or whose base name
//! (before the first `:`) is `E` (`Debian` finds `Debian:11` and
//! `Debian:12`), or, for Ubuntu, whose ecosystem without the `Pro` and `LTS`
//! segments is `E`. So `Ubuntu:22.04` finds `Ubuntu:22.04:LTS` and
//! `Ubuntu:Pro:22.04:LTS` entries, while `Ubuntu:22.04:LTS` finds only its
//! own; an image cannot tell whether it runs with a Pro subscription, and a
//! Pro entry describes the same release's packages, with fixes only in the
//! Pro archive. Debian publishes per major release (`Debian:12`): a query
//! for a point release (`Debian:12.5`) is looked up as its major release.
//! Alpine releases are `Alpine:vMAJOR.MINOR`, as OSV names them. Ecosystem
//! strings are case-sensitive.
//!
//! Package names are matched as OSV writes them, case-sensitively, except
//! PyPI, where both sides are PEP 503-normalised (lower case, runs of `-`,
//! `_`, `.` become `-`), as osv.dev does: `PyYAML`, `pyyaml` and `py_yaml`
//! are one package there. For Linux distributions the name is the source
//! package (see [`Package::advisory_name`](crate::package::Package::advisory_name)).
//!
//! # Storage and versions
//!
//! The connection runs in WAL mode (scans read while an import writes) with
//! `synchronous=NORMAL` (a crash can lose the last commit, never corrupt the
//! file, and the data can always be re-imported). The schema version is kept
//! in the `schema_version` table; `open` applies missing migrations in order
//! and refuses a file from a newer PatchPilot (see `schema.rs` for the
//! migration rules). [`AdvisoryDb::version`] is a digest of every stored
//! (id, modified) pair (and the body of an undated record) plus the schema
//! version: it changes with every import
//! that inserts or replaces a record, so scan results cached under it stay
//! valid exactly as long as the data they were computed from.
//!
//! [`resolve_dir`] finds the DB directory: `--db DIR`, then `PATCHPILOT_DB`,
//! then the configuration, then `$XDG_DATA_HOME/patchpilot/db` or
//! `~/.local/share/patchpilot/db`.

mod codec;
mod error;
mod keys;
mod location;
mod schema;
mod source;
mod store;
mod time;

pub use error::Error;
pub use location::resolve_dir;
pub use store::{AdvisoryDb, DB_FILE_NAME, DbStatus, ImportStats, Match, RefusedRecord, SourceImport, WarnedRecord};
