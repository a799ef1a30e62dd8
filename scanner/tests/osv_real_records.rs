//! Real advisory records as the public databases store them, quirks and
//! all: golang/vulndb's zero `modified`, osv.dev's older `"versions": null`
//! and missing `modified`, pypa/advisory-database's YAML (one record still
//! in the layout before OSV 1.0), GitHub's and RustSec's exports, and
//! distribution records. `fixtures/osv/real/SOURCES.tsv` cites each file's
//! repository, path and commit; `BOUNDARIES.tsv` lists every boundary
//! version of their ECOSYSTEM and SEMVER ranges with the judgement the
//! record implies (`introduced`, `last_affected` and listed versions are
//! affected, `fixed` is clean).
//!
//! What must hold: the whole set imports with nothing refused, and every
//! boundary is judged right wherever PatchPilot has a version scheme for
//! the ecosystem. Every ecosystem of these records has one now (Maven,
//! RubyGems and NuGet came with issue 18 item 5), so all 449 boundaries are
//! judged; rows in an ecosystem without a scheme would be counted, and that
//! count is pinned (to none), so a record added in such an ecosystem, or a
//! scheme dropped, fails here until the pin says so.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use patchpilot_scanner::db::AdvisoryDb;
use patchpilot_scanner::osv::{self, Affected, Format, RangeType, WarningKind};
use patchpilot_scanner::version::Scheme;

fn real_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/osv/real")
}

/// The record files, by file name.
fn record_files() -> BTreeMap<String, PathBuf> {
    fs::read_dir(real_dir())
        .expect("fixtures/osv/real")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext != "tsv"))
        .map(|path| (path.file_name().expect("name").to_string_lossy().into_owned(), path))
        .collect()
}

/// The rows of a TSV file after its header, as columns.
fn tsv(name: &str) -> Vec<Vec<String>> {
    let text = fs::read_to_string(real_dir().join(name)).expect("tsv");
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// The id of a record file, as the importer reads it.
fn id_of(path: &Path) -> String {
    let name = path.file_name().expect("name").to_string_lossy();
    let format = Format::of_name(&name).expect("a record file");
    osv::read_record(&fs::read(path).expect("read"), format).expect("readable").record.id
}

#[test]
fn every_record_cites_its_source_and_commit() {
    let files: BTreeSet<String> = record_files().into_keys().collect();
    let sources = tsv("SOURCES.tsv");
    let cited: BTreeSet<String> = sources.iter().map(|row| row[0].clone()).collect();
    assert_eq!(files, cited, "one SOURCES.tsv row per record file");
    for row in &sources {
        assert_eq!(row.len(), 5, "{row:?}");
        assert!(row[1].contains('/'), "repository owner/name: {row:?}");
        assert!(row[3].len() == 40 && row[3].bytes().all(|b| b.is_ascii_hexdigit()), "commit: {row:?}");
    }
    assert!(files.len() >= 30, "{} records", files.len());
}

#[test]
fn the_real_records_import_with_nothing_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut db = AdvisoryDb::open(dir.path()).expect("open");
    let stats = db.import(&real_dir()).expect("import");
    let files = record_files();
    assert!(stats.refused.is_empty(), "{:#?}", stats.refused);
    assert_eq!((stats.read, stats.inserted), (files.len() as u64, files.len() as u64), "{stats:?}");

    let warned = |kind: WarningKind| -> BTreeSet<String> {
        stats.warnings.iter().filter(|w| w.warning.kind == kind).map(|w| w.id.clone()).collect()
    };
    // Every golang/vulndb record (its checkout's zero time) and the Debian
    // record without `modified` are undated; nothing else is.
    let undated: BTreeSet<String> = files
        .iter()
        .filter(|(name, _)| name.starts_with("golang-vulndb--") || name.contains("DSA-3029-1"))
        .map(|(_, path)| id_of(path))
        .collect();
    assert_eq!(undated.len(), 7);
    assert_eq!(warned(WarningKind::UndatedModified), undated);
    assert_eq!(warned(WarningKind::LegacyLayout), BTreeSet::from(["PYSEC-2021-76".to_owned()]));
    // Nothing was left out of any record.
    assert_eq!(warned(WarningKind::DroppedPart), BTreeSet::new(), "{:#?}", stats.warnings);

    let status = db.status().expect("status");
    assert_eq!(status.sources[0].refused, 0);
    assert_eq!(status.sources[0].warnings, stats.warnings.len() as u64);
    // The legacy record matches like any other.
    let aiohttp = db.query("PyPI", "aiohttp", "3.7.3").expect("query");
    assert!(aiohttp.iter().any(|m| m.record.id == "PYSEC-2021-76" && m.fixed == ["3.7.4"]), "{aiohttp:?}");
    assert!(
        db.query("PyPI", "aiohttp", "3.7.4").expect("query").iter().all(|m| m.record.id != "PYSEC-2021-76")
    );
}

#[test]
fn every_boundary_version_of_the_real_records_is_judged_right() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut db = AdvisoryDb::open(dir.path()).expect("open");
    db.import(&real_dir()).expect("import");
    let files = record_files();

    let mut judged = 0;
    let mut without_scheme: BTreeMap<String, usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    for row in tsv("BOUNDARIES.tsv") {
        let [file, ecosystem, package, version, expected] = &row[..] else { panic!("row {row:?}") };
        let expect_affected = match expected.as_str() {
            "affected" => true,
            "clean" => false,
            other => panic!("expected {other:?} in {row:?}"),
        };
        let id = id_of(files.get(file).unwrap_or_else(|| panic!("{file} is not a record file")));
        let record = db.advisory(&id).expect("lookup").unwrap_or_else(|| panic!("{id} stored"));
        // The entries of this package that name the version: the boundary is
        // that entry's.
        let entries: Vec<&Affected> = record
            .affected
            .iter()
            .filter(|a| a.package.as_ref().is_some_and(|p| p.ecosystem == *ecosystem && p.name == *package))
            .filter(|a| names_version(a, version))
            .collect();
        assert!(!entries.is_empty(), "{id}: no entry of {ecosystem}/{package} names {version}");
        let scheme = Scheme::for_ecosystem(ecosystem);
        for entry in &entries {
            let scheme = match scheme {
                Some(scheme) => scheme,
                // Only SEMVER ranges can be judged without the ecosystem's
                // own ordering.
                None if entry.versions.is_empty()
                    && entry.ranges.iter().all(|r| r.kind != RangeType::Ecosystem) =>
                {
                    Scheme::Semver
                }
                None => {
                    *without_scheme
                        .entry(ecosystem.split(':').next().unwrap_or(ecosystem).to_owned())
                        .or_default() += 1;
                    continue;
                }
            };
            let evaluation = osv::evaluate(entry, version, scheme)
                .unwrap_or_else(|e| panic!("{id}: {ecosystem}/{package} {version}: {e}"));
            judged += 1;
            if evaluation.affected != expect_affected {
                wrong.push(format!("{id}: {ecosystem}/{package} {version} should be {expected}"));
            }
        }
        // Through the DB as a scan asks, where the record has one entry for
        // the package: AlmaLinux lists a package once per module stream,
        // and a union of its streams' ranges is no single judgement.
        let package_entries = record
            .affected
            .iter()
            .filter(|a| a.package.as_ref().is_some_and(|p| p.ecosystem == *ecosystem && p.name == *package))
            .count();
        if scheme.is_some() && package_entries == 1 {
            let matched =
                db.query(ecosystem, package, version).expect("query").iter().any(|m| m.record.id == id);
            if matched != expect_affected {
                wrong.push(format!("db query: {id}: {ecosystem}/{package} {version} should be {expected}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{} misjudged:\n{}", wrong.len(), wrong.join("\n"));
    // Pinned: every boundary row is judged, 18 of them (16 Maven, 1 NuGet,
    // 1 RubyGems) by the schemes of issue 18 item 5.
    assert_eq!(judged, 449, "boundaries judged");
    assert_eq!(without_scheme, BTreeMap::new(), "boundaries not judged for want of a version scheme");
}

/// Whether an entry names `version` in a range event or its version list.
fn names_version(entry: &Affected, version: &str) -> bool {
    entry.versions.iter().any(|v| v == version)
        || entry.ranges.iter().filter(|r| r.kind != RangeType::Git).flat_map(|r| &r.events).any(|e| {
            [&e.introduced, &e.fixed, &e.last_affected].into_iter().any(|v| v.as_deref() == Some(version))
        })
}
