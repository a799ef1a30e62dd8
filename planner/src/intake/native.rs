//! PatchPilot's own assessment document: a manifest of images and the
//! findings in each. `schemas/assessment.v1.schema.json` documents it; the
//! serde form of [`Assessment`] is the definition.
//!
//! ```json
//! {
//!   "schema": "patchpilot/assessment/v1",
//!   "assessments": [
//!     {
//!       "image": "ghcr.io/acme/api:1.4.2",
//!       "digest": "sha256:…",
//!       "findings": [
//!         { "id": "CVE-2024-2511",
//!           "package": { "name": "libssl3", "version": "3.1.4-r5", "type": "apk" },
//!           "fixed_versions": ["3.1.4-r6"], "severity": "medium" }
//!       ]
//!     }
//!   ]
//! }
//! ```

use patchpilot_model::Assessment;
pub use patchpilot_model::{ASSESSMENT_SCHEMA as SCHEMA, AssessmentDocument as Document};

use super::{Error, ImageOverride, typed};

/// Parses and validates a native document.
pub fn parse(doc: serde_json::Value, image: Option<&ImageOverride>) -> Result<Vec<Assessment>, Error> {
    let mut document: Document = typed(doc)?;
    if document.schema != SCHEMA {
        return Err(Error::new(
            "schema",
            format!("unsupported schema `{}`; this version reads `{SCHEMA}`", document.schema),
        ));
    }
    if let Some(o) = image {
        if document.assessments.len() != 1 {
            return Err(Error::new(
                "assessments",
                format!("--image applies to one image, but the document has {}", document.assessments.len()),
            ));
        }
        document.assessments[0].image = o.image.clone();
        document.assessments[0].digest = o.digest.clone();
    }
    for (i, a) in document.assessments.iter_mut().enumerate() {
        a.validate().map_err(|e| Error::from_validation(e, &format!("assessments[{i}]")))?;
        if a.source_format.is_empty() {
            a.source_format = "patchpilot".into();
        }
    }
    Ok(document.assessments)
}

#[cfg(test)]
mod tests {
    use super::super::{Format, parse as parse_any};

    fn doc(findings: &str) -> String {
        format!(
            r#"{{"schema":"patchpilot/assessment/v1","assessments":[{{"image":"r.local/a:1","digest":"sha256:{}","findings":[{findings}]}}]}}"#,
            "c".repeat(64)
        )
    }

    #[test]
    fn reads_minimal_document() {
        let (format, a) = parse_any(
            doc(r#"{"id":"CVE-1","package":{"name":"zlib","version":"1.2"},"severity":"HIGH","fixed_versions":["1.3"]}"#).as_bytes(),
            None,
            None,
        )
        .expect("valid");
        assert_eq!(format, Format::Native);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].findings[0].severity, patchpilot_model::Severity::High);
        assert_eq!(a[0].source_format, "patchpilot");
    }

    #[test]
    fn errors_name_the_json_path() {
        let err = parse_any(
            doc(r#"{"id":"CVE-1","package":{"name":"zlib","version":"1.2"}},{"id":"CVE-2","package":{"name":"zlib","version":"1.2"},"severity":"bad"}"#).as_bytes(),
            None,
            None,
        )
        .expect_err("bad severity");
        assert_eq!(err.path, "assessments[0].findings[1].severity", "{err}");
        let err =
            parse_any(doc(r#"{"id":"","package":{"name":"zlib","version":"1.2"}}"#).as_bytes(), None, None)
                .expect_err("empty id");
        assert_eq!(err.path, "assessments[0].findings[0].id");
        let err =
            parse_any(doc(r#"{"id":"CVE-1","pkg":{}}"#).as_bytes(), None, None).expect_err("unknown field");
        assert!(err.path.starts_with("assessments[0].findings[0]"), "{err}");
        let bad_digest = r#"{"schema":"patchpilot/assessment/v1","assessments":[{"image":"a:1","digest":"md5:1","findings":[]}]}"#;
        let err = parse_any(bad_digest.as_bytes(), None, None).expect_err("bad digest");
        assert_eq!(err.path, "assessments[0].digest");
    }
}

#[cfg(test)]
mod schema_tests {
    //! The JSON Schema in `schemas/` and the serde definition must agree:
    //! every document the parser accepts or prints validates, and fields the
    //! parser refuses, the schema refuses too.

    use super::super::parse as parse_any;
    use super::Document;

    fn root() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn validator() -> jsonschema::Validator {
        let schema: serde_json::Value = serde_json::from_slice(
            &std::fs::read(root().join("schemas/assessment.v1.schema.json")).expect("schema file"),
        )
        .expect("schema is JSON");
        jsonschema::validator_for(&schema).expect("schema compiles")
    }

    fn errors(v: &jsonschema::Validator, doc: &serde_json::Value) -> Vec<String> {
        v.iter_errors(doc).map(|e| format!("{}: {e}", e.instance_path())).collect()
    }

    #[test]
    fn examples_and_converted_reports_validate() {
        let v = validator();
        let example: serde_json::Value = serde_json::from_slice(
            &std::fs::read(root().join("examples/assessments/payments.json")).expect("example"),
        )
        .expect("json");
        assert_eq!(errors(&v, &example), Vec::<String>::new());
        for report in [
            "trivy-alpine-310-registry.json",
            "trivy-fluentd-debian-gemspec.json",
            "grype-chainguard-rabbitmq-image.json",
        ] {
            let bytes = std::fs::read(root().join("tests/fixtures/reports").join(report)).expect("fixture");
            let (_, assessments) = parse_any(&bytes, None, None).expect("parses");
            let printed = serde_json::to_value(Document::new(assessments)).expect("serializes");
            assert_eq!(errors(&v, &printed), Vec::<String>::new(), "{report}");
            // What --dry-run prints is itself a valid native document.
            let (_, again) = parse_any(printed.to_string().as_bytes(), None, None).expect("re-reads");
            assert!(!again.is_empty());
        }
    }

    #[test]
    fn schema_and_parser_refuse_the_same_mistakes() {
        let v = validator();
        let base = format!(
            r#"{{"schema":"patchpilot/assessment/v1","assessments":[{{"image":"a:1","digest":"sha256:{}","findings":[{{"id":"CVE-1","package":{{"name":"z","version":"1"}},"severity":"high"}}]}}]}}"#,
            "a".repeat(64)
        );
        let good: serde_json::Value = serde_json::from_str(&base).expect("json");
        assert!(errors(&v, &good).is_empty());
        assert!(parse_any(base.as_bytes(), None, None).is_ok());
        let mutations: [(&str, serde_json::Value); 4] = [
            ("/assessments/0/findings/0/severity", "urgent".into()),
            ("/assessments/0/digest", "sha256:abc".into()),
            ("/assessments/0/findings/0/package/version", "".into()),
            ("/assessments/0/extra", true.into()),
        ];
        for (pointer, value) in mutations {
            let mut doc = good.clone();
            match doc.pointer_mut(pointer) {
                Some(slot) => *slot = value,
                None => {
                    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
                    doc.pointer_mut(parent)
                        .and_then(|p| p.as_object_mut())
                        .expect("parent")
                        .insert(key.into(), value);
                }
            }
            assert!(!errors(&v, &doc).is_empty(), "schema accepts {pointer}");
            assert!(parse_any(doc.to_string().as_bytes(), None, None).is_err(), "parser accepts {pointer}");
        }
    }
}
