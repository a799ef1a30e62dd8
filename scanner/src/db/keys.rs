//! Lookup keys: which ecosystem and package-name strings an OSV `affected`
//! entry is found under, and how a query is turned into the same keys.
//!
//! The ecosystem rules follow the osv.dev API (`gcp/api/server.py`,
//! `is_matching_package_ecosystem`, and `osv/ecosystems/_ecosystems.py`,
//! `normalize` and `remove_variants`): a query ecosystem matches an entry
//! whose ecosystem is the same string, or whose ecosystem *reduces* to it by
//! keeping only the part before the first `:` (`Debian:12` → `Debian`), or,
//! for Ubuntu, by dropping the `Pro` and `LTS` variant markers
//! (`Ubuntu:Pro:18.04:LTS` → `Ubuntu:18.04`). Matching is case-sensitive, as
//! OSV ecosystem names are.
//!
//! One addition on the query side: Debian publishes OSV data per major
//! release (`Debian:12`), while `/etc/debian_version` names point releases
//! (`12.5`); a query for `Debian:12.5` is looked up as `Debian:12`.
//!
//! Package names are compared as OSV gives them (case-sensitive), except
//! PyPI, whose names are compared after PEP 503 normalisation (lower case,
//! runs of `-`, `_` and `.` collapsed to one `-`), as osv.dev does
//! (`maybe_normalize_package_names`).

use std::borrow::Cow;

use patchpilot_model::package_names;

/// The ecosystem without its release or variant suffix: `Debian:12` →
/// `Debian`, `Ubuntu:Pro:18.04:LTS` → `Ubuntu`, `PyPI` → `PyPI`.
pub(crate) fn base_ecosystem(ecosystem: &str) -> &str {
    ecosystem.split_once(':').map_or(ecosystem, |(base, _)| base)
}

/// Every ecosystem key an `affected` entry of `ecosystem` is indexed under:
/// the ecosystem itself, its base, and for Ubuntu the ecosystem without its
/// `Pro`/`LTS` segments. No duplicates; the exact ecosystem comes first.
pub(crate) fn index_ecosystems(ecosystem: &str) -> Vec<String> {
    let mut keys = vec![ecosystem.to_owned()];
    let mut add = |key: &str| {
        if !keys.iter().any(|k| k == key) {
            keys.push(key.to_owned());
        }
    };
    add(base_ecosystem(ecosystem));
    if let Some(without_variants) = ubuntu_without_variants(ecosystem) {
        add(&without_variants);
    }
    keys
}

/// Whether an `affected` entry of `package_ecosystem` answers a query for
/// `query_ecosystem` (already passed through [`query_ecosystem`]).
pub(crate) fn ecosystem_matches(package_ecosystem: &str, query_ecosystem: &str) -> bool {
    package_ecosystem == query_ecosystem
        || base_ecosystem(package_ecosystem) == query_ecosystem
        || ubuntu_without_variants(package_ecosystem).is_some_and(|e| e == query_ecosystem)
}

/// The ecosystem key a query for `ecosystem` looks up: the ecosystem as
/// given, except that a Debian point release names its major release.
pub(crate) fn query_ecosystem(ecosystem: &str) -> Cow<'_, str> {
    if let Some(release) = ecosystem.strip_prefix("Debian:")
        && let Some((major, minor)) = release.split_once('.')
        && is_number(major)
        && is_number(minor)
    {
        return Cow::Owned(format!("Debian:{major}"));
    }
    Cow::Borrowed(ecosystem)
}

/// The package-name key of `name` in `ecosystem`: normalised for PyPI
/// ([`package_names::pypi`], PEP 503), unchanged elsewhere.
pub(crate) fn name_key<'a>(ecosystem: &str, name: &'a str) -> Cow<'a, str> {
    if base_ecosystem(ecosystem) == "PyPI" {
        Cow::Owned(package_names::pypi(name))
    } else {
        Cow::Borrowed(name)
    }
}

/// `Ubuntu:Pro:18.04:LTS` → `Ubuntu:18.04`; `None` for other ecosystems.
/// osv.dev removes the substrings `:Pro` and `:LTS`; removing whole
/// segments gives the same result for every ecosystem Canonical publishes
/// and cannot cut a longer segment such as `:Profile` in half.
fn ubuntu_without_variants(ecosystem: &str) -> Option<String> {
    if base_ecosystem(ecosystem) != "Ubuntu" {
        return None;
    }
    let kept: Vec<&str> = ecosystem.split(':').filter(|segment| !matches!(*segment, "Pro" | "LTS")).collect();
    Some(kept.join(":"))
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_keys_follow_osv_dev() {
        assert_eq!(index_ecosystems("npm"), ["npm"]);
        assert_eq!(index_ecosystems("Debian:12"), ["Debian:12", "Debian"]);
        assert_eq!(index_ecosystems("Alpine:v3.19"), ["Alpine:v3.19", "Alpine"]);
        assert_eq!(index_ecosystems("Ubuntu:22.04:LTS"), ["Ubuntu:22.04:LTS", "Ubuntu", "Ubuntu:22.04"]);
        assert_eq!(
            index_ecosystems("Ubuntu:Pro:18.04:LTS"),
            ["Ubuntu:Pro:18.04:LTS", "Ubuntu", "Ubuntu:18.04"]
        );
        assert_eq!(
            index_ecosystems("Ubuntu:Pro:FIPS-updates:20.04:LTS"),
            ["Ubuntu:Pro:FIPS-updates:20.04:LTS", "Ubuntu", "Ubuntu:FIPS-updates:20.04"]
        );
        assert_eq!(index_ecosystems("Ubuntu:24.10"), ["Ubuntu:24.10", "Ubuntu"]);
        assert_eq!(
            index_ecosystems("Red Hat:rhel_aus:8.4::appstream"),
            ["Red Hat:rhel_aus:8.4::appstream", "Red Hat"]
        );
    }

    #[test]
    fn matching_agrees_with_the_index_keys() {
        for package_ecosystem in
            ["npm", "Debian:12", "Ubuntu:Pro:18.04:LTS", "Ubuntu:22.04:LTS", "Alpine:v3.19"]
        {
            for query in [
                "npm",
                "Debian",
                "Debian:12",
                "Debian:11",
                "Ubuntu",
                "Ubuntu:18.04",
                "Ubuntu:22.04",
                "Alpine",
            ] {
                assert_eq!(
                    ecosystem_matches(package_ecosystem, query),
                    index_ecosystems(package_ecosystem).iter().any(|k| k == query),
                    "{package_ecosystem} vs {query}"
                );
            }
        }
        assert!(!ecosystem_matches("Debian:12", "debian:12"), "ecosystems are case-sensitive");
        assert!(!ecosystem_matches("Ubuntu:22.04", "Ubuntu:22.04:LTS"), "a query never widens to a variant");
    }

    #[test]
    fn debian_point_releases_query_their_major_release() {
        assert_eq!(query_ecosystem("Debian:12.5"), "Debian:12");
        assert_eq!(query_ecosystem("Debian:12"), "Debian:12");
        assert_eq!(query_ecosystem("Debian"), "Debian");
        assert_eq!(query_ecosystem("Debian:trixie"), "Debian:trixie");
        assert_eq!(query_ecosystem("Debian:12.5.1"), "Debian:12.5.1", "not a point release");
        assert_eq!(query_ecosystem("Ubuntu:22.04"), "Ubuntu:22.04");
        assert_eq!(query_ecosystem("Alpine:v3.19"), "Alpine:v3.19");
    }

    #[test]
    fn pypi_names_are_pep503_normalised() {
        assert_eq!(name_key("PyPI", "PyYAML"), "pyyaml");
        assert_eq!(name_key("PyPI", "zope.interface"), "zope-interface");
        assert_eq!(name_key("PyPI", "Foo__Bar-.baz"), "foo-bar-baz");
        assert_eq!(name_key("PyPI", "ruamel.yaml.clib"), "ruamel-yaml-clib");
        assert_eq!(name_key("npm", "JSONStream"), "JSONStream", "only PyPI is normalised");
        assert_eq!(name_key("Go", "github.com/BurntSushi/toml"), "github.com/BurntSushi/toml");
    }
}
