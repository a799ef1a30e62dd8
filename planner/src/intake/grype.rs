//! Grype JSON reports (`grype -o json`).
//!
//! One report is one image when `source.type` is `image`; directory and SBOM
//! scans are accepted only with `--image`. The image digest is the first
//! `repoDigests` entry (the digest users pull, as Trivy reports it), else
//! `manifestDigest`, else `imageID`. Related vulnerabilities (the CVE behind
//! a GHSA, say) become aliases, and lend their CVSS when the match has none.

use std::collections::BTreeMap;

use chrono::{DateTime, FixedOffset, Utc};
use patchpilot_model::{
    Assessment, Cvss, Finding, ImageDigest, OperatingSystem, Package, Platform, Severity,
};
use serde::Deserialize;

use super::{Error, ImageOverride, typed};

#[derive(Debug, Deserialize)]
struct Report {
    matches: Vec<Match>,
    #[serde(default)]
    source: Option<Source>,
    #[serde(default)]
    distro: Option<Distro>,
    #[serde(default)]
    descriptor: Option<Descriptor>,
}

#[derive(Debug, Deserialize)]
struct Source {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    target: serde_json::Value,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ImageTarget {
    user_input: String,
    #[serde(rename = "imageID", default)]
    image_id: Option<String>,
    #[serde(default)]
    manifest_digest: Option<String>,
    #[serde(default)]
    repo_digests: Option<Vec<String>>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    architecture: Option<String>,
    #[serde(default)]
    os: Option<String>,
    #[serde(default)]
    variant: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Distro {
    #[serde(default)]
    name: String,
    #[serde(default)]
    version: String,
}

#[derive(Debug, Deserialize)]
struct Descriptor {
    #[serde(default)]
    name: String,
    #[serde(default)]
    version: String,
    /// Kept as text: test goldens blank it, and a scan time is not worth
    /// refusing a report over.
    #[serde(default)]
    timestamp: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Match {
    vulnerability: Vulnerability,
    #[serde(default)]
    related_vulnerabilities: Option<Vec<Related>>,
    artifact: Artifact,
}

#[derive(Debug, Deserialize)]
struct Vulnerability {
    id: String,
    #[serde(default)]
    severity: Option<String>,
    #[serde(default)]
    fix: Option<Fix>,
    #[serde(default)]
    cvss: Option<Vec<GrypeCvss>>,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Related {
    id: String,
    #[serde(default)]
    cvss: Option<Vec<GrypeCvss>>,
}

#[derive(Debug, Deserialize)]
struct Fix {
    #[serde(default)]
    versions: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct GrypeCvss {
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    vector: Option<String>,
    metrics: Metrics,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metrics {
    base_score: f64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Artifact {
    name: String,
    version: String,
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    purl: Option<String>,
    #[serde(default)]
    locations: Option<Vec<Location>>,
    #[serde(default)]
    upstreams: Option<Vec<Upstream>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Location {
    #[serde(default)]
    path: String,
    #[serde(rename = "layerID", default)]
    layer_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Upstream {
    name: String,
    #[serde(default)]
    version: Option<String>,
}

/// OSV ecosystem of a Grype artifact type; OS types take the distro's.
fn ecosystem_of(kind: &str, distro: Option<&str>) -> String {
    match kind {
        "apk" | "deb" | "rpm" | "alpm" | "portage" => distro.unwrap_or_default().to_owned(),
        "go-module" => "Go".into(),
        "npm" => "npm".into(),
        "python" => "PyPI".into(),
        "rust-crate" => "crates.io".into(),
        "java-archive" | "jenkins-plugin" => "Maven".into(),
        "gem" => "RubyGems".into(),
        "php-composer" | "php-pecl-pkg" => "Packagist".into(),
        "dotnet" => "NuGet".into(),
        "hex" => "Hex".into(),
        "dart-pub" => "Pub".into(),
        _ => String::new(),
    }
}

fn convert_cvss(list: &[GrypeCvss]) -> Vec<Cvss> {
    list.iter()
        .map(|c| Cvss {
            source: c.source.clone().unwrap_or_default(),
            version: c.version.clone().unwrap_or_default(),
            vector: c.vector.clone().unwrap_or_default(),
            score: c.metrics.base_score,
        })
        .collect()
}

/// Converts a Grype report.
pub fn parse(doc: serde_json::Value, image: Option<&ImageOverride>) -> Result<Assessment, Error> {
    let report: Report = typed(doc)?;
    let (image_ref, digest, labels, platform) = match (image, &report.source) {
        (Some(o), _) => (o.image.clone(), o.digest.clone(), BTreeMap::new(), None),
        (None, Some(source)) if source.kind == "image" => {
            let target: ImageTarget =
                serde_path_to_error::deserialize(source.target.clone()).map_err(|e| {
                    let inner = Error::from_serde(e);
                    Error::new(
                        format!("source.target.{}", inner.path).trim_end_matches('.').to_owned(),
                        inner.reason,
                    )
                })?;
            let digest = image_digest(&target)?;
            let platform = target.architecture.as_ref().map(|arch| Platform {
                os: target.os.clone().unwrap_or_default(),
                architecture: arch.clone(),
                variant: target.variant.clone().unwrap_or_default(),
            });
            (target.user_input.clone(), digest, target.labels.clone().unwrap_or_default(), platform)
        }
        (None, Some(source)) => {
            return Err(Error::new(
                "source.type",
                format!(
                    "a `{}` report scans no image; pass --image IMAGE@DIGEST to attach it to one",
                    source.kind
                ),
            ));
        }
        (None, None) => {
            return Err(Error::new(
                "source",
                "missing; the report names no image (pass --image IMAGE@DIGEST)",
            ));
        }
    };
    let os = report.distro.as_ref().filter(|d| !d.name.is_empty()).map(|d| OperatingSystem {
        family: d.name.clone(),
        version: d.version.clone(),
        ecosystem: OperatingSystem::osv_ecosystem(&d.name, &d.version),
    });
    let distro_ecosystem = os.as_ref().map(|o| o.ecosystem.as_str());

    let mut findings = Vec::with_capacity(report.matches.len());
    for (i, m) in report.matches.iter().enumerate() {
        let path = format!("matches[{i}]");
        let severity = m
            .vulnerability
            .severity
            .as_deref()
            .unwrap_or("Unknown")
            .parse::<Severity>()
            .map_err(|e| Error::new(format!("{path}.vulnerability.severity"), e))?;
        let related = m.related_vulnerabilities.as_deref().unwrap_or_default();
        let mut aliases: Vec<String> =
            related.iter().map(|r| r.id.clone()).filter(|id| *id != m.vulnerability.id).collect();
        aliases.sort();
        aliases.dedup();
        let mut cvss = convert_cvss(m.vulnerability.cvss.as_deref().unwrap_or_default());
        if cvss.is_empty() {
            cvss = related.iter().flat_map(|r| convert_cvss(r.cvss.as_deref().unwrap_or_default())).collect();
        }
        let location = m.artifact.locations.as_deref().unwrap_or_default().first();
        let upstream = m.artifact.upstreams.as_deref().unwrap_or_default().first();
        let finding = Finding {
            id: m.vulnerability.id.clone(),
            aliases,
            package: Package {
                name: m.artifact.name.clone(),
                version: m.artifact.version.clone(),
                kind: m.artifact.kind.clone(),
                ecosystem: ecosystem_of(&m.artifact.kind, distro_ecosystem),
                source_name: upstream
                    .map(|u| u.name.clone())
                    .filter(|n| *n != m.artifact.name)
                    .unwrap_or_default(),
                source_version: upstream
                    .and_then(|u| u.version.clone())
                    .filter(|v| *v != m.artifact.version)
                    .unwrap_or_default(),
                path: location.map(|l| l.path.trim_start_matches('/').to_owned()).unwrap_or_default(),
                layer: location.and_then(|l| l.layer_id.clone()).unwrap_or_default(),
                purl: m.artifact.purl.clone().unwrap_or_default(),
            },
            fixed_versions: m.vulnerability.fix.as_ref().and_then(|f| f.versions.clone()).unwrap_or_default(),
            severity,
            cvss,
            title: m
                .vulnerability
                .description
                .as_deref()
                .and_then(|d| d.lines().next())
                .map(|l| l.chars().take(200).collect())
                .unwrap_or_default(),
        };
        finding.validate().map_err(|e| {
            let field = match e.path.as_str() {
                "id" => "vulnerability.id",
                "package.name" => "artifact.name",
                "package.version" => "artifact.version",
                _ => "vulnerability.cvss",
            };
            Error::new(format!("{path}.{field}"), e.reason)
        })?;
        findings.push(finding);
    }
    let scanner = match &report.descriptor {
        Some(d) if !d.version.is_empty() => format!("{} {}", d.name, d.version),
        _ => "grype".into(),
    };
    let assessment = Assessment {
        image: image_ref,
        digest,
        platform,
        os,
        labels,
        scanner,
        source_format: "grype".into(),
        scanned_at: report
            .descriptor
            .as_ref()
            .and_then(|d| d.timestamp.as_deref())
            .and_then(|t| DateTime::<FixedOffset>::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc)),
        findings,
    };
    assessment.validate().map_err(|e| Error::new("source.target.userInput", e.reason))?;
    Ok(assessment)
}

fn image_digest(target: &ImageTarget) -> Result<ImageDigest, Error> {
    if let Some(first) = target.repo_digests.iter().flatten().next() {
        let digest = first.rsplit_once('@').map(|(_, d)| d).unwrap_or(first);
        return digest.parse().map_err(|e| Error::new("source.target.repoDigests[0]", e));
    }
    if let Some(d) = target.manifest_digest.as_ref().filter(|d| !d.is_empty()) {
        return d.parse().map_err(|e| Error::new("source.target.manifestDigest", e));
    }
    match &target.image_id {
        Some(id) => id.parse().map_err(|e| Error::new("source.target.imageID", e)),
        None => Err(Error::new("source.target", "no repoDigests, manifestDigest or imageID")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Format, parse as parse_any};
    use super::*;
    use crate::read_report_fixture as fixture;

    #[test]
    fn chainguard_image_report() {
        // Real `grype -o json` output (chainguard-sandbox/darkfiles2, see SOURCES.md).
        let (format, mut a) =
            parse_any(&fixture("grype-chainguard-rabbitmq-image.json"), None, None).expect("parses");
        assert_eq!(format, Format::Grype);
        let a = a.remove(0);
        assert_eq!(a.image, "cgr.dev/chainguard-private/rabbitmq:4.3.2");
        assert_eq!(
            a.digest.as_str(),
            "sha256:1be27c0f0afc5e33b9137b8fb1dbd332e59fe3c7584615add94fd4b49614ee89"
        );
        assert_eq!(a.findings.len(), 24);
        assert_eq!(a.scanner, "grype 0.117.0");
        assert_eq!(a.platform.as_ref().map(|p| p.architecture.as_str()), Some("arm64"));
        assert!(a.labels.contains_key("org.opencontainers.image.authors"));
        let crypto = a.findings.iter().find(|f| f.package.name == "libcrypto3").expect("libcrypto3");
        assert_eq!(crypto.package.source_name, "openssl");
        assert_eq!(crypto.package.kind, "apk");
        assert_eq!(crypto.package.path, "usr/lib/apk/db/installed");
        assert!(crypto.package.layer.starts_with("sha256:"));
        let severities = |s: Severity| a.findings.iter().filter(|f| f.severity == s).count();
        assert_eq!((severities(Severity::Critical), severities(Severity::High)), (2, 13));
        assert_eq!(a.findings.iter().filter(|f| f.is_fixable()).count(), 14);
    }

    #[test]
    fn directory_report_needs_an_image() {
        let err = parse_any(&fixture("grype-npm-directory.json"), None, None).expect_err("no image");
        assert_eq!(err.path, "source.type");
        let o: super::super::ImageOverride =
            format!("r.local/web:2@sha256:{}", "d".repeat(64)).parse().expect("override");
        let (_, a) = parse_any(&fixture("grype-npm-directory.json"), None, Some(&o)).expect("with --image");
        assert_eq!(a[0].findings.len(), 3);
        // GHSA matches with empty cvss borrow the related CVE's scores.
        assert!(a[0].findings.iter().all(|f| !f.cvss.is_empty()));
        assert!(a[0].findings.iter().all(|f| f.aliases.iter().any(|x| x.starts_with("CVE-"))));
    }

    #[test]
    fn presenter_golden_with_blank_fields_parses() {
        // Grype's own JSON presenter snapshot: synthetic data, blank
        // timestamp and fix state, rpm metadata.
        let (_, a) = parse_any(&fixture("grype-golden-imgs-presenter.json"), None, None).expect("parses");
        assert_eq!(a[0].findings.len(), 2);
        assert_eq!(a[0].scanned_at, None);
    }

    #[test]
    fn null_locations_are_accepted() {
        let o: super::super::ImageOverride =
            format!("r.local/py:1@sha256:{}", "e".repeat(64)).parse().expect("override");
        let (_, a) = parse_any(&fixture("grype-python-sbom-file.json"), None, Some(&o)).expect("parses");
        assert_eq!(a[0].findings.len(), 4);
        assert!(a[0].findings.iter().all(|f| f.package.path.is_empty()));
    }
}
