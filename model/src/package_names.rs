//! Package names in each ecosystem's canonical form: the one place
//! PatchPilot decides when two spellings name the same package.
//!
//! The scanner's advisory keys, its package URLs, VEX matching in the
//! planner and the agent's lockfile and pin edits all compare names through
//! these functions, so they cannot disagree about it.
//!
//! - PyPI follows the Python Packaging Authority's "Names and normalization"
//!   specification (formerly PEP 503): lower case, and every run of `-`, `_`
//!   and `.` becomes a single `-` (`Foo__Bar.baz` → `foo-bar-baz`).
//! - Package URL names and namespaces follow the purl-spec type definitions
//!   (`types/<type>-definition.json`): lower case where a definition says
//!   the name or namespace is not case sensitive, and the PyPI normalisation
//!   above for `pypi` (the definition itself lists only `_` → `-`; the
//!   normalised form is a subset of what it allows and the one PyPI uses).

use std::borrow::Cow;

/// The normalised form of a PyPI project name (PyPA "Names and
/// normalization", formerly PEP 503). Names that normalise to the same
/// string are the same project.
///
/// Lower-casing is Unicode's, as Python's `str.lower()` in the reference
/// implementation (`re.sub(r"[-_.]+", "-", name).lower()`); valid names are
/// ASCII anyway.
pub fn pypi(name: &str) -> String {
    let mut normalised = String::with_capacity(name.len());
    let mut in_separator_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_separator_run {
                normalised.push('-');
            }
            in_separator_run = true;
        } else {
            normalised.extend(c.to_lowercase());
            in_separator_run = false;
        }
    }
    normalised
}

/// Whether the purl type's definition calls its names case insensitive
/// (`"case_sensitive": false`, "must be lowercased"): apk, bitbucket,
/// composer, deb, github, golang, hex and npm. `pypi` is normalised by
/// [`pypi`] instead.
fn lowercase_name(purl_type: &str) -> bool {
    matches!(purl_type, "apk" | "bitbucket" | "composer" | "deb" | "github" | "golang" | "hex" | "npm")
}

/// Whether the purl type's definition calls its namespaces case
/// insensitive: the vendors of apk, deb, rpm and qpkg, the scopes of npm,
/// the module hosts of golang, and the owners of bitbucket, composer, github
/// and hex.
fn lowercase_namespace(purl_type: &str) -> bool {
    matches!(
        purl_type,
        "apk" | "bitbucket" | "composer" | "deb" | "github" | "golang" | "hex" | "npm" | "qpkg" | "rpm"
    )
}

fn lowercase(text: &str) -> Cow<'_, str> {
    if text.chars().any(char::is_uppercase) { Cow::Owned(text.to_lowercase()) } else { Cow::Borrowed(text) }
}

/// A package URL name in the canonical form of its type (`purl_type` in
/// lower case): PyPI-normalised for `pypi`, lower case for the types whose
/// names are not case sensitive, unchanged otherwise (maven, cargo, rpm…).
pub fn purl_name<'a>(purl_type: &str, name: &'a str) -> Cow<'a, str> {
    if purl_type == "pypi" {
        Cow::Owned(pypi(name))
    } else if lowercase_name(purl_type) {
        lowercase(name)
    } else {
        Cow::Borrowed(name)
    }
}

/// A package URL namespace in the canonical form of its type: lower case
/// for the types whose namespaces are not case sensitive, unchanged
/// otherwise (maven group ids are case sensitive).
pub fn purl_namespace<'a>(purl_type: &str, namespace: &'a str) -> Cow<'a, str> {
    if lowercase_namespace(purl_type) { lowercase(namespace) } else { Cow::Borrowed(namespace) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pypi_names_follow_the_pypa_normalisation() {
        assert_eq!(pypi("Pygments"), "pygments");
        assert_eq!(pypi("zope.interface"), "zope-interface");
        assert_eq!(pypi("Foo__Bar-.baz"), "foo-bar-baz");
        assert_eq!(pypi("ruamel.yaml.clib"), "ruamel-yaml-clib");
        assert_eq!(pypi("importlib_metadata"), "importlib-metadata");
        assert_eq!(pypi("Bar_Baz"), pypi("bar.baz"));
        // The specification's own examples: all of these are `friendly-bard`.
        for name in ["friendly-bard", "Friendly-Bard", "FRIENDLY-BARD", "friendly.bard", "friendly_bard"] {
            assert_eq!(pypi(name), "friendly-bard", "{name}");
        }
        assert_eq!(pypi("friendly--bard"), "friendly-bard");
        assert_eq!(pypi("FrIeNdLy-._.-bArD"), "friendly-bard");
    }

    #[test]
    fn purl_names_follow_the_type_definitions() {
        assert_eq!(purl_name("pypi", "Django_Allauth"), "django-allauth");
        assert_eq!(purl_name("deb", "LibFoo"), "libfoo");
        assert_eq!(purl_name("apk", "Py3-Foo"), "py3-foo");
        assert_eq!(purl_name("npm", "JSONStream"), "jsonstream");
        assert_eq!(purl_name("golang", "Toml"), "toml");
        assert_eq!(purl_name("rpm", "NetworkManager"), "NetworkManager", "rpm names are case sensitive");
        assert_eq!(purl_name("maven", "HTTPClient"), "HTTPClient");
        assert_eq!(purl_name("cargo", "Inflector"), "Inflector");
        assert_eq!(purl_namespace("rpm", "RedHat"), "redhat");
        assert_eq!(purl_namespace("golang", "github.com/BurntSushi"), "github.com/burntsushi");
        assert_eq!(purl_namespace("maven", "HTTPClient"), "HTTPClient");
    }
}
