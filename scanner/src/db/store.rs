//! [`AdvisoryDb`]: opening the SQLite file, importing OSV records into it,
//! and answering lookups. The schema is in `schema.rs`, the lookup keys in
//! `keys.rs`, the stored record format in `codec.rs`; the rules they follow
//! are summarised in the `db` module docs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use sha2::{Digest, Sha256};

use super::time::{now_text, parse_time};
use super::{Error, codec, keys, schema, source};
use crate::osv::{self, Format, Record, RecordWarning, Refusal, WarningKind};
use crate::version::Scheme;

/// File name of the DB inside its directory.
pub const DB_FILE_NAME: &str = "advisories.sqlite";

/// A local OSV advisory database (one SQLite file).
#[derive(Debug)]
pub struct AdvisoryDb {
    conn: Connection,
    path: PathBuf,
    schema_version: i64,
}

/// What one import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportStats {
    /// The source imported.
    pub source: PathBuf,
    /// Record candidates read (files or zip entries named `*.json`).
    pub read: u64,
    /// Records that were new.
    pub inserted: u64,
    /// Records that replaced a stored version with an older `modified`.
    pub replaced: u64,
    /// Records whose stored version was as new or newer.
    pub skipped: u64,
    /// Candidates that could not be stored at all (not JSON or YAML, not an
    /// object, no `id`), with the reason.
    pub refused: Vec<RefusedRecord>,
    /// Records stored with something left out or assumed (see
    /// [`osv::read_record`]), one entry per problem.
    pub warnings: Vec<WarnedRecord>,
    /// Wall time of the import, commit included.
    pub elapsed: Duration,
}

impl ImportStats {
    /// Whether the import changed the DB's contents (and so its
    /// [`version`](AdvisoryDb::version)).
    pub fn changed(&self) -> bool {
        self.inserted + self.replaced > 0
    }
}

/// A record candidate an import could not store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedRecord {
    /// File path relative to the imported directory, or zip entry name.
    pub location: String,
    /// The record's `id`, when it could be read.
    pub id: Option<String>,
    /// The field at fault, when one is.
    pub field: Option<String>,
    /// Why it was refused.
    pub reason: String,
}

impl fmt::Display for RefusedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.location)?;
        if let Some(id) = &self.id {
            write!(f, " ({id})")?;
        }
        match &self.field {
            Some(field) => write!(f, ": `{field}` {}", self.reason),
            None => write!(f, ": {}", self.reason),
        }
    }
}

/// A record stored with something left out or assumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarnedRecord {
    /// File path relative to the imported directory, or zip entry name.
    pub location: String,
    /// The record's `id`.
    pub id: String,
    /// What was left out or assumed.
    pub warning: RecordWarning,
}

impl fmt::Display for WarnedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let RecordWarning { field, detail, .. } = &self.warning;
        write!(f, "{} ({}): `{field}` {detail}", self.location, self.id)
    }
}

/// The latest import of one source, for `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceImport {
    /// The path imported.
    pub source: String,
    /// When that import finished.
    pub finished_at: DateTime<Utc>,
    /// Candidates it refused.
    pub refused: u64,
    /// Warnings about the records it stored.
    pub warnings: u64,
}

/// The state of the DB, for `patchpilot db status`.
#[derive(Debug, Clone, PartialEq)]
pub struct DbStatus {
    /// The SQLite file.
    pub path: PathBuf,
    /// Schema version of the file.
    pub schema_version: i64,
    /// The content version ([`AdvisoryDb::version`]).
    pub version: String,
    /// Records stored, withdrawn ones included.
    pub records: u64,
    /// Of those, withdrawn.
    pub withdrawn: u64,
    /// Records not withdrawn per base ecosystem (`Debian`, `npm`…). A
    /// record affecting several releases of a distribution counts once.
    pub ecosystems: BTreeMap<String, u64>,
    /// The newest `modified` of any stored record.
    pub newest_modified: Option<DateTime<Utc>>,
    /// When the last import (changing anything or not) finished.
    pub last_import: Option<DateTime<Utc>>,
    /// How long ago that was: the age of the local copy.
    pub age: Option<TimeDelta>,
    /// The latest import of each source, newest first: what it refused and
    /// warned about.
    pub sources: Vec<SourceImport>,
}

/// An advisory affecting a queried version.
#[derive(Debug, Clone, PartialEq)]
pub struct Match {
    /// The advisory (without `details`).
    pub record: Record,
    /// Versions that fix it and are above the queried one, lowest first;
    /// empty when no fix is known.
    pub fixed: Vec<String>,
}

impl AdvisoryDb {
    /// Opens (creating if needed) the DB in `dir` (file
    /// `dir/advisories.sqlite`), applying any pending schema migration.
    /// Nothing is loaded into memory.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::CreateDir { path: dir.to_owned(), source })?;
        let path = dir.join(DB_FILE_NAME);
        let mut conn = Connection::open(&path).map_err(|source| Error::Sqlite {
            path: path.clone(),
            action: "cannot open the advisory DB",
            source,
        })?;
        schema::configure(&conn, &path)?;
        let schema_version = schema::migrate(&mut conn, &path)?;
        Ok(AdvisoryDb { conn, path, schema_version })
    }

    /// The SQLite file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Imports OSV records from a zip archive as published per ecosystem on
    /// osv.dev (one JSON record per entry), a directory (searched
    /// recursively for `*.json`), or a single `.json` file.
    ///
    /// A record is inserted when its id is new, replaces the stored one when
    /// its `modified` is later, and is skipped otherwise. The whole import
    /// is one transaction. Candidates that are not valid OSV records are
    /// listed in [`ImportStats::malformed`] and do not stop the import; a
    /// source that cannot be read, or a SQLite failure, is an error and
    /// changes nothing.
    pub fn import(&mut self, source_path: &Path) -> Result<ImportStats, Error> {
        self.import_with_progress(source_path, &crate::progress::Silent)
    }

    /// [`AdvisoryDb::import`], reporting each record read.
    pub fn import_with_progress(
        &mut self,
        source_path: &Path,
        progress: &dyn crate::progress::Progress,
    ) -> Result<ImportStats, Error> {
        let step = crate::progress::Step::begin(progress, "importing advisories", None);
        let clock = Instant::now();
        let started_at = now_text();
        let path = self.path.clone();
        let sqlite = |action| {
            let path = path.clone();
            move |source| Error::Sqlite { path, action, source }
        };
        // A larger page cache for the bulk write: the index B-tree stays in
        // memory instead of being re-read for every insert.
        self.conn.pragma_update(None, "cache_size", -65_536).map_err(sqlite("cannot size the page cache"))?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite("cannot start the import transaction"))?;
        let mut counters = Counters::load(&tx, &path)?;
        let mut stats = ImportStats {
            source: source_path.to_owned(),
            read: 0,
            inserted: 0,
            replaced: 0,
            skipped: 0,
            refused: Vec::new(),
            warnings: Vec::new(),
            elapsed: Duration::ZERO,
        };
        source::for_each_entry(source_path, |entry| {
            stats.read += 1;
            step.tick();
            let parsed = entry
                .data
                .map_err(|reason| Refusal { id: None, field: None, reason })
                .and_then(|bytes| parse_record(&bytes, entry.format));
            match parsed {
                Ok((parsed, warnings)) => {
                    store_record(&tx, &mut counters, &parsed, &mut stats).map_err(|source| Error::Store {
                        path: path.clone(),
                        id: parsed.record.id.clone(),
                        location: entry.location.clone(),
                        source: Box::new(source),
                    })?;
                    stats.warnings.extend(warnings.into_iter().map(|warning| WarnedRecord {
                        location: entry.location.clone(),
                        id: parsed.record.id.clone(),
                        warning,
                    }));
                    Ok(())
                }
                Err(Refusal { id, field, reason }) => {
                    stats.refused.push(RefusedRecord { location: entry.location, id, field, reason });
                    Ok(())
                }
            }
        })?;
        if stats.changed() {
            counters.save(&tx).map_err(sqlite("cannot update the DB counters"))?;
        }
        tx.execute(
            "INSERT INTO imports (source, started_at, finished_at, inserted, replaced, skipped, malformed, warnings)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                source_path.display().to_string(),
                started_at,
                now_text(),
                count_i64(stats.inserted),
                count_i64(stats.replaced),
                count_i64(stats.skipped),
                count_i64(stats.refused.len() as u64),
                count_i64(stats.warnings.len() as u64),
            ],
        )
        .map_err(sqlite("cannot record the import"))?;
        tx.commit().map_err(sqlite("cannot commit the import"))?;
        if stats.changed() {
            // Refreshes the planner's statistics. Plain `optimize` only
            // looks at tables this connection queried, and an import only
            // inserts: after a small first import, the statistics of
            // `affected_index` stayed those of a handful of rows and every
            // lookup scanned a whole ecosystem (the scan benchmark found a
            // 12× slower match). 0x10002 analyses every table whose size
            // changed; the limit keeps it to milliseconds.
            self.conn
                .execute_batch("PRAGMA analysis_limit = 1000; PRAGMA optimize = 0x10002;")
                .map_err(sqlite("cannot optimise after the import"))?;
        }
        self.conn.pragma_update(None, "cache_size", -16_384).map_err(sqlite("cannot size the page cache"))?;
        stats.elapsed = clock.elapsed();
        tracing::info!(
            source = %source_path.display(),
            read = stats.read,
            inserted = stats.inserted,
            replaced = stats.replaced,
            skipped = stats.skipped,
            refused = stats.refused.len(),
            warnings = stats.warnings.len(),
            elapsed_ms = stats.elapsed.as_millis() as u64,
            "imported OSV records"
        );
        Ok(stats)
    }

    /// Counts per ecosystem, total records, newest `modified`, when the last
    /// import finished, and the DB's age. Reads a handful of rows.
    pub fn status(&self) -> Result<DbStatus, Error> {
        let sqlite = self.sqlite_error("cannot read the DB status");
        let meta = Meta::read(&self.conn, &self.path)?;
        let mut statement =
            self.conn.prepare_cached("SELECT ecosystem, records FROM ecosystem_counts").map_err(&sqlite)?;
        let ecosystems = statement
            .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?)))
            .map_err(&sqlite)?
            .map(|row| row.map(|(ecosystem, records)| (ecosystem, u64::try_from(records).unwrap_or(0))))
            .collect::<Result<BTreeMap<_, _>, _>>()
            .map_err(&sqlite)?;
        let last_import: Option<String> = self
            .conn
            .query_row("SELECT finished_at FROM imports ORDER BY rowid DESC LIMIT 1", [], |row| row.get(0))
            .optional()
            .map_err(&sqlite)?;
        let last_import =
            last_import.map(|text| self.parse_stored_time("imports.finished_at", &text)).transpose()?;
        let newest_modified = meta
            .newest_modified
            .as_deref()
            .map(|text| parse_time(text).map(|(time, _)| time))
            .transpose()
            .map_err(|reason| Error::Corrupt {
                path: self.path.clone(),
                what: "meta key newest_modified".into(),
                reason,
            })?;
        Ok(DbStatus {
            path: self.path.clone(),
            schema_version: self.schema_version,
            version: self.version_from(&meta),
            records: u64::try_from(meta.records).unwrap_or(0),
            withdrawn: u64::try_from(meta.withdrawn).unwrap_or(0),
            ecosystems,
            newest_modified,
            last_import,
            age: last_import.map(|finished| Utc::now() - finished),
            sources: self.source_imports()?,
        })
    }

    /// The latest import of each source, newest first.
    fn source_imports(&self) -> Result<Vec<SourceImport>, Error> {
        let sqlite = self.sqlite_error("cannot read the import history");
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT source, finished_at, malformed, warnings FROM imports
                 WHERE rowid IN (SELECT max(rowid) FROM imports GROUP BY source) ORDER BY rowid DESC",
            )
            .map_err(&sqlite)?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                    row.get::<_, i64>(3)?,
                ))
            })
            .map_err(&sqlite)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(&sqlite)?;
        rows.into_iter()
            .map(|(source, finished_at, refused, warnings)| {
                Ok(SourceImport {
                    finished_at: self.parse_stored_time("imports.finished_at", &finished_at)?,
                    source,
                    refused: u64::try_from(refused).unwrap_or(0),
                    warnings: u64::try_from(warnings).unwrap_or(0),
                })
            })
            .collect()
    }

    /// Records (not withdrawn) with an `affected` entry for `package` in
    /// `ecosystem`, by id. Ecosystems match as on osv.dev (the exact
    /// string, the base name for any release, Ubuntu without `:Pro`/`:LTS`)
    /// and a Debian point release queries its major release; PyPI names
    /// match after PEP 503 normalisation. See the `db` module docs.
    pub fn advisories_for(&self, ecosystem: &str, package: &str) -> Result<Vec<Record>, Error> {
        let ecosystem_key = keys::query_ecosystem(ecosystem);
        let name_key = keys::name_key(&ecosystem_key, package);
        let sqlite = self.sqlite_error("cannot look up advisories");
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT r.id, r.body FROM affected_index a JOIN records r ON r.rowid = a.record
                 WHERE a.ecosystem = ?1 AND a.name = ?2 ORDER BY r.id",
            )
            .map_err(&sqlite)?;
        let rows = statement
            .query_map(params![ecosystem_key, name_key], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?))
            })
            .map_err(&sqlite)?;
        let mut records = Vec::new();
        for row in rows {
            let (id, body) = row.map_err(&sqlite)?;
            let record = codec::decode(&body).map_err(|reason| Error::Corrupt {
                path: self.path.clone(),
                what: format!("record {id}"),
                reason,
            })?;
            records.push(record);
        }
        Ok(records)
    }

    /// The record with `id` or an alias of it (`CVE-…` finds the GHSA or
    /// distro record that lists it), withdrawn ones included: the agent's
    /// `lookup_advisory` reads it as evidence.
    pub fn advisory(&self, id: &str) -> Result<Option<Record>, Error> {
        let sqlite = self.sqlite_error("cannot look up an advisory");
        let body: Option<(String, Vec<u8>)> = self
            .conn
            .query_row("SELECT id, body FROM records WHERE id = ?1", params![id], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .optional()
            .map_err(&sqlite)?;
        let decode = |(rid, body): (String, Vec<u8>)| {
            codec::decode(&body).map_err(|reason| Error::Corrupt {
                path: self.path.clone(),
                what: format!("record {rid}"),
                reason,
            })
        };
        if let Some(found) = body {
            return decode(found).map(Some);
        }
        // Aliases live inside the compressed bodies, which no index covers:
        // a scan, rare enough (a model asking by CVE id) to be worth it.
        let mut statement =
            self.conn.prepare_cached("SELECT id, body FROM records ORDER BY id").map_err(&sqlite)?;
        let rows = statement
            .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?)))
            .map_err(&sqlite)?;
        for row in rows {
            let record = decode(row.map_err(&sqlite)?)?;
            if record.aliases.iter().chain(&record.upstream).any(|a| a == id) {
                return Ok(Some(record));
            }
        }
        Ok(None)
    }

    /// Advisories affecting `version` of `package`, each with the fixed
    /// versions above it, ordered by id.
    ///
    /// Every `affected` entry of a record that names this package in a
    /// matching ecosystem is evaluated with [`osv::evaluate`] in the
    /// ecosystem's [`Scheme`]; the record matches when any entry does. An
    /// entry whose own versions cannot be parsed is skipped with a warning
    /// naming the record, so one bad record cannot hide the others; an
    /// installed version that cannot be parsed is an error.
    pub fn query(&self, ecosystem: &str, package: &str, version: &str) -> Result<Vec<Match>, Error> {
        let scheme = Scheme::for_ecosystem(ecosystem)
            .ok_or_else(|| Error::NoVersionScheme { ecosystem: ecosystem.to_owned() })?;
        let ecosystem_key = keys::query_ecosystem(ecosystem);
        let name_key = keys::name_key(&ecosystem_key, package);
        let mut matches = Vec::new();
        for record in self.advisories_for(ecosystem, package)? {
            let mut affected = false;
            let mut fixed = Vec::new();
            for entry in &record.affected {
                let Some(osv_package) = &entry.package else { continue };
                if !keys::ecosystem_matches(&osv_package.ecosystem, &ecosystem_key)
                    || keys::name_key(&osv_package.ecosystem, &osv_package.name) != name_key
                {
                    continue;
                }
                match osv::evaluate(entry, version, scheme) {
                    Ok(evaluation) => {
                        if evaluation.affected {
                            affected = true;
                            fixed.extend(evaluation.fixed);
                        }
                    }
                    Err(error) if error.version == version => {
                        return Err(Error::InstalledVersion {
                            ecosystem: ecosystem.to_owned(),
                            package: package.to_owned(),
                            version: version.to_owned(),
                            source: Box::new(error),
                        });
                    }
                    Err(error) => {
                        tracing::warn!(
                            record = %record.id,
                            ecosystem = %osv_package.ecosystem,
                            package = %osv_package.name,
                            %error,
                            "skipping an affected entry whose versions cannot be compared"
                        );
                    }
                }
            }
            if affected {
                matches.push(Match { fixed: sort_versions(scheme, fixed), record });
            }
        }
        Ok(matches)
    }

    /// An identifier of the DB's contents, for caches keyed by DB version:
    /// the schema version and a digest of every stored (id, modified)
    /// pair. It changes whenever an import inserts or replaces a record, and
    /// two DBs holding the same records have the same version.
    pub fn version(&self) -> Result<String, Error> {
        Ok(self.version_from(&Meta::read(&self.conn, &self.path)?))
    }

    fn version_from(&self, meta: &Meta) -> String {
        format!("osv-s{}-{}", self.schema_version, meta.content_digest)
    }

    fn sqlite_error(&self, action: &'static str) -> impl Fn(rusqlite::Error) -> Error + '_ {
        move |source| Error::Sqlite { path: self.path.clone(), action, source }
    }

    fn parse_stored_time(&self, what: &str, text: &str) -> Result<DateTime<Utc>, Error> {
        parse_time(text).map(|(time, _)| time).map_err(|reason| Error::Corrupt {
            path: self.path.clone(),
            what: what.to_owned(),
            reason,
        })
    }
}

/// A record ready to store.
struct ParsedRecord {
    record: Record,
    /// [`UNDATED_NS`] when `modified` is no usable time.
    modified_ns: i64,
    withdrawn: bool,
    body: Vec<u8>,
}

/// The `modified_ns` of a record whose `modified` is missing, zero
/// (golang/vulndb writes `0001-01-01T00:00:00Z`) or no time: older than any
/// dated version of it.
const UNDATED_NS: i64 = i64::MIN;

/// Reads one candidate leniently (see [`osv::read_record`]) and orders its
/// `modified`.
fn parse_record(bytes: &[u8], format: Format) -> Result<(ParsedRecord, Vec<RecordWarning>), Refusal> {
    let osv::Ingested { record, mut warnings } = osv::read_record(bytes, format)?;
    let modified_ns = match parse_time(&record.modified) {
        Ok((_, nanos)) => nanos,
        Err(reason) => {
            let detail = if record.modified.is_empty() {
                "is missing".to_owned()
            } else {
                format!("{:?} is no usable time ({reason})", record.modified)
            };
            warnings.push(RecordWarning {
                kind: WarningKind::UndatedModified,
                field: "modified".to_owned(),
                detail: format!("{detail}: kept as older than any dated version"),
            });
            UNDATED_NS
        }
    };
    let body = codec::encode(&record).map_err(|reason| Refusal {
        id: Some(record.id.clone()),
        field: None,
        reason,
    })?;
    Ok((ParsedRecord { withdrawn: record.withdrawn.is_some(), modified_ns, body, record }, warnings))
}

fn count_i64(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Inserts, replaces or skips one record.
fn store_record(
    tx: &Transaction<'_>,
    counters: &mut Counters,
    parsed: &ParsedRecord,
    stats: &mut ImportStats,
) -> rusqlite::Result<()> {
    let ParsedRecord { record, modified_ns, withdrawn, body } = parsed;
    let (modified_ns, withdrawn) = (*modified_ns, *withdrawn);
    // The body is read back only for an undated stored record: two undated
    // versions cannot be ordered, so the one imported last wins when it
    // differs, and the digest covers its body.
    type StoredRow = (i64, String, i64, bool, Option<Vec<u8>>);
    let stored: Option<StoredRow> = tx
        .prepare_cached(
            "SELECT rowid, modified, modified_ns, withdrawn, CASE WHEN modified_ns = ?2 THEN body END
             FROM records WHERE id = ?1",
        )?
        .query_row(params![&record.id, UNDATED_NS], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?))
        })
        .optional()?;
    let rowid = match stored {
        None => {
            tx.prepare_cached(
                "INSERT INTO records (id, modified, modified_ns, withdrawn, body) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![record.id, record.modified, modified_ns, withdrawn, body])?;
            counters.records += 1;
            stats.inserted += 1;
            tx.last_insert_rowid()
        }
        Some((rowid, old_modified, old_ns, old_withdrawn, old_body))
            if modified_ns > old_ns
                || (modified_ns == UNDATED_NS
                    && old_ns == UNDATED_NS
                    && old_body.as_deref() != Some(body)) =>
        {
            if old_withdrawn {
                counters.withdrawn -= 1;
            } else {
                unindex(tx, counters, rowid)?;
            }
            tx.prepare_cached(
                "UPDATE records SET modified = ?1, modified_ns = ?2, withdrawn = ?3, body = ?4 WHERE rowid = ?5",
            )?
            .execute(params![record.modified, modified_ns, withdrawn, body, rowid])?;
            counters.toggle_digest(&record.id, &old_modified, old_body.as_deref());
            stats.replaced += 1;
            rowid
        }
        Some(_) => {
            stats.skipped += 1;
            return Ok(());
        }
    };
    counters.toggle_digest(
        &record.id,
        &record.modified,
        (modified_ns == UNDATED_NS).then_some(body.as_slice()),
    );
    if modified_ns > counters.newest_modified_ns {
        counters.newest_modified_ns = modified_ns;
        counters.newest_modified = Some(record.modified.clone());
    }
    if withdrawn {
        counters.withdrawn += 1;
    } else {
        index(tx, counters, rowid, record)?;
    }
    Ok(())
}

/// Adds the index rows of a record that is not withdrawn.
fn index(tx: &Transaction<'_>, counters: &mut Counters, rowid: i64, record: &Record) -> rusqlite::Result<()> {
    let mut insert = tx.prepare_cached(
        "INSERT OR IGNORE INTO affected_index (ecosystem, name, record) VALUES (?1, ?2, ?3)",
    )?;
    let mut bases = BTreeSet::new();
    for entry in &record.affected {
        let Some(package) = &entry.package else { continue };
        let name = keys::name_key(&package.ecosystem, &package.name);
        for ecosystem in keys::index_ecosystems(&package.ecosystem) {
            insert.execute(params![ecosystem, name, rowid])?;
        }
        bases.insert(keys::base_ecosystem(&package.ecosystem));
    }
    for base in bases {
        *counters.ecosystem_deltas.entry(base.to_owned()).or_default() += 1;
    }
    Ok(())
}

/// Removes the index rows of a record about to be replaced. Base-ecosystem
/// keys are exactly the keys without `:`, so they give the counts to undo.
fn unindex(tx: &Transaction<'_>, counters: &mut Counters, rowid: i64) -> rusqlite::Result<()> {
    let bases = tx
        .prepare_cached(
            "SELECT DISTINCT ecosystem FROM affected_index WHERE record = ?1 AND instr(ecosystem, ':') = 0",
        )?
        .query_map([rowid], |row| row.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    for base in bases {
        *counters.ecosystem_deltas.entry(base).or_default() -= 1;
    }
    tx.prepare_cached("DELETE FROM affected_index WHERE record = ?1")?.execute([rowid])?;
    Ok(())
}

/// The `meta` values, as read by `status` and `version`.
struct Meta {
    records: i64,
    withdrawn: i64,
    newest_modified: Option<String>,
    newest_modified_ns: i64,
    /// Hex of the XOR of a hash of every stored (id, modified).
    content_digest: String,
}

const DIGEST_BYTES: usize = 16;

impl Meta {
    fn read(conn: &Connection, path: &Path) -> Result<Meta, Error> {
        let sqlite =
            |source| Error::Sqlite { path: path.to_owned(), action: "cannot read the DB metadata", source };
        let mut statement = conn.prepare_cached("SELECT key, value FROM meta").map_err(sqlite)?;
        let values = statement
            .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))
            .map_err(sqlite)?
            .collect::<Result<HashMap<_, _>, _>>()
            .map_err(sqlite)?;
        let number = |key: &str| -> Result<i64, Error> {
            values.get(key).map_or(Ok(0), |text| {
                text.parse().map_err(|e| Error::Corrupt {
                    path: path.to_owned(),
                    what: format!("meta key {key}"),
                    reason: format!("{text:?}: {e}"),
                })
            })
        };
        let content_digest =
            values.get("content_digest").cloned().unwrap_or_else(|| "0".repeat(DIGEST_BYTES * 2));
        if content_digest.len() != DIGEST_BYTES * 2 || !content_digest.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(Error::Corrupt {
                path: path.to_owned(),
                what: "meta key content_digest".into(),
                reason: format!("{content_digest:?} is not {DIGEST_BYTES} bytes of hex"),
            });
        }
        Ok(Meta {
            records: number("records")?,
            withdrawn: number("withdrawn")?,
            newest_modified: values.get("newest_modified").cloned(),
            newest_modified_ns: number("newest_modified_ns")?,
            content_digest,
        })
    }
}

/// The running totals of an import, written back at its end.
struct Counters {
    records: i64,
    withdrawn: i64,
    newest_modified: Option<String>,
    newest_modified_ns: i64,
    digest: [u8; DIGEST_BYTES],
    ecosystem_deltas: HashMap<String, i64>,
}

impl Counters {
    fn load(tx: &Transaction<'_>, path: &Path) -> Result<Counters, Error> {
        let meta = Meta::read(tx, path)?;
        let mut digest = [0u8; DIGEST_BYTES];
        hex::decode_to_slice(&meta.content_digest, &mut digest).map_err(|e| Error::Corrupt {
            path: path.to_owned(),
            what: "meta key content_digest".into(),
            reason: e.to_string(),
        })?;
        Ok(Counters {
            records: meta.records,
            withdrawn: meta.withdrawn,
            newest_modified: meta.newest_modified,
            newest_modified_ns: meta.newest_modified_ns,
            digest,
            ecosystem_deltas: HashMap::new(),
        })
    }

    /// Adds or removes (XOR is its own inverse) one (id, modified) pair,
    /// with the stored body of an undated record (whose versions the pair
    /// alone would not tell apart).
    fn toggle_digest(&mut self, id: &str, modified: &str, undated_body: Option<&[u8]>) {
        let mut hasher = Sha256::new();
        hasher.update(id.as_bytes());
        hasher.update([0u8]);
        hasher.update(modified.as_bytes());
        if let Some(body) = undated_body {
            hasher.update([0u8]);
            hasher.update(body);
        }
        let hash = hasher.finalize();
        for (byte, hashed) in self.digest.iter_mut().zip(hash.iter()) {
            *byte ^= hashed;
        }
    }

    fn save(&self, tx: &Transaction<'_>) -> rusqlite::Result<()> {
        let mut set = tx.prepare_cached(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )?;
        set.execute(params!["records", self.records.to_string()])?;
        set.execute(params!["withdrawn", self.withdrawn.to_string()])?;
        set.execute(params!["content_digest", hex::encode(self.digest)])?;
        set.execute(params!["newest_modified_ns", self.newest_modified_ns.to_string()])?;
        if let Some(newest) = &self.newest_modified {
            set.execute(params!["newest_modified", newest])?;
        }
        let mut count = tx.prepare_cached(
            "INSERT INTO ecosystem_counts (ecosystem, records) VALUES (?1, ?2)
             ON CONFLICT (ecosystem) DO UPDATE SET records = records + excluded.records",
        )?;
        for (ecosystem, delta) in &self.ecosystem_deltas {
            if *delta != 0 {
                count.execute(params![ecosystem, delta])?;
            }
        }
        tx.execute("DELETE FROM ecosystem_counts WHERE records <= 0", [])?;
        Ok(())
    }
}

/// Sorts and de-duplicates versions in `scheme` order. An insertion sort,
/// because a comparator that fails on some pairs is no total order (which
/// `slice::sort_by` may panic on); versions the scheme cannot parse go last
/// in their original order.
fn sort_versions(scheme: Scheme, versions: Vec<String>) -> Vec<String> {
    let mut sorted: Vec<String> = Vec::with_capacity(versions.len());
    let mut unparsable: Vec<String> = Vec::new();
    for version in versions {
        if sorted.contains(&version) || unparsable.contains(&version) {
            continue;
        }
        if scheme.compare(&version, &version).is_err() {
            unparsable.push(version);
            continue;
        }
        let position = sorted
            .iter()
            .position(|existing| scheme.compare(&version, existing).is_ok_and(|order| order.is_lt()))
            .unwrap_or(sorted.len());
        sorted.insert(position, version);
    }
    sorted.extend(unparsable);
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lookup must use both key columns, also after a small first
    /// import followed by a large one (the order `patchpilot db import`
    /// naturally sees): stale statistics once made it scan a whole
    /// ecosystem per lookup.
    #[test]
    fn lookups_use_the_full_key_after_a_small_then_a_large_import() {
        let dir = tempfile::tempdir().expect("tempdir");
        let small = dir.path().join("small");
        let large = dir.path().join("large");
        std::fs::create_dir_all(&small).expect("dir");
        std::fs::create_dir_all(&large).expect("dir");
        let record = |id: String, name: String| {
            serde_json::json!({
                "id": id, "modified": "2024-01-01T00:00:00Z",
                "affected": [{ "package": { "ecosystem": "Debian:12", "name": name },
                               "ranges": [{ "type": "ECOSYSTEM", "events": [{ "introduced": "0" }, { "fixed": "1.0-1" }] }] }]
            })
            .to_string()
        };
        // Synthetic records, generated here: shape matters, not content.
        for i in 0..3 {
            std::fs::write(small.join(format!("{i}.json")), record(format!("SMALL-{i}"), format!("pkg{i}")))
                .expect("write");
        }
        for i in 0..4000 {
            std::fs::write(
                large.join(format!("{i}.json")),
                record(format!("LARGE-{i}"), format!("pkg{}", i % 400)),
            )
            .expect("write");
        }
        let db_dir = dir.path().join("db");
        let mut db = AdvisoryDb::open(&db_dir).expect("open");
        // The real fixtures first, as a new user would try the DB.
        db.import(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/osv/records"))
            .expect("fixtures import");
        db.import(&small).expect("small import");
        db.import(&large).expect("large import");
        let db = AdvisoryDb::open(&db_dir).expect("reopen");
        let plan: Vec<String> = db
            .conn
            .prepare(
                "EXPLAIN QUERY PLAN SELECT r.id, r.body FROM affected_index a JOIN records r ON r.rowid = a.record
                 WHERE a.ecosystem = ?1 AND a.name = ?2 ORDER BY r.id",
            )
            .expect("prepare")
            .query_map(params!["debian:12", "pkg7"], |row| row.get::<_, String>(3))
            .expect("plan")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert!(plan.iter().any(|step| step.contains("ecosystem=? AND name=?")), "{plan:?}");
    }

    #[test]
    fn fixed_versions_sort_in_scheme_order() {
        let versions = ["1.10.0", "1.2.0", "not a version", "1.2.0", "1.9.0-rc.1"].map(String::from).to_vec();
        assert_eq!(
            sort_versions(Scheme::Semver, versions),
            ["1.2.0", "1.9.0-rc.1", "1.10.0", "not a version"]
        );
        let dpkg = ["1.1.0l-1~deb9u6", "1.1.0l-1"].map(String::from).to_vec();
        assert_eq!(sort_versions(Scheme::Dpkg, dpkg), ["1.1.0l-1~deb9u6", "1.1.0l-1"]);
    }

    #[test]
    fn content_digest_is_order_independent_and_reversible() {
        let mut counters = Counters {
            records: 0,
            withdrawn: 0,
            newest_modified: None,
            newest_modified_ns: 0,
            digest: [0; DIGEST_BYTES],
            ecosystem_deltas: HashMap::new(),
        };
        counters.toggle_digest("A", "2024-01-01T00:00:00Z", None);
        counters.toggle_digest("B", "2024-01-02T00:00:00Z", None);
        let ab = counters.digest;
        counters.toggle_digest("A", "2024-01-01T00:00:00Z", None);
        counters.toggle_digest("B", "2024-01-02T00:00:00Z", None);
        assert_eq!(counters.digest, [0; DIGEST_BYTES]);
        counters.toggle_digest("B", "2024-01-02T00:00:00Z", None);
        counters.toggle_digest("A", "2024-01-01T00:00:00Z", None);
        assert_eq!(counters.digest, ab);
        counters.toggle_digest("A", "2024-01-01T00:00:00Z", None);
        counters.toggle_digest("A", "2024-01-03T00:00:00Z", None);
        assert_ne!(counters.digest, ab, "a replaced record changes the digest");
    }
}
