//! What catalogers find: installed packages and where they came from.

use std::fmt;

/// Packaging format of an installed package.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PackageKind {
    /// Alpine / Wolfi `apk`.
    Apk,
    /// Debian / Ubuntu `dpkg`.
    Deb,
    /// RPM (Red Hat family, SUSE, Amazon Linux…).
    Rpm,
    /// A Go module compiled into a binary, or the Go standard library
    /// (`stdlib`, versioned by the toolchain).
    GoModule,
    /// A Rust crate compiled into a binary (cargo-auditable).
    RustCrate,
    /// A Python distribution (`*.dist-info`, `*.egg-info`).
    Python,
    /// An npm package under `node_modules`.
    Npm,
    /// A Java archive (Maven coordinates from `pom.properties` or the
    /// manifest).
    JavaArchive,
}

impl PackageKind {
    /// The name PatchPilot uses in findings (`Finding.package_type`).
    pub fn as_str(self) -> &'static str {
        match self {
            PackageKind::Apk => "apk",
            PackageKind::Deb => "deb",
            PackageKind::Rpm => "rpm",
            PackageKind::GoModule => "go-module",
            PackageKind::RustCrate => "cargo",
            PackageKind::Python => "python",
            PackageKind::Npm => "npm",
            PackageKind::JavaArchive => "java-archive",
        }
    }

    /// Package URL type.
    pub fn purl_type(self) -> &'static str {
        match self {
            PackageKind::Apk => "apk",
            PackageKind::Deb => "deb",
            PackageKind::Rpm => "rpm",
            PackageKind::GoModule => "golang",
            PackageKind::RustCrate => "cargo",
            PackageKind::Python => "pypi",
            PackageKind::Npm => "npm",
            PackageKind::JavaArchive => "maven",
        }
    }

    /// Whether packages of this kind belong to the distribution (their OSV
    /// ecosystem comes from the OS release, and they match by source package).
    pub fn is_os(self) -> bool {
        matches!(self, PackageKind::Apk | PackageKind::Deb | PackageKind::Rpm)
    }

    /// OSV ecosystem of language packages; `None` for OS packages.
    pub fn language_ecosystem(self) -> Option<&'static str> {
        match self {
            PackageKind::GoModule => Some("Go"),
            PackageKind::RustCrate => Some("crates.io"),
            PackageKind::Python => Some("PyPI"),
            PackageKind::Npm => Some("npm"),
            PackageKind::JavaArchive => Some("Maven"),
            PackageKind::Apk | PackageKind::Deb | PackageKind::Rpm => None,
        }
    }
}

impl fmt::Display for PackageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One installed package.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Package {
    /// Installed (binary) package name; for Maven `group:artifact`, for Go
    /// the module path (`stdlib` for the standard library).
    pub name: String,
    /// Installed version in the ecosystem's own syntax (dpkg and rpm with
    /// epoch when not zero: `1:2.3-4`; Go with its `v` prefix).
    pub version: String,
    /// Packaging format.
    pub kind: PackageKind,
    /// Source package name (dpkg `Source:`, apk origin, rpm SOURCERPM name),
    /// when it differs from `name`.
    pub source_name: Option<String>,
    /// Source package version, when it differs from `version`.
    pub source_version: Option<String>,
    /// Path inside the image of the file the package was found in: the
    /// package database, the binary, the METADATA file, the jar.
    pub path: String,
    /// Digest of the layer that file came from; set by the scan pipeline.
    pub layer: Option<String>,
    /// OSV ecosystem; set by the scan pipeline for OS packages (from the OS
    /// release), by catalogers for language packages.
    pub ecosystem: String,
}

impl Package {
    /// The name advisories are filed under: the source package for OS
    /// packages, the package itself otherwise.
    pub fn advisory_name(&self) -> &str {
        if self.kind.is_os() { self.source_name.as_deref().unwrap_or(&self.name) } else { &self.name }
    }

    /// The version advisories compare against: the source version for OS
    /// packages when it differs, the installed version otherwise.
    pub fn advisory_version(&self) -> &str {
        if self.kind.is_os() {
            self.source_version.as_deref().unwrap_or(&self.version)
        } else {
            &self.version
        }
    }
}

/// Percent-encodes the characters a purl segment may not carry raw.
fn purl_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'_' | b'~' | b'+' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl Package {
    /// The package URL (<https://github.com/package-url/purl-spec>). OS
    /// packages take the distribution id (`alpine`, `debian`…) as
    /// namespace.
    pub fn purl(&self, os_id: Option<&str>) -> String {
        let version = purl_encode(&self.version);
        let kind = self.kind.purl_type();
        match self.kind {
            PackageKind::Apk | PackageKind::Deb | PackageKind::Rpm => {
                let namespace = match os_id.unwrap_or_default() {
                    "rhel" => "redhat",
                    "" => "unknown",
                    other => other,
                };
                format!("pkg:{kind}/{}/{}@{version}", purl_encode(namespace), purl_encode(&self.name))
            }
            PackageKind::GoModule => {
                let segments: Vec<String> = self.name.split('/').map(purl_encode).collect();
                format!("pkg:{kind}/{}@{version}", segments.join("/"))
            }
            PackageKind::Python => {
                let name = self.name.to_ascii_lowercase().replace(['_', '.'], "-");
                format!("pkg:{kind}/{}@{version}", purl_encode(&name))
            }
            PackageKind::Npm => match self.name.split_once('/') {
                Some((scope, name)) if scope.starts_with('@') => {
                    format!("pkg:{kind}/{}/{}@{version}", purl_encode(scope), purl_encode(name))
                }
                _ => format!("pkg:{kind}/{}@{version}", purl_encode(&self.name)),
            },
            PackageKind::JavaArchive => match self.name.split_once(':') {
                Some((group, artifact)) => {
                    format!("pkg:{kind}/{}/{}@{version}", purl_encode(group), purl_encode(artifact))
                }
                None => format!("pkg:{kind}/{}@{version}", purl_encode(&self.name)),
            },
            PackageKind::RustCrate => format!("pkg:{kind}/{}@{version}", purl_encode(&self.name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(kind: PackageKind, name: &str, version: &str) -> Package {
        Package {
            name: name.into(),
            version: version.into(),
            kind,
            source_name: None,
            source_version: None,
            path: String::new(),
            layer: None,
            ecosystem: String::new(),
        }
    }

    #[test]
    fn purls_follow_the_spec_examples() {
        // Examples from the purl spec's PURL-TYPES document.
        assert_eq!(
            pkg(PackageKind::Deb, "curl", "7.50.3-1").purl(Some("debian")),
            "pkg:deb/debian/curl@7.50.3-1"
        );
        assert_eq!(
            pkg(PackageKind::GoModule, "github.com/gorilla/context", "234fd47e07d1004f0aed9c").purl(None),
            "pkg:golang/github.com/gorilla/context@234fd47e07d1004f0aed9c"
        );
        assert_eq!(
            pkg(PackageKind::Npm, "@angular/animation", "12.3.1").purl(None),
            "pkg:npm/%40angular/animation@12.3.1"
        );
        assert_eq!(
            pkg(PackageKind::Python, "Django_Allauth", "12.23").purl(None),
            "pkg:pypi/django-allauth@12.23"
        );
        assert_eq!(
            pkg(PackageKind::JavaArchive, "org.apache.xmlgraphics:batik-anim", "1.9.1").purl(None),
            "pkg:maven/org.apache.xmlgraphics/batik-anim@1.9.1"
        );
        assert_eq!(
            pkg(PackageKind::Rpm, "curl", "7.50.3-1.fc25").purl(Some("rhel")),
            "pkg:rpm/redhat/curl@7.50.3-1.fc25"
        );
        assert_eq!(
            pkg(PackageKind::Deb, "openssl", "1:3.0.2-0ubuntu1").purl(Some("ubuntu")),
            "pkg:deb/ubuntu/openssl@1%3A3.0.2-0ubuntu1"
        );
    }

    #[test]
    fn advisories_use_the_source_package_for_os_packages() {
        let mut p = pkg(PackageKind::Deb, "libssl3", "3.0.11-1~deb12u2");
        p.source_name = Some("openssl".into());
        assert_eq!((p.advisory_name(), p.advisory_version()), ("openssl", "3.0.11-1~deb12u2"));
        let mut g = pkg(PackageKind::GoModule, "golang.org/x/net", "v0.17.0");
        g.source_name = Some("ignored".into());
        assert_eq!(g.advisory_name(), "golang.org/x/net");
    }
}
