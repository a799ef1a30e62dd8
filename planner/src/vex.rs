//! OpenVEX documents (v0.0.1 and v0.2.0): statements that a product is, or
//! is not, affected by a vulnerability.
//!
//! Products are matched by package URL. An OCI product
//! (`pkg:oci/name[@digest]?repository_url=…&tag=…`) matches an image; its
//! `subcomponents` narrow the statement to packages inside it. Any other
//! purl matches a package wherever it is installed. For each finding the
//! latest applicable statement wins; `not_affected` and `fixed` suppress it.
//!
//! VEX text is evidence from outside: it can only suppress findings it names
//! exactly, never widen anything.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, FixedOffset};
use patchpilot_model::Finding;
use serde::Deserialize;

use crate::mapping::ImageReference;

/// Why VEX documents could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("cannot read VEX document {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not a valid OpenVEX document.
    #[error("{path}: {field}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// JSON path of the bad field.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

/// VEX status of a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The product does not contain or use the vulnerable code.
    NotAffected,
    /// The product is affected.
    Affected,
    /// The vulnerability was fixed in the product.
    Fixed,
    /// Not yet known.
    UnderInvestigation,
}

impl Status {
    /// The status as OpenVEX writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::NotAffected => "not_affected",
            Status::Affected => "affected",
            Status::Fixed => "fixed",
            Status::UnderInvestigation => "under_investigation",
        }
    }

    /// Whether the statement suppresses findings.
    pub fn suppresses(self) -> bool {
        matches!(self, Status::NotAffected | Status::Fixed)
    }
}

#[derive(Debug, Deserialize)]
struct Document {
    #[serde(rename = "@context")]
    _context: String,
    #[serde(default)]
    timestamp: Option<DateTime<FixedOffset>>,
    statements: Vec<RawStatement>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawVulnerability {
    Name(String),
    Object {
        #[serde(default)]
        name: Option<String>,
        #[serde(rename = "@id", default)]
        id: Option<String>,
        #[serde(default)]
        aliases: Vec<String>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawProduct {
    Id(String),
    Object {
        #[serde(rename = "@id", default)]
        id: Option<String>,
        #[serde(default)]
        identifiers: HashMap<String, String>,
        #[serde(default)]
        subcomponents: Vec<RawProduct>,
    },
}

#[derive(Debug, Deserialize)]
struct RawStatement {
    vulnerability: RawVulnerability,
    #[serde(default)]
    products: Vec<RawProduct>,
    status: Status,
    #[serde(default)]
    timestamp: Option<DateTime<FixedOffset>>,
    #[serde(default)]
    justification: Option<String>,
    #[serde(default)]
    impact_statement: Option<String>,
    #[serde(default)]
    action_statement: Option<String>,
}

/// A package URL, parsed far enough to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purl {
    /// Type, lowercase: `apk`, `deb`, `oci`…
    pub kind: String,
    /// Namespace, possibly empty.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Version, percent-decoded.
    pub version: Option<String>,
    /// Qualifiers, percent-decoded.
    pub qualifiers: HashMap<String, String>,
}

fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(hi << 4 | lo);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Purl {
    /// Parses `pkg:type/namespace/name@version?qualifiers#subpath`.
    pub fn parse(text: &str) -> Option<Purl> {
        let rest = text.strip_prefix("pkg:")?;
        let rest = rest.split('#').next().unwrap_or_default();
        let (rest, qualifiers) = match rest.split_once('?') {
            Some((r, q)) => (r, q),
            None => (rest, ""),
        };
        let (path, version) = match rest.rsplit_once('@') {
            Some((p, v)) if !p.is_empty() => (p, Some(percent_decode(v))),
            _ => (rest, None),
        };
        let mut segments = path.trim_matches('/').split('/');
        let kind = segments.next()?.to_ascii_lowercase();
        let mut parts: Vec<String> = segments.map(percent_decode).collect();
        let name = parts.pop()?;
        if kind.is_empty() || name.is_empty() {
            return None;
        }
        let qualifiers = qualifiers
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_ascii_lowercase(), percent_decode(v)))
            .collect();
        Some(Purl { kind, namespace: parts.join("/"), name, version, qualifiers })
    }

    /// Whether this (statement) purl covers `installed`: same type,
    /// namespace and name, and the same version when this one names one.
    fn covers(&self, installed: &Purl) -> bool {
        self.kind == installed.kind
            && self.namespace.eq_ignore_ascii_case(&installed.namespace)
            && self.name == installed.name
            && self.version.as_ref().is_none_or(|v| installed.version.as_ref() == Some(v))
    }
}

/// Docker-style canonical repository: `docker.io/library/x` for short names.
fn canonical_repository(repository: &str) -> String {
    let reference = ImageReference::parse(repository);
    let repo = reference.repository;
    let repo = repo.strip_prefix("index.docker.io/").map(|r| format!("docker.io/{r}")).unwrap_or(repo);
    match repo.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => repo,
        Some(_) => format!("docker.io/{repo}"),
        None => format!("docker.io/library/{repo}"),
    }
}

/// The purl type of a package kind as PatchPilot names it.
fn purl_type_of(kind: &str) -> &str {
    match kind {
        "go-module" | "gomod" | "gobinary" => "golang",
        "python" => "pypi",
        "java-archive" | "jar" => "maven",
        "rust-crate" => "cargo",
        other => other,
    }
}

#[derive(Debug, Clone)]
enum Scope {
    /// An image, optionally narrowed to packages.
    Image { oci: Purl, subcomponents: Vec<Purl> },
    /// A package anywhere.
    Package(Purl),
}

#[derive(Debug, Clone)]
struct Statement {
    scopes: Vec<Scope>,
    status: Status,
    at: Option<DateTime<FixedOffset>>,
    source: PathBuf,
    justification: Option<String>,
    impact_statement: Option<String>,
    action_statement: Option<String>,
}

/// Loaded statements, indexed by vulnerability id (uppercase).
#[derive(Debug, Clone, Default)]
pub struct VexIndex {
    by_vulnerability: HashMap<String, Vec<Statement>>,
    documents: usize,
}

/// A statement's verdict on one finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VexVerdict {
    /// The winning status.
    pub status: Status,
    /// The document it came from.
    pub source: PathBuf,
    /// The statement's `justification` (OpenVEX's vocabulary, as written),
    /// when it gives one.
    pub justification: Option<String>,
    /// Its `impact_statement`: why the product is not affected.
    pub impact_statement: Option<String>,
    /// Its `action_statement`: what to do about an affected product.
    pub action_statement: Option<String>,
}

impl VexIndex {
    /// Loads every path: a file, or a folder whose `*.json` files are read.
    pub fn load(paths: &[PathBuf]) -> Result<VexIndex, Error> {
        let mut index = VexIndex::default();
        for path in paths {
            if path.is_dir() {
                let entries =
                    std::fs::read_dir(path).map_err(|source| Error::Read { path: path.clone(), source })?;
                let mut files: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect();
                files.sort();
                for file in files {
                    index.add_file(&file)?;
                }
            } else {
                index.add_file(path)?;
            }
        }
        Ok(index)
    }

    /// Number of documents loaded.
    pub fn documents(&self) -> usize {
        self.documents
    }

    fn add_file(&mut self, path: &Path) -> Result<(), Error> {
        let text = std::fs::read(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
        self.add_document(path, &text)
    }

    /// Adds one document; `path` names it in errors and verdicts.
    pub fn add_document(&mut self, path: &Path, json: &[u8]) -> Result<(), Error> {
        let mut de = serde_json::Deserializer::from_slice(json);
        let doc: Document = serde_path_to_error::deserialize(&mut de).map_err(|e| Error::Invalid {
            path: path.to_owned(),
            field: e.path().to_string(),
            reason: e.inner().to_string(),
        })?;
        for (i, raw) in doc.statements.into_iter().enumerate() {
            let field = |f: &str| format!("statements[{i}].{f}");
            let (ids, _) = match raw.vulnerability {
                RawVulnerability::Name(name) => (vec![name], ()),
                RawVulnerability::Object { name, id, aliases } => {
                    let mut ids: Vec<String> = name.into_iter().chain(aliases).collect();
                    // @id is often a URL; keep it only when it is a bare id.
                    if let Some(id) = id.filter(|id| !id.contains('/')) {
                        ids.push(id);
                    }
                    (ids, ())
                }
            };
            if ids.is_empty() {
                return Err(Error::Invalid {
                    path: path.to_owned(),
                    field: field("vulnerability"),
                    reason: "names no vulnerability".into(),
                });
            }
            let mut scopes = Vec::new();
            for (j, product) in raw.products.iter().enumerate() {
                let (purl_text, subcomponents) = product_purl(product);
                let Some(purl_text) = purl_text else { continue };
                let Some(purl) = Purl::parse(&purl_text) else {
                    return Err(Error::Invalid {
                        path: path.to_owned(),
                        field: field(&format!("products[{j}]")),
                        reason: format!("`{purl_text}` is not a package URL"),
                    });
                };
                if purl.kind == "oci" {
                    let subcomponents = subcomponents
                        .iter()
                        .filter_map(|s| product_purl(s).0)
                        .filter_map(|s| Purl::parse(&s))
                        .collect();
                    scopes.push(Scope::Image { oci: purl, subcomponents });
                } else {
                    scopes.push(Scope::Package(purl));
                }
            }
            let statement = Statement {
                scopes,
                status: raw.status,
                at: raw.timestamp.or(doc.timestamp),
                source: path.to_owned(),
                justification: raw.justification,
                impact_statement: raw.impact_statement,
                action_statement: raw.action_statement,
            };
            for id in ids {
                self.by_vulnerability.entry(id.to_ascii_uppercase()).or_default().push(statement.clone());
            }
        }
        self.documents += 1;
        Ok(())
    }

    /// The latest statement that applies to `finding` in the image
    /// `image_ref`@`digest`, if any.
    pub fn verdict(&self, image_ref: &str, digest: &str, finding: &Finding) -> Option<VexVerdict> {
        if self.by_vulnerability.is_empty() {
            return None;
        }
        let installed = installed_purl(finding);
        let mut best: Option<&Statement> = None;
        let ids = std::iter::once(&finding.id).chain(finding.aliases.iter());
        for id in ids {
            let Some(statements) = self.by_vulnerability.get(&id.to_ascii_uppercase()) else { continue };
            for s in statements {
                if s.scopes.iter().any(|scope| scope_applies(scope, image_ref, digest, &installed)) {
                    best = match best {
                        Some(b) if b.at >= s.at => Some(b),
                        _ => Some(s),
                    };
                }
            }
        }
        best.map(|s| VexVerdict {
            status: s.status,
            source: s.source.clone(),
            justification: s.justification.clone(),
            impact_statement: s.impact_statement.clone(),
            action_statement: s.action_statement.clone(),
        })
    }
}

fn product_purl(p: &RawProduct) -> (Option<String>, &[RawProduct]) {
    match p {
        RawProduct::Id(id) => (Some(id.clone()), &[]),
        RawProduct::Object { id, identifiers, subcomponents } => {
            let purl = identifiers.get("purl").cloned().or_else(|| id.clone());
            (purl, subcomponents)
        }
    }
}

/// The finding's package as a purl: its own when it has one, else built from
/// type and name.
fn installed_purl(finding: &Finding) -> Option<Purl> {
    if let Some(p) = Purl::parse(&finding.package.purl) {
        return Some(p);
    }
    if finding.package.kind.is_empty() {
        return None;
    }
    Some(Purl {
        kind: purl_type_of(&finding.package.kind).to_owned(),
        namespace: String::new(),
        name: finding.package.name.clone(),
        version: Some(finding.package.version.clone()),
        qualifiers: HashMap::new(),
    })
}

/// Compares names, ignoring the namespace when one side lacks it (a purl
/// built from a bare package type has none).
fn package_matches(statement: &Purl, installed: &Option<Purl>) -> bool {
    let Some(installed) = installed else { return false };
    if statement.namespace.is_empty() || installed.namespace.is_empty() {
        statement.kind == installed.kind
            && statement.name == installed.name
            && statement.version.as_ref().is_none_or(|v| installed.version.as_ref() == Some(v))
    } else {
        statement.covers(installed)
    }
}

fn scope_applies(scope: &Scope, image_ref: &str, digest: &str, installed: &Option<Purl>) -> bool {
    match scope {
        Scope::Package(p) => package_matches(p, installed),
        Scope::Image { oci, subcomponents } => {
            if !oci_matches(oci, image_ref, digest) {
                return false;
            }
            subcomponents.is_empty() || subcomponents.iter().any(|s| package_matches(s, installed))
        }
    }
}

fn oci_matches(oci: &Purl, image_ref: &str, digest: &str) -> bool {
    if let Some(version) = &oci.version
        && !version.eq_ignore_ascii_case(digest)
    {
        return false;
    }
    let reference = ImageReference::parse(image_ref);
    if let Some(tag) = oci.qualifiers.get("tag")
        && reference.tag.as_deref() != Some(tag.as_str())
    {
        return false;
    }
    match oci.qualifiers.get("repository_url") {
        Some(url) => canonical_repository(url) == canonical_repository(&reference.repository),
        None => {
            // Without a repository, the purl name is the image's last path
            // segment; a digest pins it anyway.
            oci.version.is_some() || reference.repository.rsplit('/').next() == Some(oci.name.as_str())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use patchpilot_model::{Package, Severity};

    fn finding(id: &str, name: &str, kind: &str, purl: &str) -> Finding {
        Finding {
            id: id.into(),
            aliases: vec![],
            package: Package {
                name: name.into(),
                version: "1.36.1-r15".into(),
                kind: kind.into(),
                ecosystem: String::new(),
                source_name: String::new(),
                source_version: String::new(),
                path: String::new(),
                layer: String::new(),
                purl: purl.into(),
            },
            fixed_versions: vec!["1.36.1-r16".into()],
            severity: Severity::Medium,
            cvss: vec![],
            title: String::new(),
        }
    }

    fn fixture(name: &str) -> PathBuf {
        crate::report_fixture(name)
    }

    #[test]
    fn purl_parsing() {
        let p =
            Purl::parse("pkg:oci/trivy@sha256%3Aabc?repository_url=ghcr.io%2Faquasecurity%2Ftrivy&tag=0.50")
                .expect("parses");
        assert_eq!((p.kind.as_str(), p.name.as_str()), ("oci", "trivy"));
        assert_eq!(p.version.as_deref(), Some("sha256:abc"));
        assert_eq!(
            p.qualifiers.get("repository_url").map(String::as_str),
            Some("ghcr.io/aquasecurity/trivy")
        );
        let p = Purl::parse("pkg:apk/alpine/busybox@1.36.1-r15?arch=x86_64").expect("parses");
        assert_eq!((p.namespace.as_str(), p.version.as_deref()), ("alpine", Some("1.36.1-r15")));
        assert!(Purl::parse("not-a-purl").is_none());
    }

    #[test]
    fn trivy_published_vex_suppresses_busybox_in_trivy_images_only() {
        // Aqua's own VEX for the trivy image: busybox CVEs not_affected.
        let index = VexIndex::load(&[fixture("openvex-trivy-oci-not-affected.json")]).expect("loads");
        let f = finding("CVE-2023-42363", "busybox", "apk", "pkg:apk/alpine/busybox@1.36.1-r15?arch=x86_64");
        let v = index.verdict("ghcr.io/aquasecurity/trivy:0.50.1", "sha256:00", &f).expect("applies");
        assert_eq!(v.status, Status::NotAffected);
        assert_eq!(v.status.as_str(), "not_affected");
        assert_eq!(
            (v.justification.as_deref(), v.impact_statement.as_deref()),
            (Some("vulnerable_code_cannot_be_controlled_by_adversary"), Some("awk is not used")),
            "the statement's reasons travel with the verdict"
        );
        // index.docker.io and a short Docker Hub name are the same repository.
        assert!(index.verdict("aquasec/trivy:0.50.1", "sha256:00", &f).is_some());
        // Another image: not covered.
        assert!(index.verdict("ghcr.io/acme/api:1", "sha256:00", &f).is_none());
        // Another package in the trivy image: not covered.
        let other = finding("CVE-2023-42363", "musl", "apk", "pkg:apk/alpine/musl@1.2.4-r2");
        assert!(index.verdict("ghcr.io/aquasecurity/trivy:0.50.1", "sha256:00", &other).is_none());
    }

    #[test]
    fn package_scoped_fixed_statement_matches_version() {
        let index = VexIndex::load(&[fixture("openvex-vexctl-demo-fixed.json")]).expect("loads");
        let mut f = finding("CVE-2014-123456", "git", "apk", "pkg:apk/distro/git@2.39.0-r1?arch=x86_64");
        f.package.version = "2.39.0-r1".into();
        assert_eq!(index.verdict("any/image:1", "sha256:00", &f).map(|v| v.status), Some(Status::Fixed));
        f.package.purl = "pkg:apk/distro/git@2.38.0-r0?arch=x86_64".into();
        assert!(index.verdict("any/image:1", "sha256:00", &f).is_none(), "other version");
    }

    #[test]
    fn latest_statement_wins() {
        let doc = br#"{"@context":"https://openvex.dev/ns/v0.2.0","timestamp":"2024-01-01T00:00:00Z","statements":[
          {"vulnerability":{"name":"CVE-1"},"products":[{"@id":"pkg:deb/debian/openssl"}],"status":"not_affected","timestamp":"2024-01-01T00:00:00Z"},
          {"vulnerability":{"name":"CVE-1"},"products":[{"@id":"pkg:deb/debian/openssl"}],"status":"affected","timestamp":"2024-02-01T00:00:00Z"}]}"#;
        let mut index = VexIndex::default();
        index.add_document(Path::new("inline.json"), doc).expect("valid");
        let f = finding("CVE-1", "openssl", "deb", "pkg:deb/debian/openssl@3.0.11-1");
        assert_eq!(index.verdict("x:1", "sha256:00", &f).map(|v| v.status), Some(Status::Affected));
    }

    #[test]
    fn invalid_document_names_field() {
        let mut index = VexIndex::default();
        let err = index
            .add_document(
                Path::new("bad.json"),
                br#"{"@context":"x","statements":[{"vulnerability":{"name":"CVE-1"},"status":"maybe"}]}"#,
            )
            .expect_err("bad status");
        let msg = err.to_string();
        assert!(msg.contains("bad.json") && msg.contains("statements[0].status"), "{msg}");
    }
}
