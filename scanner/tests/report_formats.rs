//! The SARIF 2.1.0, CycloneDX 1.6 and SPDX 2.3 reports of a real scan,
//! checked against the official JSON schemas and for what they say.
//!
//! The schemas in `fixtures/schemas` are verbatim copies of OASIS's SARIF
//! 2.1.0 errata-01 schema (draft-04), CycloneDX's `bom-1.6.schema.json` with
//! the two schemas it `$ref`s (draft-07) and SPDX's 2.3 schema (draft-07);
//! `fixtures/schemas/SOURCES.md` names their repositories and commits. They
//! are loaded from disk and the referenced ones are registered under the URIs
//! the BOM schema resolves its relative `$ref`s to, so validation never
//! touches the network. Formats are asserted (`uri`, `uri-reference`,
//! `date-time`, `iri-reference`…), which the specifications require of
//! conforming documents.
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
use patchpilot_scanner::package::Package;
use patchpilot_scanner::report;
use patchpilot_scanner::scan::{Catalog, Scanner};
use serde_json::{Value, json};
use support::{db, fixtures, write_oci_layout};

/// A serial number as RFC 4122 writes one (lowercase hex), which the BOM
/// schema's `serialNumber` pattern demands.
const SERIAL: &str = "3e671687-395b-41f5-a30f-a58921a69b79";

/// The URIs `bom-1.6.schema.json` resolves its relative `$ref`s to, against
/// its `$id` `http://cyclonedx.org/schema/bom-1.6.schema.json`.
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
        .build(&schema_file("bom-1.6.schema.json"))
        .expect("the CycloneDX 1.6 schema compiles with its references")
}

fn spdx_validator() -> Validator {
    jsonschema::options()
        .with_draft(Draft::Draft7)
        .should_validate_formats(true)
        .offline()
        .build(&schema_file("spdx-schema-2.3.json"))
        .expect("the SPDX 2.3 schema compiles")
}

/// The idstring of SPDX 2.3 clause 3.2: `SPDXRef-` then letters, digits,
/// `.` and `-` (the 2.3 schema does not check it; later revisions of the
/// schema add this very pattern).
fn is_spdx_id(id: &str) -> bool {
    id.strip_prefix("SPDXRef-").is_some_and(|rest| {
        !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    })
}

/// An RFC 3986 absolute URI, by the validator's own draft-7 `uri` check.
fn is_uri(text: &str) -> bool {
    jsonschema::options()
        .with_draft(Draft::Draft7)
        .should_validate_formats(true)
        .build(&json!({ "type": "string", "format": "uri" }))
        .expect("the uri check compiles")
        .is_valid(&json!(text))
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
    image: image::Image,
    catalog: Catalog,
    assessment: Assessment,
}

impl Scan {
    fn sbom<'a>(&'a self, assessment: &'a Assessment) -> report::Sbom<'a> {
        report::Sbom { assessment, image: &self.image, packages: &self.catalog.packages }
    }

    /// The BOM of `assessment` (this scan's, or an edited copy).
    fn bom(&self, assessment: &Assessment) -> Value {
        report::cyclonedx(&self.sbom(assessment), &BTreeMap::new(), SERIAL)
    }
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
    Scan { _db_dir: db_dir, _layout: layout, manifest_digest, image, catalog, assessment }
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
    let mut bom = scanned.bom(&scanned.assessment);
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
        .build(&schema_file("bom-1.6.schema.json"));
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
    let bom = scanned.bom(&scanned.assessment);
    assert_valid(&cyclonedx_validator(), &bom, "the BOM");

    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.6");
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
fn one_package_at_two_paths_is_two_components_and_findings_affect_their_own() {
    let scanned = scan(true);
    let finding = scanned.assessment.findings.first().expect("a finding");
    let original = scanned
        .catalog
        .packages
        .iter()
        .find(|p| p.name == finding.package.name && p.path == finding.package.path)
        .expect("the finding's package");
    // The same package in a second place, as Go's stdlib is in every binary.
    let mut packages = scanned.catalog.packages.clone();
    packages.push(Package { path: "opt/copy/installed".into(), ..original.clone() });
    let sbom = report::Sbom { assessment: &scanned.assessment, image: &scanned.image, packages: &packages };
    let bom = report::cyclonedx(&sbom, &BTreeMap::new(), SERIAL);
    assert_valid(&cyclonedx_validator(), &bom, "the BOM");
    let components = bom["components"].as_array().expect("components");
    let copies: Vec<(&str, &str)> = components
        .iter()
        .filter(|c| c["purl"] == finding.package.purl.as_str())
        .map(|c| {
            (c["bom-ref"].as_str().expect("bom-ref"), c["properties"][0]["value"].as_str().expect("path"))
        })
        .collect();
    let paths: Vec<&str> = copies.iter().map(|(_, path)| *path).collect();
    assert_eq!(paths, [finding.package.path.as_str(), "opt/copy/installed"]);
    let vulnerability = &bom["vulnerabilities"][0];
    assert_eq!(vulnerability["affects"], json!([{ "ref": copies[0].0 }]), "the finding's own path");

    // A finding naming no cataloged path affects every copy.
    let mut elsewhere = scanned.assessment.clone();
    elsewhere.findings[0].package.path = "nowhere".into();
    let sbom = report::Sbom { assessment: &elsewhere, image: &scanned.image, packages: &packages };
    let bom = report::cyclonedx(&sbom, &BTreeMap::new(), SERIAL);
    let affected: BTreeSet<&str> = bom["vulnerabilities"][0]["affects"]
        .as_array()
        .expect("affects")
        .iter()
        .map(|a| a["ref"].as_str().expect("ref"))
        .collect();
    assert_eq!(affected, copies.iter().map(|(r, _)| *r).collect());

    let sbom = report::Sbom { assessment: &scanned.assessment, image: &scanned.image, packages: &packages };
    let doc = report::spdx(&sbom, SERIAL);
    assert_valid(&spdx_validator(), &doc, "the SPDX document");
    let sources: Vec<&str> = doc["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["externalRefs"][0]["referenceLocator"] == finding.package.purl.as_str())
        .map(|p| p["sourceInfo"].as_str().expect("sourceInfo"))
        .collect();
    assert_eq!(sources.len(), 2, "{sources:?}");
    assert!(sources[1].contains("opt/copy/installed"), "{sources:?}");
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
    let bom = scanned.bom(&assessment);
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

    let bom = scanned.bom(&scanned.assessment);
    assert_valid(&cyclonedx_validator(), &bom, "the BOM without vulnerabilities");
    let spdx = report::spdx(&scanned.sbom(&scanned.assessment), SERIAL);
    assert_valid(&spdx_validator(), &spdx, "the SPDX document of a scan without findings");
    assert_eq!(bom["vulnerabilities"], json!([]));
    let libraries =
        bom["components"].as_array().expect("components").iter().filter(|c| c["type"] == "library").count();
    let os = scanned.catalog.os.as_ref().map(|o| o.distro());
    let distinct: BTreeSet<String> = scanned.catalog.packages.iter().map(|p| p.purl(os)).collect();
    assert_eq!(libraries, distinct.len(), "the inventory does not depend on findings");
}

/// Every `bom-ref` the BOM defines: the image, its layers, the components,
/// the vulnerabilities.
fn bom_refs(bom: &Value) -> Vec<String> {
    let image = &bom["metadata"]["component"];
    std::iter::once(image)
        .chain(image["components"].as_array().into_iter().flatten())
        .chain(bom["components"].as_array().into_iter().flatten())
        .chain(bom["vulnerabilities"].as_array().into_iter().flatten())
        .filter_map(|c| c["bom-ref"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn cyclonedx_dependencies_reference_only_components_and_leave_package_graphs_unknown() {
    let scanned = scan(true);
    let bom = scanned.bom(&scanned.assessment);
    assert_valid(&cyclonedx_validator(), &bom, "the BOM");
    let refs = bom_refs(&bom);
    let defined: BTreeSet<&str> = refs.iter().map(String::as_str).collect();
    assert_eq!(defined.len(), refs.len(), "bom-refs are unique across the BOM: {refs:?}");

    let dependencies = bom["dependencies"].as_array().expect("dependencies");
    for d in dependencies {
        let from = d["ref"].as_str().expect("ref");
        assert!(defined.contains(from), "dependency of `{from}`, which nothing defines");
        for to in d["dependsOn"].as_array().expect("dependsOn") {
            let to = to.as_str().expect("a ref");
            assert!(defined.contains(to), "`{from}` depends on `{to}`, which nothing defines");
        }
    }
    let libraries: BTreeSet<&str> = bom["components"]
        .as_array()
        .expect("components")
        .iter()
        .filter(|c| c["type"] == "library")
        .filter_map(|c| c["bom-ref"].as_str())
        .collect();
    assert!(!libraries.is_empty());
    let image = dependencies.iter().find(|d| d["ref"] == "image").expect("the image's entry");
    let depends_on: BTreeSet<&str> =
        image["dependsOn"].as_array().expect("dependsOn").iter().filter_map(Value::as_str).collect();
    let mut expected = libraries.clone();
    expected.insert("os");
    assert_eq!(depends_on, expected, "the image depends on the distribution and every package");
    // No package-to-package relation is known, so no package claims to
    // depend on nothing (an empty `dependsOn`): they are left out of the
    // graph, and a composition says their graphs are unknown.
    assert_eq!(dependencies.len(), 1, "{dependencies:?}");
    let compositions = bom["compositions"].as_array().expect("compositions");
    assert_eq!(compositions.len(), 1);
    assert_eq!(compositions[0]["aggregate"], "unknown");
    let described: BTreeSet<&str> = compositions[0]["dependencies"]
        .as_array()
        .expect("dependencies")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(described.iter().all(|r| defined.contains(r)), "{described:?}");
    assert!(libraries.iter().all(|l| described.contains(l)), "every package's graph is declared unknown");

    let mut broken = bom.clone();
    broken["dependencies"][0]["dependsOn"] = json!(["pkg-0", "pkg-0"]);
    let errors = violations(&cyclonedx_validator(), &broken);
    assert!(errors.iter().any(|e| e.starts_with("/dependencies/0/dependsOn")), "uniqueItems: {errors:?}");
}

#[test]
fn cyclonedx_hashes_are_the_digests_the_scan_read_and_nothing_else() {
    let scanned = scan(true);
    let bom = scanned.bom(&scanned.assessment);
    assert_valid(&cyclonedx_validator(), &bom, "the BOM");
    let image = &bom["metadata"]["component"];
    let manifest_hex = scanned.manifest_digest.strip_prefix("sha256:").expect("a sha256 digest");
    assert_eq!(image["hashes"], json!([{ "alg": "SHA-256", "content": manifest_hex }]));
    assert_eq!(image["properties"], json!([{ "name": "patchpilot:image:digest-of", "value": "manifest" }]));
    // The layers, hashed independently of the scanner from the blobs the
    // layout was written with.
    let layers = image["components"].as_array().expect("the layers");
    let blobs: Vec<String> = support::layers().iter().map(|l| support::sha(&l.blob)).collect();
    assert_eq!(layers.len(), blobs.len());
    for (layer, digest) in layers.iter().zip(&blobs) {
        assert_eq!(layer["type"], "file");
        assert_eq!(layer["name"], digest.as_str());
        assert_eq!(
            layer["hashes"],
            json!([{ "alg": "SHA-256", "content": digest.trim_start_matches("sha256:") }])
        );
    }
    for c in bom["components"].as_array().expect("components") {
        assert!(c.get("hashes").is_none(), "no checksum is recorded for {}", c["name"]);
    }

    // A `docker save` archive: the image ID, the config's SHA-256.
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = dir.path().join("app.tar");
    support::write_docker_archive(&archive);
    let image = image::open_docker_archive(&archive).expect("archive");
    let catalog = Scanner::default().catalog_image(&image).expect("catalog");
    let assessment = report::assessment(&image, &catalog, &matching::Matched::default()).expect("assessment");
    let sbom = report::Sbom { assessment: &assessment, image: &image, packages: &catalog.packages };
    let bom = report::cyclonedx(&sbom, &BTreeMap::new(), SERIAL);
    assert_valid(&cyclonedx_validator(), &bom, "the archive's BOM");
    let config = support::sha(&support::config(&support::layers()));
    assert_eq!(
        bom["metadata"]["component"]["hashes"],
        json!([{ "alg": "SHA-256", "content": config.trim_start_matches("sha256:") }])
    );
    assert_eq!(bom["metadata"]["component"]["properties"][0]["value"], "config");
    let spdx = report::spdx(&sbom, SERIAL);
    assert_valid(&spdx_validator(), &spdx, "the archive's SPDX document");
    assert_eq!(spdx["packages"][0]["checksums"][0]["checksumValue"], config.trim_start_matches("sha256:"));

    // A root filesystem's digest is PatchPilot's own and hashes nothing
    // anyone else has: no hash, in either format.
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(root.path().join("etc")).expect("etc");
    std::fs::write(root.path().join("etc/os-release"), "ID=alpine\nVERSION_ID=3.19.1\n").expect("os-release");
    let (image, catalog) = Scanner::default().catalog_rootfs(root.path()).expect("rootfs");
    let assessment = report::assessment(&image, &catalog, &matching::Matched::default()).expect("assessment");
    let sbom = report::Sbom { assessment: &assessment, image: &image, packages: &catalog.packages };
    let bom = report::cyclonedx(&sbom, &BTreeMap::new(), SERIAL);
    assert_valid(&cyclonedx_validator(), &bom, "the root filesystem's BOM");
    assert!(bom["metadata"]["component"].get("hashes").is_none(), "{bom:#}");
    assert!(bom["metadata"]["component"].get("components").is_none(), "no layers");
    let spdx = report::spdx(&sbom, SERIAL);
    assert_valid(&spdx_validator(), &spdx, "the root filesystem's SPDX document");
    assert!(spdx["packages"][0].get("checksums").is_none(), "{spdx:#}");
}

#[test]
fn cyclonedx_analysis_says_what_a_vex_or_ignore_decision_says() {
    let scanned = scan(true);
    assert_eq!(scanned.assessment.findings.len(), 4);
    let rule = patchpilot_scanner::ignore::IgnoreFile::parse(
        std::path::Path::new(".trivyignore"),
        "# not reachable from the API\nCVE-2021-23424 exp:2027-01-31\n",
    )
    .expect("rule");
    let analyses: BTreeMap<usize, report::Analysis> = [
        report::Analysis::from_openvex(
            "not_affected",
            Some("vulnerable_code_not_in_execute_path"),
            Some("the parser is never called"),
            None,
            "app.vex.json",
        ),
        report::Analysis::from_openvex(
            "not_affected",
            Some("vulnerable_code_cannot_be_controlled_by_adversary"),
            None,
            None,
            "app.vex.json",
        ),
        Some(report::Analysis::from_ignore_rule(".trivyignore", &rule.rules[0])),
        report::Analysis::from_openvex(
            "affected",
            None,
            None,
            Some("upgrade in the next release"),
            "app.vex.json",
        ),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, a)| (i, a.expect("a known status")))
    .collect();
    let bom = report::cyclonedx(&scanned.sbom(&scanned.assessment), &analyses, SERIAL);
    assert_valid(&cyclonedx_validator(), &bom, "the BOM with analyses");
    let analysis = |i: usize| bom["vulnerabilities"][i]["analysis"].clone();
    assert_eq!(
        analysis(0),
        json!({
            "state": "not_affected",
            "justification": "code_not_reachable",
            "detail": "OpenVEX app.vex.json: not_affected (vulnerable_code_not_in_execute_path). the parser is never called"
        })
    );
    assert_eq!(
        analysis(1),
        json!({
            "state": "not_affected",
            "detail": "OpenVEX app.vex.json: not_affected (vulnerable_code_cannot_be_controlled_by_adversary)"
        }),
        "no CycloneDX justification means the same; the OpenVEX one is kept in words"
    );
    assert_eq!(
        analysis(2),
        json!({ "detail": "Ignored by .trivyignore line 2 until 2027-01-31: not reachable from the API" }),
        "an ignore rule states no impact"
    );
    assert_eq!(
        analysis(3),
        json!({ "state": "exploitable", "detail": "OpenVEX app.vex.json: affected. upgrade in the next release" })
    );
    let fixed = report::Analysis::from_openvex("fixed", Some("component_not_present"), None, None, "x")
        .expect("fixed");
    assert_eq!((fixed.state, fixed.justification), (Some(report::AnalysisState::Resolved), None));
    let investigating =
        report::Analysis::from_openvex("under_investigation", None, None, None, "x").expect("known");
    assert_eq!(investigating.state, Some(report::AnalysisState::InTriage));
    assert_eq!(
        report::Analysis::from_openvex("not_affected", Some("component_not_present"), None, None, "x")
            .and_then(|a| a.justification),
        Some(report::Justification::CodeNotPresent)
    );
    assert!(report::Analysis::from_openvex("maybe", None, None, None, "x").is_none());

    // Without decisions, no analysis at all: the plain scan knows none.
    let plain = scanned.bom(&scanned.assessment);
    assert!(
        plain["vulnerabilities"]
            .as_array()
            .expect("vulnerabilities")
            .iter()
            .all(|v| v.get("analysis").is_none())
    );

    let mut broken = bom.clone();
    broken["vulnerabilities"][0]["analysis"]["state"] = json!("ignored");
    let errors = violations(&cyclonedx_validator(), &broken);
    assert!(errors.iter().any(|e| e.starts_with("/vulnerabilities/0/analysis/state")), "{errors:?}");
}

#[test]
fn spdx_of_a_scan_is_valid_and_describes_the_image_and_every_package() {
    let scanned = scan(true);
    let mut packages = scanned.catalog.packages.clone();
    // A package whose name sanitises to another's SPDX id (`_` and `-`).
    let mut twin = packages.iter().find(|p| p.name == "musl-utils").cloned().expect("musl-utils");
    twin.name = "musl_utils".into();
    packages.push(twin);
    let sbom = report::Sbom { assessment: &scanned.assessment, image: &scanned.image, packages: &packages };
    let doc = report::spdx(&sbom, SERIAL);
    let validator = spdx_validator();
    assert_valid(&validator, &doc, "the SPDX document");

    assert_eq!(doc["spdxVersion"], "SPDX-2.3");
    assert_eq!(doc["dataLicense"], "CC0-1.0");
    assert_eq!(doc["SPDXID"], "SPDXRef-DOCUMENT");
    assert_eq!(doc["name"], "acme/app:1.0");
    let namespace = doc["documentNamespace"].as_str().expect("documentNamespace");
    assert!(is_uri(namespace) && namespace.ends_with(SERIAL) && !namespace.contains('#'), "{namespace}");
    let other = report::spdx(&sbom, "8f1c4f4e-3a53-4a2b-9d55-1b6f1c1e0c2a");
    assert_ne!(other["documentNamespace"], doc["documentNamespace"], "one namespace per document");
    let created = doc["creationInfo"]["created"].as_str().expect("created");
    assert!(
        chrono::NaiveDateTime::parse_from_str(created, "%Y-%m-%dT%H:%M:%SZ").is_ok(),
        "clause 6.9's UTC form: {created}"
    );
    assert_eq!(
        doc["creationInfo"]["creators"],
        json!([format!("Tool: patchpilot-{}", env!("CARGO_PKG_VERSION"))])
    );

    let spdx_packages = doc["packages"].as_array().expect("packages");
    let ids: Vec<&str> = spdx_packages.iter().map(|p| p["SPDXID"].as_str().expect("SPDXID")).collect();
    assert_eq!(ids.len(), ids.iter().collect::<BTreeSet<_>>().len(), "SPDXIDs are unique: {ids:?}");
    for id in &ids {
        assert!(is_spdx_id(id), "{id}");
    }
    let image = &spdx_packages[0];
    assert_eq!(image["SPDXID"], "SPDXRef-Image");
    assert_eq!(image["primaryPackagePurpose"], "CONTAINER");
    assert_eq!(image["versionInfo"], scanned.manifest_digest.as_str());
    assert_eq!(
        image["checksums"],
        json!([{ "algorithm": "SHA256", "checksumValue": scanned.manifest_digest.trim_start_matches("sha256:") }])
    );
    for p in spdx_packages {
        assert_eq!(p["downloadLocation"], "NOASSERTION");
        assert_eq!(p["filesAnalyzed"], false);
        assert_eq!(
            (&p["licenseConcluded"], &p["licenseDeclared"]),
            (&json!("NOASSERTION"), &json!("NOASSERTION"))
        );
    }
    // Every cataloged package once, by its purl.
    let purls: Vec<&str> = spdx_packages
        .iter()
        .flat_map(|p| p["externalRefs"].as_array().into_iter().flatten())
        .filter(|r| r["referenceCategory"] == "PACKAGE-MANAGER" && r["referenceType"] == "purl")
        .map(|r| r["referenceLocator"].as_str().expect("locator"))
        .collect();
    let os = scanned.catalog.os.as_ref().map(|o| o.distro());
    let expected: BTreeSet<String> = packages.iter().map(|p| p.purl(os)).collect();
    assert_eq!(purls.len(), expected.len(), "each package once: {purls:?}");
    assert_eq!(purls.iter().map(|p| (*p).to_owned()).collect::<BTreeSet<_>>(), expected);
    // Two packages whose names differ only by `-` and `_` stay two (apk
    // names are not normalised); their purls carry arch and distro.
    for name in ["musl-utils", "musl_utils"] {
        let prefix = format!("pkg:apk/alpine/{name}@1.1.14-r10?");
        assert!(purls.iter().any(|p| p.starts_with(&prefix)), "{prefix} in {purls:?}");
    }
    let musl_ids: Vec<&str> = ids.iter().copied().filter(|id| id.contains("musl-utils")).collect();
    assert_eq!(musl_ids.len(), 2, "both musl utils packages, told apart: {musl_ids:?}");

    // Relationships: the document describes the image, which contains
    // every other package; each names elements that exist.
    let relationships = doc["relationships"].as_array().expect("relationships");
    let known: BTreeSet<&str> = ids.iter().copied().chain(["SPDXRef-DOCUMENT"]).collect();
    for r in relationships {
        for end in ["spdxElementId", "relatedSpdxElement"] {
            let id = r[end].as_str().expect("id");
            assert!(known.contains(id), "{end} `{id}` names no element");
        }
    }
    let describes: Vec<&Value> =
        relationships.iter().filter(|r| r["relationshipType"] == "DESCRIBES").collect();
    assert_eq!(describes.len(), 1);
    assert_eq!(
        (&describes[0]["spdxElementId"], &describes[0]["relatedSpdxElement"]),
        (&json!("SPDXRef-DOCUMENT"), &json!("SPDXRef-Image"))
    );
    let contained: BTreeSet<&str> = relationships
        .iter()
        .filter(|r| r["relationshipType"] == "CONTAINS" && r["spdxElementId"] == "SPDXRef-Image")
        .filter_map(|r| r["relatedSpdxElement"].as_str())
        .collect();
    let others: BTreeSet<&str> = ids.iter().copied().filter(|id| *id != "SPDXRef-Image").collect();
    assert_eq!(contained, others, "the image contains every other package");
    let os = spdx_packages.iter().find(|p| p["SPDXID"] == "SPDXRef-OperatingSystem").expect("the OS");
    assert_eq!((&os["name"], &os["versionInfo"]), (&json!("alpine"), &json!("3.19.1")));

    let mut broken = doc.clone();
    broken["relationships"][0]["relationshipType"] = json!("OWNS");
    let errors = violations(&validator, &broken);
    assert!(errors.iter().any(|e| e.starts_with("/relationships/0/relationshipType")), "{errors:?}");
    let mut broken = doc.clone();
    broken["packages"][1].as_object_mut().expect("a package").remove("downloadLocation");
    assert!(!validator.is_valid(&broken), "downloadLocation is required");
}
