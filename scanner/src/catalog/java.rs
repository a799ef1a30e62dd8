//! Java libraries from jar, war and ear archives.
//!
//! Maven writes `META-INF/maven/<groupId>/<artifactId>/pom.properties` into
//! every archive it builds, with the artifact's `groupId`, `artifactId` and
//! `version`; PatchPilot names the package `groupId:artifactId`, the form
//! OSV's Maven ecosystem uses. An archive holds one `pom.properties` per
//! artifact it contains (shaded jars hold several), and each becomes a
//! package. The file is a `java.util.Properties` file, read as that class
//! reads one: ISO-8859-1, `#`/`!` comments, `=`, `:` or whitespace between
//! key and value, `\` line continuations and escapes.
//!
//! Archives built without Maven have no `pom.properties`; then the main
//! section of `META-INF/MANIFEST.MF` (the JAR File Specification: `Name:
//! value` lines, a leading space continuing the previous line, case-insensitive
//! names, the main section ending at the first blank line) gives
//! `Implementation-Title` and `Implementation-Version`, or else OSGi's
//! `Bundle-SymbolicName` and `Bundle-Version`. Those names are not Maven
//! coordinates (they have no `:`), so a matcher can only compare them
//! loosely. An archive with neither yields no package.
//!
//! Archives nested in the archive — Spring Boot's `BOOT-INF/lib/*.jar`, a
//! war's `WEB-INF/lib/*.jar`, an ear's modules and `lib/*.jar` — are read one
//! level deep, and their packages' path is `outer.jar!/BOOT-INF/lib/x.jar`.
//!
//! Archives are untrusted, and a small zip can claim or expand to gigabytes.
//! The limits, per top-level archive: at most [`MAX_ENTRIES`] entries in any
//! one archive and [`MAX_TOTAL_ENTRIES`] in the archive and its nested
//! archives together (the counts are checked in the end-of-central-directory
//! record before the directory is parsed); at most [`MAX_METADATA_BYTES`]
//! decompressed from one metadata file, [`MAX_NESTED_ARCHIVE_BYTES`] from one
//! compressed nested archive, and [`MAX_BYTES_READ`] decompressed in total.
//! Decompressed sizes are counted as bytes come out of the decompressor, never
//! taken from the archive's headers. Nested archives stored without
//! compression (Spring Boot requires it for `BOOT-INF/lib`) are read in place
//! from the outer archive's bytes, not copied, and entries pointing at the
//! same stored bytes are read once. Going past a limit is an error naming the
//! archive.

use std::io::{Cursor, Read};

use zip::{CompressionMethod, ZipArchive};

use super::{Cataloger, Error};
use crate::package::{Package, PackageKind};

const NAME: &str = "java-archive";

/// Most entries in one archive (outer or nested). Large Spring Boot
/// applications have a few tens of thousands.
pub const MAX_ENTRIES: u64 = 100_000;

/// Most entries in a top-level archive and all its nested archives together.
pub const MAX_TOTAL_ENTRIES: u64 = 1_000_000;

/// Most decompressed bytes read from one `pom.properties` or `MANIFEST.MF`;
/// real ones are a few hundred bytes.
pub const MAX_METADATA_BYTES: u64 = 1024 * 1024;

/// Most decompressed bytes read for one compressed nested archive, which is
/// held in memory while it is read.
pub const MAX_NESTED_ARCHIVE_BYTES: u64 = 256 * 1024 * 1024;

/// Most decompressed bytes read in total for one top-level archive, nested
/// archives and their metadata included.
pub const MAX_BYTES_READ: u64 = 512 * 1024 * 1024;

/// Reads Maven coordinates and manifests from Java archives.
#[derive(Debug, Clone, Copy, Default)]
pub struct JavaCataloger;

impl Cataloger for JavaCataloger {
    fn name(&self) -> &'static str {
        NAME
    }

    fn wants(&self, path: &str, _executable: bool) -> bool {
        let file = path.rsplit('/').next().unwrap_or(path);
        is_java_archive_name(file)
    }

    fn parse(&self, path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
        let mut budget = Budget { bytes: MAX_BYTES_READ, entries: MAX_TOTAL_ENTRIES };
        let mut packages = Vec::new();
        scan_archive(path, data, Depth::Outer, &mut budget, &mut packages)?;
        let mut seen = std::collections::HashSet::new();
        packages.retain(|package| {
            seen.insert((package.name.clone(), package.version.clone(), package.path.clone()))
        });
        Ok(packages)
    }
}

fn is_java_archive_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".jar", ".war", ".ear"].iter().any(|ext| lower.len() > ext.len() && lower.ends_with(ext))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Depth {
    Outer,
    Nested,
}

/// What is still allowed for the current top-level archive.
struct Budget {
    /// Decompressed bytes.
    bytes: u64,
    /// Central directory entries.
    entries: u64,
}

/// Where a nested archive's bytes are.
enum NestedBytes {
    /// Stored without compression at this range of the outer archive.
    InPlace(std::ops::Range<usize>),
    /// Compressed: must be inflated.
    Compressed,
}

/// What one archive holds that is worth reading.
#[derive(Default)]
struct Interesting {
    pom_properties: Vec<(usize, String)>,
    manifest: Option<usize>,
    nested: Vec<(usize, String, NestedBytes)>,
}

fn scan_archive(
    path: &str,
    data: &[u8],
    depth: Depth,
    budget: &mut Budget,
    packages: &mut Vec<Package>,
) -> Result<(), Error> {
    // The zip reader allocates for as many entries as the archive declares,
    // so the declared count is checked before it is opened.
    if let Some(declared) = declared_entry_count(data) {
        check_entry_count(path, declared, budget)?;
    }
    let mut archive = ZipArchive::new(Cursor::new(data))
        .map_err(|e| Error::new(NAME, path, format!("not a readable zip archive: {e}")))?;
    let entry_count = archive.len() as u64;
    check_entry_count(path, entry_count, budget)?;
    budget.entries -= entry_count;

    let mut interesting = Interesting::default();
    let mut stored_nested_seen = std::collections::HashSet::new();
    for index in 0..archive.len() {
        let entry = archive
            .by_index_raw(index)
            .map_err(|e| Error::new(NAME, path, format!("entry {index}: unreadable: {e}")))?;
        if entry.is_dir() {
            continue;
        }
        let name = entry
            .name()
            .map_err(|e| Error::new(NAME, path, format!("entry {index}: unreadable name: {e}")))?
            .into_owned();
        if name.starts_with("META-INF/maven/") && name.ends_with("/pom.properties") {
            interesting.pom_properties.push((index, name));
        } else if name.eq_ignore_ascii_case("META-INF/MANIFEST.MF") {
            interesting.manifest = Some(index);
        } else if depth == Depth::Outer && is_java_archive_name(&name) {
            let bytes = match (entry.compression(), entry.data_start()) {
                (CompressionMethod::Stored, Some(start)) => {
                    let range = usize::try_from(start)
                        .ok()
                        .zip(usize::try_from(entry.compressed_size()).ok())
                        .and_then(|(start, len)| Some(start..start.checked_add(len)?))
                        .filter(|range| range.end <= data.len())
                        .ok_or_else(|| {
                            Error::new(NAME, path, format!("{name}: stored data lies outside the archive"))
                        })?;
                    if !stored_nested_seen.insert(range.start) {
                        continue;
                    }
                    NestedBytes::InPlace(range)
                }
                _ => NestedBytes::Compressed,
            };
            interesting.nested.push((index, name, bytes));
        }
    }

    let found_before = packages.len();
    for (index, name) in &interesting.pom_properties {
        let bytes = read_entry(&mut archive, path, *index, name, MAX_METADATA_BYTES, budget)?;
        let properties = parse_properties(&bytes);
        let get = |key: &str| {
            properties.iter().find(|(k, _)| k == key).map(|(_, v)| v.trim()).filter(|v| !v.is_empty())
        };
        // A pom.properties missing a coordinate cannot name an artifact;
        // Maven always writes all three, so such a file is a hand-made one
        // and is passed over rather than failing the whole archive.
        if let (Some(group), Some(artifact), Some(version)) =
            (get("groupId"), get("artifactId"), get("version"))
        {
            packages.push(java_package(format!("{group}:{artifact}"), version.to_owned(), path));
        }
    }
    if packages.len() == found_before
        && let Some(index) = interesting.manifest
    {
        let bytes =
            read_entry(&mut archive, path, index, "META-INF/MANIFEST.MF", MAX_METADATA_BYTES, budget)?;
        if let Some((name, version)) = manifest_identity(&bytes) {
            packages.push(java_package(name, version, path));
        }
    }
    for (index, name, bytes) in &interesting.nested {
        let nested_path = format!("{path}!/{name}");
        match bytes {
            NestedBytes::InPlace(range) => {
                let nested = data.get(range.clone()).unwrap_or_default();
                scan_archive(&nested_path, nested, Depth::Nested, budget, packages)?;
            }
            NestedBytes::Compressed => {
                let nested = read_entry(&mut archive, path, *index, name, MAX_NESTED_ARCHIVE_BYTES, budget)?;
                scan_archive(&nested_path, &nested, Depth::Nested, budget, packages)?;
            }
        }
    }
    Ok(())
}

fn check_entry_count(path: &str, count: u64, budget: &Budget) -> Result<(), Error> {
    if count > MAX_ENTRIES {
        return Err(Error::new(
            NAME,
            path,
            format!("{count} entries, more than the {MAX_ENTRIES} read from one archive"),
        ));
    }
    if count > budget.entries {
        return Err(Error::new(
            NAME,
            path,
            format!("nested archives hold more than the {MAX_TOTAL_ENTRIES} entries read per archive"),
        ));
    }
    Ok(())
}

/// The entry count an archive's end-of-central-directory record declares
/// (APPNOTE.TXT 4.3.16, and 4.3.14 for ZIP64), or `None` when the record
/// cannot be found, which the zip reader then reports.
fn declared_entry_count(data: &[u8]) -> Option<u64> {
    const EOCD_SIGNATURE: [u8; 4] = [0x50, 0x4b, 0x05, 0x06];
    const ZIP64_LOCATOR_SIGNATURE: [u8; 4] = [0x50, 0x4b, 0x06, 0x07];
    const ZIP64_EOCD_SIGNATURE: [u8; 4] = [0x50, 0x4b, 0x06, 0x06];
    const EOCD_LEN: usize = 22;
    const MAX_COMMENT: usize = 0xFFFF;
    let bytes_at = |at: usize, len: usize| data.get(at..at.checked_add(len)?);
    let le_u16 = |at: usize| Some(u64::from(u16::from_le_bytes(bytes_at(at, 2)?.try_into().ok()?)));
    let le_u64 = |at: usize| Some(u64::from_le_bytes(bytes_at(at, 8)?.try_into().ok()?));

    let last_start = data.len().checked_sub(EOCD_LEN)?;
    let first_start = last_start.saturating_sub(MAX_COMMENT);
    let eocd = (first_start..=last_start).rev().find(|&at| bytes_at(at, 4) == Some(&EOCD_SIGNATURE[..]))?;
    let total = le_u16(eocd.checked_add(10)?)?;
    if total != 0xFFFF {
        return Some(total);
    }
    let locator = eocd.checked_sub(20)?;
    if bytes_at(locator, 4) != Some(&ZIP64_LOCATOR_SIGNATURE[..]) {
        return Some(total);
    }
    let zip64_eocd = usize::try_from(le_u64(locator.checked_add(8)?)?).ok()?;
    if bytes_at(zip64_eocd, 4) != Some(&ZIP64_EOCD_SIGNATURE[..]) {
        return None;
    }
    le_u64(zip64_eocd.checked_add(32)?)
}

/// Decompresses one entry, stopping at `limit` or at what is left of the
/// archive's budget, whichever is smaller.
fn read_entry(
    archive: &mut ZipArchive<Cursor<&[u8]>>,
    path: &str,
    index: usize,
    name: &str,
    limit: u64,
    budget: &mut Budget,
) -> Result<Vec<u8>, Error> {
    let allowed = limit.min(budget.bytes);
    let entry =
        archive.by_index(index).map_err(|e| Error::new(NAME, path, format!("{name}: unreadable: {e}")))?;
    let mut bytes = Vec::new();
    entry
        .take(allowed.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::new(NAME, path, format!("{name}: cannot decompress: {e}")))?;
    let read = bytes.len() as u64;
    if read > allowed {
        let reason = if allowed == limit {
            format!("{name}: expands past the {limit}-byte limit for one entry")
        } else {
            format!("{name}: the archive expands past the {MAX_BYTES_READ}-byte limit read per archive")
        };
        return Err(Error::new(NAME, path, reason));
    }
    budget.bytes -= read;
    Ok(bytes)
}

fn java_package(name: String, version: String, path: &str) -> Package {
    Package {
        name,
        version,
        kind: PackageKind::JavaArchive,
        source_name: None,
        source_version: None,
        arch: None,
        path: path.to_owned(),
        layer: None,
        ecosystem: "Maven".to_owned(),
    }
}

/// Parses a `java.util.Properties` file into `(key, value)` pairs in file
/// order.
fn parse_properties(bytes: &[u8]) -> Vec<(String, String)> {
    // ISO-8859-1 maps every byte to the code point of the same number.
    let text: String = bytes.iter().map(|&b| char::from(b)).collect();
    let mut pairs = Vec::new();
    let mut logical = String::new();
    let mut continuing = false;
    // `\r\n`, `\n` and `\r` all end a line.
    let text = text.replace("\r\n", "\n");
    for natural in text.split(['\n', '\r']) {
        let line = if continuing { natural.trim_start_matches([' ', '\t', '\x0c']) } else { natural };
        if !continuing {
            let trimmed = line.trim_start_matches([' ', '\t', '\x0c']);
            if trimmed.is_empty() || trimmed.starts_with(['#', '!']) {
                continue;
            }
        }
        let trailing_backslashes = line.chars().rev().take_while(|c| *c == '\\').count();
        if trailing_backslashes % 2 == 1 {
            logical.push_str(&line[..line.len() - 1]);
            continuing = true;
            continue;
        }
        logical.push_str(line);
        continuing = false;
        pairs.push(split_property(&std::mem::take(&mut logical)));
    }
    if !logical.is_empty() {
        pairs.push(split_property(&logical));
    }
    pairs
}

/// Splits one logical properties line into its unescaped key and value.
fn split_property(line: &str) -> (String, String) {
    let line = line.trim_start_matches([' ', '\t', '\x0c']);
    let mut key_end = line.len();
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if matches!(c, '=' | ':' | ' ' | '\t' | '\x0c') {
            key_end = at;
            break;
        }
    }
    let (key, rest) = line.split_at(key_end);
    let rest = rest.trim_start_matches([' ', '\t', '\x0c']);
    let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
    let value = rest.trim_start_matches([' ', '\t', '\x0c']);
    (unescape_properties(key), unescape_properties(value))
}

fn unescape_properties(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(decoded) if hex.len() == 4 => out.push(decoded),
                    _ => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// `(name, version)` from a manifest's main section.
fn manifest_identity(bytes: &[u8]) -> Option<(String, String)> {
    let text = String::from_utf8_lossy(bytes);
    let mut attributes: Vec<(String, String)> = Vec::new();
    for line in text.split('\n').map(|line| line.strip_suffix('\r').unwrap_or(line)) {
        if line.is_empty() {
            break;
        }
        if let Some(continuation) = line.strip_prefix(' ') {
            if let Some((_, value)) = attributes.last_mut() {
                value.push_str(continuation);
            }
            continue;
        }
        if let Some((name, value)) = line.split_once(':') {
            attributes.push((name.trim().to_owned(), value.trim_start().to_owned()));
        }
    }
    let get = |key: &str| {
        attributes
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    };
    if let (Some(title), Some(version)) = (get("Implementation-Title"), get("Implementation-Version")) {
        return Some((title.to_owned(), version.to_owned()));
    }
    if let (Some(symbolic_name), Some(version)) = (get("Bundle-SymbolicName"), get("Bundle-Version")) {
        // `com.example.bundle;singleton:=true`: directives follow the name.
        let name = symbolic_name.split(';').next().unwrap_or(symbolic_name).trim();
        if !name.is_empty() {
            return Some((name.to_owned(), version.to_owned()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use zip::write::SimpleFileOptions;
    use zip::{CompressionMethod, ZipWriter};

    use super::*;

    /// Builds a zip in memory; the test jars here are synthetic (a jar is
    /// binary and cannot be copied from a text source).
    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
        let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
        for (name, data) in entries {
            if name.ends_with('/') {
                writer.add_directory(*name, options).expect("directory");
            } else {
                writer.start_file(*name, options).expect("start entry");
                writer.write_all(data).expect("write entry");
            }
        }
        writer.finish().expect("finish zip").into_inner()
    }

    fn coordinates(packages: &[Package]) -> Vec<(&str, &str, &str)> {
        packages.iter().map(|p| (p.name.as_str(), p.version.as_str(), p.path.as_str())).collect()
    }

    #[test]
    fn wants_java_archives() {
        let cataloger = JavaCataloger;
        for path in ["app/app.jar", "opt/tomcat/webapps/ROOT.war", "srv/app.EAR", "x.Jar"] {
            assert!(cataloger.wants(path, false), "{path}");
        }
        for path in ["app/app.jar.sha1", "app/.jar", "app/jar", "app/classes/A.class", "app/app.zip"] {
            assert!(!cataloger.wants(path, false), "{path}");
        }
    }

    #[test]
    fn pom_properties_gives_maven_coordinates() {
        let jar = zip_of(&[
            ("META-INF/", b""),
            (
                "META-INF/MANIFEST.MF",
                b"Manifest-Version: 1.0\nImplementation-Title: ignored\nImplementation-Version: 0\n",
            ),
            (
                "META-INF/maven/org.example/demo/pom.properties",
                b"#comment\ngroupId=org.example\nartifactId=demo\nversion=1.2.3\n",
            ),
            ("org/example/Demo.class", b"\xca\xfe\xba\xbe"),
        ]);
        let packages = JavaCataloger.parse("app/demo.jar", &jar).expect("parses");
        assert_eq!(coordinates(&packages), vec![("org.example:demo", "1.2.3", "app/demo.jar")]);
        let package = &packages[0];
        assert_eq!((package.kind, package.ecosystem.as_str()), (PackageKind::JavaArchive, "Maven"));
        assert_eq!((package.source_name.as_deref(), package.source_version.as_deref()), (None, None));
    }

    #[test]
    fn shaded_jar_reports_every_embedded_artifact_once() {
        let jar = zip_of(&[
            ("META-INF/maven/g/a/pom.properties", b"groupId=g\nartifactId=a\nversion=1\n"),
            ("META-INF/maven/h/b/pom.properties", b"groupId=h\nartifactId=b\nversion=2\n"),
            ("META-INF/maven/h/b-copy/pom.properties", b"groupId=h\nartifactId=b\nversion=2\n"),
            ("META-INF/maven/x/incomplete/pom.properties", b"groupId=x\nversion=3\n"),
        ]);
        let packages = JavaCataloger.parse("shaded.jar", &jar).expect("parses");
        assert_eq!(coordinates(&packages), vec![("g:a", "1", "shaded.jar"), ("h:b", "2", "shaded.jar")]);
    }

    #[test]
    fn manifest_fallback_prefers_implementation_then_bundle() {
        let implementation = zip_of(&[(
            "META-INF/MANIFEST.MF",
            b"Manifest-Version: 1.0\r\nImplementation-Title: Demo\r\nImplementation-Version: 4.5\r\nBundle-SymbolicName: org.demo\r\nBundle-Version: 9\r\n",
        )]);
        let packages = JavaCataloger.parse("a.jar", &implementation).expect("parses");
        assert_eq!(coordinates(&packages), vec![("Demo", "4.5", "a.jar")]);

        let bundle = zip_of(&[(
            "META-INF/MANIFEST.MF",
            b"Manifest-Version: 1.0\nbundle-symbolicname: org.demo.very.long.bundle.name.that.wraps.at.seven\n ty.two;singleton:=true\nBundle-Version: 2.0.1\n\nName: org/demo/\nImplementation-Title: section, not main\nImplementation-Version: 7\n",
        )]);
        let packages = JavaCataloger.parse("b.jar", &bundle).expect("parses");
        assert_eq!(
            coordinates(&packages),
            vec![("org.demo.very.long.bundle.name.that.wraps.at.seventy.two", "2.0.1", "b.jar")]
        );

        let nothing = zip_of(&[
            ("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\nCreated-By: javac\n"),
            ("A.class", b"x"),
        ]);
        assert!(JavaCataloger.parse("c.jar", &nothing).expect("parses").is_empty());
    }

    #[test]
    fn nested_archives_one_level_deep() {
        let innermost = zip_of(&[(
            "META-INF/maven/deep/deep/pom.properties",
            b"groupId=deep\nartifactId=deep\nversion=0\n",
        )]);
        let library = zip_of(&[
            ("META-INF/maven/org.lib/lib/pom.properties", b"groupId=org.lib\nartifactId=lib\nversion=2.0\n"),
            ("lib/too-deep.jar", &innermost),
        ]);
        let manifest_only =
            zip_of(&[("META-INF/MANIFEST.MF", b"Implementation-Title: plain\nImplementation-Version: 3\n")]);
        let fat = zip_of(&[
            ("META-INF/maven/com.app/app/pom.properties", b"groupId=com.app\nartifactId=app\nversion=1.0\n"),
            ("BOOT-INF/lib/", b""),
            ("BOOT-INF/lib/lib-2.0.jar", &library),
            ("WEB-INF/lib/plain.JAR", &manifest_only),
        ]);
        let packages = JavaCataloger.parse("app/app.jar", &fat).expect("parses");
        assert_eq!(
            coordinates(&packages),
            vec![
                ("com.app:app", "1.0", "app/app.jar"),
                ("org.lib:lib", "2.0", "app/app.jar!/BOOT-INF/lib/lib-2.0.jar"),
                ("plain", "3", "app/app.jar!/WEB-INF/lib/plain.JAR"),
            ]
        );
    }

    #[test]
    fn properties_syntax() {
        let parsed = parse_properties(
            b"# c\n! c\n  key1 = a\\\n    b\nkey2:value2\nkey3 value3\nkey\\=4=v\\u00e9\\t\nempty\n\xe9t\xe9=latin1\r\nlast=\\",
        );
        let want = [
            ("key1", "ab"),
            ("key2", "value2"),
            ("key3", "value3"),
            ("key=4", "v\u{e9}\t"),
            ("empty", ""),
            ("\u{e9}t\u{e9}", "latin1"),
            ("last", ""),
        ];
        let got: Vec<(&str, &str)> = parsed.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn not_a_zip_is_an_error_naming_the_path() {
        let err =
            JavaCataloger.parse("app/broken.jar", b"this is not a zip file at all").expect_err("not zip");
        assert_eq!((err.cataloger, err.path.as_str()), ("java-archive", "app/broken.jar"));
        assert!(err.reason.contains("not a readable zip"), "{err}");
        let mut truncated =
            zip_of(&[("META-INF/maven/g/a/pom.properties", b"groupId=g\nartifactId=a\nversion=1\n")]);
        truncated.truncate(truncated.len() / 2);
        assert!(JavaCataloger.parse("app/truncated.jar", &truncated).is_err());
    }

    #[test]
    fn broken_nested_archive_error_names_the_nested_path() {
        let fat = zip_of(&[("BOOT-INF/lib/broken.jar", b"PK\x03\x04 but not really")]);
        let err = JavaCataloger.parse("app.jar", &fat).expect_err("broken nested");
        assert_eq!(err.path, "app.jar!/BOOT-INF/lib/broken.jar");
    }

    #[test]
    fn metadata_bomb_is_refused() {
        // Two mebibytes of one byte deflate to a few kilobytes.
        let bomb = vec![b'a'; 2 * 1024 * 1024];
        let jar = zip_of(&[("META-INF/maven/g/a/pom.properties", &bomb)]);
        assert!(jar.len() < 64 * 1024, "the test archive should be small: {}", jar.len());
        let err = JavaCataloger.parse("bomb.jar", &jar).expect_err("too large");
        assert!(err.reason.contains("limit"), "{err}");
    }

    #[test]
    fn total_budget_is_shared_by_nested_archives() {
        let mut budget = Budget { bytes: 10, entries: MAX_TOTAL_ENTRIES };
        let jar = zip_of(&[("META-INF/maven/g/a/pom.properties", b"groupId=g\nartifactId=a\nversion=1\n")]);
        let mut packages = Vec::new();
        let err = scan_archive("small-budget.jar", &jar, Depth::Outer, &mut budget, &mut packages)
            .expect_err("over budget");
        assert!(err.reason.contains("per archive"), "{err}");
    }

    #[test]
    fn stored_nested_archives_are_read_in_place_and_once() {
        let library = zip_of(&[(
            "META-INF/maven/org.lib/lib/pom.properties",
            b"groupId=org.lib\nartifactId=lib\nversion=2.0\n",
        )]);
        let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
        let stored = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
        writer.start_file("BOOT-INF/lib/lib-2.0.jar", stored).expect("start entry");
        writer.write_all(&library).expect("write entry");
        let fat = writer.finish().expect("finish").into_inner();
        let mut budget = Budget { bytes: 1024, entries: MAX_TOTAL_ENTRIES };
        let mut packages = Vec::new();
        scan_archive("app.jar", &fat, Depth::Outer, &mut budget, &mut packages).expect("parses");
        assert_eq!(coordinates(&packages), vec![("org.lib:lib", "2.0", "app.jar!/BOOT-INF/lib/lib-2.0.jar")]);
        // Only the nested pom.properties was decompressed, not the stored jar.
        let pom_len = "groupId=org.lib\nartifactId=lib\nversion=2.0\n".len() as u64;
        assert_eq!(budget.bytes, 1024 - pom_len);
        assert_eq!(budget.entries, MAX_TOTAL_ENTRIES - 2);
    }

    #[test]
    fn entry_counts_are_checked_before_the_directory_is_parsed() {
        let jar = zip_of(&[("a", b"1"), ("b", b"2"), ("c", b"3")]);
        assert_eq!(declared_entry_count(&jar), Some(3));
        assert_eq!(declared_entry_count(b"no end record here"), None);
        assert_eq!(declared_entry_count(b""), None);

        let mut budget = Budget { bytes: MAX_BYTES_READ, entries: 2 };
        let err =
            scan_archive("many.jar", &jar, Depth::Outer, &mut budget, &mut Vec::new()).expect_err("too many");
        assert!(err.reason.contains("entries"), "{err}");

        let budget = Budget { bytes: MAX_BYTES_READ, entries: MAX_TOTAL_ENTRIES };
        let err =
            check_entry_count("huge.jar", MAX_ENTRIES + 1, &budget).expect_err("over the per-archive cap");
        assert!(err.reason.contains("100000"), "{err}");
    }

    #[test]
    fn zip64_locator_pointing_outside_the_data_is_not_a_panic() {
        // An end record claiming 0xFFFF entries, preceded by a ZIP64 locator
        // whose offset points far past the end of the data.
        let mut data = vec![0x50, 0x4b, 0x06, 0x07, 0, 0, 0, 0];
        data.extend_from_slice(&u64::MAX.to_le_bytes());
        data.extend_from_slice(&[1, 0, 0, 0]);
        data.extend_from_slice(&[0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
        data.extend_from_slice(&[0; 10]);
        assert_eq!(declared_entry_count(&data), None);
        assert!(JavaCataloger.parse("odd.jar", &data).is_err());
    }
}
