//! RPM: installed packages from the rpm database in its SQLite form
//! (`rpmdb.sqlite`, the default since rpm 4.16: Fedora 33+, RHEL/Rocky/Alma
//! 9, Amazon Linux 2023, openSUSE).
//!
//! The database file is loaded into an in-memory SQLite connection with
//! `sqlite3_deserialize` (never written anywhere), read-only, in defensive
//! mode and with the schema untrusted. Each row of the `Packages` table
//! (`hnum INTEGER PRIMARY KEY, blob BLOB`) is one package header as rpm's
//! `headerExport` writes it: the header structure of rpm's
//! `docs/manual/format.md` and `format_header.md` without its 8-byte magic,
//! that is a big-endian index entry count and data length, that many 16-byte
//! index entries (tag, type, offset, count), then the data store. Every
//! index entry is checked the way rpm's `hdrblobVerifyInfo` does before any
//! of it is read (known type, offset within the data, alignment, count
//! limits) and strings must end within the data; a header that breaks a rule
//! fails the whole file, naming the row.
//!
//! From each header: NAME, EPOCH, VERSION, RELEASE, ARCH and SOURCERPM. The
//! version is `epoch:version-release` when the epoch is present and not 0,
//! else `version-release`. The source package comes from the SOURCERPM file
//! name (`openssl-3.0.7-24.el9.src.rpm` → `openssl`, `3.0.7-24.el9`); as a
//! source RPM's file name never carries the epoch, which binary and source
//! packages share from the same spec file, the binary's epoch is put in
//! front of the source version. Source name and version are only set when
//! they differ from the binary's. `gpg-pubkey` entries (imported signing
//! keys) are not packages and are skipped.
//!
//! Not supported yet: the BerkeleyDB `Packages` file (rpm < 4.16: RHEL/
//! CentOS 7 and 8, Amazon Linux 2) and the NDB backend (`Packages.db`, SUSE);
//! images that only have those yield no rpm packages. A database file whose
//! WAL (`rpmdb.sqlite-wal`) was not checkpointed is read as the main file
//! alone; rpm checkpoints when it closes the database.

use rusqlite::{Connection, config::DbConfig};

use super::{Cataloger, Error};
use crate::package::{Package, PackageKind};

/// Name of this cataloger in errors and logs.
const CATALOGER: &str = "rpm";

/// Where rpm ≥ 4.16 keeps its SQLite database, by distribution family.
const DATABASE_PATHS: [&str; 2] = ["var/lib/rpm/rpmdb.sqlite", "usr/lib/sysimage/rpm/rpmdb.sqlite"];

/// First 16 bytes of every SQLite 3 database file.
const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// Size of the SQLite file header; bytes 18 and 19 are the write and read
/// format versions (1 legacy, 2 WAL).
const SQLITE_HEADER_LEN: usize = 100;

/// rpm's `HEADER_TAGS_MAX`: at most this many index entries.
const HEADER_TAGS_MAX: u32 = 0x0000_ffff;

/// rpm's `HEADER_DATA_MAX` (256 MiB): data length and offsets limit.
const HEADER_DATA_MAX: u32 = 0x0fff_ffff;

/// rpm's `HEADER_ARRAY_MAX`: element count limit of non-binary entries.
const HEADER_ARRAY_MAX: u32 = 0x000f_ffff;

/// Size of one index entry: tag, type, offset, count.
const INDEX_ENTRY_LEN: usize = 16;

/// The imported signing keys rpm records as pseudo-packages.
const GPG_PUBKEY: &str = "gpg-pubkey";

/// Header tags read (`rpmtag.h`).
mod tag {
    pub const NAME: u32 = 1000;
    pub const VERSION: u32 = 1001;
    pub const RELEASE: u32 = 1002;
    pub const EPOCH: u32 = 1003;
    pub const ARCH: u32 = 1022;
    pub const SOURCERPM: u32 = 1044;
}

/// Header data types (`rpmTagType`), with the size and alignment of one
/// element of the fixed-size ones.
mod kind {
    pub const NULL: u32 = 0;
    pub const CHAR: u32 = 1;
    pub const INT8: u32 = 2;
    pub const INT16: u32 = 3;
    pub const INT32: u32 = 4;
    pub const INT64: u32 = 5;
    pub const STRING: u32 = 6;
    pub const BIN: u32 = 7;
    pub const STRING_ARRAY: u32 = 8;
    pub const I18NSTRING: u32 = 9;

    /// Element size of fixed-size types, which is also their alignment.
    pub fn fixed_size(kind: u32) -> Option<u32> {
        match kind {
            NULL | CHAR | INT8 | BIN => Some(1),
            INT16 => Some(2),
            INT32 => Some(4),
            INT64 => Some(8),
            _ => None,
        }
    }
}

/// Finds the packages in rpm's SQLite database.
#[derive(Debug, Clone, Copy, Default)]
pub struct RpmCataloger;

impl Cataloger for RpmCataloger {
    fn name(&self) -> &'static str {
        CATALOGER
    }

    fn wants(&self, path: &str, _executable: bool) -> bool {
        DATABASE_PATHS.contains(&path)
    }

    fn parse(&self, path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
        let error = |reason: String| Error::new(CATALOGER, path, reason);
        let connection = open_database(data).map_err(error)?;
        let headers = read_headers(&connection).map_err(error)?;
        let mut packages = Vec::with_capacity(headers.len());
        for (hnum, blob) in headers {
            let header = parse_header(&blob).map_err(|err| error(format!("Packages row {hnum}: {err}")))?;
            if header.name != GPG_PUBKEY {
                packages.push(package(&header, path));
            }
        }
        Ok(packages)
    }
}

/// A header blob that breaks the header format's rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The blob is shorter than its own lengths say, or they exceed rpm's
    /// limits.
    #[error("header: {0}")]
    Layout(String),
    /// An index entry is inconsistent.
    #[error("header index entry {index} (tag {tag}): {reason}")]
    Entry {
        /// Position of the entry in the index.
        index: usize,
        /// Its tag.
        tag: u32,
        /// What is wrong with it.
        reason: String,
    },
    /// A tag rpm always writes is missing or of the wrong type.
    #[error("header tag {tag}: {reason}")]
    Tag {
        /// The tag.
        tag: u32,
        /// What is wrong with it.
        reason: String,
    },
}

/// The fields of an installed package's header PatchPilot uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpmHeader {
    /// NAME.
    pub name: String,
    /// EPOCH, when present.
    pub epoch: Option<u32>,
    /// VERSION.
    pub version: String,
    /// RELEASE.
    pub release: String,
    /// ARCH (`x86_64`, `noarch`…); absent from `gpg-pubkey` entries.
    pub arch: Option<String>,
    /// SOURCERPM file name; absent from `gpg-pubkey` entries and source
    /// packages.
    pub source_rpm: Option<String>,
}

impl RpmHeader {
    /// `epoch:version-release`, or `version-release` when the epoch is
    /// absent or 0.
    pub fn full_version(&self) -> String {
        match self.epoch {
            Some(epoch) if epoch != 0 => format!("{epoch}:{}-{}", self.version, self.release),
            _ => format!("{}-{}", self.version, self.release),
        }
    }
}

/// Loads `data` into a private in-memory, read-only connection.
fn open_database(data: &[u8]) -> Result<Connection, String> {
    let header =
        data.get(..SQLITE_HEADER_LEN).filter(|header| header.starts_with(SQLITE_MAGIC)).ok_or_else(|| {
            "not an SQLite 3 database (BerkeleyDB and NDB rpm databases are not supported)".to_owned()
        })?;
    // The in-memory VFS cannot open a database whose header asks for WAL
    // mode: present the copy as a rollback-journal database instead. The
    // pages are the same; only the journal mode recorded in bytes 18 and 19
    // differs.
    let mut patched_header = [0u8; SQLITE_HEADER_LEN];
    patched_header.copy_from_slice(header);
    patched_header[18] = 1;
    patched_header[19] = 1;
    let pages = data.get(SQLITE_HEADER_LEN..).unwrap_or_default();
    let sqlite_error = |err: rusqlite::Error| format!("SQLite: {err}");
    let mut connection = Connection::open_in_memory().map_err(sqlite_error)?;
    // A hostile file's schema must not run anything: no functions from the
    // schema, no writes through special pragmas.
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true).map_err(sqlite_error)?;
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false).map_err(sqlite_error)?;
    connection
        .deserialize_read_exact(
            rusqlite::MAIN_DB,
            std::io::Read::chain(&patched_header[..], pages),
            data.len(),
            true,
        )
        .map_err(sqlite_error)?;
    Ok(connection)
}

/// Every `(hnum, blob)` of the `Packages` table, by `hnum`.
fn read_headers(connection: &Connection) -> Result<Vec<(i64, Vec<u8>)>, String> {
    let sqlite_error = |err: rusqlite::Error| format!("SQLite: {err}");
    // Only a real table: a view could make the query arbitrarily expensive.
    let packages_type: Option<String> = connection
        .query_row("SELECT type FROM sqlite_schema WHERE name = 'Packages'", [], |row| row.get(0))
        .map(Some)
        .or_else(|err| match err {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            other => Err(other),
        })
        .map_err(sqlite_error)?;
    match packages_type.as_deref() {
        Some("table") => {}
        Some(other) => return Err(format!("`Packages` is a {other}, not a table")),
        None => return Err("no `Packages` table: not an rpm database".to_owned()),
    }
    let mut statement =
        connection.prepare("SELECT hnum, blob FROM Packages ORDER BY hnum").map_err(sqlite_error)?;
    let rows = statement
        .query_map([], |row| {
            let hnum: i64 = row.get(0)?;
            let blob = match row.get_ref(1)? {
                rusqlite::types::ValueRef::Blob(blob) => Some(blob.to_vec()),
                _ => None,
            };
            Ok((hnum, blob))
        })
        .map_err(sqlite_error)?;
    let mut headers = Vec::new();
    for row in rows {
        let (hnum, blob) = row.map_err(sqlite_error)?;
        let blob = blob.ok_or_else(|| format!("Packages row {hnum}: `blob` is not a BLOB"))?;
        headers.push((hnum, blob));
    }
    Ok(headers)
}

/// One validated index entry.
#[derive(Debug, Clone, Copy)]
struct Entry {
    tag: u32,
    kind: u32,
    offset: usize,
    count: u32,
}

/// Parses one header blob as stored in the rpm database (no magic).
pub fn parse_header(blob: &[u8]) -> Result<RpmHeader, HeaderError> {
    let layout = |reason: String| HeaderError::Layout(reason);
    let index_count = read_u32(blob, 0).ok_or_else(|| layout("shorter than its 8-byte intro".to_owned()))?;
    let data_len = read_u32(blob, 4).ok_or_else(|| layout("shorter than its 8-byte intro".to_owned()))?;
    if index_count == 0 || index_count > HEADER_TAGS_MAX {
        return Err(layout(format!("{index_count} index entries (rpm allows 1 to {HEADER_TAGS_MAX})")));
    }
    if data_len > HEADER_DATA_MAX {
        return Err(layout(format!("{data_len} bytes of data (rpm allows at most {HEADER_DATA_MAX})")));
    }
    let index_len = index_count as usize * INDEX_ENTRY_LEN;
    let expected = 8 + index_len + data_len as usize;
    if blob.len() != expected {
        return Err(layout(format!(
            "{} bytes, but {index_count} index entries and {data_len} bytes of data take {expected}",
            blob.len()
        )));
    }
    let index = &blob[8..8 + index_len];
    let data = &blob[8 + index_len..];
    let mut entries = Vec::with_capacity(index_count as usize);
    for (position, raw) in index.chunks_exact(INDEX_ENTRY_LEN).enumerate() {
        entries.push(check_entry(position, raw, data_len)?);
    }
    // Entries added after install ("dribbles") follow the region and win
    // over an earlier entry with the same tag, as in rpm's headerImport.
    let find = |tag: u32| entries.iter().rev().find(|entry| entry.tag == tag);
    let string = |tag: u32| -> Result<Option<String>, HeaderError> {
        find(tag).map(|entry| read_string(entry, data)).transpose()
    };
    let required = |tag: u32| -> Result<String, HeaderError> {
        string(tag)?.ok_or(HeaderError::Tag { tag, reason: "missing".to_owned() })
    };
    let epoch = find(tag::EPOCH).map(|entry| read_int32(entry, data)).transpose()?;
    Ok(RpmHeader {
        name: required(tag::NAME)?,
        epoch,
        version: required(tag::VERSION)?,
        release: required(tag::RELEASE)?,
        arch: string(tag::ARCH)?,
        source_rpm: string(tag::SOURCERPM)?,
    })
}

/// Decodes one index entry and applies rpm's checks (`hdrchkType`,
/// `hdrchkRange`, `hdrchkAlign`, `hdrchkCount`, `hdrchkArray`), plus the
/// bounds of fixed-size data.
fn check_entry(position: usize, raw: &[u8], data_len: u32) -> Result<Entry, HeaderError> {
    let field = |at: usize| read_u32(raw, at).unwrap_or_default();
    let (tag, kind, offset, count) = (field(0), field(4), field(8), field(12));
    let error = |reason: String| HeaderError::Entry { index: position, tag, reason };
    if kind > kind::I18NSTRING {
        return Err(error(format!("unknown type {kind}")));
    }
    // The offset is a signed 32-bit number on disk.
    if offset > data_len || offset > i32::MAX as u32 {
        return Err(error(format!("offset {offset} is outside the {data_len}-byte data")));
    }
    if count == 0 || count > data_len {
        return Err(error(format!("count {count} is impossible for {data_len} bytes of data")));
    }
    if kind != kind::BIN && count > HEADER_ARRAY_MAX {
        return Err(error(format!("count {count} exceeds rpm's array limit")));
    }
    if let Some(size) = kind::fixed_size(kind) {
        if offset % size != 0 {
            return Err(error(format!("offset {offset} is not aligned for type {kind}")));
        }
        let end = u64::from(offset) + u64::from(count) * u64::from(size);
        if end > u64::from(data_len) {
            return Err(error(format!("{count} elements of type {kind} run past the end of the data")));
        }
    }
    Ok(Entry { tag, kind, offset: offset as usize, count })
}

/// The first string of a STRING, STRING_ARRAY or I18NSTRING entry, which
/// must end with a NUL inside the data.
fn read_string(entry: &Entry, data: &[u8]) -> Result<String, HeaderError> {
    let error = |reason: &str| HeaderError::Tag { tag: entry.tag, reason: reason.to_owned() };
    if !matches!(entry.kind, kind::STRING | kind::STRING_ARRAY | kind::I18NSTRING) {
        return Err(error(&format!("type {} is not a string", entry.kind)));
    }
    if entry.kind == kind::STRING && entry.count != 1 {
        return Err(error("a STRING entry must have count 1"));
    }
    let rest = data.get(entry.offset..).unwrap_or_default();
    let end =
        rest.iter().position(|&byte| byte == 0).ok_or_else(|| error("string has no NUL within the data"))?;
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// The first value of an INT32 entry (bounds checked by [`check_entry`]).
fn read_int32(entry: &Entry, data: &[u8]) -> Result<u32, HeaderError> {
    if entry.kind != kind::INT32 {
        return Err(HeaderError::Tag { tag: entry.tag, reason: format!("type {} is not INT32", entry.kind) });
    }
    read_u32(data, entry.offset).ok_or_else(|| HeaderError::Tag {
        tag: entry.tag,
        reason: "INT32 runs past the end of the data".to_owned(),
    })
}

/// The big-endian `u32` at `at`, when there are four bytes there.
fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    Some(u32::from_be_bytes(bytes.get(at..end)?.try_into().ok()?))
}

/// Name and `version-release` of the source package a SOURCERPM file name
/// names: `.rpm` and the architecture (`.src`, `.nosrc`) dropped, then
/// release and version split off at the last two dashes.
pub fn parse_source_rpm(file_name: &str) -> Option<(String, String)> {
    let stem = file_name.strip_suffix(".rpm")?;
    let (stem, _arch) = stem.rsplit_once('.')?;
    let (rest, release) = stem.rsplit_once('-')?;
    let (name, version) = rest.rsplit_once('-')?;
    if name.is_empty() || version.is_empty() || release.is_empty() {
        return None;
    }
    Some((name.to_owned(), format!("{version}-{release}")))
}

/// The package a header describes, found in the database at `path`.
fn package(header: &RpmHeader, path: &str) -> Package {
    let version = header.full_version();
    let source = header.source_rpm.as_deref().and_then(|file_name| {
        let parsed = parse_source_rpm(file_name);
        if parsed.is_none() {
            tracing::debug!(package = %header.name, source_rpm = file_name, "SOURCERPM is not name-version-release.arch.rpm");
        }
        parsed
    });
    let (source_name, source_version) = match source {
        Some((name, source_version)) => {
            let source_version = match header.epoch {
                Some(epoch) if epoch != 0 => format!("{epoch}:{source_version}"),
                _ => source_version,
            };
            (Some(name).filter(|name| *name != header.name), Some(source_version).filter(|v| *v != version))
        }
        None => (None, None),
    };
    Package {
        name: header.name.clone(),
        version,
        kind: PackageKind::Rpm,
        source_name,
        source_version,
        arch: header.arch.clone(),
        path: path.to_owned(),
        layer: None,
        ecosystem: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a header blob (no magic) the way rpm lays one out: strings
    /// NUL-terminated, INT32 data 4-byte aligned.
    fn blob(entries: &[(u32, HeaderValue)]) -> Vec<u8> {
        let mut index = Vec::new();
        let mut data = Vec::new();
        for (tag, value) in entries {
            let (kind, count, bytes): (u32, u32, Vec<u8>) = match value {
                HeaderValue::Str(s) => (kind::STRING, 1, [s.as_bytes(), b"\0"].concat()),
                HeaderValue::Int32(v) => {
                    while data.len() % 4 != 0 {
                        data.push(0);
                    }
                    (kind::INT32, 1, v.to_be_bytes().to_vec())
                }
            };
            index.extend_from_slice(&tag.to_be_bytes());
            index.extend_from_slice(&kind.to_be_bytes());
            index.extend_from_slice(&(data.len() as u32).to_be_bytes());
            index.extend_from_slice(&count.to_be_bytes());
            data.extend_from_slice(&bytes);
        }
        let mut out = Vec::new();
        out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend(index);
        out.extend(data);
        out
    }

    enum HeaderValue {
        Str(&'static str),
        Int32(u32),
    }
    use HeaderValue::{Int32, Str};

    fn openssl_libs() -> Vec<u8> {
        blob(&[
            (tag::NAME, Str("openssl-libs")),
            (tag::VERSION, Str("3.0.7")),
            (tag::RELEASE, Str("24.el9")),
            (tag::EPOCH, Int32(1)),
            (tag::ARCH, Str("x86_64")),
            (tag::SOURCERPM, Str("openssl-3.0.7-24.el9.src.rpm")),
        ])
    }

    #[test]
    fn header_fields_and_package_follow_rpm_conventions() {
        let header = parse_header(&openssl_libs()).expect("valid");
        assert_eq!(
            header,
            RpmHeader {
                name: "openssl-libs".into(),
                epoch: Some(1),
                version: "3.0.7".into(),
                release: "24.el9".into(),
                arch: Some("x86_64".into()),
                source_rpm: Some("openssl-3.0.7-24.el9.src.rpm".into()),
            }
        );
        let package = package(&header, "var/lib/rpm/rpmdb.sqlite");
        assert_eq!(package.version, "1:3.0.7-24.el9");
        assert_eq!(package.source_name.as_deref(), Some("openssl"));
        assert_eq!(package.source_version, None, "same as the binary's once the epoch is added");
        assert_eq!(package.kind, PackageKind::Rpm);
        assert_eq!(package.ecosystem, "");
        assert_eq!(package.advisory_name(), "openssl");
        assert_eq!(package.advisory_version(), "1:3.0.7-24.el9");

        let zero_epoch = blob(&[
            (tag::NAME, Str("bash")),
            (tag::VERSION, Str("5.1.8")),
            (tag::RELEASE, Str("6.el9")),
            (tag::EPOCH, Int32(0)),
            (tag::SOURCERPM, Str("bash-5.1.8-6.el9_1.src.rpm")),
        ]);
        let package = super::package(&parse_header(&zero_epoch).expect("valid"), "db");
        assert_eq!(package.version, "5.1.8-6.el9");
        assert_eq!(package.source_name, None);
        assert_eq!(package.source_version.as_deref(), Some("5.1.8-6.el9_1"));
    }

    #[test]
    fn source_rpm_names_split_at_the_last_two_dashes() {
        for (file, want) in [
            ("openssl-3.0.7-24.el9.src.rpm", Some(("openssl", "3.0.7-24.el9"))),
            ("python3.9-3.9.18-1.el9.src.rpm", Some(("python3.9", "3.9.18-1.el9"))),
            ("glibc-2.34-60.el9.nosrc.rpm", Some(("glibc", "2.34-60.el9"))),
            ("xz-libs-5.2.5-8.el9_0.src.rpm", Some(("xz-libs", "5.2.5-8.el9_0"))),
            ("nodashes.src.rpm", None),
            ("a-1.src.rpm", None),
            ("-1-2.src.rpm", None),
            ("openssl-3.0.7-24.el9.src", None),
            ("", None),
        ] {
            let got = parse_source_rpm(file);
            let want = want.map(|(n, v)| (n.to_owned(), v.to_owned()));
            assert_eq!(got, want, "{file}");
        }
    }

    #[test]
    fn later_entries_override_earlier_ones_with_the_same_tag() {
        let header = parse_header(&blob(&[
            (tag::NAME, Str("old")),
            (tag::VERSION, Str("1")),
            (tag::RELEASE, Str("1")),
            (tag::NAME, Str("new")),
        ]))
        .expect("valid");
        assert_eq!(header.name, "new");
        assert_eq!(header.epoch, None);
        assert_eq!(header.arch, None);
    }

    /// Replaces the big-endian u32 at `at`.
    fn poke(mut blob: Vec<u8>, at: usize, value: u32) -> Vec<u8> {
        blob[at..at + 4].copy_from_slice(&value.to_be_bytes());
        blob
    }

    #[test]
    fn hostile_headers_are_errors_not_panics() {
        let good = openssl_libs();
        let entry = |n: usize, field: usize| 8 + n * INDEX_ENTRY_LEN + field * 4;
        let data_len = u32::from_be_bytes(good[4..8].try_into().expect("4 bytes"));
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", Vec::new()),
            ("intro only", good[..7].to_vec()),
            ("no entries", poke(good.clone(), 0, 0)),
            ("too many entries", poke(good.clone(), 0, 0x1_0000)),
            ("entries beyond blob", poke(good.clone(), 0, 1000)),
            ("data length too large", poke(good.clone(), 4, 0x1000_0000)),
            ("data length beyond blob", poke(good.clone(), 4, data_len + 1)),
            ("trailing bytes", [good.clone(), vec![0]].concat()),
            ("truncated data", good[..good.len() - 1].to_vec()),
            ("unknown type", poke(good.clone(), entry(0, 1), 10)),
            ("offset out of range", poke(good.clone(), entry(0, 2), data_len + 1)),
            ("negative offset", poke(good.clone(), entry(0, 2), 0x8000_0000)),
            ("zero count", poke(good.clone(), entry(0, 3), 0)),
            ("count beyond data", poke(good.clone(), entry(0, 3), data_len + 1)),
            ("int32 misaligned", poke(good.clone(), entry(3, 2), 1)),
            ("int32 past end", poke(good.clone(), entry(3, 2), data_len - 2)),
            ("string without nul", poke(good.clone(), entry(5, 2), data_len)),
            ("string count", poke(good.clone(), entry(0, 3), 2)),
            ("name as int32", poke(poke(good.clone(), entry(0, 1), kind::INT32), entry(0, 2), 0)),
            ("epoch as string", poke(good.clone(), entry(3, 1), kind::STRING)),
            ("name missing", poke(good.clone(), entry(0, 0), 999)),
        ];
        for (name, blob) in cases {
            assert!(parse_header(&blob).is_err(), "{name}");
        }
        // An entry at offset == data length with count 1 and type CHAR
        // would read past the end.
        let char_at_end = poke(poke(good.clone(), entry(4, 1), kind::CHAR), entry(4, 2), data_len);
        assert!(matches!(parse_header(&char_at_end), Err(HeaderError::Entry { index: 4, .. })));
    }

    #[test]
    fn non_sqlite_files_and_foreign_databases_are_errors() {
        let cataloger = RpmCataloger;
        assert!(cataloger.wants("var/lib/rpm/rpmdb.sqlite", false));
        assert!(cataloger.wants("usr/lib/sysimage/rpm/rpmdb.sqlite", false));
        assert!(!cataloger.wants("var/lib/rpm/Packages", false));
        assert!(!cataloger.wants("usr/share/rpmdb.sqlite", false));

        let error = cataloger.parse("var/lib/rpm/rpmdb.sqlite", &[0u8; 4096]).expect_err("not sqlite");
        assert_eq!(error.cataloger, "rpm");
        assert_eq!(error.path, "var/lib/rpm/rpmdb.sqlite");
        assert!(cataloger.parse("var/lib/rpm/rpmdb.sqlite", b"SQLite format 3\0").is_err());

        // A valid SQLite database that is not an rpm database.
        let other = Connection::open_in_memory().expect("memory");
        other.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);").expect("sql");
        let bytes = other.serialize(rusqlite::MAIN_DB).expect("serialize").to_vec();
        let error = cataloger.parse("var/lib/rpm/rpmdb.sqlite", &bytes).expect_err("no Packages");
        assert!(error.reason.contains("no `Packages` table"), "{error}");

        // `Packages` as a view is refused before it is queried.
        let view = Connection::open_in_memory().expect("memory");
        view.execute_batch("CREATE VIEW Packages AS SELECT 1 AS hnum, x'00' AS blob;").expect("sql");
        let bytes = view.serialize(rusqlite::MAIN_DB).expect("serialize").to_vec();
        let error = cataloger.parse("var/lib/rpm/rpmdb.sqlite", &bytes).expect_err("view");
        assert!(error.reason.contains("is a view"), "{error}");

        // Truncating a database file makes SQLite report corruption.
        let truncated = bytes[..bytes.len() / 2].to_vec();
        assert!(cataloger.parse("var/lib/rpm/rpmdb.sqlite", &truncated).is_err());
    }

    /// A database laid out as rpm's sqlite backend creates it, holding
    /// headers built here, in WAL mode as rpm leaves it.
    #[test]
    fn packages_table_rows_become_packages_and_gpg_keys_are_skipped() {
        let db = Connection::open_in_memory().expect("memory");
        db.execute_batch(
            "CREATE TABLE 'Packages' (hnum INTEGER PRIMARY KEY AUTOINCREMENT,blob BLOB NOT NULL);",
        )
        .expect("sql");
        let key = blob(&[
            (tag::NAME, Str("gpg-pubkey")),
            (tag::VERSION, Str("fd431d51")),
            (tag::RELEASE, Str("4ae0493b")),
        ]);
        for header in [openssl_libs(), key] {
            db.execute("INSERT INTO Packages (blob) VALUES (?1)", [header]).expect("insert");
        }
        let mut bytes = db.serialize(rusqlite::MAIN_DB).expect("serialize").to_vec();
        bytes[18] = 2;
        bytes[19] = 2;
        let packages = RpmCataloger.parse("var/lib/rpm/rpmdb.sqlite", &bytes).expect("readable");
        assert_eq!(packages.len(), 1);
        assert_eq!(packages[0].name, "openssl-libs");
        assert_eq!(packages[0].path, "var/lib/rpm/rpmdb.sqlite");

        // One bad header fails the file, naming its row.
        db.execute("INSERT INTO Packages (blob) VALUES (x'0000000100000000')", []).expect("insert");
        let bytes = db.serialize(rusqlite::MAIN_DB).expect("serialize").to_vec();
        let error = RpmCataloger.parse("var/lib/rpm/rpmdb.sqlite", &bytes).expect_err("bad row");
        assert!(error.reason.starts_with("Packages row 3: "), "{error}");
    }
}
