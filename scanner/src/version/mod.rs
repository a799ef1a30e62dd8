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
    /// Maven's `ComparableVersion` (Maven 3.9).
    Maven,
    /// RubyGems' `Gem::Version`.
    RubyGems,
    /// NuGet.Versioning's `NuGetVersion` (SemVer 2.0 with a fourth number).
    NuGet,
}

impl Scheme {
    /// The scheme of an OSV ecosystem name (`Alpine:v3.19`, `Debian:12`,
    /// `Go`, `Maven:https://maven.google.com`…); `None` when PatchPilot has no
    /// comparator for it.
    pub fn for_ecosystem(ecosystem: &str) -> Option<Scheme> {
        let base = ecosystem.split(':').next().unwrap_or(ecosystem);
        Some(match base {
            "Alpine" | "Wolfi" | "Chainguard" => Scheme::Apk,
            "Debian" | "Ubuntu" => Scheme::Dpkg,
            "Red Hat" | "Rocky Linux" | "AlmaLinux" | "openSUSE" | "SUSE" | "Amazon Linux" | "Mariner"
            | "Azure Linux" | "Photon OS" | "openEuler" => Scheme::Rpm,
            "Go" | "crates.io" | "npm" | "Hex" | "Pub" | "SwiftURL" => Scheme::Semver,
            "PyPI" => Scheme::Pep440,
            "Maven" => Scheme::Maven,
            "RubyGems" => Scheme::RubyGems,
            "NuGet" => Scheme::NuGet,
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
            Scheme::Maven => "Maven",
            Scheme::RubyGems => "RubyGems",
            Scheme::NuGet => "NuGet",
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
            Scheme::Maven => maven::compare(a, b),
            Scheme::RubyGems => rubygems::compare(a, b),
            Scheme::NuGet => nuget::compare(a, b),
        }
    }
}

pub mod apk;
pub mod dpkg;
pub mod maven;
pub mod nuget;
pub mod pep440;
pub mod rpm;
pub mod rubygems;
pub mod semver;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_ecosystems_have_their_own_schemes() {
        assert_eq!(Scheme::for_ecosystem("Maven"), Some(Scheme::Maven));
        // OSV's Maven may name another repository after a colon.
        assert_eq!(Scheme::for_ecosystem("Maven:https://maven.google.com"), Some(Scheme::Maven));
        assert_eq!(Scheme::for_ecosystem("RubyGems"), Some(Scheme::RubyGems));
        assert_eq!(Scheme::for_ecosystem("NuGet"), Some(Scheme::NuGet));
        assert_eq!(Scheme::for_ecosystem("Packagist"), None);
        for scheme in [Scheme::Maven, Scheme::RubyGems, Scheme::NuGet] {
            let error = scheme.compare("1\u{1}", "1").expect_err(scheme.name());
            assert_eq!((error.scheme, error.version.as_str()), (scheme.name(), "1\u{1}"));
        }
    }
}
