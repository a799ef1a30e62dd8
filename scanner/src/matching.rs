//! Matching cataloged packages against the advisory DB.
//!
//! - OS packages are looked up by their *source* package and version (dpkg
//!   `Source:`, apk origin, rpm SRPM), as distribution advisories are filed;
//!   language packages by their own name.
//! - Advisories about the same vulnerability (a GHSA and the CVE it aliases,
//!   a distribution record and the CVE it names as `upstream`) are merged
//!   into one finding per
//!   package: the primary id is the CVE when there is one, the rest become
//!   aliases.
//! - Each finding carries the fixed versions above the installed one,
//!   smallest first, and a severity taken from the highest CVSS v3 (else v2)
//!   base score, else the advisory's own label (GHSA's severity, Debian's
//!   urgency, Ubuntu's priority).

use std::collections::{BTreeMap, BTreeSet};

use patchpilot_model::purl::Distro;
use patchpilot_model::{Cvss, Finding, Package as FindingPackage, Severity};

use crate::catalog::os_release::OsRelease;
use crate::cvss;
use crate::db::{AdvisoryDb, Match};
use crate::osv::Record;
use crate::package::Package;
use crate::scan::Catalog;
use crate::version::Scheme;

/// What matching produced.
#[derive(Debug, Clone, Default)]
pub struct Matched {
    /// One finding per (package, vulnerability).
    pub findings: Vec<Finding>,
    /// Packages that could not be matched, with the reason.
    pub warnings: Vec<String>,
    /// Packages looked up.
    pub packages_checked: usize,
}

/// Why matching failed as a whole (per-package problems are warnings).
#[derive(Debug, thiserror::Error)]
#[error("advisory lookup failed")]
pub struct Error(#[source] pub crate::db::Error);

/// Matches every package of `catalog` against `db`. Findings name their
/// package by its package URL, with the catalog's distribution release.
pub fn match_catalog(catalog: &Catalog, db: &AdvisoryDb) -> Result<Matched, Error> {
    let os = catalog.os.as_ref().map(OsRelease::distro);
    let mut out = Matched::default();
    let mut unsupported: BTreeMap<String, usize> = BTreeMap::new();
    // Binary packages of one source package share its advisories: look
    // each (ecosystem, source, version) up once.
    let mut looked_up: BTreeMap<(String, String, String), Vec<Match>> = BTreeMap::new();
    for package in &catalog.packages {
        if package.ecosystem.is_empty() {
            continue;
        }
        let Some(scheme) = Scheme::for_ecosystem(&package.ecosystem) else {
            *unsupported.entry(package.ecosystem.clone()).or_default() += 1;
            continue;
        };
        out.packages_checked += 1;
        let key = (
            package.ecosystem.clone(),
            package.advisory_name().to_owned(),
            package.advisory_version().to_owned(),
        );
        if let Some(matches) = looked_up.get(&key) {
            out.findings.extend(merge(package, matches.clone(), scheme, os));
            continue;
        }
        let matches = match db.query(&package.ecosystem, package.advisory_name(), package.advisory_version())
        {
            Ok(m) => m,
            Err(crate::db::Error::InstalledVersion { .. }) => {
                out.warnings.push(format!(
                    "{} {} ({}): the installed version cannot be compared; not matched",
                    package.name, package.version, package.path
                ));
                continue;
            }
            Err(e) => return Err(Error(e)),
        };
        out.findings.extend(merge(package, matches.clone(), scheme, os));
        looked_up.insert(key, matches);
    }
    for (ecosystem, n) in unsupported {
        out.warnings.push(format!(
            "{n} package(s) in ecosystem {ecosystem}: no version comparison for it yet; not matched"
        ));
    }
    out.findings.sort_by(|a, b| {
        (&a.id, &a.package.name, &a.package.version, &a.package.path).cmp(&(
            &b.id,
            &b.package.name,
            &b.package.version,
            &b.package.path,
        ))
    });
    Ok(out)
}

/// Groups `matches` by alias closure and builds one finding per group.
fn merge(package: &Package, matches: Vec<Match>, scheme: Scheme, os: Option<Distro<'_>>) -> Vec<Finding> {
    // Union-find over advisory indexes, joined when ids or aliases overlap.
    let n = matches.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut owner: BTreeMap<String, usize> = BTreeMap::new();
    for (i, m) in matches.iter().enumerate() {
        for id in std::iter::once(&m.record.id).chain(&m.record.aliases).chain(&m.record.upstream) {
            match owner.get(id) {
                Some(&j) => {
                    let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                    parent[a] = b;
                }
                None => {
                    owner.insert(id.clone(), i);
                }
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<&Match>> = BTreeMap::new();
    for (i, m) in matches.iter().enumerate() {
        let root = find(&mut parent, i);
        groups.entry(root).or_default().push(m);
    }
    groups.into_values().map(|group| finding(package, &group, scheme, os)).collect()
}

/// The preferred primary id: a CVE, then a GHSA, then the first record's id.
fn primary_id(ids: &BTreeSet<String>, first: &str) -> String {
    ids.iter()
        .find(|i| i.starts_with("CVE-"))
        .or_else(|| ids.iter().find(|i| i.starts_with("GHSA-")))
        .cloned()
        .unwrap_or_else(|| first.to_owned())
}

fn finding(package: &Package, group: &[&Match], scheme: Scheme, os: Option<Distro<'_>>) -> Finding {
    let mut ids = BTreeSet::new();
    for m in group {
        ids.insert(m.record.id.clone());
        ids.extend(m.record.aliases.iter().cloned());
        ids.extend(m.record.upstream.iter().cloned());
    }
    let id = primary_id(&ids, &group[0].record.id);
    ids.remove(&id);

    let mut fixed: Vec<String> = group.iter().flat_map(|m| m.fixed.iter().cloned()).collect();
    fixed.sort_by(|a, b| scheme.compare(a, b).unwrap_or(std::cmp::Ordering::Equal));
    fixed.dedup();

    let cvss = cvss_of(package, group);
    let severity = severity_of(&cvss, group);
    let title = group
        .iter()
        .find(|m| m.record.id == id)
        .or_else(|| group.first())
        .and_then(|m| m.record.summary.clone())
        .or_else(|| group.iter().find_map(|m| m.record.summary.clone()))
        .unwrap_or_default();
    Finding {
        id,
        aliases: ids.into_iter().collect(),
        package: FindingPackage {
            name: package.name.clone(),
            version: package.version.clone(),
            kind: package.kind.as_str().to_owned(),
            ecosystem: package.ecosystem.clone(),
            source_name: package.source_name.clone().unwrap_or_default(),
            source_version: package.source_version.clone().unwrap_or_default(),
            path: package.path.clone(),
            layer: package.layer.clone().unwrap_or_default(),
            purl: package.purl(os),
        },
        fixed_versions: fixed,
        severity,
        cvss,
        title,
    }
}

/// Who scored a record's vectors, by its id prefix.
fn score_source(record: &Record) -> String {
    match record.id.split('-').next().unwrap_or_default() {
        "CVE" => "nvd".into(),
        "GHSA" => "ghsa".into(),
        other => other.to_ascii_lowercase(),
    }
}

fn cvss_of(package: &Package, group: &[&Match]) -> Vec<Cvss> {
    let mut out = Vec::new();
    for m in group {
        // A per-package severity overrides the record's.
        let affected_severity = m
            .record
            .affected
            .iter()
            .filter(|a| a.package.as_ref().is_some_and(|p| p.name == package.advisory_name()))
            .flat_map(|a| a.severity.iter())
            .collect::<Vec<_>>();
        let severities =
            if affected_severity.is_empty() { m.record.severity.iter().collect() } else { affected_severity };
        for s in severities {
            if !s.kind.starts_with("CVSS") {
                continue;
            }
            if let Some(score) = cvss::base_score(&s.score) {
                out.push(Cvss {
                    source: score_source(&m.record),
                    version: score.version.into(),
                    vector: s.score.clone(),
                    score: score.base,
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.source, &a.vector).cmp(&(&b.source, &b.vector)));
    out.dedup_by(|a, b| a.source == b.source && a.vector == b.vector);
    out
}

fn severity_of(cvss: &[Cvss], group: &[&Match]) -> Severity {
    // The newest CVSS version decides: a v4 score where the advisory has
    // one, as the GitHub advisory database and NVD show it, then v3, then v2.
    let best = |major: char| {
        cvss.iter()
            .filter(|c| c.version.starts_with(major))
            .map(|c| {
                cvss::Score { version: if major == '2' { "2.0" } else { "3.1" }, base: c.score }.severity()
            })
            .max()
    };
    if let Some(s) = best('4').or_else(|| best('3')).or_else(|| best('2')) {
        return s;
    }
    // Labels: GHSA `database_specific.severity`, Debian `urgency`,
    // Ubuntu's `Ubuntu` severity type.
    let mut labels = Vec::new();
    for m in group {
        if let Some(label) =
            m.record.database_specific.as_ref().and_then(|d| d.get("severity")).and_then(|s| s.as_str())
        {
            labels.push(label.to_owned());
        }
        for a in &m.record.affected {
            for source in [&a.ecosystem_specific, &a.database_specific] {
                if let Some(v) = source
                    .as_ref()
                    .and_then(|d| d.get("urgency").or_else(|| d.get("severity")))
                    .and_then(|s| s.as_str())
                {
                    labels.push(v.to_owned());
                }
            }
        }
        for s in &m.record.severity {
            if s.kind == "Ubuntu" {
                labels.push(s.score.clone());
            }
        }
    }
    labels.iter().filter_map(|l| l.trim_end_matches('*').parse::<Severity>().ok()).max().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cve_is_preferred_as_primary_id() {
        let ids: BTreeSet<String> =
            ["GHSA-aaaa-bbbb-cccc", "CVE-2024-1", "PYSEC-2024-9"].iter().map(|s| s.to_string()).collect();
        assert_eq!(primary_id(&ids, "GHSA-aaaa-bbbb-cccc"), "CVE-2024-1");
        let ids: BTreeSet<String> = ["GO-2024-1", "GHSA-x"].iter().map(|s| s.to_string()).collect();
        assert_eq!(primary_id(&ids, "GO-2024-1"), "GHSA-x");
    }
}
