//! What catalogers find: installed packages and where they came from.

use std::fmt;

use patchpilot_model::purl::{self, Distro, Purl};

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
    /// The Linux kernel of a boot image (`vmlinuz`), by its release.
    LinuxKernel,
    /// A loadable Linux kernel module (`*.ko`), from its `.modinfo`.
    LinuxKernelModule,
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
            PackageKind::LinuxKernel => "linux-kernel",
            PackageKind::LinuxKernelModule => "linux-kernel-module",
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
            // The purl spec has no type for either; syft writes `generic`.
            PackageKind::LinuxKernel | PackageKind::LinuxKernelModule => "generic",
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
            // Distribution kernels are matched through their OS packages,
            // which carry the distribution's fixes.
            PackageKind::Apk
            | PackageKind::Deb
            | PackageKind::Rpm
            | PackageKind::LinuxKernel
            | PackageKind::LinuxKernelModule => None,
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
    /// Architecture as the package database records it (dpkg
    /// `Architecture:`, apk `A:`, rpm `ARCH`: `amd64`, `x86_64`, `noarch`…);
    /// `None` for language packages.
    pub arch: Option<String>,
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

impl Package {
    /// The package URL in PatchPilot's canonical form
    /// ([`patchpilot_model::purl`], which names the purl-spec rules it
    /// follows). OS packages take the distribution's vendor as namespace
    /// (`alpine`, `debian`, `redhat`…; `unknown` without `os`), their
    /// architecture as `arch` and the release as `distro`
    /// (`debian-12`); an rpm epoch becomes the `epoch` qualifier.
    ///
    /// Empty only for a package no purl can be built for (an empty name,
    /// which no cataloger produces).
    pub fn purl(&self, os: Option<Distro<'_>>) -> String {
        match self.canonical_purl(os) {
            Ok(purl) => purl.to_string(),
            Err(e) => {
                tracing::debug!(package = %self.name, version = %self.version, error = %e, "no package URL");
                String::new()
            }
        }
    }

    /// The package URL as a [`Purl`]; see [`Package::purl`].
    pub fn canonical_purl(&self, os: Option<Distro<'_>>) -> Result<Purl, purl::Error> {
        let ty = self.kind.purl_type();
        let version = Some(self.version.as_str());
        match self.kind {
            PackageKind::Apk | PackageKind::Deb | PackageKind::Rpm => {
                let vendor = os.map(|d| d.vendor()).unwrap_or_else(|| "unknown".to_owned());
                let distro = os.and_then(|d| d.qualifier());
                let qualifiers: Vec<(&str, &str)> =
                    [("arch", self.arch.as_deref()), ("distro", distro.as_deref())]
                        .into_iter()
                        .filter_map(|(key, value)| Some((key, value?)))
                        .collect();
                Purl::build(ty, Some(&vendor), &self.name, version, &qualifiers, None)
            }
            // A module path's last element is the name, the rest the
            // namespace; the standard library (`stdlib`) has none.
            PackageKind::GoModule => match self.name.rsplit_once('/') {
                Some((namespace, name)) => Purl::build(ty, Some(namespace), name, version, &[], None),
                None => Purl::build(ty, None, &self.name, version, &[], None),
            },
            PackageKind::Npm => match self.name.split_once('/') {
                Some((scope, name)) if scope.starts_with('@') => {
                    Purl::build(ty, Some(scope), name, version, &[], None)
                }
                _ => Purl::build(ty, None, &self.name, version, &[], None),
            },
            PackageKind::JavaArchive => match self.name.split_once(':') {
                Some((group, artifact)) => Purl::build(ty, Some(group), artifact, version, &[], None),
                None => Purl::build(ty, None, &self.name, version, &[], None),
            },
            PackageKind::Python
            | PackageKind::RustCrate
            | PackageKind::LinuxKernel
            | PackageKind::LinuxKernelModule => Purl::build(ty, None, &self.name, version, &[], None),
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
            arch: None,
            path: String::new(),
            layer: None,
            ecosystem: String::new(),
        }
    }

    fn distro(id: &'static str, version_id: &'static str) -> Option<Distro<'static>> {
        Some(Distro { id, version_id })
    }

    fn with_arch(mut p: Package, arch: &str) -> Package {
        p.arch = Some(arch.into());
        p
    }

    #[test]
    fn purls_follow_the_spec_examples() {
        // Examples of the purl spec's type definitions and test suite
        // (package-url/purl-spec `types/`, `tests/types/`).
        assert_eq!(
            pkg(PackageKind::Deb, "curl", "7.50.3-1").purl(distro("debian", "")),
            "pkg:deb/debian/curl@7.50.3-1"
        );
        assert_eq!(
            with_arch(pkg(PackageKind::Deb, "attr", "1:2.4.47-2+b1"), "amd64").purl(distro("debian", "")),
            "pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64",
            "deb keeps the epoch in the version and encodes `+`"
        );
        assert_eq!(
            with_arch(pkg(PackageKind::Rpm, "centerim", "1:4.22.10-1.el6"), "i686")
                .purl(distro("fedora", "25")),
            "pkg:rpm/fedora/centerim@4.22.10-1.el6?arch=i686&distro=fedora-25&epoch=1",
            "rpm puts the epoch in a qualifier"
        );
        assert_eq!(
            with_arch(pkg(PackageKind::Apk, "curl", "7.83.0-r0"), "x86").purl(distro("alpine", "")),
            "pkg:apk/alpine/curl@7.83.0-r0?arch=x86"
        );
        assert_eq!(
            pkg(PackageKind::GoModule, "github.com/gorilla/context", "234fd47e07d1004f0aed9c").purl(None),
            "pkg:golang/github.com/gorilla/context@234fd47e07d1004f0aed9c"
        );
        assert_eq!(pkg(PackageKind::GoModule, "stdlib", "v1.22.2").purl(None), "pkg:golang/stdlib@v1.22.2");
        assert_eq!(
            pkg(PackageKind::Npm, "@angular/animation", "12.3.1").purl(None),
            "pkg:npm/%40angular/animation@12.3.1"
        );
        assert_eq!(
            pkg(PackageKind::Python, "Django_Allauth", "12.23").purl(None),
            "pkg:pypi/django-allauth@12.23"
        );
        assert_eq!(
            pkg(PackageKind::Python, "zope.interface", "6.1").purl(None),
            "pkg:pypi/zope-interface@6.1"
        );
        assert_eq!(
            pkg(PackageKind::JavaArchive, "org.apache.xmlgraphics:batik-anim", "1.9.1").purl(None),
            "pkg:maven/org.apache.xmlgraphics/batik-anim@1.9.1"
        );
        assert_eq!(pkg(PackageKind::RustCrate, "rand", "0.7.2").purl(None), "pkg:cargo/rand@0.7.2");
        assert_eq!(
            pkg(PackageKind::Rpm, "curl", "7.50.3-1.fc25").purl(distro("rhel", "")),
            "pkg:rpm/redhat/curl@7.50.3-1.fc25"
        );
        assert_eq!(
            pkg(PackageKind::Deb, "openssl", "1:3.0.2-0ubuntu1").purl(distro("ubuntu", "")),
            "pkg:deb/ubuntu/openssl@1:3.0.2-0ubuntu1",
            "the spec leaves `:` unencoded"
        );
    }

    #[test]
    fn os_purls_carry_arch_and_the_release() {
        let libssl = with_arch(pkg(PackageKind::Deb, "libssl3", "3.0.11-1~deb12u2"), "amd64");
        assert_eq!(
            libssl.purl(distro("debian", "12")),
            "pkg:deb/debian/libssl3@3.0.11-1~deb12u2?arch=amd64&distro=debian-12"
        );
        let busybox = with_arch(pkg(PackageKind::Apk, "busybox", "1.36.1-r15"), "x86_64");
        assert_eq!(
            busybox.purl(distro("alpine", "3.19.1")),
            "pkg:apk/alpine/busybox@1.36.1-r15?arch=x86_64&distro=alpine-3.19.1"
        );
        let openssl = with_arch(pkg(PackageKind::Rpm, "openssl", "1:3.0.7-27.el9"), "x86_64");
        assert_eq!(
            openssl.purl(distro("rhel", "9.3")),
            "pkg:rpm/redhat/openssl@3.0.7-27.el9?arch=x86_64&distro=rhel-9.3&epoch=1"
        );
        assert_eq!(pkg(PackageKind::Deb, "curl", "1").purl(None), "pkg:deb/unknown/curl@1");
        assert_eq!(pkg(PackageKind::Deb, "", "1").purl(None), "", "no purl without a name");
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
