//! RPM: installed packages from the rpm database, in any of the three
//! forms rpm has kept it in:
//!
//! | file | backend | written by | found on |
//! |---|---|---|---|
//! | `rpmdb.sqlite` | SQLite ([`sqlite`]) | rpm ≥ 4.16 (its default) | Fedora 33+, RHEL/Rocky/Alma 9, Amazon Linux 2023 |
//! | `Packages` | BerkeleyDB hash ([`bdb`]) | rpm < 4.16 | RHEL/CentOS 7 and 8, Amazon Linux 2, older SUSE |
//! | `Packages.db` | NDB ([`ndb`]) | rpm ≥ 4.15 configured for it | SUSE Linux Enterprise 15 and openSUSE since about 2021 |
//!
//! Each is looked for in `var/lib/rpm/` and in `usr/lib/sysimage/rpm/`
//! (SUSE's location, where `var/lib/rpm` is a symlink to it); the file name
//! picks the reader. None of them needs rpm or BerkeleyDB: all three are
//! read from the bytes, as untrusted input.
//!
//! Every backend stores the same thing per package, the header blob rpm's
//! `headerExport` writes, parsed and checked by [`header`]. From each
//! header: NAME, EPOCH, VERSION, RELEASE, ARCH and SOURCERPM. The version is
//! `epoch:version-release` when the epoch is present and not 0, else
//! `version-release`. The source package comes from the SOURCERPM file name
//! (`openssl-3.0.7-24.el9.src.rpm` → `openssl`, `3.0.7-24.el9`); as a source
//! RPM's file name never carries the epoch, which binary and source packages
//! share from the same spec file, the binary's epoch is put in front of the
//! source version. Source name and version are only set when they differ
//! from the binary's. `gpg-pubkey` entries (imported signing keys) are not
//! packages and are skipped. A header that breaks a rule fails the whole
//! file, naming its record.
//!
//! An image holding two of these files (a database converted without the
//! old file removed) yields both files' packages, each with its own path.

pub mod bdb;
pub mod header;
pub mod ndb;
pub mod sqlite;

use super::{Cataloger, Error};
use crate::package::{Package, PackageKind};
pub use header::{HeaderError, RpmHeader, parse_header};

/// Name of this cataloger in errors and logs.
const CATALOGER: &str = "rpm";

/// The rpm database formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `rpmdb.sqlite`.
    Sqlite,
    /// The BerkeleyDB hash `Packages`.
    BerkeleyDb,
    /// NDB's `Packages.db`.
    Ndb,
}

/// Where rpm keeps its database, and in which form.
pub const DATABASE_PATHS: [(&str, Backend); 6] = [
    ("var/lib/rpm/rpmdb.sqlite", Backend::Sqlite),
    ("usr/lib/sysimage/rpm/rpmdb.sqlite", Backend::Sqlite),
    ("var/lib/rpm/Packages", Backend::BerkeleyDb),
    ("usr/lib/sysimage/rpm/Packages", Backend::BerkeleyDb),
    ("var/lib/rpm/Packages.db", Backend::Ndb),
    ("usr/lib/sysimage/rpm/Packages.db", Backend::Ndb),
];

/// The imported signing keys rpm records as pseudo-packages.
const GPG_PUBKEY: &str = "gpg-pubkey";

/// The backend of the database at `path`, if it is one.
pub fn backend(path: &str) -> Option<Backend> {
    DATABASE_PATHS.iter().find(|(known, _)| *known == path).map(|(_, backend)| *backend)
}

/// Finds the packages in rpm's database.
#[derive(Debug, Clone, Copy, Default)]
pub struct RpmCataloger;

impl Cataloger for RpmCataloger {
    fn name(&self) -> &'static str {
        CATALOGER
    }

    fn wants(&self, path: &str, _executable: bool) -> bool {
        backend(path).is_some()
    }

    fn parse(&self, path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
        let error = |reason: String| Error::new(CATALOGER, path, reason);
        let backend = backend(path).ok_or_else(|| error("not an rpm database path".to_owned()))?;
        // Each record's number, as the backend calls it, and its blob.
        let (record, headers): (&str, Vec<(i64, Vec<u8>)>) = match backend {
            Backend::Sqlite => {
                ("Packages row", sqlite::read_headers(data).map_err(|err| error(err.to_string()))?)
            }
            Backend::BerkeleyDb => {
                ("header instance", widen(bdb::read_headers(data).map_err(|err| error(err.to_string()))?))
            }
            Backend::Ndb => {
                ("package index", widen(ndb::read_headers(data).map_err(|err| error(err.to_string()))?))
            }
        };
        let mut packages = Vec::with_capacity(headers.len());
        for (number, blob) in headers {
            let header = parse_header(&blob).map_err(|err| error(format!("{record} {number}: {err}")))?;
            if header.name != GPG_PUBKEY {
                packages.push(package(&header, path));
            }
        }
        Ok(packages)
    }
}

/// BerkeleyDB's and NDB's unsigned record numbers as SQLite's signed ones.
fn widen(headers: Vec<(u32, Vec<u8>)>) -> Vec<(i64, Vec<u8>)> {
    headers.into_iter().map(|(number, blob)| (i64::from(number), blob)).collect()
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
    use super::header::tag;
    use super::header::tests::{Int32, Str, blob, openssl_libs};
    use super::*;
    use rusqlite::Connection;

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
    fn non_sqlite_files_and_foreign_databases_are_errors() {
        let cataloger = RpmCataloger;
        assert!(cataloger.wants("var/lib/rpm/rpmdb.sqlite", false));
        assert!(cataloger.wants("usr/lib/sysimage/rpm/rpmdb.sqlite", false));
        assert!(cataloger.wants("var/lib/rpm/Packages", false));
        assert!(cataloger.wants("usr/lib/sysimage/rpm/Packages", false));
        assert!(cataloger.wants("var/lib/rpm/Packages.db", false));
        assert!(cataloger.wants("usr/lib/sysimage/rpm/Packages.db", false));
        assert!(!cataloger.wants("usr/share/rpmdb.sqlite", false));
        assert!(!cataloger.wants("var/lib/rpm/Name", false));
        assert!(!cataloger.wants("var/lib/rpm/Index.db", false));

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
