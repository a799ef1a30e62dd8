//! Debian and Ubuntu packages from dpkg's database.
//!
//! dpkg records installed packages in `var/lib/dpkg/status`; Google's
//! distroless images have no dpkg and instead ship one control file per
//! package in `var/lib/dpkg/status.d/<name>` (next to `<name>.md5sums`, which
//! is not a control file). Both are deb822 control data as Debian Policy §5.1
//! defines it: stanzas separated by blank lines, each field a `Name: value`
//! line whose value may continue on following lines that start with a space
//! or tab.
//!
//! Fields used (dpkg-query(1), deb-control(5), Debian Policy §5.6):
//! - `Package`, `Version` (with its epoch, `1:2.4.47-2build1`; a `0:` epoch
//!   is dropped, it means no epoch);
//! - `Status: <want> <flag> <state>`: the package's files are on disk when the
//!   state is `installed`, or `unpacked`, `half-configured`,
//!   `triggers-awaiting`, `triggers-pending` (unpacked, configuration or
//!   triggers not finished). `not-installed`, `config-files` (removed, only
//!   conffiles left) and `half-installed` (install or removal interrupted) are
//!   skipped. The want word is ignored: `hold ok installed` and
//!   `deinstall ok installed` are still installed. distroless control files
//!   carry no `Status` and list only installed packages;
//! - `Source: name` or `Source: name (version)`: the source package, and its
//!   version when it differs from the binary's (binNMUs, `+b1`);
//! - `Architecture` (`amd64`, `all`…), for the package URL's `arch`.
//!
//! A stanza without `Package`, an installed stanza without `Version`, a line
//! that is neither a field nor a continuation, or a NUL byte means the file is
//! corrupt or truncated, and it is refused with an error naming the line. Only
//! the fields used must be UTF-8; descriptions are left as packagers wrote them.

use super::{Cataloger, Error};
use crate::package::{Package, PackageKind};

const NAME: &str = "dpkg";
const STATUS_FILE: &str = "var/lib/dpkg/status";
const STATUS_DIR: &str = "var/lib/dpkg/status.d/";

/// Reads dpkg's status file and distroless `status.d` control files.
#[derive(Debug, Clone, Copy, Default)]
pub struct DpkgCataloger;

impl Cataloger for DpkgCataloger {
    fn name(&self) -> &'static str {
        NAME
    }

    fn wants(&self, path: &str, _executable: bool) -> bool {
        if path == STATUS_FILE {
            return true;
        }
        path.strip_prefix(STATUS_DIR).is_some_and(|file| {
            !file.is_empty() && !file.contains('/') && !file.starts_with('.') && !file.ends_with(".md5sums")
        })
    }

    fn parse(&self, path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
        parse_control(path, data)
    }
}

/// The fields of one stanza PatchPilot uses.
#[derive(Default)]
struct Stanza {
    first_line: usize,
    package: Option<String>,
    version: Option<String>,
    status: Option<String>,
    source: Option<String>,
    architecture: Option<String>,
}

/// Which field a continuation line belongs to; continuations of used fields
/// are malformed, the others (descriptions, conffiles) are skipped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LastField {
    None,
    Used(&'static str),
    Other,
}

fn parse_control(path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
    if data.contains(&0) {
        return Err(Error::new(NAME, path, "contains NUL bytes: not a dpkg control file"));
    }
    let mut packages = Vec::new();
    let mut stanza: Option<Stanza> = None;
    let mut last_field = LastField::None;
    for (index, raw_line) in data.split(|&b| b == b'\n').enumerate() {
        let line_number = index + 1;
        let line = raw_line.strip_suffix(b"\r").unwrap_or(raw_line);
        if line.iter().all(|b| *b == b' ' || *b == b'\t') {
            if let Some(done) = stanza.take() {
                super::keep_stanza(&mut packages, finish(path, done));
            }
            last_field = LastField::None;
            continue;
        }
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            match last_field {
                LastField::Other => continue,
                LastField::Used(field) => {
                    return Err(Error::new(
                        NAME,
                        path,
                        format!("line {line_number}: `{field}` continues onto a second line"),
                    ));
                }
                LastField::None => {
                    return Err(Error::new(
                        NAME,
                        path,
                        format!("line {line_number}: continuation line outside a field"),
                    ));
                }
            }
        }
        let current = stanza.get_or_insert_with(|| Stanza { first_line: line_number, ..Stanza::default() });
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            return Err(Error::new(
                NAME,
                path,
                format!("line {line_number}: expected `Field: value`, found {}", excerpt(line)),
            ));
        };
        let (field_name, rest) = line.split_at(colon);
        let value = rest.get(1..).unwrap_or_default();
        if !is_field_name(field_name) {
            return Err(Error::new(
                NAME,
                path,
                format!("line {line_number}: expected `Field: value`, found {}", excerpt(line)),
            ));
        }
        let (label, slot) = if field_name.eq_ignore_ascii_case(b"Package") {
            ("Package", &mut current.package)
        } else if field_name.eq_ignore_ascii_case(b"Version") {
            ("Version", &mut current.version)
        } else if field_name.eq_ignore_ascii_case(b"Status") {
            ("Status", &mut current.status)
        } else if field_name.eq_ignore_ascii_case(b"Source") {
            ("Source", &mut current.source)
        } else if field_name.eq_ignore_ascii_case(b"Architecture") {
            ("Architecture", &mut current.architecture)
        } else {
            last_field = LastField::Other;
            continue;
        };
        last_field = LastField::Used(label);
        if slot.is_some() {
            return Err(Error::new(
                NAME,
                path,
                format!(
                    "line {line_number}: second `{label}` in the stanza starting at line {}",
                    current.first_line
                ),
            ));
        }
        let text = std::str::from_utf8(value)
            .map_err(|_| Error::new(NAME, path, format!("line {line_number}: `{label}` is not UTF-8")))?;
        *slot = Some(text.trim().to_owned());
    }
    if let Some(done) = stanza.take() {
        super::keep_stanza(&mut packages, finish(path, done));
    }
    Ok(packages)
}

/// deb822 field names: printable US-ASCII except `:`, not starting with `#`
/// or `-` (Debian Policy §5.1).
fn is_field_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.iter().all(|b| b.is_ascii_graphic() && *b != b':')
        && !matches!(name.first(), Some(b'#' | b'-'))
}

/// The package a finished stanza describes, or `None` when it is not
/// installed.
fn finish(path: &str, stanza: Stanza) -> Result<Option<Package>, Error> {
    let at = stanza.first_line;
    let name = stanza
        .package
        .filter(|name| !name.is_empty())
        .ok_or_else(|| Error::new(NAME, path, format!("stanza starting at line {at} has no `Package`")))?;
    let installed = match &stanza.status {
        Some(status) => files_on_disk(status).map_err(|reason| {
            Error::new(NAME, path, format!("stanza starting at line {at} (`{name}`): {reason}"))
        })?,
        None => true,
    };
    if !installed {
        return Ok(None);
    }
    let version = stanza.version.filter(|v| !v.is_empty()).ok_or_else(|| {
        Error::new(
            NAME,
            path,
            format!("stanza starting at line {at} (`{name}`) is installed but has no `Version`"),
        )
    })?;
    let version = normalise_version(&version);
    if version.contains(char::is_whitespace) {
        return Err(Error::new(
            NAME,
            path,
            format!("stanza starting at line {at} (`{name}`): `Version` has spaces"),
        ));
    }
    let (source_name, source_version) = match &stanza.source {
        None => (None, None),
        Some(source) => parse_source(source).ok_or_else(|| {
            Error::new(
                NAME,
                path,
                format!("stanza starting at line {at} (`{name}`): `Source: {source}` is not `name` or `name (version)`"),
            )
        })?,
    };
    let source_version = source_version.map(|v| normalise_version(&v)).filter(|v| *v != version);
    let source_name = source_name.filter(|source| *source != name);
    Ok(Some(Package {
        name,
        version,
        kind: PackageKind::Deb,
        source_name,
        source_version,
        arch: stanza.architecture.filter(|a| !a.is_empty()),
        path: path.to_owned(),
        layer: None,
        ecosystem: String::new(),
    }))
}

/// Whether a `Status` value says the package's files are on disk.
fn files_on_disk(status: &str) -> Result<bool, String> {
    let words: Vec<&str> = status.split_whitespace().collect();
    let [_want, _flag, state] = words.as_slice() else {
        return Err(format!("`Status: {status}` is not `<want> <flag> <state>`"));
    };
    match *state {
        "installed" | "unpacked" | "half-configured" | "triggers-awaiting" | "triggers-pending" => Ok(true),
        "not-installed" | "config-files" | "half-installed" => Ok(false),
        other => Err(format!("unknown package state `{other}` in `Status: {status}`")),
    }
}

/// Splits `name` or `name (version)`.
fn parse_source(source: &str) -> Option<(Option<String>, Option<String>)> {
    let (name, rest) = match source.split_once(char::is_whitespace) {
        Some((name, rest)) => (name, rest.trim()),
        None => (source, ""),
    };
    if name.is_empty() {
        return None;
    }
    if rest.is_empty() {
        return Some((Some(name.to_owned()), None));
    }
    let version = rest.strip_prefix('(')?.strip_suffix(')')?.trim();
    if version.is_empty() || version.contains(char::is_whitespace) {
        return None;
    }
    Some((Some(name.to_owned()), Some(version.to_owned())))
}

/// Drops a `0:` epoch, which dpkg treats as no epoch.
fn normalise_version(version: &str) -> String {
    version.strip_prefix("0:").unwrap_or(version).to_owned()
}

/// A short printable rendering of a rejected line, for error messages.
fn excerpt(line: &[u8]) -> String {
    const LIMIT: usize = 40;
    let shown = String::from_utf8_lossy(&line[..line.len().min(LIMIT)]).into_owned();
    let ellipsis = if line.len() > LIMIT { "…" } else { "" };
    format!("{shown:?}{ellipsis}")
}

#[cfg(test)]
mod tests {
    use super::*;

    type Row<'a> = (&'a str, &'a str, Option<&'a str>, Option<&'a str>);

    fn rows(packages: &[Package]) -> Vec<Row<'_>> {
        packages
            .iter()
            .map(|p| {
                (p.name.as_str(), p.version.as_str(), p.source_name.as_deref(), p.source_version.as_deref())
            })
            .collect()
    }

    fn parse(data: &str) -> Result<Vec<Package>, Error> {
        DpkgCataloger.parse(STATUS_FILE, data.as_bytes())
    }

    #[test]
    fn wants_status_and_status_d_control_files() {
        let cataloger = DpkgCataloger;
        assert!(cataloger.wants("var/lib/dpkg/status", false));
        assert!(cataloger.wants("var/lib/dpkg/status.d/libc6", false));
        assert!(cataloger.wants("var/lib/dpkg/status.d/base-files", false));
        assert!(!cataloger.wants("var/lib/dpkg/status.d/libc6.md5sums", false));
        assert!(!cataloger.wants("var/lib/dpkg/status.d/", false));
        assert!(!cataloger.wants("var/lib/dpkg/status.d/sub/libc6", false));
        assert!(!cataloger.wants("var/lib/dpkg/status-old", false));
        assert!(!cataloger.wants("var/lib/dpkg/available", false));
        assert!(!cataloger.wants("foo/var/lib/dpkg/status", false));
    }

    // The stanzas in these unit tests are written for the tests; real status
    // files are covered by tests/catalogers_text.rs.
    #[test]
    fn status_states_decide_what_is_installed() {
        let data = "Package: kept\nStatus: install ok installed\nVersion: 1\n\n\
                    Package: held\nStatus: hold ok installed\nVersion: 2\n\n\
                    Package: removing\nStatus: deinstall ok installed\nVersion: 3\n\n\
                    Package: removed\nStatus: deinstall ok config-files\nVersion: 4\n\n\
                    Package: purged\nStatus: purge ok not-installed\n\n\
                    Package: broken\nStatus: install reinstreq half-installed\nVersion: 5\n\n\
                    Package: unpacked\nStatus: install ok unpacked\nVersion: 6\n\n\
                    Package: triggers\nStatus: install ok triggers-pending\nVersion: 7\n";
        let names: Vec<String> = parse(data).expect("parses").into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["kept", "held", "removing", "unpacked", "triggers"]);
    }

    #[test]
    fn source_with_and_without_version() {
        let data = "Package: libssl3\nStatus: install ok installed\nSource: openssl (3.0.11-1~deb12u2)\nVersion: 3.0.11-1~deb12u2+b1\n\n\
                    Package: fdisk\nStatus: install ok installed\nSource: util-linux\nVersion: 2.38.1-5\n\n\
                    Package: openssl\nStatus: install ok installed\nSource: openssl\nVersion: 3.0.11-1~deb12u2\n\n\
                    Package: libfoo\nStatus: install ok installed\nSource: foo (1:2.0-1)\nVersion: 1:2.0-1\n";
        assert_eq!(
            rows(&parse(data).expect("parses")),
            vec![
                ("libssl3", "3.0.11-1~deb12u2+b1", Some("openssl"), Some("3.0.11-1~deb12u2")),
                ("fdisk", "2.38.1-5", Some("util-linux"), None),
                ("openssl", "3.0.11-1~deb12u2", None, None),
                ("libfoo", "1:2.0-1", Some("foo"), None),
            ]
        );
    }

    #[test]
    fn epochs_kept_zero_epoch_dropped() {
        let data =
            "Package: a\nVersion: 1:2.4.47-2build1\n\nPackage: b\nVersion: 0:1.0-1\nSource: bsrc (0:1.0-1)\n";
        assert_eq!(
            rows(&parse(data).expect("parses")),
            vec![("a", "1:2.4.47-2build1", None, None), ("b", "1.0-1", Some("bsrc"), None)]
        );
    }

    #[test]
    fn continuations_of_other_fields_and_whitespace_only_separators() {
        let data = "Package: adduser\nStatus: install ok installed\nConffiles:\n /etc/adduser.conf cc34\nVersion: 3.131\nDescription: add users\n This package includes\n .\n more\n \t \nPackage: acl\nVersion: 2.3.1-3\n";
        assert_eq!(
            rows(&parse(data).expect("parses")),
            vec![("adduser", "3.131", None, None), ("acl", "2.3.1-3", None, None)]
        );
    }

    #[test]
    fn field_names_are_case_insensitive_and_kind_is_deb() {
        let packages = parse("package: x\nVERSION: 1\nsource: y\n").expect("parses");
        assert_eq!(rows(&packages), vec![("x", "1", Some("y"), None)]);
        assert_eq!((packages[0].kind, packages[0].path.as_str()), (PackageKind::Deb, STATUS_FILE));
        assert!(packages[0].ecosystem.is_empty() && packages[0].layer.is_none());
    }

    #[test]
    fn incomplete_stanzas_are_skipped_and_corrupt_structure_is_an_error() {
        // A stanza that lacks what we need is skipped; the others stay.
        let packages =
            parse("Package: a\nStatus: install ok installed\nVersion: 1\n\nPackage: b\nStatus: install ok installed\n")
                .expect("rest is read");
        assert_eq!(rows(&packages), vec![("a", "1", None, None)]);
        assert!(parse("Version: 1\nStatus: install ok installed\n").expect("skipped").is_empty());
        for (text, why) in [
            ("Package: a\nStatus: install ok\nVersion: 1\n", "<want> <flag> <state>"),
            ("Package: a\nStatus: install ok sideways\nVersion: 1\n", "sideways"),
            ("Package: a\nVersion: 1\nSource: b (2\n", "Source"),
        ] {
            assert!(parse(text).expect("skipped").is_empty(), "{why}");
        }
        // The reason a stanza is skipped names it and the line.
        let stanza = Stanza {
            first_line: 5,
            package: Some("b".into()),
            status: Some("install ok installed".into()),
            ..Stanza::default()
        };
        let err = finish(STATUS_FILE, stanza).expect_err("no version");
        assert_eq!((err.cataloger, err.path.as_str()), ("dpkg", STATUS_FILE));
        assert!(
            err.reason.contains("line 5") && err.reason.contains("`b`") && err.reason.contains("Version"),
            "{err}"
        );

        // Structure damage is still an error.

        let err =
            parse("Package: a\nVersion: 1\nConffiles:\n/etc/pam.conf 87fc\n").expect_err("missing indent");
        assert!(err.reason.contains("line 4"), "{err}");

        let err = parse("Package: a\nVersion: 1\nVersion: 2\n").expect_err("two versions");
        assert!(err.reason.contains("second `Version`"), "{err}");

        let err = parse(" leading continuation\n").expect_err("continuation first");
        assert!(err.reason.contains("line 1"), "{err}");

        let err = parse("Package: a\n b\nVersion: 1\n").expect_err("multi-line package");
        assert!(err.reason.contains("`Package` continues"), "{err}");
    }

    #[test]
    fn binary_and_non_utf8_are_errors() {
        let err = DpkgCataloger.parse(STATUS_FILE, b"\x1f\x8b\x08\0\0\0\0\0").expect_err("gzip");
        assert!(err.reason.contains("NUL"), "{err}");
        let err = DpkgCataloger.parse(STATUS_FILE, b"\xde\xad\xbe\xef\n").expect_err("garbage");
        assert!(err.reason.contains("line 1"), "{err}");
        let err =
            DpkgCataloger.parse(STATUS_FILE, b"Package: caf\xe9\nVersion: 1\n").expect_err("latin-1 name");
        assert_eq!(err.to_string(), "dpkg: var/lib/dpkg/status: line 1: `Package` is not UTF-8");
    }

    #[test]
    fn non_utf8_descriptions_are_tolerated() {
        let packages = DpkgCataloger
            .parse(STATUS_FILE, b"Package: a\nVersion: 1\nMaintainer: J\xf6rg\nDescription: x\n M\xfcller\n")
            .expect("parses");
        assert_eq!(rows(&packages), vec![("a", "1", None, None)]);
    }

    #[test]
    fn empty_file_has_no_packages() {
        assert!(parse("").expect("parses").is_empty());
        assert!(parse("\n\n\n").expect("parses").is_empty());
    }
}
