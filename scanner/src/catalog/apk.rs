//! Alpine, Wolfi and Chainguard packages from apk-tools' installed database.
//!
//! apk-tools keeps what is installed in `lib/apk/db/installed` (Wolfi and
//! Chainguard moved it to `usr/lib/apk/db/installed`). The format, described
//! in apk-tools' `doc/apk-package.5` and written by its `database.c`, is one
//! stanza per package, stanzas separated by a blank line, each line a single
//! letter, a colon and a value: `P:` the package name, `V:` its version, `o:`
//! the origin (the source package advisories are filed under), `A:` the
//! architecture, and many more (files, checksums, dependencies) that a
//! vulnerability match does not need.
//!
//! apk-tools never writes a stanza without `P:` and `V:`, a line in another
//! shape, or a NUL byte, so any of those means the file is truncated or is not
//! an apk database, and the whole file is refused with an error naming the
//! line, rather than guessing which packages were meant. Only the fields used
//! must be UTF-8: descriptions and maintainer names are copied from packages
//! as they are.

use super::{Cataloger, Error};
use crate::package::{Package, PackageKind};

const NAME: &str = "apk";

/// Database paths: Alpine's, then the `/usr`-merged one of Wolfi and
/// Chainguard.
const DATABASE_PATHS: &[&str] = &["lib/apk/db/installed", "usr/lib/apk/db/installed"];

/// Reads apk-tools' installed database.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApkCataloger;

impl Cataloger for ApkCataloger {
    fn name(&self) -> &'static str {
        NAME
    }

    fn wants(&self, path: &str, _executable: bool) -> bool {
        DATABASE_PATHS.contains(&path)
    }

    fn parse(&self, path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
        parse_installed(path, data)
    }
}

/// The fields of one stanza PatchPilot uses, with the line the stanza starts
/// on for errors.
#[derive(Default)]
struct Stanza {
    first_line: usize,
    name: Option<String>,
    version: Option<String>,
    origin: Option<String>,
    arch: Option<String>,
}

fn parse_installed(path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
    if data.contains(&0) {
        return Err(Error::new(NAME, path, "contains NUL bytes: not an apk database"));
    }
    let mut packages = Vec::new();
    let mut stanza: Option<Stanza> = None;
    for (index, raw_line) in data.split(|&b| b == b'\n').enumerate() {
        let line_number = index + 1;
        let line = raw_line.strip_suffix(b"\r").unwrap_or(raw_line);
        if line.iter().all(u8::is_ascii_whitespace) {
            if let Some(done) = stanza.take() {
                super::keep_stanza(&mut packages, finish(path, done).map(Some));
            }
            continue;
        }
        let current = stanza.get_or_insert_with(|| Stanza { first_line: line_number, ..Stanza::default() });
        let (key, value) = match line {
            [key, b':', value @ ..] if key.is_ascii_alphabetic() => (*key, value),
            _ => {
                return Err(Error::new(
                    NAME,
                    path,
                    format!("line {line_number}: expected `<letter>:<value>`, found {}", excerpt(line)),
                ));
            }
        };
        let slot = match key {
            b'P' => &mut current.name,
            b'V' => &mut current.version,
            b'o' => &mut current.origin,
            b'A' => &mut current.arch,
            _ => continue,
        };
        if slot.is_some() {
            return Err(Error::new(
                NAME,
                path,
                format!(
                    "line {line_number}: second `{}:` in the stanza starting at line {}",
                    key as char, current.first_line
                ),
            ));
        }
        let text = std::str::from_utf8(value).map_err(|_| {
            Error::new(NAME, path, format!("line {line_number}: `{}:` value is not UTF-8", key as char))
        })?;
        *slot = Some(text.trim().to_owned());
    }
    if let Some(done) = stanza.take() {
        super::keep_stanza(&mut packages, finish(path, done).map(Some));
    }
    Ok(packages)
}

fn finish(path: &str, stanza: Stanza) -> Result<Package, Error> {
    let missing = |field: &str| {
        Error::new(
            NAME,
            path,
            format!(
                "stanza starting at line {} has no `{field}` (truncated or corrupt database)",
                stanza.first_line
            ),
        )
    };
    let name = stanza.name.clone().filter(|n| !n.is_empty()).ok_or_else(|| missing("P:"))?;
    let version = stanza.version.clone().filter(|v| !v.is_empty()).ok_or_else(|| missing("V:"))?;
    let source_name = stanza.origin.filter(|origin| !origin.is_empty() && *origin != name);
    Ok(Package {
        name,
        version,
        kind: PackageKind::Apk,
        source_name,
        // apk builds every subpackage from its origin at the same version.
        source_version: None,
        arch: stanza.arch.filter(|a| !a.is_empty()),
        path: path.to_owned(),
        layer: None,
        ecosystem: String::new(),
    })
}

/// A short printable rendering of a rejected line, for error messages.
fn excerpt(line: &[u8]) -> String {
    const LIMIT: usize = 40;
    let shown = String::from_utf8_lossy(&line[..line.len().min(LIMIT)]).into_owned();
    let ellipsis = if line.len() > LIMIT { "…" } else { "" };
    format!("{:?}{ellipsis}", shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DB: &str = "lib/apk/db/installed";

    fn names_versions_origins(packages: &[Package]) -> Vec<(&str, &str, Option<&str>)> {
        packages.iter().map(|p| (p.name.as_str(), p.version.as_str(), p.source_name.as_deref())).collect()
    }

    #[test]
    fn wants_both_database_locations_only() {
        let cataloger = ApkCataloger;
        assert!(cataloger.wants("lib/apk/db/installed", false));
        assert!(cataloger.wants("usr/lib/apk/db/installed", false));
        assert!(!cataloger.wants("lib/apk/db/installed/test", false));
        assert!(!cataloger.wants("foo/lib/apk/db/installed", false));
        assert!(!cataloger.wants("lib/apk/db/scripts.tar", false));
    }

    // Synthetic stanzas written for this test; real databases are covered by
    // tests/catalogers_text.rs.
    #[test]
    fn origin_becomes_source_name_only_when_it_differs() {
        let data = "C:Q1abc=\nP:libssl3\nV:3.1.2-r0\nA:aarch64\no:openssl\n\nP:zlib\nV:1.2.13-r1\no:zlib\n\nP:no-origin\nV:1\n";
        let packages = ApkCataloger.parse(DB, data.as_bytes()).expect("parses");
        assert_eq!(
            names_versions_origins(&packages),
            vec![
                ("libssl3", "3.1.2-r0", Some("openssl")),
                ("zlib", "1.2.13-r1", None),
                ("no-origin", "1", None)
            ]
        );
        let first = &packages[0];
        assert_eq!((first.kind, first.path.as_str(), first.ecosystem.as_str()), (PackageKind::Apk, DB, ""));
        assert_eq!((first.source_version.as_deref(), first.layer.as_deref()), (None, None));
    }

    #[test]
    fn crlf_extra_blank_lines_and_no_final_newline() {
        let data = "\r\n\r\nP:musl\r\nV:1.2.4-r1\r\n\r\n\r\nP:busybox\r\nV:1.36.1-r2";
        let packages = ApkCataloger.parse(DB, data.as_bytes()).expect("parses");
        assert_eq!(
            names_versions_origins(&packages),
            vec![("musl", "1.2.4-r1", None), ("busybox", "1.36.1-r2", None)]
        );
    }

    #[test]
    fn empty_database_has_no_packages() {
        assert!(ApkCataloger.parse(DB, b"").expect("parses").is_empty());
        assert!(ApkCataloger.parse(DB, b"\n\n").expect("parses").is_empty());
    }

    #[test]
    fn an_incomplete_stanza_is_skipped_and_the_rest_kept() {
        // Trivy's and syft's fixtures carry such stanzas on purpose; one of
        // them must not hide the other packages of the database.
        let packages =
            ApkCataloger.parse(DB, b"P:musl\nV:1.2.4-r1\n\nP:busybox\nA:x86_64\n").expect("rest is read");
        assert_eq!(packages.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), vec!["musl"]);
        assert!(ApkCataloger.parse(DB, b"V:1.0\nA:x86_64\n").expect("skipped").is_empty());
        // The reason it was skipped still names the line.
        let stanza = Stanza { first_line: 4, name: Some("busybox".into()), ..Stanza::default() };
        let err = finish(DB, stanza).expect_err("no version");
        assert_eq!((err.cataloger, err.path.as_str()), ("apk", DB));
        assert!(err.reason.contains("line 4") && err.reason.contains("`V:`"), "{err}");
    }

    #[test]
    fn garbage_nul_and_non_utf8_are_errors() {
        let err = ApkCataloger.parse(DB, b"P:musl\nthis is not apk\n").expect_err("garbage");
        assert!(err.reason.contains("line 2"), "{err}");
        let err = ApkCataloger.parse(DB, b"\x7fELF\x02\x01\x01\0\0\0").expect_err("binary");
        assert!(err.reason.contains("NUL"), "{err}");
        let err = ApkCataloger.parse(DB, b"P:mus\xffl\nV:1\n").expect_err("non-utf8 name");
        assert!(err.reason.contains("not UTF-8"), "{err}");
        assert_eq!(err.to_string(), "apk: lib/apk/db/installed: line 1: `P:` value is not UTF-8");
    }

    #[test]
    fn non_utf8_in_unused_fields_is_tolerated() {
        let packages = ApkCataloger.parse(DB, b"P:musl\nV:1\nm:Timo Ter\xe4s\n").expect("parses");
        assert_eq!(names_versions_origins(&packages), vec![("musl", "1", None)]);
    }

    #[test]
    fn repeated_name_in_one_stanza_is_an_error() {
        let err = ApkCataloger.parse(DB, b"P:a\nV:1\nP:b\n").expect_err("two names");
        assert!(err.reason.contains("second `P:`"), "{err}");
    }
}
