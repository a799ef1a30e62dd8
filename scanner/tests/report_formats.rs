//! The SARIF 2.1.0 and CycloneDX 1.5 reports of a real scan, checked against
//! the official JSON schemas and for what they say.
//!
//! The schemas in `fixtures/schemas` are verbatim copies of OASIS's SARIF
//! 2.1.0 errata-01 schema (draft-04) and CycloneDX's `bom-1.5.schema.json`
//! with the two schemas it `$ref`s (draft-07); `fixtures/schemas/SOURCES.md`
//! names their repositories and commits. They are loaded from disk and the
//! referenced ones are registered under the URIs the BOM schema resolves its
//! relative `$ref`s to, so validation never touches the network. Formats are
//! asserted (`uri`, `uri-reference`, `date-time`…), which the SARIF and
//! CycloneDX specifications require of conforming documents.
//!
//! The scan is the one of `scan_pipeline.rs`: the shared test image as an OCI
//! layout, matched against the real OSV fixture records.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use jsonschema::{Draft, Registry, Validator};
use patchpilot_model::{Assessment, Cvss, Severity};
use patchpilot_registry::oci::PlatformChoice;
use patchpilot_scanner::cvss;
use patchpilot_scanner::db::AdvisoryDb;
use patchpilot_scanner::image;
use patchpilot_scanner::matching;
use patchpilot_scanner::report;
use patchpilot_scanner::scan::{Catalog, Scanner};
use serde_json::{Value, json};
use support::{db, fixtures, write_oci_layout};

/// A serial number as RFC 4122 writes one (lowercase hex), which the BOM
/// schema's `serialNumber` pattern demands.
const SERIAL: &str = "3e671687-395b-41f5-a30f-a58921a69b79";

/// The URIs `bom-1.5.schema.json` resolves its relative `$ref`s to, against
/// its `$id` `http://cyclonedx.org/schema/bom-1.5.schema.json`.
const SPDX_URI: &str = "http://cyclonedx.org/schema/spdx.schema.json";
const JSF_URI: &str = "http://cyclonedx.org/schema/jsf-0.82.schema.json";

fn schema_file(name: &str) -> Value {
    let path = fixtures().join("schemas").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn sarif_validator() -> Validator {
    // The SARIF schema is draft-04 but names the draft-06 format
    // `uri-reference` ("A string containing a valid relative or absolute
    // URI"), which a draft-04 validator treats as unknown and skips. The
    // check is borrowed from the validator's own draft-06 RFC 3986 one.
    let uri_reference = jsonschema::options()
        .with_draft(Draft::Draft6)
        .should_validate_formats(true)
        .build(&json!({ "type": "string", "format": "uri-reference" }))
        .expect("the uri-reference check compiles");
    jsonschema::options()
        .with_draft(Draft::Draft4)
        .should_validate_formats(true)
        .with_format("uri-reference", move |text: &str| uri_reference.is_valid(&json!(text)))
        .offline()
        .build(&schema_file("sarif-schema-2.1.0.json"))
        .expect("the SARIF 2.1.0 schema compiles")
}

fn cyclonedx_registry(with_spdx: bool) -> Registry<'static> {
    let mut builder = Registry::new()
        .add(JSF_URI, Draft::Draft7.create_resource(schema_file("jsf-0.82.schema.json")))
        .expect("JSF URI");
    if with_spdx {
        builder = builder
            .add(SPDX_URI, Draft::Draft7.create_resource(schema_file("spdx.schema.json")))
            .expect("SPDX URI");
    }
    builder.prepare().expect("registry")
}

fn cyclonedx_validator() -> Validator {
    let registry = cyclonedx_registry(true);
    jsonschema::options()
        .with_draft(Draft::Draft7)
        .with_registry(&registry)
        .should_validate_formats(true)
        .offline()
        .build(&schema_file("bom-1.5.schema.json"))
        .expect("the CycloneDX 1.5 schema compiles with its references")
}

/// Every violation, as `instance path: message`, so a failure says where.
fn violations(validator: &Validator, document: &Value) -> Vec<String> {
    validator.iter_errors(document).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

fn assert_valid(validator: &Validator, document: &Value, what: &str) {
    let errors = violations(validator, document);
    assert!(errors.is_empty(), "{what} violates its schema:\n{}\n{document:#}", errors.join("\n"));
}

struct Scan {
    _db_dir: tempfile::TempDir,
    _layout: tempfile::TempDir,
    manifest_digest: String,
    catalog: Catalog,
    assessment: Assessment,
}

/// Scans the support image; with `advisories` false, against an empty DB,
/// which gives the same catalog and no findings.
fn scan(advisories: bool) -> Scan {
    let layout = tempfile::tempdir().expect("tempdir");
    let manifest_digest = write_oci_layout(layout.path());
    let image = image::open_oci_layout(layout.path(), Some("acme/app:1.0"), &PlatformChoice::default())
        .expect("layout");
    let (db_dir, db) = if advisories {
        db()
    } else {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = AdvisoryDb::open(dir.path()).expect("empty db");
        (dir, db)
    };
    let catalog = Scanner::default().catalog_image(&image).expect("catalog");
    let matched = matching::match_catalog(&catalog, &db).expect("match");
    let assessment = report::assessment(&image, &catalog, &matched).expect("assessment");
    Scan { _db_dir: db_dir, _layout: layout, manifest_digest, catalog, assessment }
}

/// The SARIF `result.level` each severity should get. SARIF 2.1.0 defines
/// `error` as a serious problem, `warning` as a problem and `note` as a minor
/// one; critical and high findings are serious, medium ones problems.
fn expected_level(severity: Severity) -> &'static str {
    match severity {
        Severity::Critical | Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low | Severity::Negligible | Severity::Unknown => "note",
    }
}

/// The file each package of the test image was read from, as the image's
/// layers lay them out (see `support::layers`).
fn expected_path(package: &str) -> &'static str {
    match package {
        "musl" | "musl-utils" => "lib/apk/db/installed",
        "PyYAML" => "usr/lib/python3.11/site-packages/PyYAML-5.3.1.dist-info/METADATA",
        "ansi-html" => "app/node_modules/ansi-html/package.json",
        other => panic!("no finding expected in {other}"),
    }
}

fn results(sarif: &Value) -> &Vec<Value> {
    sarif["runs"][0]["results"].as_array().expect("runs[0].results")
}

#[test]
fn the_validators_reject_what_the_schemas_forbid() {
    let sarif_validator = sarif_validator();
    let bom_validator = cyclonedx_validator();
    let scanned = scan(true);
    let mut sarif = report::sarif(&scanned.assessment);
    let mut bom = report::cyclonedx(&scanned.assessment, &scanned.catalog.packages, SERIAL);
    assert_valid(&sarif_validator, &sarif, "the SARIF log");
    assert_valid(&bom_validator, &bom, "the BOM");

    sarif["runs"][0]["results"][1]["level"] = json!("fatal");
    let errors = violations(&sarif_validator, &sarif);
    assert!(errors.iter().any(|e| e.starts_with("/runs/0/results/1/level")), "{errors:?}");
    sarif["runs"][0]["results"][1]["level"] = json!("error");
    sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] =
        json!("a b\\c");
    let errors = violations(&sarif_validator, &sarif);
    assert!(errors.iter().any(|e| e.contains("artifactLocation/uri")), "formats are asserted: {errors:?}");

    bom["components"][0]["type"] = json!("container-ish");
    let errors = violations(&bom_validator, &bom);
    assert!(errors.iter().any(|e| e.starts_with("/components/0")), "{errors:?}");
    bom["components"][0]["type"] = json!("operating-system");
    bom["serialNumber"] = json!("urn:uuid:3E671687-395B-41F5-A30F-A58921A69B79");
    assert!(!bom_validator.is_valid(&bom), "the serial number pattern wants lowercase hex");
    bom["serialNumber"] = json!(format!("urn:uuid:{SERIAL}"));
    bom["components"][1]["licenses"] = json!([{ "license": { "id": "Not-An-SPDX-Id" } }]);
    let errors = violations(&bom_validator, &bom);
    assert!(
        errors.iter().any(|e| e.starts_with("/components/1/licenses")),
        "the SPDX schema is applied: {errors:?}"
    );
    bom["components"][1]["licenses"] = json!([{ "license": { "id": "MIT" } }]);
    assert_valid(&bom_validator, &bom, "the BOM with an SPDX licence id");
}

#[test]
fn the_bom_schema_resolves_its_references_only_from_the_registered_files() {
    let registry = cyclonedx_registry(false);
    let built = jsonschema::options()
        .with_draft(Draft::Draft7)
        .with_registry(&registry)
        .offline()
        .build(&schema_file("bom-1.5.schema.json"));
    assert!(built.is_err(), "without spdx.schema.json the BOM schema must not compile offline");
}

#[test]
fn sarif_of_a_scan_is_valid_and_reports_every_finding() {
    let scanned = scan(true);
    let findings = &scanned.assessment.findings;
    assert_eq!(findings.len(), 4, "the scan of scan_pipeline.rs");
    let sarif = report::sarif(&scanned.assessment);
    assert_valid(&sarif_validator(), &sarif, "the SARIF log");

    assert_eq!(sarif["version"], "2.1.0");
    let runs = sarif["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["tool"]["driver"]["name"], "patchpilot-scanner");
    let results = results(&sarif);
    assert_eq!(results.len(), findings.len(), "one result per finding");
    for (finding, result) in findings.iter().zip(results) {
        assert_eq!(result["ruleId"], finding.id.as_str());
        assert_eq!(result["level"], expected_level(finding.severity), "{}", finding.id);
        assert_eq!(result["properties"]["severity"], finding.severity.as_str());
        let locations = result["locations"].as_array().expect("locations");
        assert_eq!(locations.len(), 1, "one location per result, as GitHub reads only the first");
        assert_eq!(
            locations[0]["physicalLocation"]["artifactLocation"]["uri"],
            expected_path(&finding.package.name)
        );
        assert_eq!(
            locations[0]["physicalLocation"]["artifactLocation"]["uri"],
            finding.package.path.as_str()
        );
        assert_eq!(locations[0]["logicalLocations"][0]["fullyQualifiedName"], finding.package.purl.as_str());
        let message = result["message"]["text"].as_str().expect("message.text");
        assert!(
            message.contains(&finding.package.name) && message.contains(&finding.package.version),
            "{message}"
        );
    }
    let by_id: BTreeMap<&str, &Value> =
        results.iter().map(|r| (r["ruleId"].as_str().expect("ruleId"), r)).collect();
    assert_eq!(by_id["CVE-2020-14343"]["locations"][0]["logicalLocations"][0]["name"], "PyYAML");
    assert_eq!(
        results.iter().filter(|r| r["ruleId"] == "CVE-2025-26519").count(),
        2,
        "musl and musl-utils are two results of one rule"
    );
}

#[test]
fn sarif_rules_are_unique_and_carry_githubs_security_severity() {
    let scanned = scan(true);
    let sarif = report::sarif(&scanned.assessment);
    let rules = sarif["runs"][0]["tool"]["driver"]["rules"].as_array().expect("rules");
    let rule_ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().expect("rule id")).collect();
    let distinct: BTreeSet<&str> = rule_ids.iter().copied().collect();
    assert_eq!(rule_ids.len(), distinct.len(), "rule ids are unique: {rule_ids:?}");
    let finding_ids: BTreeSet<&str> = scanned.assessment.findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(distinct, finding_ids, "exactly one rule per vulnerability");
    for result in results(&sarif) {
        assert!(rule_ids.contains(&result["ruleId"].as_str().expect("ruleId")), "every ruleId names a rule");
    }
    for rule in rules {
        let id = rule["id"].as_str().expect("id");
        assert_eq!(rule["helpUri"], format!("https://osv.dev/vulnerability/{id}"));
        let tags: Vec<&str> =
            rule["properties"]["tags"].as_array().expect("tags").iter().filter_map(Value::as_str).collect();
        // GitHub applies `security-severity` only to rules tagged `security`.
        assert!(tags.contains(&"security"), "{id}: {tags:?}");
        let best = scanned
            .assessment
            .findings
            .iter()
            .filter(|f| f.id == id)
            .flat_map(|f| f.cvss.iter().map(|c| c.score))
            .fold(None, |acc: Option<f64>, s| Some(acc.map_or(s, |a| a.max(s))));
        match best {
            Some(score) => {
                // GitHub: "A string representing a score … between 0.0 and 10.0".
                let text =
                    rule["properties"]["security-severity"].as_str().expect("security-severity is a string");
                let parsed: f64 = text.parse().expect("a decimal number");
                assert!((0.0..=10.0).contains(&parsed), "{id}: {text}");
                assert!((parsed - score).abs() < 0.05, "{id}: {text} is the best CVSS score {score}");
            }
            None => {
                assert!(rule["properties"].get("security-severity").is_none(), "{id} has no score to give")
            }
        }
    }
    let scored = rules.iter().filter(|r| r["properties"].get("security-severity").is_some()).count();
    assert!(scored > 0, "the fixture records carry CVSS vectors");
}

#[test]
fn sarif_levels_follow_every_severity() {
    let scanned = scan(true);
    let mut assessment = scanned.assessment.clone();
    // The scan only yields critical and high findings; the same findings with
    // every other severity check the rest of the mapping.
    let severities = [Severity::Medium, Severity::Low, Severity::Negligible, Severity::Unknown];
    for (finding, severity) in assessment.findings.iter_mut().zip(severities) {
        finding.severity = severity;
    }
    let sarif = report::sarif(&assessment);
    assert_valid(&sarif_validator(), &sarif, "the SARIF log");
    let levels: Vec<&str> = results(&sarif).iter().map(|r| r["level"].as_str().expect("level")).collect();
    assert_eq!(levels, ["warning", "note", "note", "note"]);
    let real = report::sarif(&scanned.assessment);
    let real_levels: Vec<&str> = results(&real).iter().map(|r| r["level"].as_str().unwrap_or("")).collect();
    assert_eq!(real_levels, ["error"; 4], "critical and high findings are errors");
}

#[test]
fn sarif_locations_are_uri_references_whatever_the_path() {
    let scanned = scan(true);
    let mut assessment = scanned.assessment.clone();
    // Paths inside images may hold spaces, non-ASCII letters and colons;
    // `artifactLocation.uri` must still be an RFC 3986 URI reference, and a
    // colon in the first segment would read as a URI scheme.
    assessment.findings[0].package.path = "opt/Acme Tool/lib/commons-text-1.9.jar".into();
    assessment.findings[1].package.path = "usr/share/b\u{fc}cher/100%.js".into();
    assessment.findings[2].package.path = "srv/app/node_modules/@types/node/package.json".into();
    assessment.findings[3].package.path = String::new();
    assessment.image = "alpine:3.19".into();
    let sarif = report::sarif(&assessment);
    assert_valid(&sarif_validator(), &sarif, "the SARIF log with awkward paths");
    let uris: Vec<&str> = results(&sarif)
        .iter()
        .map(|r| r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].as_str().expect("uri"))
        .collect();
    assert_eq!(
        uris,
        [
            "opt/Acme%20Tool/lib/commons-text-1.9.jar",
            "usr/share/b%C3%BCcher/100%25.js",
            "srv/app/node_modules/@types/node/package.json",
            "alpine%3A3.19",
        ],
        "percent-encoded, so a consumer decodes them back to the paths"
    );
}

#[test]
fn cyclonedx_of_a_scan_is_valid_and_describes_image_packages_and_vulnerabilities() {
    let scanned = scan(true);
    let findings = &scanned.assessment.findings;
    let bom = report::cyclonedx(&scanned.assessment, &scanned.catalog.packages, SERIAL);
    assert_valid(&cyclonedx_validator(), &bom, "the BOM");

    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.5");
    assert_eq!(bom["serialNumber"], format!("urn:uuid:{SERIAL}"));
    let image = &bom["metadata"]["component"];
    assert_eq!(image["type"], "container");
    assert_eq!(image["name"], "acme/app:1.0");
    assert_eq!(
        image["version"],
        scanned.manifest_digest.as_str(),
        "the container is versioned by its manifest digest"
    );

    let components = bom["components"].as_array().expect("components");
    let os: Vec<&Value> = components.iter().filter(|c| c["type"] == "operating-system").collect();
    assert_eq!(os.len(), 1);
    assert_eq!(os[0]["name"], "alpine");
    assert_eq!(os[0]["version"], "3.19.1");
    let refs: Vec<&str> = components.iter().map(|c| c["bom-ref"].as_str().expect("bom-ref")).collect();
    assert_eq!(refs.len(), refs.iter().collect::<BTreeSet<_>>().len(), "bom-refs are unique");
    assert!(!refs.contains(&"image"), "the metadata component's bom-ref is not reused");
    let by_ref: BTreeMap<&str, &Value> =
        components.iter().map(|c| (c["bom-ref"].as_str().unwrap_or(""), c)).collect();
    let purls: BTreeSet<&str> = components.iter().filter_map(|c| c["purl"].as_str()).collect();
    let os = scanned.catalog.os.as_ref().map(|o| o.distro());
    let catalog_purls: BTreeSet<String> = scanned.catalog.packages.iter().map(|p| p.purl(os)).collect();
    assert_eq!(purls, catalog_purls.iter().map(String::as_str).collect(), "every cataloged package, once");
    assert!(purls.contains("pkg:apk/alpine/musl@1.1.14-r10?arch=x86_64&distro=alpine-3.19.1"), "{purls:?}");

    let vulnerabilities = bom["vulnerabilities"].as_array().expect("vulnerabilities");
    assert_eq!(vulnerabilities.len(), findings.len(), "one vulnerability per finding");
    for (finding, vulnerability) in findings.iter().zip(vulnerabilities) {
        assert_eq!(vulnerability["id"], finding.id.as_str());
        let affects = vulnerability["affects"].as_array().expect("affects");
        assert_eq!(affects.len(), 1);
        let target = affects[0]["ref"].as_str().expect("ref");
        let component = by_ref
            .get(target)
            .unwrap_or_else(|| panic!("{}: affects `{target}`, which no component has", finding.id));
        assert_eq!(
            component["purl"],
            finding.package.purl.as_str(),
            "{} affects its own package",
            finding.id
        );
        assert_eq!(component["name"], finding.package.name.as_str());

        let ratings = vulnerability["ratings"].as_array().expect("ratings");
        assert_eq!(ratings.len(), finding.cvss.len() + 1, "one rating per CVSS score and the overall one");
        let overall = ratings.iter().find(|r| r.get("score").is_none()).expect("the overall rating");
        assert_eq!(
            overall["severity"],
            finding.severity.as_str(),
            "critical/high/medium/low keep their names"
        );
        for cvss in &finding.cvss {
            let rating =
                ratings.iter().find(|r| r["vector"] == cvss.vector.as_str()).expect("a rating per vector");
            assert_eq!(rating["score"].as_f64(), Some(cvss.score));
            let method = match cvss.version.as_str() {
                "3.1" => "CVSSv31",
                "3.0" => "CVSSv3",
                "2.0" => "CVSSv2",
                other => panic!("the scanner scored a CVSS {other} vector"),
            };
            assert_eq!(rating["method"], method);
        }
        for alias in &finding.aliases {
            assert!(
                vulnerability["references"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|x| x["id"] == alias.as_str())),
                "{}: alias {alias} is referenced",
                finding.id
            );
        }
    }
    let musl = vulnerabilities.iter().find(|v| v["id"] == "CVE-2025-26519").expect("musl vulnerability");
    assert!(
        musl["references"].as_array().is_some_and(|r| r.iter().any(|x| x["id"] == "ALPINE-CVE-2025-26519"))
    );
}

#[test]
fn a_zero_cvss_score_is_rated_none() {
    let scanned = scan(true);
    let mut assessment = scanned.assessment.clone();
    // A v3.1 vector with no impact scores 0.0, which the CVSS v3.1 rating
    // scale calls "None" (CycloneDX `none`), not an unknown severity.
    let vector = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:N";
    let score = cvss::base_score(vector).expect("a valid vector");
    assert_eq!((score.version, score.base), ("3.1", 0.0));
    let finding = &mut assessment.findings[1];
    finding.cvss = vec![Cvss {
        source: "ghsa".into(),
        version: score.version.into(),
        vector: vector.into(),
        score: score.base,
    }];
    let bom = report::cyclonedx(&assessment, &scanned.catalog.packages, SERIAL);
    assert_valid(&cyclonedx_validator(), &bom, "the BOM");
    let rating = bom["vulnerabilities"][1]["ratings"]
        .as_array()
        .expect("ratings")
        .iter()
        .find(|r| r["vector"] == vector)
        .cloned();
    assert_eq!(rating.as_ref().map(|r| &r["severity"]), Some(&json!("none")), "{rating:?}");
    assert_eq!(rating.as_ref().map(|r| &r["method"]), Some(&json!("CVSSv31")));
    let sarif = report::sarif(&assessment);
    assert_valid(&sarif_validator(), &sarif, "the SARIF log");
    let rule = sarif["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .find(|r| r["id"] == "CVE-2021-23424")
        .cloned();
    assert_eq!(
        rule.map(|r| r["properties"]["security-severity"].clone()),
        Some(json!("0.0")),
        "GitHub accepts 0.0 to 10.0"
    );
}

#[test]
fn a_scan_without_findings_gives_valid_empty_reports() {
    let scanned = scan(false);
    assert!(scanned.assessment.findings.is_empty(), "an empty advisory DB matches nothing");
    assert!(!scanned.catalog.packages.is_empty());

    let sarif = report::sarif(&scanned.assessment);
    assert_valid(&sarif_validator(), &sarif, "the SARIF log without results");
    assert_eq!(results(&sarif).len(), 0, "an empty results array says the scan ran and found nothing");
    assert_eq!(sarif["runs"][0]["tool"]["driver"]["rules"], json!([]));

    let bom = report::cyclonedx(&scanned.assessment, &scanned.catalog.packages, SERIAL);
    assert_valid(&cyclonedx_validator(), &bom, "the BOM without vulnerabilities");
    assert_eq!(bom["vulnerabilities"], json!([]));
    let libraries =
        bom["components"].as_array().expect("components").iter().filter(|c| c["type"] == "library").count();
    let os = scanned.catalog.os.as_ref().map(|o| o.distro());
    let distinct: BTreeSet<String> = scanned.catalog.packages.iter().map(|p| p.purl(os)).collect();
    assert_eq!(libraries, distinct.len(), "the inventory does not depend on findings");
}
