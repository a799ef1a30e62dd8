//! CycloneDX 1.6 JSON (`bom-1.6.schema.json`): the image as the BOM's
//! `metadata.component` (a `container`, with its layers as nested `file`
//! components), every cataloged package as a `library` and the distribution
//! as an `operating-system` component, the `dependencies` graph,
//! `compositions` saying how complete it is, and `vulnerabilities` with
//! ratings, the components they affect and, where a decision is known, an
//! impact `analysis` (the VEX fields of the 1.6 vulnerability object).
//!
//! `hashes` appear only where PatchPilot holds a real one: the image's
//! manifest (or config) digest and each layer's digest. The catalogers
//! record no per-package checksum, so packages carry none.

use std::collections::BTreeMap;

use chrono::Utc;
use patchpilot_model::Severity;
use serde_json::{Value, json};

use super::{Hash, HashAlgorithm, Sbom};

/// `bom-ref`s of the fixed components; packages are `pkg-N`, layers
/// `layer-N`, vulnerabilities `vuln-N`, so none can collide.
const IMAGE_REF: &str = "image";
const OS_REF: &str = "os";

/// An impact analysis of one finding: the 1.6 `vulnerability.analysis`
/// object. Every field is optional there, and stays empty here unless the
/// decision behind it says so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Analysis {
    /// `state`.
    pub state: Option<AnalysisState>,
    /// `justification`, for `not_affected`.
    pub justification: Option<Justification>,
    /// `response`.
    pub response: Vec<Response>,
    /// `detail`: who decided, and why, in words.
    pub detail: String,
}

/// `impactAnalysisState` (`resolved_with_pedigree` is not produced: it
/// needs pedigree evidence PatchPilot does not record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnalysisState {
    /// The vulnerability has been remediated.
    Resolved,
    /// It may be directly or indirectly exploitable.
    Exploitable,
    /// It is being investigated.
    InTriage,
    /// It was falsely identified or associated.
    FalsePositive,
    /// The component is not affected.
    NotAffected,
}

/// `impactAnalysisJustification`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Justification {
    /// The code has been removed or tree-shaken.
    CodeNotPresent,
    /// The vulnerable code is not invoked at runtime.
    CodeNotReachable,
    /// Exploitability requires a configurable option to be set or unset.
    RequiresConfiguration,
    /// Exploitability requires a dependency that is not present.
    RequiresDependency,
    /// Exploitability requires an environment that is not present.
    RequiresEnvironment,
    /// Exploitability requires a compiler flag to be set or unset.
    ProtectedByCompiler,
    /// Exploits are prevented at runtime.
    ProtectedAtRuntime,
    /// Attacks are blocked at the perimeter.
    ProtectedAtPerimeter,
    /// Preventative measures reduce the likelihood or impact.
    ProtectedByMitigatingControl,
}

/// A `response` to the vulnerability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    /// Can not fix.
    CanNotFix,
    /// Will not fix.
    WillNotFix,
    /// Update to a different revision or release.
    Update,
    /// Revert to a previous revision or release.
    Rollback,
    /// A workaround is available.
    WorkaroundAvailable,
}

impl AnalysisState {
    fn as_str(self) -> &'static str {
        match self {
            AnalysisState::Resolved => "resolved",
            AnalysisState::Exploitable => "exploitable",
            AnalysisState::InTriage => "in_triage",
            AnalysisState::FalsePositive => "false_positive",
            AnalysisState::NotAffected => "not_affected",
        }
    }
}

impl Justification {
    fn as_str(self) -> &'static str {
        match self {
            Justification::CodeNotPresent => "code_not_present",
            Justification::CodeNotReachable => "code_not_reachable",
            Justification::RequiresConfiguration => "requires_configuration",
            Justification::RequiresDependency => "requires_dependency",
            Justification::RequiresEnvironment => "requires_environment",
            Justification::ProtectedByCompiler => "protected_by_compiler",
            Justification::ProtectedAtRuntime => "protected_at_runtime",
            Justification::ProtectedAtPerimeter => "protected_at_perimeter",
            Justification::ProtectedByMitigatingControl => "protected_by_mitigating_control",
        }
    }
}

impl Response {
    fn as_str(self) -> &'static str {
        match self {
            Response::CanNotFix => "can_not_fix",
            Response::WillNotFix => "will_not_fix",
            Response::Update => "update",
            Response::Rollback => "rollback",
            Response::WorkaroundAvailable => "workaround_available",
        }
    }
}

impl Analysis {
    /// The analysis an OpenVEX statement makes: `status` and
    /// `justification` in OpenVEX's vocabulary, `impact_statement` and
    /// `action_statement` as written, `source` naming the document.
    ///
    /// Statuses map one to one (`not_affected` → `not_affected`, `fixed` →
    /// `resolved`, `affected` → `exploitable`, `under_investigation` →
    /// `in_triage`). Justifications map where the two vocabularies mean the
    /// same thing: both "not present" ones to `code_not_present`,
    /// `vulnerable_code_not_in_execute_path` to `code_not_reachable`,
    /// `inline_mitigations_already_exist` to
    /// `protected_by_mitigating_control`. OpenVEX's
    /// `vulnerable_code_cannot_be_controlled_by_adversary` has no CycloneDX
    /// counterpart (none of "requires environment", "protected at runtime"…
    /// says the same), so it gets no `justification`; like every OpenVEX
    /// justification it is kept, word for word, in `detail`. The free-text
    /// action statement names no `response` value, so none is invented.
    /// `None` for a status OpenVEX does not define.
    pub fn from_openvex(
        status: &str,
        justification: Option<&str>,
        impact_statement: Option<&str>,
        action_statement: Option<&str>,
        source: &str,
    ) -> Option<Analysis> {
        let state = match status {
            "not_affected" => AnalysisState::NotAffected,
            "fixed" => AnalysisState::Resolved,
            "affected" => AnalysisState::Exploitable,
            "under_investigation" => AnalysisState::InTriage,
            _ => return None,
        };
        let mapped = justification.and_then(|j| match j {
            "component_not_present" | "vulnerable_code_not_present" => Some(Justification::CodeNotPresent),
            "vulnerable_code_not_in_execute_path" => Some(Justification::CodeNotReachable),
            "inline_mitigations_already_exist" => Some(Justification::ProtectedByMitigatingControl),
            _ => None,
        });
        let mut detail = format!("OpenVEX {source}: {status}");
        if let Some(j) = justification {
            detail.push_str(&format!(" ({j})"));
        }
        for text in [impact_statement, action_statement].into_iter().flatten() {
            let text = text.trim();
            if !text.is_empty() {
                detail.push_str(". ");
                detail.push_str(text);
            }
        }
        Some(Analysis {
            state: Some(state),
            // CycloneDX wants a justification only for `not_affected`.
            justification: mapped.filter(|_| state == AnalysisState::NotAffected),
            response: Vec::new(),
            detail,
        })
    }

    /// The analysis an ignore-file rule makes. A rule says "do not report
    /// this" and why in free text; it does not say the image is unaffected,
    /// fixed or falsely matched, so the analysis has no `state`, only the
    /// rule in `detail`: the file, the line, the last day it applies, the
    /// reason.
    pub fn from_ignore_rule(file: &str, rule: &crate::ignore::IgnoreRule) -> Analysis {
        let mut detail = format!("Ignored by {file} line {}", rule.line);
        if let Some(day) = rule.expires {
            detail.push_str(&format!(" until {day}"));
        }
        if !rule.reason.is_empty() {
            detail.push_str(": ");
            detail.push_str(&rule.reason);
        }
        Analysis { detail, ..Analysis::default() }
    }

    fn to_json(&self) -> Value {
        let mut out = serde_json::Map::new();
        if let Some(state) = self.state {
            out.insert("state".into(), json!(state.as_str()));
        }
        if let Some(justification) = self.justification {
            out.insert("justification".into(), json!(justification.as_str()));
        }
        if !self.response.is_empty() {
            let mut response: Vec<&str> = self.response.iter().map(|r| r.as_str()).collect();
            response.dedup();
            out.insert("response".into(), json!(response));
        }
        if !self.detail.is_empty() {
            out.insert("detail".into(), json!(self.detail));
        }
        Value::Object(out)
    }
}

fn cdx_hash(hash: Hash<'_>) -> Value {
    let alg = match hash.algorithm {
        HashAlgorithm::Sha256 => "SHA-256",
        HashAlgorithm::Sha512 => "SHA-512",
    };
    json!({ "alg": alg, "content": hash.hex })
}

/// The BOM. `analyses` holds the impact analysis of findings that have
/// one, by their index in `sbom.assessment.findings`; `serial` is a UUID in
/// RFC 4122's lowercase form (the BOM's `serialNumber`).
pub fn cyclonedx(sbom: &Sbom<'_>, analyses: &BTreeMap<usize, Analysis>, serial: &str) -> Value {
    let assessment = sbom.assessment;
    let mut components = Vec::new();
    // (purl, path) → bom-ref.
    let mut refs: BTreeMap<(String, String), String> = BTreeMap::new();
    if let Some(os) = &assessment.os {
        components.push(json!({ "type": "operating-system", "bom-ref": OS_REF, "name": os.family, "version": os.version }));
    }
    for (i, (p, purl)) in sbom.distinct_packages().into_iter().enumerate() {
        let bom_ref = format!("pkg-{i}");
        let mut properties = vec![json!({ "name": "patchpilot:package:path", "value": p.path })];
        if let Some(layer) = &p.layer {
            properties.push(json!({ "name": "patchpilot:layer:digest", "value": layer }));
        }
        components.push(json!({
            "type": "library", "bom-ref": bom_ref, "name": p.name, "version": p.version, "purl": purl,
            "properties": properties,
        }));
        refs.insert((purl, p.path.clone()), bom_ref);
    }

    let mut image = json!({ "type": "container", "bom-ref": IMAGE_REF, "name": assessment.image, "version": assessment.digest.to_string() });
    if let Some(hash) = sbom.image_hash() {
        image["hashes"] = json!([cdx_hash(hash)]);
        let of = match sbom.image.digest_kind {
            crate::image::DigestKind::Config => "config",
            _ => "manifest",
        };
        // Consumers need to know which document the hash is of to check it.
        image["properties"] = json!([{ "name": "patchpilot:image:digest-of", "value": of }]);
    }
    // Layers are parts of the image, not dependencies of it: nested
    // components, each hashed by its digest (the SHA-256 of the layer as its
    // source stores it; for legacy `docker save` archives, the uncompressed
    // tar, i.e. the diff id).
    let layers: Vec<Value> = sbom
        .image
        .layers
        .iter()
        .enumerate()
        .map(|(i, layer)| {
            let mut c = json!({ "type": "file", "bom-ref": format!("layer-{i}"), "name": layer.digest });
            if let Some(hash) = Hash::parse(&layer.digest) {
                c["hashes"] = json!([cdx_hash(hash)]);
            }
            c
        })
        .collect();
    if !layers.is_empty() {
        image["components"] = Value::Array(layers);
    }

    // The dependency graph. The image depends on the distribution and on
    // every cataloged package. The catalogers read no package-to-package
    // relations (apk's `D:`, dpkg's `Depends:`… are not parsed), and the
    // 1.6 schema's `dependency` text is explicit about what each form says:
    // "Components or services that do not have their own dependencies must
    // be declared as empty elements within the graph. Components or
    // services that are not represented in the dependency graph may have
    // unknown dependencies." An empty `dependsOn` would claim musl-utils
    // depends on nothing; so packages get no entry (unknown), and a
    // composition says so, as the same text recommends ("leverage
    // compositions to indicate unknown dependency graphs").
    let mut image_deps: Vec<&str> = Vec::new();
    if assessment.os.is_some() {
        image_deps.push(OS_REF);
    }
    image_deps.extend(refs.values().map(String::as_str));
    image_deps.sort_by_key(|r| ref_order(r));
    let dependencies = json!([{ "ref": IMAGE_REF, "dependsOn": image_deps }]);
    // `unknown`: "a 'best-effort' to obtain constituent components … but
    // the completeness is inconclusive" — a scan finds what its catalogers
    // know, and the packages' own dependencies are not read at all.
    let mut described: Vec<&str> = vec![IMAGE_REF];
    described.extend(image_deps.iter().copied());
    let compositions = json!([{ "aggregate": "unknown", "dependencies": described }]);

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
            // A finding's package is always cataloged; should one not be,
            // it affects nothing rather than a reference to no component.
            // The component at the finding's path; a finding without one
            // affects every component of its purl.
            let exact = refs.get(&(f.package.purl.clone(), f.package.path.clone()));
            let affects: Vec<Value> = match exact {
                Some(r) => vec![json!({ "ref": r })],
                None => refs
                    .iter()
                    .filter(|((purl, _), _)| *purl == f.package.purl)
                    .map(|(_, r)| json!({ "ref": r }))
                    .collect(),
            };
            let mut v = json!({
                "bom-ref": format!("vuln-{i}"),
                "id": f.id,
                // The data comes from OSV records, whatever the id's origin.
                "source": { "name": "OSV", "url": format!("https://osv.dev/vulnerability/{}", f.id) },
                "ratings": ratings,
                "affects": affects,
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
            if let Some(analysis) = analyses.get(&i) {
                v["analysis"] = analysis.to_json();
            }
            v
        })
        .collect();
    json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": format!("urn:uuid:{serial}"),
        "version": 1,
        "metadata": {
            "timestamp": Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "tools": { "components": [{ "type": "application", "name": "patchpilot-scanner", "version": env!("CARGO_PKG_VERSION") }] },
            "component": image,
        },
        "components": components,
        "dependencies": dependencies,
        "compositions": compositions,
        "vulnerabilities": vulnerabilities,
    })
}

/// `os` first, then packages in catalog order (`pkg-2` before `pkg-10`).
fn ref_order(r: &str) -> (u8, usize) {
    match r.strip_prefix("pkg-").and_then(|n| n.parse().ok()) {
        Some(n) => (1, n),
        None => (0, 0),
    }
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
