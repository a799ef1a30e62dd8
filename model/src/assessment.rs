//! Assessments and findings.
//!
//! The serde form of [`Assessment`] is also PatchPilot's native assessment
//! format (documented by `schemas/assessment.v1.schema.json`), so
//! `patchpilot submit --dry-run` prints exactly what a native file contains.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use patchpilot_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::ValidationError;
use crate::time::{from_timestamp, timestamp};

/// A content digest of an image manifest, `algorithm:hex`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ImageDigest(String);

impl ImageDigest {
    /// The digest as text, e.g. `sha256:4f2c…`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ImageDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for ImageDigest {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (algorithm, hex) = s.split_once(':').ok_or_else(|| format!("`{s}` is not `algorithm:hex`"))?;
        let expected = match algorithm {
            "sha256" => 64,
            "sha512" => 128,
            other => return Err(format!("unsupported digest algorithm `{other}`")),
        };
        if hex.len() != expected || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("`{s}` must be {algorithm}: followed by {expected} hex digits"));
        }
        Ok(ImageDigest(s.to_ascii_lowercase()))
    }
}

impl TryFrom<String> for ImageDigest {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ImageDigest> for String {
    fn from(d: ImageDigest) -> String {
        d.0
    }
}

/// Severity, ordered from least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Severity {
    /// Not given or unknown.
    #[default]
    Unknown,
    /// Below low (Grype's Negligible, Debian's unimportant).
    Negligible,
    /// Low.
    Low,
    /// Medium (also "moderate").
    Medium,
    /// High (also "important").
    High,
    /// Critical.
    Critical,
}

impl Severity {
    /// All severities, least severe first.
    pub const ALL: [Severity; 6] = [
        Severity::Unknown,
        Severity::Negligible,
        Severity::Low,
        Severity::Medium,
        Severity::High,
        Severity::Critical,
    ];

    /// Lowercase name, as in the native format.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Unknown => "unknown",
            Severity::Negligible => "negligible",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }

    /// Numeric rank used in the database: 0 (unknown) to 5 (critical).
    pub fn rank(self) -> i16 {
        self as i16
    }

    /// Inverse of [`Severity::rank`]; out-of-range ranks are unknown.
    pub fn from_rank(rank: i16) -> Severity {
        Severity::ALL.get(rank as usize).copied().unwrap_or_default()
    }

    /// Severity band of a CVSS base score.
    pub fn from_cvss_score(score: f64) -> Severity {
        match score {
            s if s >= 9.0 => Severity::Critical,
            s if s >= 7.0 => Severity::High,
            s if s >= 4.0 => Severity::Medium,
            s if s > 0.0 => Severity::Low,
            _ => Severity::Unknown,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Severity {
    type Err = String;

    /// Case-insensitive; accepts the vocabularies of Trivy, Grype, GHSA and
    /// the distributions.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "" | "unknown" | "unspecified" | "none" | "not yet assigned" => Severity::Unknown,
            "negligible" | "unimportant" => Severity::Negligible,
            "low" => Severity::Low,
            "medium" | "moderate" => Severity::Medium,
            "high" | "important" => Severity::High,
            "critical" => Severity::Critical,
            other => return Err(format!("unknown severity `{other}`")),
        })
    }
}

impl Serialize for Severity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Severity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl From<Severity> for pb::Severity {
    fn from(s: Severity) -> Self {
        match s {
            Severity::Unknown => pb::Severity::Unspecified,
            Severity::Negligible => pb::Severity::Negligible,
            Severity::Low => pb::Severity::Low,
            Severity::Medium => pb::Severity::Medium,
            Severity::High => pb::Severity::High,
            Severity::Critical => pb::Severity::Critical,
        }
    }
}

impl From<pb::Severity> for Severity {
    fn from(s: pb::Severity) -> Self {
        match s {
            pb::Severity::Unspecified => Severity::Unknown,
            pb::Severity::Negligible => Severity::Negligible,
            pb::Severity::Low => Severity::Low,
            pb::Severity::Medium => Severity::Medium,
            pb::Severity::High => Severity::High,
            pb::Severity::Critical => Severity::Critical,
        }
    }
}

/// One CVSS score of a vulnerability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cvss {
    /// Who scored it: `nvd`, `ghsa`, a distribution.
    #[serde(default)]
    pub source: String,
    /// CVSS version: `2.0`, `3.0`, `3.1`, `4.0`.
    #[serde(default)]
    pub version: String,
    /// The vector string.
    #[serde(default)]
    pub vector: String,
    /// Base score, 0–10.
    pub score: f64,
}

/// Platform of an image manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// e.g. `linux`.
    #[serde(default)]
    pub os: String,
    /// e.g. `amd64`.
    #[serde(default)]
    pub architecture: String,
    /// e.g. `v8`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub variant: String,
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if !self.variant.is_empty() {
            write!(f, "/{}", self.variant)?;
        }
        Ok(())
    }
}

/// The distribution found in an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OperatingSystem {
    /// os-release ID: `alpine`, `debian`…
    pub family: String,
    /// Version as found: `3.19.1`.
    #[serde(default)]
    pub version: String,
    /// OSV ecosystem: `Alpine:v3.19`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ecosystem: String,
}

/// Debian release numbers by code name, from Debian's distro-info-data
/// (`debian.csv`): for `debian_version` on testing (`bookworm/sid`) and for
/// package URLs whose `distro` is a code name (`distro=jessie`).
const DEBIAN_CODENAMES: &[(&str, &str)] = &[
    ("squeeze", "6"),
    ("wheezy", "7"),
    ("jessie", "8"),
    ("stretch", "9"),
    ("buster", "10"),
    ("bullseye", "11"),
    ("bookworm", "12"),
    ("trixie", "13"),
    ("forky", "14"),
];

impl OperatingSystem {
    /// The Debian release number of a code name (`bookworm` → `12`), or
    /// `None` for a name Debian's distro-info-data does not list here.
    pub fn debian_release(codename: &str) -> Option<&'static str> {
        DEBIAN_CODENAMES.iter().find(|(name, _)| *name == codename).map(|(_, release)| *release)
    }

    /// Builds the OSV ecosystem name of a distribution, e.g. `alpine`,
    /// `3.19.1` → `Alpine:v3.19`; `debian`, `12.5` → `Debian:12`.
    pub fn osv_ecosystem(family: &str, version: &str) -> String {
        let major_minor = || version.split('.').take(2).collect::<Vec<_>>().join(".");
        let major = || version.split('.').next().unwrap_or_default().to_owned();
        match family.to_ascii_lowercase().as_str() {
            "alpine" => format!("Alpine:v{}", major_minor()),
            "debian" => format!("Debian:{}", major()),
            "ubuntu" => format!("Ubuntu:{}", major_minor()),
            "redhat" | "rhel" => format!("Red Hat:{}", major()),
            "rocky" => format!("Rocky Linux:{}", major()),
            "alma" | "almalinux" => format!("AlmaLinux:{}", major()),
            "amazon" | "amzn" => format!("Amazon Linux:{}", major()),
            "wolfi" => "Wolfi".to_owned(),
            "chainguard" => "Chainguard".to_owned(),
            "opensuse-leap" | "opensuse.leap" => format!("openSUSE:Leap {}", major_minor()),
            "sles" | "suse linux enterprise server" => {
                format!("SUSE:Linux Enterprise Server {}", major())
            }
            "photon" => format!("Photon OS:{}", major_minor()),
            "mariner" | "cbl-mariner" => format!("Mariner:{}", major_minor()),
            "azurelinux" => format!("Azure Linux:{}", major_minor()),
            other if version.is_empty() => other.to_owned(),
            other => format!("{other}:{version}"),
        }
    }
}

/// The package a finding is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    /// Installed (binary) package name.
    pub name: String,
    /// Installed version.
    pub version: String,
    /// Packaging format: `apk`, `deb`, `rpm`, `go-module`, `npm`, `python`…
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// OSV ecosystem.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ecosystem: String,
    /// Source package name; empty means the same as `name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_name: String,
    /// Source package version; empty means the same as `version`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_version: String,
    /// Path inside the image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Digest of the layer that added it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub layer: String,
    /// Package URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub purl: String,
}

/// One vulnerability in one package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// Primary vulnerability id, e.g. `CVE-2024-2511`.
    pub id: String,
    /// Other ids of the same vulnerability.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// Where it was found.
    pub package: Package,
    /// Fixing versions as the scanner listed them (one per release line);
    /// empty when there is no fix.
    #[serde(default)]
    pub fixed_versions: Vec<String>,
    /// Severity.
    #[serde(default)]
    pub severity: Severity,
    /// CVSS scores by source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cvss: Vec<Cvss>,
    /// One-line title.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
}

/// Identity of a finding inside one image: vulnerability and package (name
/// and path). Used for deduplication.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FindingKey {
    /// Vulnerability id.
    pub vulnerability_id: String,
    /// Package name.
    pub package_name: String,
    /// Installed version.
    pub installed_version: String,
}

impl Package {
    /// A package with its name, installed version and OSV ecosystem; the
    /// other fields empty.
    pub fn new(name: impl Into<String>, version: impl Into<String>, ecosystem: impl Into<String>) -> Package {
        Package {
            name: name.into(),
            version: version.into(),
            kind: String::new(),
            ecosystem: ecosystem.into(),
            source_name: String::new(),
            source_version: String::new(),
            path: String::new(),
            layer: String::new(),
            purl: String::new(),
        }
    }
}

impl Finding {
    /// A finding of `id` in `package` with `severity`; no aliases, no
    /// known fix, no scores, no title.
    pub fn new(id: impl Into<String>, package: Package, severity: Severity) -> Finding {
        Finding {
            id: id.into(),
            aliases: Vec::new(),
            package,
            fixed_versions: Vec::new(),
            severity,
            cvss: Vec::new(),
            title: String::new(),
        }
    }

    /// The same finding, fixed in `versions`.
    pub fn fixed_in<I, V>(mut self, versions: I) -> Finding
    where
        I: IntoIterator<Item = V>,
        V: Into<String>,
    {
        self.fixed_versions = versions.into_iter().map(Into::into).collect();
        self
    }

    /// Key of this finding within a remediation's finding set: the same
    /// vulnerability in the same package version counts once, whichever
    /// images and paths it was found at.
    pub fn set_key(&self) -> FindingKey {
        FindingKey {
            vulnerability_id: self.id.clone(),
            package_name: self.package.name.clone(),
            installed_version: self.package.version.clone(),
        }
    }

    /// Whether any fixing version is known.
    pub fn is_fixable(&self) -> bool {
        !self.fixed_versions.is_empty()
    }

    /// Whether `id` names this vulnerability, by primary id or alias
    /// (case-insensitive).
    pub fn is_known_as(&self, id: &str) -> bool {
        self.id.eq_ignore_ascii_case(id) || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(id))
    }

    /// Checks the fields every finding needs, naming the first bad one by
    /// its path within the finding (`package.version`).
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.id.trim().is_empty() {
            return Err(ValidationError::new("id", "must not be empty"));
        }
        if self.package.name.trim().is_empty() {
            return Err(ValidationError::new("package.name", "must not be empty"));
        }
        if self.package.version.trim().is_empty() {
            return Err(ValidationError::new("package.version", "must not be empty"));
        }
        for (i, c) in self.cvss.iter().enumerate() {
            if !(0.0..=10.0).contains(&c.score) {
                return Err(ValidationError::new(
                    format!("cvss[{i}].score"),
                    format!("{} is outside 0–10", c.score),
                ));
            }
        }
        Ok(())
    }
}

fn default_source_format() -> String {
    "patchpilot".to_owned()
}

/// The scan result of one image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assessment {
    /// Image reference as scanned, e.g. `ghcr.io/acme/api:1.4.2`.
    pub image: String,
    /// Manifest digest (or config digest when the report has no repository
    /// digest).
    pub digest: ImageDigest,
    /// Platform of the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// Distribution, when the image has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<OperatingSystem>,
    /// OCI config labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Scanner name and version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scanner: String,
    /// Report format it was read from.
    #[serde(default = "default_source_format")]
    pub source_format: String,
    /// When the scan ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scanned_at: Option<DateTime<Utc>>,
    /// The findings.
    pub findings: Vec<Finding>,
}

impl Assessment {
    /// Checks every field, naming the first bad one by path.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.image.trim().is_empty() {
            return Err(ValidationError::new("image", "must not be empty"));
        }
        for (i, finding) in self.findings.iter().enumerate() {
            finding.validate().map_err(|e| e.within(&format!("findings[{i}]")))?;
        }
        Ok(())
    }

    /// Content-derived id: the same report always yields the same id, so a
    /// resubmission is recognised on the bus and in the database.
    pub fn content_id(&self) -> String {
        let mut hasher = Sha256::new();
        // serde_json writes struct fields in declaration order and BTreeMaps
        // sorted, so the encoding is stable for equal values.
        let encoded = serde_json::to_vec(self).unwrap_or_default();
        hasher.update(&encoded);
        format!("asmt-{}", &hex::encode(hasher.finalize())[..32])
    }

    /// Encodes for the bus. `submitted_at` is the publish time.
    pub fn to_proto(&self, submitted_at: DateTime<Utc>) -> pb::Assessment {
        pb::Assessment {
            assessment_id: self.content_id(),
            image_ref: self.image.clone(),
            image_digest: self.digest.to_string(),
            platform: self.platform.as_ref().map(|p| pb::Platform {
                os: p.os.clone(),
                architecture: p.architecture.clone(),
                variant: p.variant.clone(),
            }),
            os: self.os.as_ref().map(|o| pb::OperatingSystem {
                family: o.family.clone(),
                version: o.version.clone(),
                ecosystem: o.ecosystem.clone(),
            }),
            findings: self.findings.iter().map(finding_to_proto).collect(),
            labels: self.labels.clone().into_iter().collect(),
            scanner: self.scanner.clone(),
            source_format: self.source_format.clone(),
            scanned_at: self.scanned_at.map(timestamp),
            submitted_at: Some(timestamp(submitted_at)),
        }
    }

    /// Decodes and validates a bus message. Returns the assessment and the
    /// id and submission time the sender put on it.
    pub fn from_proto(
        m: pb::Assessment,
    ) -> Result<(Assessment, String, Option<DateTime<Utc>>), ValidationError> {
        let digest = m
            .image_digest
            .parse::<ImageDigest>()
            .map_err(|reason| ValidationError::new("image_digest", reason))?;
        let findings = m.findings.into_iter().map(finding_from_proto).collect::<Vec<_>>();
        let assessment = Assessment {
            image: m.image_ref,
            digest,
            platform: m.platform.map(|p| Platform {
                os: p.os,
                architecture: p.architecture,
                variant: p.variant,
            }),
            os: m.os.map(|o| OperatingSystem {
                family: o.family,
                version: o.version,
                ecosystem: o.ecosystem,
            }),
            labels: m.labels.into_iter().collect(),
            scanner: m.scanner,
            source_format: m.source_format,
            scanned_at: m.scanned_at.and_then(from_timestamp),
            findings,
        };
        assessment.validate().map_err(|e| {
            // Proto field names differ from the native format's.
            let path = e
                .path
                .replace(".id", ".vulnerability_id")
                .replace(".package.name", ".package_name")
                .replace(".package.version", ".installed_version")
                .replace("image", "image_ref");
            ValidationError::new(path, e.reason)
        })?;
        let id = if m.assessment_id.is_empty() { assessment.content_id() } else { m.assessment_id };
        Ok((assessment, id, m.submitted_at.and_then(from_timestamp)))
    }
}

/// The `schema` value of version 1 of PatchPilot's assessment document.
pub const ASSESSMENT_SCHEMA: &str = "patchpilot/assessment/v1";

/// PatchPilot's assessment document: a manifest of images and the findings
/// in each. `schemas/assessment.v1.schema.json` documents it; the planner
/// reads it and the scanner writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssessmentDocument {
    /// Always [`ASSESSMENT_SCHEMA`].
    pub schema: String,
    /// One entry per image.
    pub assessments: Vec<Assessment>,
}

impl AssessmentDocument {
    /// Wraps assessments in a document.
    pub fn new(assessments: Vec<Assessment>) -> AssessmentDocument {
        AssessmentDocument { schema: ASSESSMENT_SCHEMA.to_owned(), assessments }
    }
}

/// An assessment as it travels on `ASSESSMENTS`: with its id (the content
/// id unless the submitter set one) and when it was submitted.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmittedAssessment {
    /// The message id: the same report always yields the same id.
    pub id: String,
    /// The assessment.
    pub assessment: Assessment,
    /// When it was submitted.
    pub submitted_at: Option<DateTime<Utc>>,
}

impl SubmittedAssessment {
    /// `assessment`, submitted now under its content id.
    pub fn now(assessment: Assessment) -> SubmittedAssessment {
        SubmittedAssessment { id: assessment.content_id(), assessment, submitted_at: Some(Utc::now()) }
    }
}

impl crate::wire::Wire for SubmittedAssessment {
    type Proto = pb::Assessment;
    const PROTO_NAME: &'static str = "patchpilot.v1.Assessment";
    fn to_wire(&self) -> pb::Assessment {
        let mut m = self.assessment.to_proto(self.submitted_at.unwrap_or_else(Utc::now));
        m.assessment_id = self.id.clone();
        m.submitted_at = self.submitted_at.map(timestamp);
        m
    }
    fn from_wire(m: pb::Assessment) -> Result<SubmittedAssessment, ValidationError> {
        let (assessment, id, submitted_at) = Assessment::from_proto(m)?;
        Ok(SubmittedAssessment { id, assessment, submitted_at })
    }
}

impl From<&Finding> for pb::Finding {
    fn from(f: &Finding) -> pb::Finding {
        finding_to_proto(f)
    }
}

impl From<pb::Finding> for Finding {
    /// Decodes one finding; [`Finding::validate`] checks it.
    fn from(f: pb::Finding) -> Finding {
        finding_from_proto(f)
    }
}

fn finding_to_proto(f: &Finding) -> pb::Finding {
    pb::Finding {
        vulnerability_id: f.id.clone(),
        aliases: f.aliases.clone(),
        package_name: f.package.name.clone(),
        source_package: if f.package.source_name.is_empty() {
            f.package.name.clone()
        } else {
            f.package.source_name.clone()
        },
        package_type: f.package.kind.clone(),
        ecosystem: f.package.ecosystem.clone(),
        installed_version: f.package.version.clone(),
        fixed_versions: f.fixed_versions.clone(),
        severity: pb::Severity::from(f.severity) as i32,
        cvss: f
            .cvss
            .iter()
            .map(|c| pb::Cvss {
                source: c.source.clone(),
                version: c.version.clone(),
                vector: c.vector.clone(),
                base_score: c.score,
            })
            .collect(),
        layer_digest: f.package.layer.clone(),
        path: f.package.path.clone(),
        purl: f.package.purl.clone(),
        title: f.title.clone(),
        source_version: f.package.source_version.clone(),
    }
}

fn finding_from_proto(f: pb::Finding) -> Finding {
    let severity = pb::Severity::try_from(f.severity).unwrap_or(pb::Severity::Unspecified);
    let source_name = if f.source_package == f.package_name { String::new() } else { f.source_package };
    Finding {
        id: f.vulnerability_id,
        aliases: f.aliases,
        package: Package {
            name: f.package_name,
            version: f.installed_version,
            kind: f.package_type,
            ecosystem: f.ecosystem,
            source_name,
            source_version: f.source_version,
            path: f.path,
            layer: f.layer_digest,
            purl: f.purl,
        },
        fixed_versions: f.fixed_versions,
        severity: severity.into(),
        cvss: f
            .cvss
            .into_iter()
            .map(|c| Cvss { source: c.source, version: c.version, vector: c.vector, score: c.base_score })
            .collect(),
        title: f.title,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Assessment {
        Assessment {
            image: "registry.local/acme/api:1.0".into(),
            digest: format!("sha256:{}", "ab".repeat(32)).parse().expect("digest"),
            platform: Some(Platform {
                os: "linux".into(),
                architecture: "amd64".into(),
                variant: String::new(),
            }),
            os: Some(OperatingSystem {
                family: "alpine".into(),
                version: "3.19.1".into(),
                ecosystem: "Alpine:v3.19".into(),
            }),
            labels: BTreeMap::from([(
                "org.opencontainers.image.source".into(),
                "https://github.com/acme/api".into(),
            )]),
            scanner: "trivy 0.50.1".into(),
            source_format: "trivy".into(),
            scanned_at: None,
            findings: vec![Finding {
                id: "CVE-2024-2511".into(),
                aliases: vec!["ALPINE-1".into()],
                package: Package {
                    name: "libcrypto3".into(),
                    version: "3.1.4-r5".into(),
                    kind: "apk".into(),
                    ecosystem: "Alpine:v3.19".into(),
                    source_name: "openssl".into(),
                    source_version: String::new(),
                    path: String::new(),
                    layer: String::new(),
                    purl: "pkg:apk/alpine/libcrypto3@3.1.4-r5".into(),
                },
                fixed_versions: vec!["3.1.4-r6".into()],
                severity: Severity::High,
                cvss: vec![Cvss {
                    source: "nvd".into(),
                    version: "3.1".into(),
                    vector: "CVSS:3.1/AV:N".into(),
                    score: 7.5,
                }],
                title: "openssl: memory growth".into(),
            }],
        }
    }

    #[test]
    fn proto_round_trip_keeps_everything() {
        let a = sample();
        let now = Utc::now();
        let (back, id, submitted) = Assessment::from_proto(a.to_proto(now)).expect("decodes");
        assert_eq!(back, a);
        assert_eq!(id, a.content_id());
        assert_eq!(submitted.map(|t| t.timestamp_micros()), Some(now.timestamp_micros()));
    }

    #[test]
    fn content_id_is_stable_and_sensitive() {
        let a = sample();
        assert_eq!(a.content_id(), sample().content_id());
        let mut b = sample();
        b.findings[0].fixed_versions.push("3.2.0".into());
        assert_ne!(a.content_id(), b.content_id());
    }

    #[test]
    fn bad_digest_is_named() {
        let mut m = sample().to_proto(Utc::now());
        m.image_digest = "sha256:nothex".into();
        let err = Assessment::from_proto(m).expect_err("rejects");
        assert_eq!(err.path, "image_digest");
    }

    #[test]
    fn empty_version_is_named_with_index() {
        let mut m = sample().to_proto(Utc::now());
        m.findings[0].installed_version.clear();
        let err = Assessment::from_proto(m).expect_err("rejects");
        assert_eq!(err.path, "findings[0].installed_version");
    }

    #[test]
    fn severity_parses_vocabularies_and_orders() {
        assert_eq!("MODERATE".parse::<Severity>(), Ok(Severity::Medium));
        assert_eq!("Negligible".parse::<Severity>(), Ok(Severity::Negligible));
        assert_eq!("important".parse::<Severity>(), Ok(Severity::High));
        assert!("urgent".parse::<Severity>().is_err());
        assert!(Severity::Critical > Severity::High && Severity::Low > Severity::Unknown);
        for s in Severity::ALL {
            assert_eq!(Severity::from_rank(s.rank()), s);
        }
        assert_eq!(Severity::from_cvss_score(9.8), Severity::Critical);
        assert_eq!(Severity::from_cvss_score(4.0), Severity::Medium);
    }

    #[test]
    fn osv_ecosystem_names() {
        assert_eq!(OperatingSystem::osv_ecosystem("alpine", "3.19.1"), "Alpine:v3.19");
        assert_eq!(OperatingSystem::osv_ecosystem("debian", "12.5"), "Debian:12");
        assert_eq!(OperatingSystem::osv_ecosystem("ubuntu", "22.04"), "Ubuntu:22.04");
    }
}
