//! Scan results in the formats people and tools read: PatchPilot's native
//! assessment, SARIF 2.1.0 ([`sarif`]), CycloneDX 1.6 with dependencies,
//! hashes and vulnerability analysis ([`cyclonedx`]), SPDX 2.3 JSON
//! ([`spdx`]), and a table for terminals.
//!
//! The two SBOM formats describe the same things from one [`Sbom`]: the
//! image, the distribution, every cataloged package once per path (by purl
//! and path), and
//! what PatchPilot truly knows about them. What it does not know (licences,
//! per-package checksums, package-to-package dependencies) they leave out or
//! mark as not asserted rather than guess.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use chrono::Utc;
use patchpilot_model::{Assessment, OperatingSystem, Platform, Severity};

use crate::image::{DigestKind, Image};
use crate::matching::Matched;
use crate::package::Package;
use crate::scan::Catalog;

pub mod cyclonedx;
pub mod sarif;
pub mod spdx;

pub use cyclonedx::{Analysis, AnalysisState, Justification, Response, cyclonedx};
pub use sarif::sarif;
pub use spdx::spdx;

/// The scanner's name and version, as reports name the tool.
pub fn tool_version() -> String {
    format!("patchpilot-scanner {}", env!("CARGO_PKG_VERSION"))
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Human-readable table.
    Table,
    /// PatchPilot's assessment document.
    Json,
    /// SARIF 2.1.0.
    Sarif,
    /// CycloneDX 1.6 JSON with vulnerabilities.
    CycloneDx,
    /// SPDX 2.3 JSON (named `spdx-json`, as Trivy and Syft name it).
    SpdxJson,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "table" => Ok(Format::Table),
            "json" => Ok(Format::Json),
            "sarif" => Ok(Format::Sarif),
            "cyclonedx" => Ok(Format::CycloneDx),
            "spdx-json" => Ok(Format::SpdxJson),
            other => Err(format!("unknown format `{other}` (table, json, sarif, cyclonedx, spdx-json)")),
        }
    }
}

/// What an SBOM describes: the scan's assessment, the image it was made
/// of, and the cataloged packages.
#[derive(Debug, Clone, Copy)]
pub struct Sbom<'a> {
    /// The findings and the distribution.
    pub assessment: &'a Assessment,
    /// The scanned image: its digest and what that digest hashes, its layers.
    pub image: &'a Image,
    /// Every cataloged package (duplicates by purl are described once).
    pub packages: &'a [Package],
}

impl Sbom<'_> {
    /// The distribution purls of OS packages are namespaced and qualified
    /// by.
    fn distro(&self) -> Option<patchpilot_model::purl::Distro<'_>> {
        self.assessment.os.as_ref().map(patchpilot_model::purl::Distro::from)
    }

    /// Every package once per place it was found, with its purl, in
    /// catalog order: two catalog entries with one purl and one path (the
    /// same package found twice, in two layers) are one component, while
    /// one purl at two paths is two, each with its path: Go's `stdlib` is
    /// compiled into every Go binary and must be replaced in each, and syft
    /// reports one per binary too. Findings name their package's purl and
    /// path.
    fn distinct_packages(&self) -> Vec<(&Package, String)> {
        let mut seen = BTreeSet::new();
        self.packages
            .iter()
            .filter_map(|p| {
                let purl = p.purl(self.distro());
                seen.insert((purl.clone(), p.path.as_str())).then_some((p, purl))
            })
            .collect()
    }

    /// The image's digest as a hash of the image, when it is one: a manifest
    /// or config digest is the SHA-256 (or SHA-512) of bytes anyone can
    /// fetch and check; a root filesystem's digest is PatchPilot's own
    /// summary of the files it kept and hashes no artifact, so it is none.
    fn image_hash(&self) -> Option<Hash<'_>> {
        match self.image.digest_kind {
            DigestKind::Manifest | DigestKind::Config => Hash::parse(&self.image.digest),
            DigestKind::RootfsContent => None,
        }
    }
}

/// A digest split into algorithm and lowercase hex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hash<'a> {
    algorithm: HashAlgorithm,
    hex: &'a str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HashAlgorithm {
    Sha256,
    Sha512,
}

impl<'a> Hash<'a> {
    /// `sha256:<64 hex>` or `sha512:<128 hex>`; anything else is not a
    /// hash a report can state (digests come from image sources, which
    /// check them, but a wrong one must not become a claim).
    fn parse(digest: &'a str) -> Option<Hash<'a>> {
        let (algorithm, hex) = digest.split_once(':')?;
        let (algorithm, len) = match algorithm {
            "sha256" => (HashAlgorithm::Sha256, 64),
            "sha512" => (HashAlgorithm::Sha512, 128),
            _ => return None,
        };
        (hex.len() == len && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .then_some(Hash { algorithm, hex })
    }
}

/// Writes a path inside the image as an RFC 3986 relative reference: bytes
/// outside `pchar` and `/` (spaces, `%`, `#`, `?`, non-ASCII) are
/// percent-encoded, and so is `:`, which in a first segment
/// (`alpine:3.19`) would read as a URI scheme. SARIF's
/// `artifactLocation.uri` and SPDX's `documentNamespace` use it.
fn uri_reference(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=@".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Builds the native assessment of a scan. Fails only when the image's
/// digest is not a valid digest, which sources never produce.
pub fn assessment(image: &Image, catalog: &Catalog, matched: &Matched) -> Result<Assessment, String> {
    Ok(Assessment {
        image: image.reference.clone(),
        digest: image.digest.parse()?,
        platform: image.platform.as_ref().map(|p| Platform {
            os: p.os.clone(),
            architecture: p.architecture.clone(),
            variant: p.variant.clone().unwrap_or_default(),
        }),
        os: catalog.os.as_ref().map(|o| OperatingSystem {
            family: o.id.clone(),
            version: o.version_id.clone(),
            ecosystem: o.ecosystem().unwrap_or_default(),
        }),
        labels: image.labels.clone(),
        scanner: tool_version(),
        source_format: "patchpilot".into(),
        scanned_at: Some(Utc::now()),
        findings: matched.findings.clone(),
    })
}

/// A terminal table: one line per finding, worst first.
pub fn table(assessment: &Assessment, catalog: &Catalog) -> String {
    let mut out = String::new();
    let os = assessment
        .os
        .as_ref()
        .map(|o| format!("{} {}", o.family, o.version))
        .unwrap_or_else(|| "no distribution".into());
    let _ = writeln!(
        out,
        "{} ({})  {}  {} packages",
        assessment.image,
        assessment.digest,
        os,
        catalog.packages.len()
    );
    let mut findings: Vec<_> = assessment.findings.iter().collect();
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.id.cmp(&b.id)));
    let mut counts: BTreeMap<Severity, usize> = BTreeMap::new();
    for f in &findings {
        *counts.entry(f.severity).or_default() += 1;
    }
    let summary: Vec<String> = counts.iter().rev().map(|(s, n)| format!("{n} {s}")).collect();
    let _ = writeln!(
        out,
        "{} finding(s){}",
        findings.len(),
        if summary.is_empty() { String::new() } else { format!(": {}", summary.join(", ")) }
    );
    if findings.is_empty() {
        return out;
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<22} {:<10} {:<28} {:<24} {:<24}",
        "VULNERABILITY", "SEVERITY", "PACKAGE", "INSTALLED", "FIXED IN"
    );
    for f in findings {
        let _ = writeln!(
            out,
            "{:<22} {:<10} {:<28} {:<24} {:<24}",
            f.id,
            f.severity.as_str(),
            f.package.name,
            f.package.version,
            f.fixed_versions.first().map(String::as_str).unwrap_or("-")
        );
    }
    out
}
