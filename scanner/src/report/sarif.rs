//! SARIF 2.1.0 (OASIS Standard with Errata 01): one run, one rule per
//! vulnerability (§3.49), one result per finding (§3.27) located at the file
//! the package was found in, `level` from severity (§3.27.10), and GitHub
//! code scanning's `security-severity` rule property.

use std::collections::BTreeMap;

use patchpilot_model::{Assessment, Severity};
use serde_json::{Value, json};

use super::uri_reference;

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
