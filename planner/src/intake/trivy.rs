//! Trivy JSON reports (`trivy image -f json`, schema version 2).
//!
//! One report is one image. OS results (`Class: os-pkgs`) take their
//! ecosystem from `Metadata.OS`; language results (`lang-pkgs`) from their
//! `Type`. The image digest is the first `Metadata.RepoDigests` entry, else
//! `Metadata.ImageID` (the config digest, for images that were never
//! pushed). Reports of filesystems and repositories carry no image; they are
//! accepted only with `--image`.

use std::collections::BTreeMap;

use chrono::{DateTime, FixedOffset, Utc};
use patchpilot_model::{
    Assessment, Cvss, Finding, ImageDigest, OperatingSystem, Package, Platform, Severity,
};
use serde::Deserialize;

use super::{Error, ImageOverride, split_versions, typed};

#[derive(Debug, Deserialize)]
struct Report {
    #[serde(rename = "SchemaVersion", default)]
    schema_version: Option<u32>,
    #[serde(rename = "CreatedAt", default)]
    created_at: Option<String>,
    #[serde(rename = "ArtifactName")]
    artifact_name: String,
    #[serde(rename = "ArtifactType", default)]
    artifact_type: Option<String>,
    #[serde(rename = "Metadata", default)]
    metadata: Option<Metadata>,
    #[serde(rename = "Results", default)]
    results: Option<Vec<ResultEntry>>,
}

#[derive(Debug, Deserialize)]
struct Metadata {
    #[serde(rename = "OS", default)]
    os: Option<Os>,
    #[serde(rename = "ImageID", default)]
    image_id: Option<String>,
    #[serde(rename = "RepoDigests", default)]
    repo_digests: Option<Vec<String>>,
    #[serde(rename = "ImageConfig", default)]
    image_config: Option<ImageConfig>,
}

#[derive(Debug, Deserialize)]
struct Os {
    #[serde(rename = "Family")]
    family: String,
    #[serde(rename = "Name", default)]
    name: String,
}

#[derive(Debug, Deserialize)]
struct ImageConfig {
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    os: String,
    #[serde(default)]
    variant: String,
    #[serde(default)]
    config: Option<ContainerConfig>,
}

#[derive(Debug, Deserialize)]
struct ContainerConfig {
    #[serde(rename = "Labels", default)]
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
struct ResultEntry {
    #[serde(rename = "Target", default)]
    target: String,
    #[serde(rename = "Class", default)]
    class: String,
    #[serde(rename = "Type", default)]
    kind: String,
    #[serde(rename = "Vulnerabilities", default)]
    vulnerabilities: Option<Vec<Vulnerability>>,
}

#[derive(Debug, Deserialize)]
struct Vulnerability {
    #[serde(rename = "VulnerabilityID")]
    id: String,
    #[serde(rename = "VendorIDs", default)]
    vendor_ids: Option<Vec<String>>,
    #[serde(rename = "PkgName")]
    pkg_name: String,
    #[serde(rename = "PkgPath", default)]
    pkg_path: Option<String>,
    #[serde(rename = "PkgIdentifier", default)]
    pkg_identifier: Option<PkgIdentifier>,
    #[serde(rename = "SrcName", default)]
    src_name: Option<String>,
    #[serde(rename = "SrcVersion", default)]
    src_version: Option<String>,
    #[serde(rename = "InstalledVersion")]
    installed_version: String,
    #[serde(rename = "FixedVersion", default)]
    fixed_version: Option<String>,
    #[serde(rename = "Severity", default)]
    severity: Option<String>,
    #[serde(rename = "CVSS", default)]
    cvss: Option<BTreeMap<String, TrivyCvss>>,
    #[serde(rename = "Layer", default)]
    layer: Option<Layer>,
    #[serde(rename = "Title", default)]
    title: Option<String>,
}

#[derive(Debug, Deserialize)]
struct PkgIdentifier {
    #[serde(rename = "PURL", default)]
    purl: Option<String>,
}

#[derive(Debug, Deserialize)]
struct TrivyCvss {
    #[serde(rename = "V2Vector", default)]
    v2_vector: Option<String>,
    #[serde(rename = "V2Score", default)]
    v2_score: Option<f64>,
    #[serde(rename = "V3Vector", default)]
    v3_vector: Option<String>,
    #[serde(rename = "V3Score", default)]
    v3_score: Option<f64>,
    #[serde(rename = "V40Vector", default)]
    v40_vector: Option<String>,
    #[serde(rename = "V40Score", default)]
    v40_score: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct Layer {
    #[serde(rename = "Digest", default)]
    digest: Option<String>,
    #[serde(rename = "DiffID", default)]
    diff_id: Option<String>,
}

/// Package type and OSV ecosystem of a Trivy result type. OS types get their
/// ecosystem from the report's OS.
fn kind_and_ecosystem(trivy_type: &str) -> (&'static str, Option<&'static str>) {
    match trivy_type {
        "alpine" | "wolfi" | "chainguard" => ("apk", None),
        "debian" | "ubuntu" => ("deb", None),
        "redhat"
        | "centos"
        | "rocky"
        | "alma"
        | "amazon"
        | "oracle"
        | "fedora"
        | "photon"
        | "cbl-mariner"
        | "azurelinux"
        | "suse"
        | "opensuse"
        | "opensuse.leap"
        | "opensuse.tumbleweed"
        | "sles"
        | "slem" => ("rpm", None),
        "gomod" | "gobinary" => ("go-module", Some("Go")),
        "npm" | "node-pkg" | "yarn" | "pnpm" | "bun" => ("npm", Some("npm")),
        "pip" | "pipenv" | "poetry" | "python-pkg" | "uv" => ("python", Some("PyPI")),
        "cargo" | "rustbinary" | "rust-binary" => ("cargo", Some("crates.io")),
        "jar" | "pom" | "gradle" | "sbt" => ("java-archive", Some("Maven")),
        "gemspec" | "bundler" => ("gem", Some("RubyGems")),
        "composer" | "composer-vendor" => ("composer", Some("Packagist")),
        "nuget" | "dotnet-core" | "packages-props" => ("nuget", Some("NuGet")),
        "hex" => ("hex", Some("Hex")),
        "pub" => ("pub", Some("Pub")),
        "conan" => ("conan", Some("ConanCenter")),
        "swift" | "cocoapods" => ("swift", Some("SwiftURL")),
        _ => ("binary", None),
    }
}

/// Converts a Trivy report.
pub fn parse(doc: serde_json::Value, image: Option<&ImageOverride>) -> Result<Assessment, Error> {
    let report: Report = typed(doc)?;
    if let Some(v) = report.schema_version
        && v != 2
    {
        return Err(Error::new("SchemaVersion", format!("version {v} is not supported (expected 2)")));
    }
    let metadata = report.metadata.as_ref();
    let (image_ref, digest) = match image {
        Some(o) => (o.image.clone(), o.digest.clone()),
        None => {
            let artifact_type = report.artifact_type.as_deref().unwrap_or("container_image");
            if artifact_type != "container_image" {
                return Err(Error::new(
                    "ArtifactType",
                    format!(
                        "a `{artifact_type}` report scans no image; pass --image IMAGE@DIGEST to attach it to one"
                    ),
                ));
            }
            (report.artifact_name.clone(), image_digest(metadata)?)
        }
    };
    let os = metadata.and_then(|m| m.os.as_ref()).map(|o| OperatingSystem {
        family: o.family.clone(),
        version: o.name.clone(),
        ecosystem: OperatingSystem::osv_ecosystem(&o.family, &o.name),
    });
    let config = metadata.and_then(|m| m.image_config.as_ref());
    let platform = config.filter(|c| !c.os.is_empty() || !c.architecture.is_empty()).map(|c| Platform {
        os: c.os.clone(),
        architecture: c.architecture.clone(),
        variant: c.variant.clone(),
    });
    let labels = config.and_then(|c| c.config.as_ref()).and_then(|c| c.labels.clone()).unwrap_or_default();

    let mut findings = Vec::new();
    for (ri, result) in report.results.iter().flatten().enumerate() {
        let (kind, lang_ecosystem) = kind_and_ecosystem(&result.kind);
        let is_os = result.class == "os-pkgs";
        let ecosystem = if is_os {
            os.as_ref().map(|o| o.ecosystem.clone()).unwrap_or_default()
        } else {
            lang_ecosystem.unwrap_or_default().to_owned()
        };
        for (vi, v) in result.vulnerabilities.iter().flatten().enumerate() {
            let path = format!("Results[{ri}].Vulnerabilities[{vi}]");
            let severity = v
                .severity
                .as_deref()
                .unwrap_or("UNKNOWN")
                .parse::<Severity>()
                .map_err(|e| Error::new(format!("{path}.Severity"), e))?;
            let cvss = v
                .cvss
                .iter()
                .flatten()
                .flat_map(|(source, c)| {
                    [
                        (c.v40_vector.as_ref(), c.v40_score, "4.0"),
                        (c.v3_vector.as_ref(), c.v3_score, "3.x"),
                        (c.v2_vector.as_ref(), c.v2_score, "2.0"),
                    ]
                    .into_iter()
                    .filter_map(move |(vector, score, version)| {
                        let score = score?;
                        let vector = vector.cloned().unwrap_or_default();
                        let version = match version {
                            "3.x" if vector.starts_with("CVSS:3.0") => "3.0".to_owned(),
                            "3.x" => "3.1".to_owned(),
                            other => other.to_owned(),
                        };
                        Some(Cvss { source: source.clone(), version, vector, score })
                    })
                })
                .collect();
            let layer = v
                .layer
                .as_ref()
                .and_then(|l| l.digest.clone().filter(|d| !d.is_empty()).or_else(|| l.diff_id.clone()))
                .unwrap_or_default();
            let package_path = match (&v.pkg_path, is_os) {
                (Some(p), _) if !p.is_empty() => p.clone(),
                (_, false) => result.target.clone(),
                (_, true) => String::new(),
            };
            let src_name = v.src_name.clone().filter(|s| *s != v.pkg_name).unwrap_or_default();
            let src_version = v.src_version.clone().filter(|s| *s != v.installed_version).unwrap_or_default();
            let mut aliases: Vec<String> = v.vendor_ids.clone().unwrap_or_default();
            aliases.retain(|a| *a != v.id);
            let finding = Finding {
                id: v.id.clone(),
                aliases,
                package: Package {
                    name: v.pkg_name.clone(),
                    version: v.installed_version.clone(),
                    kind: kind.to_owned(),
                    ecosystem: ecosystem.clone(),
                    source_name: src_name,
                    source_version: src_version,
                    path: package_path,
                    layer,
                    purl: v.pkg_identifier.as_ref().and_then(|p| p.purl.clone()).unwrap_or_default(),
                },
                fixed_versions: split_versions(v.fixed_version.as_deref()),
                severity,
                cvss,
                title: v.title.clone().unwrap_or_default(),
            };
            finding.validate().map_err(|e| {
                let field = match e.path.as_str() {
                    "id" => "VulnerabilityID".to_owned(),
                    "package.name" => "PkgName".to_owned(),
                    "package.version" => "InstalledVersion".to_owned(),
                    _ => "CVSS".to_owned(),
                };
                Error::new(format!("{path}.{field}"), e.reason)
            })?;
            findings.push(finding);
        }
    }
    let assessment = Assessment {
        image: image_ref,
        digest,
        platform,
        os,
        labels,
        scanner: "trivy".into(),
        source_format: "trivy".into(),
        scanned_at: report
            .created_at
            .as_deref()
            .and_then(|t| DateTime::<FixedOffset>::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc)),
        findings,
    };
    assessment.validate().map_err(|e| Error::new("ArtifactName", e.reason))?;
    Ok(assessment)
}

fn image_digest(metadata: Option<&Metadata>) -> Result<ImageDigest, Error> {
    let Some(metadata) = metadata else {
        return Err(Error::new(
            "Metadata",
            "missing; the report names no image digest (pass --image IMAGE@DIGEST)",
        ));
    };
    if let Some(first) = metadata.repo_digests.iter().flatten().next() {
        let digest = first.rsplit_once('@').map(|(_, d)| d).unwrap_or(first);
        return digest.parse().map_err(|e| Error::new("Metadata.RepoDigests[0]", e));
    }
    match &metadata.image_id {
        Some(id) => id.parse().map_err(|e| Error::new("Metadata.ImageID", e)),
        None => Err(Error::new(
            "Metadata.RepoDigests",
            "no repository digest and no ImageID; pass --image IMAGE@DIGEST",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Format, ImageOverride, parse as parse_any};
    use super::*;
    use crate::read_report_fixture as fixture;

    #[test]
    fn alpine_image_report() {
        // aquasecurity/trivy integration golden, see SOURCES.md.
        let (format, mut a) =
            parse_any(&fixture("trivy-alpine-310-registry.json"), None, None).expect("parses");
        assert_eq!(format, Format::Trivy);
        let a = a.remove(0);
        assert_eq!(a.image, "localhost:53869/alpine:3.10");
        assert_eq!(
            a.digest.as_str(),
            "sha256:b1c5a500182b21d0bfa5a584a8526b56d8be316f89e87d951be04abed2446e60"
        );
        assert_eq!(a.os.as_ref().map(|o| o.ecosystem.as_str()), Some("Alpine:v3.10"));
        assert_eq!(a.findings.len(), 4);
        let f = &a.findings[0];
        assert_eq!(
            (f.id.as_str(), f.package.name.as_str(), f.package.version.as_str()),
            ("CVE-2019-1549", "libcrypto1.1", "1.1.1c-r0")
        );
        assert_eq!(f.fixed_versions, vec!["1.1.1d-r0".to_owned()]);
        assert_eq!(f.package.kind, "apk");
        assert_eq!(f.package.ecosystem, "Alpine:v3.10");
        assert!(f.package.purl.starts_with("pkg:apk/alpine/libcrypto1.1@"));
        assert_eq!(
            f.package.layer,
            "sha256:9d48c3bd43c520dc2784e868a780e976b207cbf493eaff8c6596eb871cbd9609"
        );
        assert!(f.cvss.iter().any(|c| c.source == "nvd" && c.version.starts_with('3')));
        assert!(a.findings.iter().all(|f| f.severity == Severity::Medium));
    }

    #[test]
    fn os_and_language_results() {
        let (_, a) = parse_any(&fixture("trivy-fluentd-debian-gemspec.json"), None, None).expect("parses");
        let a = &a[0];
        // No RepoDigests: the config digest stands in.
        assert_eq!(
            a.digest.as_str(),
            "sha256:5a992077baba51b97f27591a10d54d2f2723dc9c81a3fe419e261023f2554933"
        );
        assert_eq!(a.findings.len(), 2);
        let deb = a.findings.iter().find(|f| f.package.kind == "deb").expect("deb finding");
        assert_eq!(deb.package.ecosystem, "Debian:10");
        assert_eq!(deb.aliases, vec!["DSA-4613-1".to_owned()]);
        let gem = a.findings.iter().find(|f| f.package.kind == "gem").expect("gem finding");
        assert_eq!(gem.package.ecosystem, "RubyGems");
        assert_eq!(gem.package.path, "var/lib/gems/2.5.0/specifications/activesupport-6.0.2.1.gemspec");
        assert_eq!(gem.fixed_versions, vec!["6.0.3.1".to_owned(), "5.2.4.3".to_owned()]);
    }

    #[test]
    fn filesystem_report_needs_an_image() {
        let err = parse_any(&fixture("trivy-gomod-filesystem.json"), None, None).expect_err("no image");
        assert_eq!(err.path, "ArtifactType");
        let o: ImageOverride = format!("r.local/go:1@sha256:{}", "f".repeat(64)).parse().expect("override");
        let (_, a) =
            parse_any(&fixture("trivy-gomod-filesystem.json"), None, Some(&o)).expect("with --image");
        // The same advisory in three go.mod files is three findings (three paths).
        assert_eq!(a[0].findings.len(), 5);
        assert!(a[0].findings.iter().all(|f| f.package.ecosystem == "Go"));
        assert_eq!(a[0].findings.iter().filter(|f| f.severity == Severity::Unknown).count(), 4);
    }

    #[test]
    fn newest_schema_repository_report_with_an_image() {
        let err = parse_any(&fixture("trivy-pip-repository.json"), None, None).expect_err("no image");
        assert_eq!(err.path, "ArtifactType");
        let o: ImageOverride = format!("r.local/py:1@sha256:{}", "a".repeat(64)).parse().expect("override");
        let (_, a) = parse_any(&fixture("trivy-pip-repository.json"), None, Some(&o)).expect("parses");
        assert_eq!(a[0].findings.len(), 2);
        assert!(a[0].findings.iter().all(|f| f.package.ecosystem == "PyPI" && f.package.name == "Werkzeug"));
    }

    #[test]
    fn bad_severity_names_the_vulnerability() {
        let mut doc: serde_json::Value =
            serde_json::from_slice(&fixture("trivy-alpine-310-registry.json")).expect("json");
        doc["Results"][0]["Vulnerabilities"][2]["Severity"] = "SEVERE".into();
        let err = parse_any(doc.to_string().as_bytes(), None, None).expect_err("bad severity");
        assert_eq!(err.path, "Results[0].Vulnerabilities[2].Severity");
        doc["Results"][0]["Vulnerabilities"][1]["InstalledVersion"] = 7.into();
        let err = parse_any(doc.to_string().as_bytes(), None, None).expect_err("bad type");
        assert_eq!(err.path, "Results[0].Vulnerabilities[1].InstalledVersion");
    }
}
