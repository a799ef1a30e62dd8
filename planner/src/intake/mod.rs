//! Reading scanner reports into [`Assessment`]s.
//!
//! Three formats, detected from the document or forced:
//!
//! - [`native`]: PatchPilot's own assessment document (one or more images),
//!   described by `schemas/assessment.v1.schema.json`;
//! - [`trivy`]: `trivy image -f json` (schema version 2), OS and language
//!   results;
//! - [`grype`]: `grype -o json`.
//!
//! A document is read whole or not at all: any bad field fails the whole
//! document with the JSON path of that field, so nothing from a bad file is
//! ever published.
//!
//! Report text is evidence from scanners and registries: it is parsed into
//! typed fields and never interpreted beyond that.

pub mod grype;
pub mod native;
pub mod trivy;

use std::fmt;
use std::str::FromStr;

use patchpilot_model::{Assessment, ImageDigest, ValidationError};

/// A report that could not be read. `path` is a JSON path into the document
/// (`Results[0].Vulnerabilities[3].Severity`), empty for whole-document
/// problems.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{reason}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct Error {
    /// Where in the document.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

impl Error {
    pub(crate) fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Error { path: path.into(), reason: reason.into() }
    }

    pub(crate) fn from_serde(e: serde_path_to_error::Error<serde_json::Error>) -> Self {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        Error { path, reason: e.into_inner().to_string() }
    }

    pub(crate) fn from_validation(e: ValidationError, parent: &str) -> Self {
        let e = if parent.is_empty() { e } else { e.within(parent) };
        Error { path: e.path, reason: e.reason }
    }
}

/// A supported report format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// PatchPilot's assessment document.
    Native,
    /// Trivy JSON.
    Trivy,
    /// Grype JSON.
    Grype,
}

impl Format {
    /// The name used in `--format` and `source_format`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Native => "patchpilot",
            Format::Trivy => "trivy",
            Format::Grype => "grype",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "patchpilot" | "native" => Ok(Format::Native),
            "trivy" => Ok(Format::Trivy),
            "grype" => Ok(Format::Grype),
            other => Err(format!("unknown format `{other}` (patchpilot, trivy, grype)")),
        }
    }
}

/// Identity to give findings from reports that do not scan an image
/// (filesystem, repository or SBOM scans), or to override the report's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageOverride {
    /// Image reference, e.g. `ghcr.io/acme/api:1.4.2`.
    pub image: String,
    /// Its manifest digest.
    pub digest: ImageDigest,
}

impl FromStr for ImageOverride {
    type Err = String;

    /// Parses `REF@sha256:…`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (image, digest) = s
            .rsplit_once('@')
            .ok_or_else(|| format!("`{s}` must be IMAGE@DIGEST, e.g. ghcr.io/acme/api:1.0@sha256:…"))?;
        if image.is_empty() {
            return Err(format!("`{s}` has no image name before @"));
        }
        Ok(ImageOverride { image: image.to_owned(), digest: digest.parse()? })
    }
}

/// Recognises the format of a parsed document.
pub fn detect(doc: &serde_json::Value) -> Option<Format> {
    let obj = doc.as_object()?;
    if obj.get("schema").and_then(|s| s.as_str()).is_some_and(|s| s.starts_with("patchpilot")) {
        return Some(Format::Native);
    }
    if obj.contains_key("SchemaVersion") || (obj.contains_key("ArtifactName") && obj.contains_key("Results"))
    {
        return Some(Format::Trivy);
    }
    if obj.contains_key("matches") && (obj.contains_key("source") || obj.contains_key("descriptor")) {
        return Some(Format::Grype);
    }
    None
}

/// Parses a whole report. `format` forces the format; otherwise it is
/// detected. Every returned assessment has passed validation.
pub fn parse(
    bytes: &[u8],
    format: Option<Format>,
    image: Option<&ImageOverride>,
) -> Result<(Format, Vec<Assessment>), Error> {
    let doc: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| Error::new("", format!("not valid JSON: {e}")))?;
    let format = match format {
        Some(f) => f,
        None => detect(&doc).ok_or_else(|| {
            Error::new(
                "",
                "unrecognised report: expected a PatchPilot assessment (\"schema\"), \
                 a Trivy report (\"SchemaVersion\"/\"Results\") or a Grype report (\"matches\"); \
                 use --format to force one",
            )
        })?,
    };
    let assessments = match format {
        Format::Native => native::parse(doc, image)?,
        Format::Trivy => vec![trivy::parse(doc, image)?],
        Format::Grype => vec![grype::parse(doc, image)?],
    };
    Ok((format, assessments))
}

/// Deserializes `doc` into `T`, reporting the JSON path of any error.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(doc: serde_json::Value) -> Result<T, Error> {
    serde_path_to_error::deserialize(doc).map_err(Error::from_serde)
}

/// Splits a comma-separated version list (`"6.0.3.1, 5.2.4.3"`).
pub(crate) fn split_versions(s: Option<&str>) -> Vec<String> {
    s.unwrap_or_default().split(',').map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection() {
        let d = |s: &str| detect(&serde_json::from_str(s).expect("json"));
        assert_eq!(d(r#"{"schema":"patchpilot/assessment/v1","assessments":[]}"#), Some(Format::Native));
        assert_eq!(d(r#"{"SchemaVersion":2,"ArtifactName":"x"}"#), Some(Format::Trivy));
        assert_eq!(d(r#"{"matches":[],"source":{}}"#), Some(Format::Grype));
        assert_eq!(d(r#"{"hello":1}"#), None);
        assert_eq!(d(r#"[1,2]"#), None);
    }

    #[test]
    fn not_json_and_unknown_are_clear() {
        let err = parse(b"{nope", None, None).expect_err("bad json");
        assert!(err.reason.contains("not valid JSON"), "{err}");
        let err = parse(br#"{"a":1}"#, None, None).expect_err("unknown");
        assert!(err.reason.contains("--format"), "{err}");
    }

    #[test]
    fn image_override_parses() {
        let o: ImageOverride = format!("ghcr.io/acme/api:1@sha256:{}", "a".repeat(64)).parse().expect("ok");
        assert_eq!(o.image, "ghcr.io/acme/api:1");
        assert!("ghcr.io/acme/api:1".parse::<ImageOverride>().is_err());
        assert!("x@sha256:12".parse::<ImageOverride>().is_err());
    }
}
