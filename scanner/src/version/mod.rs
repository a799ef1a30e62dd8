//! Version comparison, one scheme per ecosystem, following each ecosystem's
//! reference tool.

use std::cmp::Ordering;

/// A version string a scheme cannot parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{version}` is not a valid {scheme} version: {reason}")]
pub struct VersionError {
    /// The scheme.
    pub scheme: &'static str,
    /// The version text.
    pub version: String,
    /// What is wrong.
    pub reason: String,
}

/// A version ordering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// apk-tools (Alpine, Wolfi, Chainguard).
    Apk,
    /// dpkg (Debian, Ubuntu).
    Dpkg,
    /// rpmvercmp with epoch (Red Hat family, SUSE, Amazon Linux, Mariner).
    Rpm,
    /// Semantic Versioning 2.0 (Go with its `v` prefix, crates.io, npm).
    Semver,
    /// PEP 440 (PyPI).
    Pep440,
}

impl Scheme {
    /// The scheme of an OSV ecosystem name (`Alpine:v3.19`, `Debian:12`,
    /// `Go`…); `None` when PatchPilot has no comparator for it.
    pub fn for_ecosystem(ecosystem: &str) -> Option<Scheme> {
        let base = ecosystem.split(':').next().unwrap_or(ecosystem);
        Some(match base {
            "Alpine" | "Wolfi" | "Chainguard" => Scheme::Apk,
            "Debian" | "Ubuntu" => Scheme::Dpkg,
            "Red Hat" | "Rocky Linux" | "AlmaLinux" | "openSUSE" | "SUSE" | "Amazon Linux" | "Mariner"
            | "Azure Linux" | "Photon OS" | "openEuler" => Scheme::Rpm,
            "Go" | "crates.io" | "npm" | "Hex" | "Pub" | "SwiftURL" => Scheme::Semver,
            "PyPI" => Scheme::Pep440,
            _ => return None,
        })
    }

    /// The scheme's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Apk => "apk",
            Scheme::Dpkg => "dpkg",
            Scheme::Rpm => "rpm",
            Scheme::Semver => "semver",
            Scheme::Pep440 => "PEP 440",
        }
    }

    /// Compares two versions under this scheme.
    pub fn compare(self, a: &str, b: &str) -> Result<Ordering, VersionError> {
        match self {
            Scheme::Apk => apk::compare(a, b),
            Scheme::Dpkg => dpkg::compare(a, b),
            Scheme::Rpm => rpm::compare(a, b),
            Scheme::Semver => semver::compare(a, b),
            Scheme::Pep440 => pep440::compare(a, b),
        }
    }
}

pub mod apk;
pub mod dpkg;
pub mod pep440;
pub mod rpm;
pub mod semver;
