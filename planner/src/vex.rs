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
//! exactly, never widen anything. Both sides are compared as canonical
//! package URLs ([`patchpilot_model::purl`]), so the spellings tools and
//! vendors use for one package meet: a statement purl covers a finding's
//! package when
//!
//! - type, namespace and name are the same in their canonical forms (PyPI
//!   names normalised, deb, apk, npm and golang names lower case, vendors
//!   `redhat`/`rhel` and the like as one); a statement without a namespace
//!   names that package under any vendor, but a statement with one never
//!   matches a package whose purl has none;
//! - the statement names no version, or the same one: the rpm epoch from
//!   either the `epoch` qualifier or an `N:` prefix (none is 0), a Go version
//!   with or without its `v`;
//! - the `arch` and `distro` it names agree with the package's (`distro`
//!   `debian-12` covers `debian-12.5`, not the other way round), and every
//!   other qualifier it names is on the package with the same value, except
//!   those that only say where a package can be fetched or repeat its
//!   source (`repository_url`, `repository_id`, `download_url`, `vcs_url`,
//!   Syft's `upstream`). What cannot be checked (a `distro` or `arch` the
//!   finding's purl lacks) does not match.
//!
//! A statement on a source package (`arch=src` for rpm, as Red Hat's VEX
//! names components; `arch=source` for deb) names every binary package
//! built from it: it is compared with the finding's source name and source
//! version (its own when the finding names none; an rpm source version
//! without an epoch has the binary's, which the spec file gives both).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, FixedOffset};
use patchpilot_model::Finding;
use patchpilot_model::purl::{self, Purl};
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
                let parse = |text: &str, at: String| {
                    Purl::parse(text).map_err(|e| Error::Invalid {
                        path: path.to_owned(),
                        field: field(&at),
                        reason: not_a_purl(text, &e),
                    })
                };
                let purl = parse(&purl_text, format!("products[{j}]"))?;
                if purl.ty() == "oci" {
                    // A subcomponent that cannot be read is an error, not
                    // dropped: dropping every one would leave a statement on
                    // the whole image.
                    let mut parsed = Vec::new();
                    for (k, sub) in subcomponents.iter().enumerate() {
                        let Some(text) = product_purl(sub).0 else { continue };
                        parsed.push(parse(&text, format!("products[{j}].subcomponents[{k}]"))?);
                    }
                    scopes.push(Scope::Image { oci: purl, subcomponents: parsed });
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
        let installed = installed(finding);
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

/// Why a statement's purl was refused, naming it once.
fn not_a_purl(text: &str, e: &purl::Error) -> String {
    match e {
        purl::Error::Syntax { .. } => e.to_string(),
        other => format!("`{text}` is not a package URL: {other}"),
    }
}

/// A finding's package as statements are compared with it.
#[derive(Debug)]
struct Installed {
    /// Its package URL.
    purl: Purl,
    /// The source package it was built from, as a purl with the source
    /// marker (`arch=src`, `arch=source`); rpm and deb only.
    source: Option<Purl>,
}

/// The finding's package: its own purl when it has one that reads, else
/// one built from type, name and version (without namespace or
/// qualifiers, so statements that name them do not match it).
fn installed(finding: &Finding) -> Option<Installed> {
    let package = &finding.package;
    let purl = Purl::parse(&package.purl).ok().or_else(|| {
        if package.kind.is_empty() {
            return None;
        }
        Purl::build(purl_type_of(&package.kind), None, &package.name, Some(&package.version), &[], None).ok()
    })?;
    let source = source_purl(finding, &purl);
    Some(Installed { purl, source })
}

/// The source package of an rpm or deb finding, in the form a source
/// statement names it: same vendor and `distro`, the source name and
/// version (the binary's when the finding names none), the source marker.
fn source_purl(finding: &Finding, binary: &Purl) -> Option<Purl> {
    let marker = match binary.ty() {
        "rpm" => "src",
        "deb" => "source",
        _ => return None,
    };
    let package = &finding.package;
    let name = if package.source_name.is_empty() { binary.name() } else { package.source_name.as_str() };
    let version = if package.source_version.is_empty() {
        binary.version().map(str::to_owned)
    } else {
        Some(package.source_version.clone())
    };
    // Binary and source rpms come from one spec file, one epoch: a source
    // version written without it (SOURCERPM file names never carry it) has
    // the binary's.
    let epoch = binary.epoch().to_string();
    let has_epoch = |v: &str| {
        v.split_once(':').is_some_and(|(e, _)| !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut qualifiers = vec![("arch", marker)];
    if binary.ty() == "rpm" && version.as_deref().is_some_and(|v| !has_epoch(v)) {
        qualifiers.push(("epoch", epoch.as_str()));
    }
    if let Some(distro) = binary.distro() {
        qualifiers.push(("distro", distro));
    }
    Purl::build(binary.ty(), binary.namespace(), name, version.as_deref(), &qualifiers, None).ok()
}

/// Qualifiers that say where a package can be fetched, or repeat what the
/// package already determines (Syft's `upstream` is its source package): a
/// statement naming them still names the same package.
const LOCATOR_QUALIFIERS: &[&str] =
    &["repository_url", "repository_id", "download_url", "vcs_url", "upstream"];

/// Whether the statement's purl covers the installed package (see the
/// module docs).
fn covers(statement: &Purl, installed: &Installed) -> bool {
    let source = statement.is_source();
    let target = if source {
        match &installed.source {
            Some(s) => s,
            None => return false,
        }
    } else {
        &installed.purl
    };
    let version_agrees = match statement.version() {
        Some(_) => statement.same_version(target),
        // A bare epoch without a version still has to agree.
        None => statement.epoch() == 0 || statement.epoch() == target.epoch(),
    };
    let other_qualifiers_agree = statement
        .qualifiers()
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "arch" | "distro" | "epoch"))
        .filter(|(key, _)| !LOCATOR_QUALIFIERS.contains(&key.as_str()))
        .all(|(key, value)| target.qualifier(key) == Some(value.as_str()));
    statement.ty() == target.ty()
        && (statement.namespace().is_none() || statement.same_namespace(target))
        && statement.name() == target.name()
        && version_agrees
        // The source marker was what chose the target.
        && (source || statement.arch().is_none_or(|arch| target.arch() == Some(arch)))
        && statement.distro_covers(target)
        && other_qualifiers_agree
        && statement.subpath().is_none_or(|sub| target.subpath() == Some(sub))
}

fn package_matches(statement: &Purl, installed: &Option<Installed>) -> bool {
    installed.as_ref().is_some_and(|installed| covers(statement, installed))
}

fn scope_applies(scope: &Scope, image_ref: &str, digest: &str, installed: &Option<Installed>) -> bool {
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
    if let Some(version) = oci.version()
        && !version.eq_ignore_ascii_case(digest)
    {
        return false;
    }
    let reference = ImageReference::parse(image_ref);
    if let Some(tag) = oci.qualifier("tag")
        && reference.tag.as_deref() != Some(tag)
    {
        return false;
    }
    match oci.qualifier("repository_url") {
        Some(url) => canonical_repository(url) == canonical_repository(&reference.repository),
        None => {
            // Without a repository, the purl name is the image's last path
            // segment; a digest pins it anyway.
            oci.version().is_some() || reference.repository.rsplit('/').next() == Some(oci.name())
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
        assert_eq!((p.ty(), p.name()), ("oci", "trivy"));
        assert_eq!(p.version(), Some("sha256:abc"));
        assert_eq!(p.qualifier("repository_url"), Some("ghcr.io/aquasecurity/trivy"));
        let p = Purl::parse("pkg:apk/alpine/busybox@1.36.1-r15?arch=x86_64").expect("parses");
        assert_eq!((p.namespace(), p.version()), (Some("alpine"), Some("1.36.1-r15")));
        assert!(Purl::parse("not-a-purl").is_err());
    }

    /// An OpenVEX document with one `not_affected` statement on `products`
    /// for `CVE-1`.
    fn statement_on(products: &[&str]) -> VexIndex {
        let products: Vec<serde_json::Value> =
            products.iter().map(|p| serde_json::json!({ "@id": p })).collect();
        let doc = serde_json::json!({
            "@context": "https://openvex.dev/ns/v0.2.0",
            "timestamp": "2024-01-01T00:00:00Z",
            "statements": [{ "vulnerability": { "name": "CVE-1" }, "products": products, "status": "not_affected" }]
        });
        let mut index = VexIndex::default();
        index.add_document(Path::new("inline.json"), doc.to_string().as_bytes()).expect("valid");
        index
    }

    /// An rpm finding for `CVE-1`.
    fn rpm(name: &str, version: &str, source: (&str, &str), purl: &str) -> Finding {
        let mut f = finding("CVE-1", name, "rpm", purl);
        f.package.version = version.into();
        f.package.source_name = source.0.into();
        f.package.source_version = source.1.into();
        f
    }

    fn suppressed(index: &VexIndex, f: &Finding) -> bool {
        index.verdict("registry.access.redhat.com/ubi9/ubi:9.3", "sha256:00", f).is_some()
    }

    #[test]
    fn red_hat_binary_rpm_statements_match_the_same_nevra() {
        // Red Hat's CSAF-VEX names a fixed binary rpm with arch and epoch
        // qualifiers (RedHatProductSecurity/security-data-guidelines
        // docs/purl.md: "epoch is not part of the version field, but
        // instead is specified using the epoch qualifier").
        let index = statement_on(&["pkg:rpm/redhat/openssl@3.0.7-27.el9?arch=x86_64&epoch=1"]);
        let ours = "pkg:rpm/redhat/openssl@3.0.7-27.el9?arch=x86_64&distro=rhel-9.3&epoch=1";
        assert!(suppressed(&index, &rpm("openssl", "1:3.0.7-27.el9", ("", ""), ours)));
        // The epoch written in the version instead of the qualifier.
        let prefixed = "pkg:rpm/redhat/openssl@1:3.0.7-27.el9?arch=x86_64";
        assert!(suppressed(&index, &rpm("openssl", "1:3.0.7-27.el9", ("", ""), prefixed)));
        // Trivy's family name and release for the same package.
        let trivy = "pkg:rpm/redhat/openssl@3.0.7-27.el9?arch=x86_64&distro=redhat-9.3&epoch=1";
        assert!(suppressed(&index, &rpm("openssl", "1:3.0.7-27.el9", ("", ""), trivy)));

        let other_arch = "pkg:rpm/redhat/openssl@3.0.7-27.el9?arch=aarch64&distro=rhel-9.3&epoch=1";
        assert!(!suppressed(&index, &rpm("openssl", "1:3.0.7-27.el9", ("", ""), other_arch)), "other arch");
        let other_epoch = "pkg:rpm/redhat/openssl@3.0.7-27.el9?arch=x86_64&epoch=2";
        assert!(!suppressed(&index, &rpm("openssl", "2:3.0.7-27.el9", ("", ""), other_epoch)), "other epoch");
        let no_epoch = "pkg:rpm/redhat/openssl@3.0.7-27.el9?arch=x86_64";
        assert!(!suppressed(&index, &rpm("openssl", "3.0.7-27.el9", ("", ""), no_epoch)), "epoch 0");
        let other_version = "pkg:rpm/redhat/openssl@3.0.7-28.el9?arch=x86_64&epoch=1";
        assert!(
            !suppressed(&index, &rpm("openssl", "1:3.0.7-28.el9", ("", ""), other_version)),
            "other version"
        );
        let no_arch = "pkg:rpm/redhat/openssl@3.0.7-27.el9?epoch=1";
        assert!(!suppressed(&index, &rpm("openssl", "1:3.0.7-27.el9", ("", ""), no_arch)), "arch unknown");
        let libs = "pkg:rpm/redhat/openssl-libs@3.0.7-27.el9?arch=x86_64&epoch=1";
        assert!(
            !suppressed(&index, &rpm("openssl-libs", "1:3.0.7-27.el9", ("openssl", ""), libs)),
            "a binary statement names that binary only"
        );
        let fedora = "pkg:rpm/fedora/openssl@3.0.7-27.el9?arch=x86_64&epoch=1";
        assert!(!suppressed(&index, &rpm("openssl", "1:3.0.7-27.el9", ("", ""), fedora)), "other vendor");
    }

    #[test]
    fn red_hat_source_rpm_statements_match_the_binaries_built_from_it() {
        // The source rpm, as Red Hat's VEX names components (`arch=src`).
        let index = statement_on(&["pkg:rpm/redhat/openssl@3.0.7-27.el9?arch=src&epoch=1"]);
        let libs = |source_version: &str, purl_version: &str| {
            rpm(
                "openssl-libs",
                "1:3.0.7-27.el9",
                ("openssl", source_version),
                &format!("pkg:rpm/redhat/openssl-libs@{purl_version}?arch=x86_64&distro=rhel-9.3&epoch=1"),
            )
        };
        // The scanner's source version (epoch in front), or none (same as
        // the binary's), or without the epoch (a SOURCERPM file name).
        assert!(suppressed(&index, &libs("1:3.0.7-27.el9", "3.0.7-27.el9")));
        assert!(suppressed(&index, &libs("", "3.0.7-27.el9")));
        assert!(suppressed(&index, &libs("3.0.7-27.el9", "3.0.7-27.el9")));
        let itself = "pkg:rpm/redhat/openssl@3.0.7-27.el9?arch=x86_64&epoch=1";
        assert!(
            suppressed(&index, &rpm("openssl", "1:3.0.7-27.el9", ("", ""), itself)),
            "the same-named binary"
        );
        assert!(!suppressed(&index, &libs("1:3.0.7-28.el9", "3.0.7-28.el9")), "built from another version");
        assert!(!suppressed(&index, &libs("0:3.0.7-27.el9", "3.0.7-27.el9")), "another epoch");
        let curl = "pkg:rpm/redhat/libcurl@7.76.1-26.el9?arch=x86_64";
        assert!(!suppressed(&index, &rpm("libcurl", "7.76.1-26.el9", ("curl", ""), curl)), "another source");

        // Red Hat's unfixed component form: no version
        // (security-data-guidelines docs/csaf-vex.md, `pkg:rpm/redhat/kernel?arch=src`).
        let index = statement_on(&["pkg:rpm/redhat/kernel?arch=src"]);
        let core = "pkg:rpm/redhat/kernel-core@5.14.0-362.8.1.el9_3?arch=x86_64&distro=rhel-9.3";
        assert!(suppressed(&index, &rpm("kernel-core", "5.14.0-362.8.1.el9_3", ("kernel", ""), core)));
        // A binary statement without arch is not a source statement.
        let index = statement_on(&["pkg:rpm/redhat/kernel"]);
        assert!(!suppressed(&index, &rpm("kernel-core", "5.14.0-362.8.1.el9_3", ("kernel", ""), core)));

        // The guidelines' own example, with the `repository_id` Red Hat
        // adds (where it can be fetched, not what it is).
        let index = statement_on(&[
            "pkg:rpm/redhat/emacs@27.2-9.el9?epoch=1&arch=src&repository_id=rhel-9-for-x86_64-appstream-rpms",
        ]);
        let common = "pkg:rpm/redhat/emacs-common@27.2-9.el9?arch=x86_64&distro=rhel-9.2&epoch=1";
        assert!(suppressed(&index, &rpm("emacs-common", "1:27.2-9.el9", ("emacs", ""), common)));
    }

    #[test]
    fn debian_source_statements_match_binaries_and_binnmus() {
        // The deb type definition's source example, and a binNMU of it.
        let index = statement_on(&["pkg:deb/debian/attr@1:2.4.47-2?arch=source"]);
        let mut f = finding("CVE-1", "libattr1", "deb", "pkg:deb/debian/libattr1@1:2.4.47-2%2Bb1?arch=amd64");
        f.package.version = "1:2.4.47-2+b1".into();
        f.package.source_name = "attr".into();
        f.package.source_version = "1:2.4.47-2".into();
        assert!(suppressed(&index, &f));
        f.package.source_version = "1:2.4.48-1".into();
        assert!(!suppressed(&index, &f));
    }

    #[test]
    fn pypi_names_compare_normalised() {
        let index = statement_on(&["pkg:pypi/Foo_Bar@1.0"]);
        // Trivy only lowercases and maps `_`; the scanner normalises fully.
        for purl in ["pkg:pypi/foo.bar@1.0", "pkg:pypi/foo-bar@1.0", "pkg:pypi/FOO__bar@1.0"] {
            let f = finding("CVE-1", "foo.bar", "python", purl);
            assert!(suppressed(&index, &f), "{purl}");
        }
        assert!(!suppressed(&index, &finding("CVE-1", "foo-baz", "python", "pkg:pypi/foo-baz@1.0")));
        assert!(!suppressed(&index, &finding("CVE-1", "foobar", "python", "pkg:pypi/foobar@1.0")));
        assert!(!suppressed(&index, &finding("CVE-1", "foo.bar", "python", "pkg:pypi/foo.bar@1.1")));
    }

    #[test]
    fn distro_and_vendor_must_agree_when_named() {
        let ours =
            finding("CVE-1", "openssl", "deb", "pkg:deb/debian/openssl@3.0.11-1?arch=amd64&distro=debian-12");
        assert!(suppressed(&statement_on(&["pkg:deb/debian/openssl?distro=debian-12"]), &ours));
        assert!(suppressed(&statement_on(&["pkg:deb/debian/openssl?distro=bookworm"]), &ours));
        assert!(!suppressed(&statement_on(&["pkg:deb/debian/openssl?distro=debian-11"]), &ours));
        assert!(!suppressed(&statement_on(&["pkg:deb/ubuntu/openssl"]), &ours), "another vendor");
        assert!(suppressed(&statement_on(&["pkg:deb/openssl"]), &ours), "no vendor named");
        let without = finding("CVE-1", "openssl", "deb", "pkg:deb/debian/openssl@3.0.11-1?arch=amd64");
        assert!(!suppressed(&statement_on(&["pkg:deb/debian/openssl?distro=debian-12"]), &without));
        // A finding without a purl has no vendor to compare.
        let bare = finding("CVE-1", "openssl", "deb", "");
        assert!(!suppressed(&statement_on(&["pkg:deb/debian/openssl"]), &bare));
        assert!(suppressed(&statement_on(&["pkg:deb/openssl"]), &bare));
        // A qualifier that says what the package is must be on it too.
        assert!(!suppressed(&statement_on(&["pkg:deb/debian/openssl?checksum=sha256:00"]), &ours));
    }

    #[test]
    fn vex_hub_statements_name_their_product() {
        // Aqua's VEX Hub: a Go product with its subcomponents. Findings name
        // the module a vulnerability is in, not the binary's main module, so
        // the product cannot be checked: its subcomponents suppress nothing.
        let index = VexIndex::load(&[fixture("openvex-vexhub-kine.json")]).expect("loads");
        let crypto = finding(
            "CVE-2024-45337",
            "golang.org/x/crypto",
            "go-module",
            "pkg:golang/golang.org/x/crypto@v0.27.0",
        );
        assert!(!suppressed(&index, &crypto));
        // The product itself, under an alias of the statement.
        let kine = finding(
            "GHSA-v778-237x-gjrc",
            "github.com/k3s-io/kine",
            "go-module",
            "pkg:golang/github.com/k3s-io/kine@v0.13.2",
        );
        assert!(suppressed(&index, &kine));

        // In an image, its subcomponent spellings match the scanner's Go
        // versions with their `v`.
        let doc = br#"{"@context":"https://openvex.dev/ns/v0.2.0","statements":[{"vulnerability":{"name":"CVE-2024-45337"},
          "products":[{"@id":"pkg:oci/kine?repository_url=docker.io/rancher/kine","subcomponents":[{"@id":"pkg:golang/golang.org/x/crypto@0.27.0"}]}],
          "status":"not_affected"}]}"#;
        let mut index = VexIndex::default();
        index.add_document(Path::new("inline.json"), doc).expect("valid");
        assert!(index.verdict("rancher/kine:v0.13.2", "sha256:00", &crypto).is_some());
        let newer = finding(
            "CVE-2024-45337",
            "golang.org/x/crypto",
            "go-module",
            "pkg:golang/golang.org/x/crypto@v0.31.0",
        );
        assert!(index.verdict("rancher/kine:v0.13.2", "sha256:00", &newer).is_none());
    }

    #[test]
    fn unreadable_subcomponents_refuse_the_document() {
        let doc = br#"{"@context":"x","statements":[{"vulnerability":"CVE-1","status":"not_affected",
          "products":[{"@id":"pkg:oci/app","subcomponents":[{"@id":"pkg:rpm/redhat/x@2:1?epoch=1"}]}]}]}"#;
        let err =
            VexIndex::default().add_document(Path::new("bad.json"), doc).expect_err("conflicting epochs");
        let msg = err.to_string();
        assert!(msg.contains("products[0].subcomponents[0]") && msg.contains("epoch"), "{msg}");
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
        // The scanner's purl, with arch and the release.
        let ours = finding(
            "CVE-2023-42363",
            "busybox",
            "apk",
            "pkg:apk/alpine/busybox@1.36.1-r15?arch=x86_64&distro=alpine-3.19.1",
        );
        assert!(index.verdict("ghcr.io/aquasecurity/trivy:0.50.1", "sha256:00", &ours).is_some());
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
