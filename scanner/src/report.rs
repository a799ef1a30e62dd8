//! Scan results in the formats people and tools read: PatchPilot's native
//! assessment, SARIF 2.1.0, CycloneDX 1.5 with vulnerabilities, and a
//! table for terminals.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::Utc;
use patchpilot_model::{Assessment, OperatingSystem, Platform, Severity};
use serde_json::{Value, json};

use crate::image::Image;
use crate::matching::Matched;
use crate::package::Package;
use crate::scan::Catalog;

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
    /// CycloneDX 1.5 JSON with vulnerabilities.
    CycloneDx,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "table" => Ok(Format::Table),
            "json" => Ok(Format::Json),
            "sarif" => Ok(Format::Sarif),
            "cyclonedx" => Ok(Format::CycloneDx),
            other => Err(format!("unknown format `{other}` (table, json, sarif, cyclonedx)")),
        }
    }
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

fn sarif_level(s: Severity) -> &'static str {
    match s {
        Severity::Critical | Severity::High => "error",
        Severity::Medium => "warning",
        _ => "note",
    }
}

/// SARIF 2.1.0: one rule per vulnerability, one result per finding,
/// located at the file the package was found in.
pub fn sarif(assessment: &Assessment) -> Value {
    let mut rules: BTreeMap<&str, Value> = BTreeMap::new();
    let mut results = Vec::new();
    for f in &assessment.findings {
        let best_score = f
            .cvss
            .iter()
            .map(|c| c.score)
            .fold(None, |acc: Option<f64>, s| Some(acc.map_or(s, |a| a.max(s))));
        rules.entry(&f.id).or_insert_with(|| {
            let mut properties = json!({ "tags": ["security", "vulnerability"] });
            if let Some(score) = best_score {
                // GitHub code scanning reads this to rank results.
                properties["security-severity"] = json!(format!("{score:.1}"));
            }
            json!({
                "id": f.id,
                "name": f.id.replace('-', ""),
                "shortDescription": { "text": if f.title.is_empty() { f.id.clone() } else { f.title.clone() } },
                "fullDescription": { "text": if f.aliases.is_empty() {
                    format!("{}: {}", f.id, if f.title.is_empty() { "see the advisory" } else { &f.title })
                } else {
                    format!("{} (also {}): {}", f.id, f.aliases.join(", "), if f.title.is_empty() { "see the advisory" } else { &f.title })
                } },
                "help": { "text": match f.fixed_versions.first() {
                    Some(fix) => format!("Upgrade {} to {fix} or later, or rebuild on a base image that ships it.", f.package.name),
                    None => format!("No fixed version of {} is published yet.", f.package.name),
                } },
                "helpUri": format!("https://osv.dev/vulnerability/{}", f.id),
                "properties": properties,
            })
        });
        let fix = if f.fixed_versions.is_empty() {
            "no fix is published".to_owned()
        } else {
            format!("fixed in {}", f.fixed_versions.join(", "))
        };
        let uri = uri_reference(if f.package.path.is_empty() { &assessment.image } else { &f.package.path });
        results.push(json!({
            "ruleId": f.id,
            "level": sarif_level(f.severity),
            "message": { "text": format!("{} {} in {} is affected by {} ({}); {}", f.package.name, f.package.version, assessment.image, f.id, f.severity, fix) },
            "locations": [{
                "physicalLocation": { "artifactLocation": { "uri": uri } },
                "logicalLocations": [{ "name": f.package.name, "fullyQualifiedName": f.package.purl, "kind": "package" }]
            }],
            "properties": { "severity": f.severity.as_str(), "fixedVersions": f.fixed_versions, "aliases": f.aliases }
        }));
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "patchpilot-scanner",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/patchpilot/patchpilot",
                "rules": rules.into_values().collect::<Vec<_>>(),
            }},
            "results": results,
        }]
    })
}

/// Writes a path inside the image as the RFC 3986 relative reference SARIF's
/// `artifactLocation.uri` must be: bytes outside `pchar` and `/` (spaces,
/// `%`, non-ASCII) are percent-encoded, and so is `:`, which in a first
/// segment (`alpine:3.19`) would read as a URI scheme.
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

/// CycloneDX 1.5: the image as the described component, every cataloged
/// package as a library (the OS as an operating-system component), and the
/// vulnerabilities with ratings and the components they affect.
pub fn cyclonedx(assessment: &Assessment, packages: &[Package], serial: &str) -> Value {
    let distro = assessment.os.as_ref().map(patchpilot_model::purl::Distro::from);
    let mut components = Vec::new();
    let mut refs: BTreeMap<String, String> = BTreeMap::new();
    if let Some(os) = &assessment.os {
        components.push(
            json!({ "type": "operating-system", "bom-ref": "os", "name": os.family, "version": os.version }),
        );
    }
    for p in packages {
        let purl = p.purl(distro);
        if refs.contains_key(&purl) {
            continue;
        }
        let bom_ref = format!("pkg-{}", refs.len());
        let mut component = json!({ "type": "library", "bom-ref": bom_ref, "name": p.name, "version": p.version, "purl": purl });
        let mut properties = vec![json!({ "name": "patchpilot:package:path", "value": p.path })];
        if let Some(layer) = &p.layer {
            properties.push(json!({ "name": "patchpilot:layer:digest", "value": layer }));
        }
        component["properties"] = Value::Array(properties);
        refs.insert(purl, bom_ref);
        components.push(component);
    }
    let vulnerabilities: Vec<Value> = assessment
        .findings
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let ratings: Vec<Value> = f
                .cvss
                .iter()
                .map(|c| {
                    let method = match c.version.as_str() {
                        "3.1" => "CVSSv31",
                        "3.0" => "CVSSv3",
                        "2.0" => "CVSSv2",
                        "4.0" => "CVSSv4",
                        _ => "other",
                    };
                    // CVSS v3.x and v4 name a 0.0 score "None", which CycloneDX
                    // has; v2 has no such band.
                    let severity = if c.version != "2.0" && c.score == 0.0 {
                        "none"
                    } else {
                        cdx_severity(if c.version == "2.0" {
                            crate::cvss::Score { version: "2.0", base: c.score }.severity()
                        } else {
                            Severity::from_cvss_score(c.score)
                        })
                    };
                    json!({ "source": { "name": c.source }, "score": c.score, "severity": severity, "method": method, "vector": c.vector })
                })
                .chain(std::iter::once(json!({ "severity": cdx_severity(f.severity), "method": "other" })))
                .collect();
            let mut v = json!({
                "bom-ref": format!("vuln-{i}"),
                "id": f.id,
                // The data comes from OSV records, whatever the id's origin.
                "source": { "name": "OSV", "url": format!("https://osv.dev/vulnerability/{}", f.id) },
                "ratings": ratings,
                "affects": [{ "ref": refs.get(&f.package.purl).cloned().unwrap_or_default() }],
            });
            if !f.title.is_empty() {
                v["description"] = json!(f.title);
            }
            if let Some(fix) = f.fixed_versions.first() {
                v["recommendation"] = json!(format!("Upgrade {} to {fix} or later", f.package.name));
            }
            if !f.aliases.is_empty() {
                v["references"] = Value::Array(
                    f.aliases
                        .iter()
                        .map(|a| json!({ "id": a, "source": { "name": "OSV", "url": format!("https://osv.dev/vulnerability/{a}") } }))
                        .collect(),
                );
            }
            v
        })
        .collect();
    json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": format!("urn:uuid:{serial}"),
        "version": 1,
        "metadata": {
            "timestamp": Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "tools": { "components": [{ "type": "application", "name": "patchpilot-scanner", "version": env!("CARGO_PKG_VERSION") }] },
            "component": { "type": "container", "bom-ref": "image", "name": assessment.image, "version": assessment.digest.to_string() }
        },
        "components": components,
        "vulnerabilities": vulnerabilities,
    })
}

fn cdx_severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "critical",
        Severity::High => "high",
        Severity::Medium => "medium",
        Severity::Low => "low",
        Severity::Negligible => "info",
        Severity::Unknown => "unknown",
    }
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
