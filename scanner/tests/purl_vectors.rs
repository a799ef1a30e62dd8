//! Runs the purl specification's own test vectors through PatchPilot's
//! canonical package URL code ([`patchpilot_model::purl::Purl`], which the
//! scanner's `Package::purl` builds with and the planner's VEX matching
//! parses with): every `parse`, `build` and `roundtrip` case of the types
//! PatchPilot writes or matches (apk, deb, rpm, pypi, npm, maven, golang,
//! cargo). The files under `tests/vectors/purl/` are verbatim copies of
//! `package-url/purl-spec` `tests/types/<type>-test.json`; their origins are
//! in `tests/vectors/SOURCES.md`.
//!
//! The suite's schema (`purl-test.schema-0.1.json`): a `parse` case reads
//! `input` (a purl) into the `expected_output` components; a `build` case
//! builds the canonical string `expected_output` from the `input`
//! components; a `roundtrip` case reads `input` and writes it back as the
//! canonical `expected_output`. `expected_failure` cases must be refused.

use std::collections::BTreeMap;

use patchpilot_model::purl::Purl;
use serde::Deserialize;

#[derive(Deserialize)]
struct Suite {
    tests: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    description: String,
    test_type: String,
    input: serde_json::Value,
    expected_output: serde_json::Value,
    expected_failure: bool,
}

/// Decoded components, as the suite writes them (`null` for absent).
#[derive(Debug, Deserialize, PartialEq, Eq)]
struct Components {
    #[serde(rename = "type")]
    ty: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    version: Option<String>,
    qualifiers: Option<BTreeMap<String, String>>,
    subpath: Option<String>,
}

impl Components {
    fn of(purl: &Purl) -> Components {
        Components {
            ty: Some(purl.ty().to_owned()),
            namespace: purl.namespace().map(str::to_owned),
            name: Some(purl.name().to_owned()),
            version: purl.version().map(str::to_owned),
            qualifiers: (!purl.qualifiers().is_empty()).then(|| purl.qualifiers().clone()),
            subpath: purl.subpath().map(str::to_owned),
        }
    }

    fn build(&self) -> Result<Purl, patchpilot_model::purl::Error> {
        let qualifiers: Vec<(&str, &str)> =
            self.qualifiers.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Purl::build(
            self.ty.as_deref().unwrap_or_default(),
            self.namespace.as_deref(),
            self.name.as_deref().unwrap_or_default(),
            self.version.as_deref(),
            &qualifiers,
            self.subpath.as_deref(),
        )
    }
}

fn string(value: &serde_json::Value, what: &str) -> String {
    value.as_str().unwrap_or_else(|| panic!("{what} is a purl string: {value}")).to_owned()
}

fn components(value: &serde_json::Value, what: &str) -> Components {
    serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{what} is a component object: {e}"))
}

/// Runs every case of one file; returns how many of each test type ran.
fn run(file: &str, text: &str) -> BTreeMap<String, usize> {
    let suite: Suite = serde_json::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut ran: BTreeMap<String, usize> = BTreeMap::new();
    for (i, case) in suite.tests.iter().enumerate() {
        let at = format!("{file} #{i} ({}, {})", case.test_type, case.description);
        match case.test_type.as_str() {
            "parse" => {
                let parsed = Purl::parse(&string(&case.input, "input"));
                if case.expected_failure {
                    assert!(parsed.is_err(), "{at}: must be refused, got {parsed:?}");
                } else {
                    let purl = parsed.unwrap_or_else(|e| panic!("{at}: {e}"));
                    assert_eq!(Components::of(&purl), components(&case.expected_output, "output"), "{at}");
                }
            }
            "build" => {
                let built = components(&case.input, "input").build();
                if case.expected_failure {
                    assert!(built.is_err(), "{at}: must be refused, got {built:?}");
                } else {
                    let purl = built.unwrap_or_else(|e| panic!("{at}: {e}"));
                    assert_eq!(purl.to_string(), string(&case.expected_output, "output"), "{at}");
                }
            }
            "roundtrip" => {
                let parsed = Purl::parse(&string(&case.input, "input"));
                if case.expected_failure {
                    assert!(parsed.is_err(), "{at}: must be refused, got {parsed:?}");
                } else {
                    let purl = parsed.unwrap_or_else(|e| panic!("{at}: {e}"));
                    let expected = string(&case.expected_output, "output");
                    assert_eq!(purl.to_string(), expected, "{at}");
                    // Canonical means stable: reading the output gives it back.
                    let again = Purl::parse(&expected).unwrap_or_else(|e| panic!("{at}: output: {e}"));
                    assert_eq!(again.to_string(), expected, "{at}: output read back");
                }
            }
            other => panic!("{at}: unknown test type `{other}`"),
        }
        *ran.entry(case.test_type.clone()).or_default() += 1;
    }
    ran
}

/// `(parse, build, roundtrip)` cases per file, so a file that stopped
/// loading, or lost cases, fails rather than passing empty.
fn assert_counts(file: &str, text: &str, expected: (usize, usize, usize)) {
    let ran = run(file, text);
    let count = |t: &str| ran.get(t).copied().unwrap_or(0);
    assert_eq!((count("parse"), count("build"), count("roundtrip")), expected, "{file}");
}

#[test]
fn apk() {
    assert_counts("apk-test.json", include_str!("vectors/purl/apk-test.json"), (2, 2, 2));
}

#[test]
fn deb() {
    assert_counts("deb-test.json", include_str!("vectors/purl/deb-test.json"), (6, 6, 7));
}

#[test]
fn rpm() {
    assert_counts("rpm-test.json", include_str!("vectors/purl/rpm-test.json"), (3, 3, 4));
}

#[test]
fn pypi() {
    assert_counts("pypi-test.json", include_str!("vectors/purl/pypi-test.json"), (5, 5, 6));
}

#[test]
fn npm() {
    assert_counts("npm-test.json", include_str!("vectors/purl/npm-test.json"), (6, 4, 7));
}

#[test]
fn maven() {
    assert_counts("maven-test.json", include_str!("vectors/purl/maven-test.json"), (17, 17, 27));
}

#[test]
fn golang() {
    assert_counts("golang-test.json", include_str!("vectors/purl/golang-test.json"), (5, 5, 7));
}

#[test]
fn cargo() {
    assert_counts("cargo-test.json", include_str!("vectors/purl/cargo-test.json"), (3, 3, 3));
}
