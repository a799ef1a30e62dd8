//! Installed Python distributions from their core metadata files.
//!
//! Every installed distribution carries a metadata file in the format of the
//! Python Packaging Authority's "Core metadata specifications": `METADATA` in
//! a `*.dist-info` directory (wheels, pip), `PKG-INFO` in a `*.egg-info`
//! directory or in an egg's `EGG-INFO` directory (setuptools), or a
//! `*.egg-info` file that is itself the metadata (distutils, as Debian's
//! `python3.11` ships `Python-3.11.egg-info`). The format is RFC 822 style
//! headers read the way the standard library's `email` parser, which
//! `importlib.metadata` uses, reads them: header names are case-insensitive,
//! a line starting with whitespace continues the previous header, the first
//! occurrence of a repeated header wins, and the headers end at the first
//! blank line or at the first line that is not a header (the rest is the
//! description). The file must be UTF-8, as the specification requires.
//!
//! `Name` is kept as written (`Pygments`, `zope.interface`). OSV's PyPI
//! records use the normalised name, so the advisory DB compares
//! [`patchpilot_model::package_names::pypi`] of both sides (`Pygments` and
//! `pygments`, `zope.interface` and `zope-interface` are the same project),
//! and the package URL carries the normalised name.

use super::{Cataloger, Error};
use crate::package::{Package, PackageKind};

const NAME: &str = "python";

/// Reads Python core metadata files.
#[derive(Debug, Clone, Copy, Default)]
pub struct PythonCataloger;

impl Cataloger for PythonCataloger {
    fn name(&self) -> &'static str {
        NAME
    }

    fn wants(&self, path: &str, _executable: bool) -> bool {
        let mut components = path.rsplit('/');
        let Some(file) = components.next() else { return false };
        let parent = components.next().unwrap_or("");
        match file {
            "METADATA" => parent.ends_with(".dist-info"),
            "PKG-INFO" => {
                parent.ends_with(".egg-info")
                    || (parent == "EGG-INFO" && components.next().is_some_and(|d| d.ends_with(".egg")))
            }
            _ => file.ends_with(".egg-info") && file.len() > ".egg-info".len(),
        }
    }

    fn parse(&self, path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
        parse_metadata(path, data).map(|package| vec![package])
    }
}

fn parse_metadata(path: &str, data: &[u8]) -> Result<Package, Error> {
    if data.contains(&0) {
        return Err(Error::new(NAME, path, "contains NUL bytes: not a core metadata file"));
    }
    let text = std::str::from_utf8(data).map_err(|e| {
        Error::new(NAME, path, format!("not UTF-8 (byte {}), as core metadata must be", e.valid_up_to()))
    })?;
    let mut name: Option<String> = None;
    let mut version: Option<String> = None;
    // The header the previous line started, so continuation lines can be
    // folded into it.
    let mut last = LastHeader::Nothing;
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            let slot = match last {
                // A continuation before any header: the headers are over.
                LastHeader::Nothing => break,
                LastHeader::Other => continue,
                LastHeader::Name => &mut name,
                LastHeader::Version => &mut version,
            };
            if let Some(value) = slot.as_mut() {
                value.push(' ');
                value.push_str(line.trim());
            }
            continue;
        }
        let Some((header, value)) = line.split_once(':').filter(|(header, _)| is_header_name(header)) else {
            break;
        };
        let (slot, which) = if header.eq_ignore_ascii_case("Name") {
            (&mut name, LastHeader::Name)
        } else if header.eq_ignore_ascii_case("Version") {
            (&mut version, LastHeader::Version)
        } else {
            last = LastHeader::Other;
            continue;
        };
        if slot.is_some() {
            last = LastHeader::Other;
            continue;
        }
        *slot = Some(value.trim().to_owned());
        last = which;
    }
    let name = name.filter(|n| !n.is_empty()).ok_or_else(|| Error::new(NAME, path, "no `Name` header"))?;
    let version =
        version.filter(|v| !v.is_empty()).ok_or_else(|| Error::new(NAME, path, "no `Version` header"))?;
    Ok(Package {
        name,
        version,
        kind: PackageKind::Python,
        source_name: None,
        source_version: None,
        arch: None,
        path: path.to_owned(),
        layer: None,
        ecosystem: "PyPI".to_owned(),
    })
}

/// The header a continuation line would extend.
#[derive(Clone, Copy)]
enum LastHeader {
    Nothing,
    Name,
    Version,
    Other,
}

/// RFC 5322 field names: printable US-ASCII except `:`.
fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str = "usr/lib/python3/dist-packages/demo-1.0.dist-info/METADATA";

    fn name_version(data: &str) -> Result<(String, String), Error> {
        PythonCataloger.parse(PATH, data.as_bytes()).map(|mut packages| {
            let package = packages.remove(0);
            (package.name, package.version)
        })
    }

    #[test]
    fn wants_metadata_files_anywhere() {
        let cataloger = PythonCataloger;
        for path in [
            "usr/lib/python3/dist-packages/requests-2.28.1.dist-info/METADATA",
            "opt/venv/lib/python3.12/site-packages/Pygments-2.6.1.dist-info/METADATA",
            "usr/lib/python3/dist-packages/setuptools.egg-info/PKG-INFO",
            "usr/lib/python2.7/site-packages/foo-1.0-py2.7.egg/EGG-INFO/PKG-INFO",
            "usr/lib/python3.11/lib-dynload/../Python-3.11.egg-info",
            "Python-2.7.egg-info",
        ] {
            assert!(cataloger.wants(path, false), "{path}");
        }
        for path in [
            "usr/lib/python3/dist-packages/requests-2.28.1.dist-info/RECORD",
            "usr/lib/python3/dist-packages/requests/METADATA",
            "usr/lib/python3/dist-packages/foo.egg-info/SOURCES.txt",
            "EGG-INFO/PKG-INFO",
            "src/PKG-INFO",
            ".egg-info",
            "METADATA",
        ] {
            assert!(!cataloger.wants(path, false), "{path}");
        }
    }

    // Header blocks in these unit tests are written for the tests; published
    // metadata files are covered by tests/catalogers_text.rs.
    #[test]
    fn headers_end_at_the_blank_line() {
        let got = name_version(
            "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\nName: not-a-header\nVersion: 9\n",
        );
        assert_eq!(got.expect("parses"), ("demo".to_owned(), "1.0".to_owned()));
    }

    #[test]
    fn case_insensitive_first_wins_crlf_and_continuations() {
        let got = name_version(
            "name: Demo_Pkg\r\nVERSION: 2.0\r\nVersion: 3.0\r\nSummary: a\r\n  longer summary\r\n",
        );
        assert_eq!(got.expect("parses"), ("Demo_Pkg".to_owned(), "2.0".to_owned()));
        let got = name_version("Name: folded\n  name\nVersion: 1\n");
        assert_eq!(got.expect("parses"), ("folded name".to_owned(), "1".to_owned()));
    }

    #[test]
    fn a_non_header_line_ends_the_headers() {
        let got = name_version("Name: demo\nKeywords: a b\nc d\nVersion: 1.0\n");
        let err = got.expect_err("version came after the headers ended");
        assert!(err.reason.contains("Version"), "{err}");
    }

    #[test]
    fn package_fields() {
        let packages = PythonCataloger.parse(PATH, b"Name: zope.interface\nVersion: 6.0\n").expect("parses");
        let package = &packages[0];
        assert_eq!(
            (package.kind, package.ecosystem.as_str(), package.path.as_str()),
            (PackageKind::Python, "PyPI", PATH)
        );
        assert_eq!(
            (package.source_name.as_deref(), package.source_version.as_deref(), package.layer.as_deref()),
            (None, None, None)
        );
    }

    #[test]
    fn missing_fields_garbage_and_non_utf8_are_errors_naming_the_path() {
        let err = name_version("Metadata-Version: 2.1\nVersion: 1.0\n").expect_err("no name");
        assert_eq!((err.cataloger, err.path.as_str()), ("python", PATH));
        assert!(err.reason.contains("Name"), "{err}");
        assert!(
            name_version("Name: demo\nVersion:\n").expect_err("empty version").reason.contains("Version")
        );
        assert!(name_version("").is_err());
        let err = PythonCataloger.parse(PATH, b"PK\x03\x04\x14\0\0\0").expect_err("zip bytes");
        assert!(err.reason.contains("NUL"), "{err}");
        let err = PythonCataloger.parse(PATH, b"Name: caf\xe9\nVersion: 1\n").expect_err("latin-1");
        assert!(err.reason.contains("UTF-8"), "{err}");
        let err = PythonCataloger.parse(PATH, b"\x01\x02garbage\n").expect_err("garbage");
        assert!(err.reason.contains("Name"), "{err}");
    }
}
