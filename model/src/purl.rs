//! Package URLs in one canonical form, written and compared the same way by
//! the scanner (`Finding.package.purl`, SBOMs), the planner (VEX matching)
//! and the CLI.
//!
//! Syntax, encoding and the per-type rules are the purl specification's
//! (`package-url/purl-spec`: `PURL-SPECIFICATION.rst` for the components,
//! their percent-encoding and the canonical order of qualifiers;
//! `types/<type>-definition.json` for each type), implemented by the
//! `packageurl` crate. PatchPilot adds what the type definitions ask and the
//! crate does not do:
//!
//! - names and namespaces in the case (and for `pypi` the normalisation) of
//!   their type, through [`crate::package_names`]: `apk` and `golang` names
//!   are lowercased as their definitions say, `pypi` names get the full
//!   PyPA normalisation (the crate maps only `_` to `-`);
//! - `rpm`: the epoch is the `epoch` qualifier and the version is
//!   `version-release` without it (rpm-definition.json; Red Hat's purl
//!   guidelines). A version written `1:3.0.7-27.el9`, as some tools do, is
//!   read as `epoch=1`; an epoch of 0 is rpm's default and is left out;
//! - `deb`: the epoch stays in the version (`1:2.4.47-2`, the deb
//!   definition's examples); an `epoch` qualifier, which Trivy writes, is
//!   put there too, and `0:` is dropped as Debian's default.
//!
//! The OS package URLs PatchPilot writes carry the vendor as namespace
//! (os-release `ID`, `rhel` as `redhat` after Red Hat's guidelines), `arch`
//! as the package database records it, and `distro` as `<ID>-<VERSION_ID>`
//! from os-release (`debian-12`, `alpine-3.19.1`, `rhel-9.3`), Syft's form:
//! it is what the image's own os-release says, the same for deb, rpm and apk
//! (Trivy writes `<family>-<release>` for deb and rpm but only the release
//! for apk), and the purl spec's own rpm example has that shape
//! (`distro=fedora-25`).
//!
//! Comparison helpers ([`Purl::same_namespace`], [`Purl::same_version`],
//! [`Purl::distro_covers`]) know the other spellings in use: a `distro` of
//! `debian-12` covers `debian-12.5`; Trivy's bare `3.19.1` for apk takes the
//! vendor from the namespace; Debian code names stand for their release;
//! `redhat`/`rhel`, `alma`/`almalinux`, `amazon`/`amzn` and `oracle`/`ol`
//! are one vendor each; a Go version matches with or without its `v`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use packageurl::PackageUrl;

use crate::OperatingSystem;
use crate::package_names;

/// Why a package URL could not be read or built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The text is not a package URL, or breaks its type's rules.
    #[error("`{text}` is not a package URL: {source}")]
    Syntax {
        /// The text.
        text: String,
        /// What the parser refused.
        #[source]
        source: packageurl::Error,
    },
    /// The components do not make a package URL.
    #[error("cannot build a `{ty}` package URL for `{name}`: {source}")]
    Build {
        /// The type.
        ty: String,
        /// The name.
        name: String,
        /// What the builder refused.
        #[source]
        source: packageurl::Error,
    },
    /// An epoch (the qualifier or a version's `N:` prefix) is not a number.
    #[error("epoch `{0}` is not a non-negative number")]
    Epoch(String),
    /// The `epoch` qualifier and the version's `N:` prefix name different
    /// epochs.
    #[error("the `epoch` qualifier ({qualifier}) and the version's epoch ({version}) disagree")]
    EpochConflict {
        /// The qualifier's epoch.
        qualifier: u64,
        /// The version prefix's epoch.
        version: u64,
    },
}

/// The distribution release an OS package was installed from, as
/// os-release names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Distro<'a> {
    /// os-release `ID` (`debian`, `alpine`, `rhel`…).
    pub id: &'a str,
    /// os-release `VERSION_ID` (`12`, `3.19.1`, `9.3`), empty when unknown.
    pub version_id: &'a str,
}

impl<'a> From<&'a OperatingSystem> for Distro<'a> {
    fn from(os: &'a OperatingSystem) -> Distro<'a> {
        Distro { id: &os.family, version_id: &os.version }
    }
}

impl Distro<'_> {
    /// The namespace of this distribution's packages: its `ID`, except
    /// `rhel`, whose packages Red Hat's purl guidelines put under `redhat`;
    /// `unknown` without one (the OS package types require a namespace).
    pub fn vendor(&self) -> String {
        match self.id.trim().to_ascii_lowercase().as_str() {
            "" => "unknown".to_owned(),
            "rhel" => "redhat".to_owned(),
            other => other.to_owned(),
        }
    }

    /// The `distro` qualifier: `<ID>-<VERSION_ID>`; `None` when either is
    /// unknown or the version is no release id (`bookworm/sid`).
    pub fn qualifier(&self) -> Option<String> {
        let id = self.id.trim().to_ascii_lowercase();
        let version = self.version_id.trim();
        let release_id = !version.is_empty()
            && version.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '~' | '-'));
        (!id.is_empty() && release_id).then(|| format!("{id}-{version}"))
    }
}

/// A package URL in PatchPilot's canonical form (see the module docs).
/// Its `Display` is the canonical string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Purl {
    ty: String,
    namespace: Option<String>,
    name: String,
    version: Option<String>,
    qualifiers: BTreeMap<String, String>,
    subpath: Option<String>,
    text: String,
}

/// Qualifier keys.
const EPOCH: &str = "epoch";
const ARCH: &str = "arch";
const DISTRO: &str = "distro";

/// An `N:` epoch prefix of a version, and the rest. Only a run of digits
/// before the first `:` is an epoch.
fn split_epoch(version: &str) -> Result<(Option<u64>, &str), Error> {
    match version.split_once(':') {
        Some((epoch, rest)) if !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit()) => {
            Ok((Some(parse_epoch(epoch)?), rest))
        }
        _ => Ok((None, version)),
    }
}

fn parse_epoch(text: &str) -> Result<u64, Error> {
    let trimmed = text.trim();
    if trimmed.is_empty() || !trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Epoch(text.to_owned()));
    }
    trimmed.parse().map_err(|_| Error::Epoch(text.to_owned()))
}

/// One epoch from the qualifier and the version prefix, which must agree
/// when both are there.
fn one_epoch(qualifier: Option<u64>, version: Option<u64>) -> Result<Option<u64>, Error> {
    match (qualifier, version) {
        (Some(q), Some(v)) if q != v => Err(Error::EpochConflict { qualifier: q, version: v }),
        (q, v) => Ok(q.or(v)),
    }
}

/// Moves the epoch where the type keeps it: `rpm` to the `epoch`
/// qualifier, `deb` into the version; 0 is each one's default and is left
/// out.
fn place_epoch(
    ty: &str,
    version: Option<String>,
    qualifiers: &mut BTreeMap<String, String>,
) -> Result<Option<String>, Error> {
    if ty != "rpm" && ty != "deb" {
        return Ok(version);
    }
    let from_qualifier = qualifiers.remove(EPOCH).map(|e| parse_epoch(&e)).transpose()?;
    let Some(version) = version else {
        // Nothing to put the epoch in front of: keep what was said.
        if let Some(epoch) = from_qualifier.filter(|e| *e != 0) {
            qualifiers.insert(EPOCH.to_owned(), epoch.to_string());
        }
        return Ok(None);
    };
    let (from_version, rest) = split_epoch(&version)?;
    let epoch = one_epoch(from_qualifier, from_version)?.unwrap_or(0);
    if ty == "rpm" {
        if epoch != 0 {
            qualifiers.insert(EPOCH.to_owned(), epoch.to_string());
        }
        Ok(Some(rest.to_owned()))
    } else if epoch != 0 {
        Ok(Some(format!("{epoch}:{rest}")))
    } else {
        Ok(Some(rest.to_owned()))
    }
}

impl Purl {
    /// Parses a package URL and puts it in canonical form.
    pub fn parse(text: &str) -> Result<Purl, Error> {
        let parsed =
            PackageUrl::from_str(text).map_err(|source| Error::Syntax { text: text.to_owned(), source })?;
        let qualifiers: Vec<(&str, &str)> =
            parsed.qualifiers().iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect();
        Purl::build(
            parsed.ty(),
            parsed.namespace(),
            parsed.name(),
            parsed.version(),
            &qualifiers,
            parsed.subpath(),
        )
    }

    /// Builds a package URL from its decoded components, in canonical
    /// form. Empty namespaces, versions, subpaths and qualifier values
    /// count as absent.
    pub fn build(
        ty: &str,
        namespace: Option<&str>,
        name: &str,
        version: Option<&str>,
        qualifiers: &[(&str, &str)],
        subpath: Option<&str>,
    ) -> Result<Purl, Error> {
        let build_error = |source| Error::Build { ty: ty.to_owned(), name: name.to_owned(), source };
        let ty_key = ty.to_ascii_lowercase();
        let canonical_name = package_names::purl_name(&ty_key, name);
        let mut purl = PackageUrl::new(ty, canonical_name.as_ref()).map_err(build_error)?;
        if let Some(namespace) = namespace.filter(|n| !n.is_empty()) {
            purl.with_namespace(package_names::purl_namespace(&ty_key, namespace).into_owned())
                .map_err(build_error)?;
        }
        // Keys are case insensitive (the builder checks their characters).
        let mut quals: BTreeMap<String, String> = qualifiers
            .iter()
            .filter(|(_, value)| !value.is_empty())
            .map(|(key, value)| (key.to_ascii_lowercase(), (*value).to_owned()))
            .collect();
        let version = place_epoch(&ty_key, version.filter(|v| !v.is_empty()).map(str::to_owned), &mut quals)?;
        for (key, value) in quals {
            purl.add_qualifier(key, value).map_err(build_error)?;
        }
        if let Some(version) = &version {
            purl.with_version(version.clone()).map_err(build_error)?;
        }
        if let Some(subpath) = subpath.filter(|s| !s.is_empty()) {
            purl.with_subpath(subpath.to_owned()).map_err(build_error)?;
        }
        purl.validate().map_err(build_error)?;
        Ok(Purl {
            ty: purl.ty().to_owned(),
            namespace: purl.namespace().map(str::to_owned),
            name: purl.name().to_owned(),
            version: purl.version().map(str::to_owned),
            qualifiers: purl.qualifiers().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            subpath: purl.subpath().map(str::to_owned),
            text: purl.to_string(),
        })
    }

    /// The type, lower case (`deb`, `rpm`, `pypi`, `oci`…).
    pub fn ty(&self) -> &str {
        &self.ty
    }

    /// The namespace, decoded.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The name, decoded and in its type's canonical form.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The version, decoded (for `rpm` without the epoch).
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The qualifiers, decoded, by lower-case key.
    pub fn qualifiers(&self) -> &BTreeMap<String, String> {
        &self.qualifiers
    }

    /// One qualifier's decoded value.
    pub fn qualifier(&self, key: &str) -> Option<&str> {
        self.qualifiers.get(key).map(String::as_str)
    }

    /// The subpath, decoded.
    pub fn subpath(&self) -> Option<&str> {
        self.subpath.as_deref()
    }

    /// The `arch` qualifier.
    pub fn arch(&self) -> Option<&str> {
        self.qualifier(ARCH)
    }

    /// The `distro` qualifier.
    pub fn distro(&self) -> Option<&str> {
        self.qualifier(DISTRO)
    }

    /// The epoch of an `rpm` (its qualifier) or `deb` (its version prefix);
    /// 0, the default, otherwise.
    pub fn epoch(&self) -> u64 {
        match self.ty.as_str() {
            "rpm" => self.qualifier(EPOCH).and_then(|e| e.parse().ok()).unwrap_or(0),
            "deb" => {
                self.version.as_deref().and_then(|v| split_epoch(v).ok()).and_then(|(e, _)| e).unwrap_or(0)
            }
            _ => 0,
        }
    }

    /// Whether this names a source package: `arch=src` or `arch=nosrc` for
    /// `rpm` (Red Hat's purl guidelines), `arch=source` for `deb` (the deb
    /// type definition).
    pub fn is_source(&self) -> bool {
        match (self.ty.as_str(), self.arch()) {
            ("rpm", Some(arch)) => arch == "src" || arch == "nosrc",
            ("deb", Some(arch)) => arch == "source",
            _ => false,
        }
    }

    /// Whether the two have the same namespace: both none, or the same
    /// vendor for the OS package types (where tools spell some vendors
    /// differently), or the same string.
    pub fn same_namespace(&self, other: &Purl) -> bool {
        match (self.namespace(), other.namespace()) {
            (None, None) => true,
            (Some(a), Some(b)) if is_os_type(&self.ty) => vendor_key(a) == vendor_key(b),
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }

    /// Whether the two name the same version: both none, or equal once the
    /// epoch is in its canonical place (`rpm` compares the epochs too), and
    /// for `golang` with or without the leading `v` (Trivy writes Go module
    /// versions without it, Go and Syft with it).
    pub fn same_version(&self, other: &Purl) -> bool {
        match (self.version(), other.version()) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                let same = if self.ty == "golang" { go_version(a) == go_version(b) } else { a == b };
                same && self.epoch() == other.epoch()
            }
            _ => false,
        }
    }

    /// Whether this purl's `distro` (as a statement about packages) covers
    /// `installed`'s: true when this one names none; else `installed` must
    /// name one of the same distribution (by vendor) and, when this one
    /// names a release, the same release or a point release of it
    /// (`debian-12` covers `debian-12.5`, `alpine-3.19` covers
    /// `alpine-3.19.1`; not the other way round).
    pub fn distro_covers(&self, installed: &Purl) -> bool {
        let Some(stated) = self.distro() else { return true };
        let Some(found) = installed.distro() else { return false };
        let stated = DistroName::parse(stated, self.namespace());
        let found = DistroName::parse(found, installed.namespace());
        let (Some(stated_id), Some(found_id)) = (&stated.id, &found.id) else { return false };
        if vendor_key(stated_id) != vendor_key(found_id) {
            return false;
        }
        match (&stated.release, &found.release) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(stated), Some(found)) => {
                found == stated
                    || found.strip_prefix(stated.as_str()).is_some_and(|rest| rest.starts_with('.'))
            }
        }
    }
}

/// Whether packages of the type come from a distribution (their namespace
/// is a vendor).
fn is_os_type(ty: &str) -> bool {
    matches!(ty, "apk" | "deb" | "rpm")
}

/// One spelling per vendor, for comparison: os-release IDs and Trivy's OS
/// family names differ for some (the same pairs `OperatingSystem::osv_ecosystem`
/// accepts).
fn vendor_key(vendor: &str) -> &str {
    match vendor {
        "rhel" | "redhat" => "redhat",
        "alma" | "almalinux" => "almalinux",
        "amazon" | "amzn" => "amzn",
        "oracle" | "ol" => "ol",
        other => other,
    }
}

/// A Go module version without its leading `v` (`v1.2.3` and `1.2.3` are
/// the same module version); pseudo-versions and commit hashes unchanged
/// unless they start with `v` and a digit.
fn go_version(version: &str) -> &str {
    version.strip_prefix('v').filter(|rest| rest.starts_with(|c: char| c.is_ascii_digit())).unwrap_or(version)
}

/// A `distro` qualifier read into a distribution and a release.
#[derive(Debug, PartialEq, Eq)]
struct DistroName {
    id: Option<String>,
    release: Option<String>,
}

impl DistroName {
    /// Reads the forms in use: `<id>-<release>` (Syft, Trivy for deb and
    /// rpm, the spec's `fedora-25`), a bare release (Trivy for apk:
    /// `3.19.1`), a Debian code name (the spec's `jessie`), or a bare id. A
    /// missing id is the purl's namespace.
    fn parse(value: &str, namespace: Option<&str>) -> DistroName {
        let value = value.trim().to_ascii_lowercase();
        let debian = |codename: &str| OperatingSystem::debian_release(codename).map(str::to_owned);
        let starts_with_digit = |s: &str| s.starts_with(|c: char| c.is_ascii_digit());
        let (id, release) = if starts_with_digit(&value) {
            (None, Some(value.clone()))
        } else if let Some(release) = debian(&value) {
            (Some("debian".to_owned()), Some(release))
        } else {
            match value.rsplit_once('-') {
                Some((id, release)) if !id.is_empty() && starts_with_digit(release) => {
                    (Some(id.to_owned()), Some(release.to_owned()))
                }
                Some((id, codename)) if !id.is_empty() && debian(codename).is_some() => {
                    (Some(id.to_owned()), debian(codename))
                }
                _ => (Some(value.clone()), None),
            }
        };
        DistroName { id: id.or_else(|| namespace.map(str::to_ascii_lowercase)), release }
    }
}

impl fmt::Display for Purl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Purl {
    type Err = Error;

    fn from_str(text: &str) -> Result<Purl, Error> {
        Purl::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn purl(text: &str) -> Purl {
        Purl::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn rpm_epochs_become_the_qualifier() {
        let p = purl("pkg:rpm/redhat/openssl@1:3.0.7-27.el9?arch=x86_64");
        assert_eq!(p.to_string(), "pkg:rpm/redhat/openssl@3.0.7-27.el9?arch=x86_64&epoch=1");
        assert_eq!((p.version(), p.epoch()), (Some("3.0.7-27.el9"), 1));
        assert_eq!(purl("pkg:rpm/redhat/openssl@3.0.7-27.el9?epoch=1&arch=x86_64"), p);
        assert_eq!(purl("pkg:rpm/redhat/openssl@1:3.0.7-27.el9?epoch=1&arch=x86_64"), p, "both, agreeing");
        let zero = purl("pkg:rpm/redhat/openssl@1.1.1k-9.el8_6?epoch=0");
        assert_eq!(zero.to_string(), "pkg:rpm/redhat/openssl@1.1.1k-9.el8_6", "0 is the default");
        assert_eq!(zero, purl("pkg:rpm/redhat/openssl@0:1.1.1k-9.el8_6"));
        assert!(matches!(
            Purl::parse("pkg:rpm/redhat/openssl@2:3.0.7-27.el9?epoch=1"),
            Err(Error::EpochConflict { qualifier: 1, version: 2 })
        ));
        assert!(matches!(Purl::parse("pkg:rpm/redhat/openssl@3.0.7?epoch=x"), Err(Error::Epoch(_))));
        // An unfixed component in Red Hat's VEX has no version at all.
        assert_eq!(purl("pkg:rpm/redhat/kernel?arch=src").to_string(), "pkg:rpm/redhat/kernel?arch=src");
    }

    #[test]
    fn deb_epochs_stay_in_the_version() {
        let p = purl("pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64");
        assert_eq!(p.to_string(), "pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64");
        assert_eq!((p.version(), p.epoch()), (Some("1:2.4.47-2+b1"), 1));
        // Trivy's form.
        assert_eq!(purl("pkg:deb/debian/attr@2.4.47-2%2Bb1?arch=amd64&epoch=1"), p);
        assert_eq!(purl("pkg:deb/debian/zlib1g@0:1.2.13"), purl("pkg:deb/debian/zlib1g@1.2.13"));
        assert!(Purl::parse("pkg:deb/debian/attr@2:2.4.47-2?epoch=1").is_err());
    }

    #[test]
    fn names_and_namespaces_follow_their_type() {
        assert_eq!(purl("pkg:pypi/Foo_Bar@1.0").to_string(), "pkg:pypi/foo-bar@1.0");
        assert_eq!(purl("pkg:pypi/foo.bar@1.0"), purl("pkg:pypi/Foo_Bar@1.0"));
        assert_eq!(purl("pkg:pypi/zope..Interface@5").name(), "zope-interface");
        assert_eq!(
            purl("pkg:apk/Alpine/Busybox@1.36.1-r15").to_string(),
            "pkg:apk/alpine/busybox@1.36.1-r15"
        );
        assert_eq!(purl("pkg:npm/%40Angular/Core@1.0.0").to_string(), "pkg:npm/%40angular/core@1.0.0");
        assert_eq!(
            purl("pkg:rpm/RedHat/NetworkManager@1.0").to_string(),
            "pkg:rpm/redhat/NetworkManager@1.0"
        );
        assert_eq!(
            purl("pkg:maven/HTTPClient/HTTPClient@0.3-3").to_string(),
            "pkg:maven/HTTPClient/HTTPClient@0.3-3"
        );
        assert!(Purl::parse("pkg:pypi/acme/foo@1.0").is_err(), "pypi has no namespace");
        assert!(Purl::parse("not-a-purl").is_err());
    }

    #[test]
    fn versions_compare_canonically() {
        let same = |a: &str, b: &str| purl(a).same_version(&purl(b));
        assert!(same("pkg:rpm/redhat/openssl@1:3.0.7-27.el9", "pkg:rpm/redhat/openssl@3.0.7-27.el9?epoch=1"));
        assert!(!same(
            "pkg:rpm/redhat/openssl@3.0.7-27.el9?epoch=2",
            "pkg:rpm/redhat/openssl@3.0.7-27.el9?epoch=1"
        ));
        assert!(!same("pkg:rpm/redhat/openssl@3.0.7-27.el9", "pkg:rpm/redhat/openssl@3.0.7-27.el9?epoch=1"));
        // The two spellings Aqua's VEX Hub lists side by side for one module
        // (rancher/kine's scan.openvex.json).
        assert!(same("pkg:golang/golang.org/x/crypto@v0.27.0", "pkg:golang/golang.org/x/crypto@0.27.0"));
        assert!(!same("pkg:golang/golang.org/x/crypto@v0.27.0", "pkg:golang/golang.org/x/crypto@v0.27.1"));
        assert!(!same("pkg:npm/foo@v1.0.0", "pkg:npm/foo@1.0.0"), "only Go drops the v");
    }

    #[test]
    fn distro_covers_its_point_releases_and_other_spellings() {
        let covers = |statement: &str, installed: &str| purl(statement).distro_covers(&purl(installed));
        let ours = "pkg:deb/debian/curl@7.88.1-10?arch=amd64&distro=debian-12";
        assert!(covers("pkg:deb/debian/curl", ours), "no distro named");
        assert!(covers("pkg:deb/debian/curl?distro=debian-12", ours));
        assert!(covers("pkg:deb/debian/curl?distro=bookworm", ours), "a Debian code name");
        assert!(covers("pkg:deb/debian/curl?distro=debian-bookworm", ours));
        assert!(!covers("pkg:deb/debian/curl?distro=debian-11", ours));
        assert!(!covers("pkg:deb/debian/curl?distro=debian-12.5", ours), "a point release of an unknown one");
        assert!(covers("pkg:deb/debian/curl?distro=debian-12", "pkg:deb/debian/curl@1?distro=debian-12.5"));
        assert!(!covers("pkg:deb/debian/curl?distro=debian-12", "pkg:deb/debian/curl@1"), "none installed");
        assert!(!covers("pkg:deb/ubuntu/curl?distro=jammy", "pkg:deb/ubuntu/curl@1?distro=ubuntu-22.04"));
        // Trivy's apk form: the release only.
        let alpine = "pkg:apk/alpine/musl@1.2.4-r2?arch=x86_64&distro=alpine-3.19.1";
        assert!(covers("pkg:apk/alpine/musl?distro=3.19.1", alpine));
        assert!(covers("pkg:apk/alpine/musl?distro=alpine-3.19", alpine));
        assert!(!covers("pkg:apk/alpine/musl?distro=alpine-3.1", alpine), "3.1 is not 3.19");
        // Trivy's family name for RHEL against os-release's ID.
        assert!(covers("pkg:rpm/redhat/curl?distro=redhat-9", "pkg:rpm/redhat/curl@1?distro=rhel-9.3"));
        assert!(!covers("pkg:rpm/redhat/curl?distro=centos-9", "pkg:rpm/redhat/curl@1?distro=rhel-9.3"));
        assert!(covers(
            "pkg:rpm/opensuse/curl?distro=opensuse-leap-15.5",
            "pkg:rpm/opensuse/curl@1?distro=opensuse-leap-15.5"
        ));
    }

    #[test]
    fn the_distro_qualifier_is_id_and_version_id() {
        let d = |id: &'static str, version_id: &'static str| Distro { id, version_id };
        assert_eq!(d("debian", "12").qualifier().as_deref(), Some("debian-12"));
        assert_eq!(d("alpine", "3.19.1").qualifier().as_deref(), Some("alpine-3.19.1"));
        assert_eq!(d("rhel", "9.3").qualifier().as_deref(), Some("rhel-9.3"));
        assert_eq!(d("debian", "").qualifier(), None);
        assert_eq!(d("debian", "bookworm/sid").qualifier(), None);
        assert_eq!(d("", "12").qualifier(), None);
        assert_eq!(d("rhel", "9.3").vendor(), "redhat");
        assert_eq!(d("", "").vendor(), "unknown");
    }
}
