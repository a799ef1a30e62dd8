//! Rust binaries built with `cargo auditable`: the crates compiled in, read
//! from the dependency list the tool embeds in the ELF section `.dep-v0`.
//!
//! The format is documented by the rust-secure-code/cargo-auditable
//! repository (`PARSING.md`, `cargo-auditable.schema.json` and the
//! `auditable-serde` crate): the section holds zlib-compressed UTF-8 JSON,
//! `{"packages": [{"name", "version", "source", "kind", "dependencies",
//! "root"}], "format": n}`, where `kind` is `"runtime"` (the default when
//! absent) or `"build"`, `root` marks the crate the binary was built from,
//! and `source` is `"crates.io"`, `"registry"` (another registry; early
//! versions wrote it for crates.io too, as the documentation example does),
//! `"git"`, `"local"` or anything else a later format adds. Unknown fields are ignored, as the
//! format promises backward compatibility.
//!
//! What is reported, one package per entry:
//! - runtime entries only: `"build"` entries (build scripts, proc-macros
//!   and their dependencies) run at build time and are not linked into the
//!   binary;
//! - of those, every entry not from `"local"` sources, plus the root even
//!   when local (it is the binary's own crate, often itself published):
//!   other local entries are workspace or path crates whose names mean
//!   nothing on crates.io and would only match unrelated advisories.
//!
//! The decompressed JSON is capped at [`MAX_DECOMPRESSED_BYTES`] (8 MiB, the
//! limit `PARSING.md` recommends against zip bombs). Files that are not ELF,
//! ELF files `object` cannot parse, and ELF files without the section yield
//! no packages; a section that does not decompress or parse is an error.

use std::io::Read;

use object::ReadRef;
use serde::Deserialize;

use super::{Cataloger, Error, FileReader, elf};
use crate::package::{Package, PackageKind};

/// Name of this cataloger in errors and logs.
const CATALOGER: &str = "cargo-auditable";

/// The section cargo-auditable writes on ELF targets.
const SECTION: &str = ".dep-v0";

/// Largest decompressed dependency list accepted (zip-bomb guard).
pub const MAX_DECOMPRESSED_BYTES: u64 = 8 << 20;

/// Most bytes of the section read. zlib's stored blocks add 5 bytes per
/// 64 KiB, so any stream that inflates to at most
/// [`MAX_DECOMPRESSED_BYTES`] ends well within twice that: a longer
/// section's tail is never needed, and a hostile one cannot make us hold it.
const MAX_SECTION_BYTES: u64 = 2 * MAX_DECOMPRESSED_BYTES;

/// Finds the crates recorded by `cargo auditable` in ELF executables.
#[derive(Debug, Clone, Copy, Default)]
pub struct CargoAuditableCataloger;

impl Cataloger for CargoAuditableCataloger {
    fn name(&self) -> &'static str {
        CATALOGER
    }

    fn wants(&self, _path: &str, executable: bool) -> bool {
        executable
    }

    fn parse(&self, path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
        catalog(path, data)
    }

    fn reads_ranges(&self) -> bool {
        true
    }

    fn parse_file(&self, path: &str, file: &FileReader<'_>) -> Result<Vec<Package>, Error> {
        catalog(path, file)
    }
}

/// The crates of the binary at `path`, whatever holds its bytes.
fn catalog<'data>(path: &str, data: impl ReadRef<'data>) -> Result<Vec<Package>, Error> {
    let Some(compressed) = dep_section(data) else {
        return Ok(Vec::new());
    };
    let list =
        parse_dependency_list(compressed).map_err(|err| Error::new(CATALOGER, path, err.to_string()))?;
    Ok(packages(&list, path))
}

/// A `.dep-v0` section that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditDataError {
    /// The zlib stream is corrupt or truncated.
    #[error("{SECTION}: zlib data does not decompress: {0}")]
    Decompress(String),
    /// The decompressed JSON is larger than [`MAX_DECOMPRESSED_BYTES`].
    #[error("{SECTION}: decompressed data exceeds {MAX_DECOMPRESSED_BYTES} bytes")]
    TooLarge,
    /// The JSON does not follow the cargo-auditable schema.
    #[error("{SECTION}: not a cargo-auditable dependency list: {0}")]
    Json(String),
}

/// The embedded dependency list (`auditable_serde::VersionInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DependencyList {
    /// Every crate in the build, dependencies referring to each other by
    /// index.
    pub packages: Vec<Crate>,
    /// Format revision (0 when absent): 0 from `cargo metadata`, 1 records
    /// proc-macros as build dependencies, 8 from Cargo's SBOM precursor.
    #[serde(default)]
    pub format: u32,
}

/// One crate of the list (`auditable_serde::Package`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Crate {
    /// Crate name from its `Cargo.toml`.
    pub name: String,
    /// Crate version (semver).
    pub version: String,
    /// `crates.io`, `registry`, `git`, `local` or another source kind.
    pub source: String,
    /// Whether the crate is linked in or only used at build time.
    #[serde(default)]
    pub kind: DependencyKind,
    /// Indexes into [`DependencyList::packages`] of this crate's
    /// dependencies.
    #[serde(default)]
    pub dependencies: Vec<usize>,
    /// Whether this is the crate the binary was built from.
    #[serde(default)]
    pub root: bool,
}

/// How a crate takes part in the build.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DependencyKind {
    /// Linked into the binary (recorded when a crate is both).
    #[default]
    Runtime,
    /// Used only by build scripts and proc-macros.
    Build,
}

/// The compressed bytes of the `.dep-v0` section (at most
/// [`MAX_SECTION_BYTES`] of them), when `data` is an ELF file that has one.
fn dep_section<'data>(data: impl ReadRef<'data>) -> Option<&'data [u8]> {
    let section = elf::read(data, SECTION.as_bytes())?.section?;
    if !elf::in_file(data, section.offset, section.file_size) {
        tracing::debug!("{SECTION} data is outside the file");
        return None;
    }
    data.read_bytes_at(section.offset, section.file_size.min(MAX_SECTION_BYTES)).ok()
}

/// Decompresses and parses a `.dep-v0` section's contents.
pub fn parse_dependency_list(compressed: &[u8]) -> Result<DependencyList, AuditDataError> {
    let mut json = Vec::new();
    flate2::read::ZlibDecoder::new(compressed)
        .take(MAX_DECOMPRESSED_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|err| AuditDataError::Decompress(err.to_string()))?;
    if json.len() as u64 > MAX_DECOMPRESSED_BYTES {
        return Err(AuditDataError::TooLarge);
    }
    serde_json::from_slice(&json).map_err(|err| AuditDataError::Json(err.to_string()))
}

/// The crates of `list` that are linked into the binary and identifiable on
/// crates.io, per the rules in the module documentation.
fn packages(list: &DependencyList, path: &str) -> Vec<Package> {
    list.packages
        .iter()
        .filter(|krate| krate.kind == DependencyKind::Runtime && (krate.root || krate.source != "local"))
        .map(|krate| Package {
            name: krate.name.clone(),
            version: krate.version.clone(),
            kind: PackageKind::RustCrate,
            source_name: None,
            source_version: None,
            arch: None,
            path: path.to_owned(),
            layer: None,
            ecosystem: "crates.io".to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).expect("in-memory write");
        encoder.finish().expect("in-memory write")
    }

    /// The example of `auditable_serde::VersionInfo`'s documentation
    /// (`auditable-serde/src/lib.rs`), verbatim.
    const DOC_EXAMPLE: &str = r#"{"packages":[{
    "name":"adler",
    "version":"0.2.3",
    "source":"registry"
}]}"#;

    #[test]
    fn documented_example_parses_with_defaults() {
        let list = parse_dependency_list(&zlib(DOC_EXAMPLE.as_bytes())).expect("valid");
        assert_eq!(list.format, 0);
        assert_eq!(
            list.packages,
            [Crate {
                name: "adler".into(),
                version: "0.2.3".into(),
                source: "registry".into(),
                kind: DependencyKind::Runtime,
                dependencies: Vec::new(),
                root: false,
            }]
        );
        let packages = packages(&list, "usr/bin/tool");
        assert_eq!(packages.len(), 1);
        assert_eq!(packages[0].name, "adler");
        assert_eq!(packages[0].version, "0.2.3");
        assert_eq!(packages[0].kind, PackageKind::RustCrate);
        assert_eq!(packages[0].ecosystem, "crates.io");
        assert_eq!(packages[0].path, "usr/bin/tool");
    }

    #[test]
    fn build_dependencies_and_non_root_local_crates_are_left_out() {
        let json = r#"{"packages":[
            {"name":"app","version":"0.1.0","source":"local","dependencies":[1,2,3],"root":true},
            {"name":"cc","version":"1.0.83","source":"crates.io","kind":"build"},
            {"name":"helper","version":"0.1.0","source":"local"},
            {"name":"hex","version":"0.4.3","source":"crates.io","kind":"runtime"},
            {"name":"forked","version":"2.0.0","source":"git"},
            {"name":"future","version":"1.0.0","source":"some-new-source","extra":{"ignored":true}}
        ],"format":1}"#;
        let list = parse_dependency_list(&zlib(json.as_bytes())).expect("valid");
        assert_eq!(list.format, 1);
        let names: Vec<String> = packages(&list, "app").into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["app", "hex", "forked", "future"]);
    }

    #[test]
    fn corrupt_or_oversized_sections_are_errors() {
        assert!(matches!(parse_dependency_list(b"not zlib at all"), Err(AuditDataError::Decompress(_))));
        let mut truncated = zlib(DOC_EXAMPLE.as_bytes());
        truncated.truncate(truncated.len() / 2);
        assert!(matches!(parse_dependency_list(&truncated), Err(AuditDataError::Decompress(_))));

        // Highly compressible: a few kilobytes that inflate past the cap.
        let bomb = zlib(&vec![b' '; (MAX_DECOMPRESSED_BYTES + 1) as usize]);
        assert!(bomb.len() < 64 * 1024);
        assert_eq!(parse_dependency_list(&bomb), Err(AuditDataError::TooLarge));
        // Exactly at the cap is still read (and then fails as JSON, being
        // only whitespace).
        let at_cap = zlib(&vec![b' '; MAX_DECOMPRESSED_BYTES as usize]);
        assert!(matches!(parse_dependency_list(&at_cap), Err(AuditDataError::Json(_))));

        for json in [
            &b"{}"[..],
            br#"{"packages":[{"name":"x","version":"1.0.0"}]}"#,
            br#"{"packages":[{"name":"x","version":"1.0.0","source":"crates.io","kind":"dev"}]}"#,
            b"\xff\xfe not utf-8",
        ] {
            assert!(matches!(parse_dependency_list(&zlib(json)), Err(AuditDataError::Json(_))), "{json:?}");
        }
    }

    #[test]
    fn files_without_the_section_yield_nothing() {
        let cataloger = CargoAuditableCataloger;
        assert!(cataloger.wants("usr/bin/x", true));
        assert!(!cataloger.wants("usr/bin/x", false));
        assert_eq!(cataloger.parse("usr/bin/x", b"#!/bin/sh\n"), Ok(Vec::new()));
        assert_eq!(cataloger.parse("usr/bin/x", b"\x7fELF\x02"), Ok(Vec::new()));
    }
}
