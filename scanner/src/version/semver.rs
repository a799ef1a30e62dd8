//! Semantic Versioning 2.0.0 precedence (Go, crates.io, npm, Hex, Pub…).
//!
//! The grammar and precedence rules are those of <https://semver.org/>
//! (spec items 2, 9, 10 and 11): `MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]`,
//! numeric identifiers without leading zeros, pre-release identifiers compared
//! left to right (numbers numerically and below alphanumerics, alphanumerics in
//! ASCII order, a longer list above its prefix), a pre-release below its
//! release, and build metadata ignored.
//!
//! Two tolerances come from the ecosystems that use it: a single leading `v`
//! (Go module versions, accepted by node-semver too) and surrounding
//! whitespace (node-semver trims it). Go's `+incompatible` is build metadata
//! and so plays no part in ordering. Numbers have no size limit.

use std::cmp::Ordering;

use super::VersionError;

/// One dot-separated pre-release identifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Identifier {
    /// Digits only, without leading zeros.
    Numeric(String),
    /// Anything else from `[0-9A-Za-z-]`.
    Alphanumeric(String),
}

impl Ord for Identifier {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Identifier::Numeric(a), Identifier::Numeric(b)) => compare_number(a, b),
            (Identifier::Numeric(_), Identifier::Alphanumeric(_)) => Ordering::Less,
            (Identifier::Alphanumeric(_), Identifier::Numeric(_)) => Ordering::Greater,
            (Identifier::Alphanumeric(a), Identifier::Alphanumeric(b)) => a.as_bytes().cmp(b.as_bytes()),
        }
    }
}

impl PartialOrd for Identifier {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A parsed, valid semantic version. Equality and order are precedence, so
/// versions differing only in build metadata are equal.
#[derive(Debug, Clone)]
pub struct Version {
    major: String,
    minor: String,
    patch: String,
    pre_release: Vec<Identifier>,
    build: Vec<String>,
}

impl Version {
    /// Parses `text`: optional surrounding whitespace, an optional leading `v`,
    /// then a strict SemVer 2.0.0 version.
    pub fn parse(text: &str) -> Result<Version, VersionError> {
        let invalid = |reason: String| VersionError { scheme: "semver", version: text.to_owned(), reason };
        let trimmed = text.trim();
        let body = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let (without_build, build) = match body.split_once('+') {
            Some((head, build)) => (head, Some(build)),
            None => (body, None),
        };
        let (core, pre_release) = match without_build.split_once('-') {
            Some((core, pre_release)) => (core, Some(pre_release)),
            None => (without_build, None),
        };
        let numbers: Vec<&str> = core.split('.').collect();
        let [major, minor, patch] = numbers.as_slice() else {
            return Err(invalid(format!("`{core}` is not MAJOR.MINOR.PATCH")));
        };
        for (name, number) in [("major", major), ("minor", minor), ("patch", patch)] {
            if !is_numeric_identifier(number) {
                return Err(invalid(format!(
                    "{name} version `{number}` is not a number without leading zeros"
                )));
            }
        }
        let pre_release = match pre_release {
            None => Vec::new(),
            Some(pre_release) => pre_release
                .split('.')
                .map(|identifier| {
                    if !is_identifier(identifier) {
                        Err(invalid(format!(
                            "pre-release identifier `{identifier}` is empty or not [0-9A-Za-z-]"
                        )))
                    } else if identifier.bytes().all(|byte| byte.is_ascii_digit()) {
                        if is_numeric_identifier(identifier) {
                            Ok(Identifier::Numeric(identifier.to_owned()))
                        } else {
                            Err(invalid(format!(
                                "numeric pre-release identifier `{identifier}` has a leading zero"
                            )))
                        }
                    } else {
                        Ok(Identifier::Alphanumeric(identifier.to_owned()))
                    }
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        let build = match build {
            None => Vec::new(),
            Some(build) => build
                .split('.')
                .map(|identifier| {
                    if is_identifier(identifier) {
                        Ok(identifier.to_owned())
                    } else {
                        Err(invalid(format!("build identifier `{identifier}` is empty or not [0-9A-Za-z-]")))
                    }
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        Ok(Version {
            major: (*major).to_owned(),
            minor: (*minor).to_owned(),
            patch: (*patch).to_owned(),
            pre_release,
            build,
        })
    }

    /// `MAJOR`, `MINOR` and `PATCH` as written (they can exceed any integer type).
    pub fn core(&self) -> [&str; 3] {
        [&self.major, &self.minor, &self.patch]
    }

    /// The pre-release identifiers.
    pub fn pre_release(&self) -> &[Identifier] {
        &self.pre_release
    }

    /// The build metadata identifiers (ignored by ordering).
    pub fn build(&self) -> &[String] {
        &self.build
    }
}

fn is_identifier(identifier: &str) -> bool {
    !identifier.is_empty() && identifier.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
}

fn is_numeric_identifier(number: &str) -> bool {
    !number.is_empty()
        && number.bytes().all(|byte| byte.is_ascii_digit())
        && (number == "0" || !number.starts_with('0'))
}

/// Compares two numbers written without leading zeros.
fn compare_number(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_number(&self.major, &other.major)
            .then_with(|| compare_number(&self.minor, &other.minor))
            .then_with(|| compare_number(&self.patch, &other.patch))
            .then_with(|| match (self.pre_release.is_empty(), other.pre_release.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                // Lexicographic slice order is exactly spec item 11.4: the first
                // differing identifier decides, else the longer list wins.
                (false, false) => self.pre_release.cmp(&other.pre_release),
            })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

/// Compares two semantic versions by precedence; an error names the first
/// invalid one.
pub fn compare(a: &str, b: &str) -> Result<Ordering, VersionError> {
    Ok(Version::parse(a)?.cmp(&Version::parse(b)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(a: &str, b: &str) -> Ordering {
        compare(a, b).expect("valid versions")
    }

    #[test]
    fn go_prefix_and_incompatible_suffix_are_tolerated() {
        assert_eq!(order("v1.2.3", "1.2.3"), Ordering::Equal);
        assert_eq!(order("v2.0.0+incompatible", "2.0.0"), Ordering::Equal);
        assert_eq!(order("v2.0.1+incompatible", "v2.0.0"), Ordering::Greater);
    }

    #[test]
    fn go_pseudo_versions_order_by_timestamp_below_the_release() {
        assert_eq!(
            order("v0.0.0-20220906165146-f3363e06e74c", "0.0.0-20220906165146-f3363e06e74c"),
            Ordering::Equal
        );
        assert_eq!(
            order("v0.0.0-20220822230855-b0a4917ee28c", "0.0.0-20220906165146-f3363e06e74c"),
            Ordering::Less
        );
        assert_eq!(order("v0.0.0-20220906165146-f3363e06e74c", "0.0.1"), Ordering::Less);
        assert_eq!(order("v1.19.0-0", "1.19.0-rc.1"), Ordering::Less);
    }

    #[test]
    fn build_metadata_is_ignored_but_must_be_well_formed() {
        assert_eq!(order("1.0.0+001", "1.0.0+20130313144700"), Ordering::Equal);
        assert_eq!(order("1.0.0-beta+exp.sha.5114f85", "1.0.0-beta"), Ordering::Equal);
        let version = Version::parse("1.0.0-alpha+001.b-2").expect("valid");
        assert_eq!(version.build(), ["001", "b-2"]);
        assert_eq!(version.pre_release(), [Identifier::Alphanumeric("alpha".into())]);
    }

    #[test]
    fn numbers_have_no_size_limit() {
        assert_eq!(order("99999999999999999999.0.0", "99999999999999999998.0.0"), Ordering::Greater);
        assert_eq!(order("1.0.0-99999999999999999999", "1.0.0-100000000000000000000"), Ordering::Less);
        assert_eq!(Version::parse("10.20.30").expect("valid").core(), ["10", "20", "30"]);
    }

    #[test]
    fn invalid_versions_are_errors_naming_the_version() {
        for bad in [
            "",
            "1",
            "1.2",
            "1.2.3.4",
            "01.2.3",
            "1.02.3",
            "1.2.03",
            "1.2.3-",
            "1.2.3-01",
            "1.2.3-a..b",
            "1.2.3+",
            "1.2.3+a..b",
            "1.2.3-a_b",
            "=1.2.3",
            "v 1.2.3",
            "vv1.2.3",
            "V1.2.3",
            "1.2.3 beta",
            "a.b.c",
            "-1.2.3",
            "1.2.-3",
            "1.2.3-é",
        ] {
            let error = compare(bad, "1.0.0").expect_err(bad);
            assert_eq!(error.version, bad);
            assert_eq!(error.scheme, "semver");
            assert!(compare("1.0.0", bad).is_err(), "{bad} as the second operand");
        }
    }

    #[test]
    fn hyphens_belong_to_identifiers() {
        // The first `-` starts the pre-release; later ones are part of it.
        let version = Version::parse("1.2.3-alpha-.-beta").expect("valid");
        assert_eq!(
            version.pre_release(),
            [Identifier::Alphanumeric("alpha-".into()), Identifier::Alphanumeric("-beta".into())]
        );
        assert_eq!(order("1.2.3-5-foo", "1.2.3-5"), Ordering::Greater);
    }
}
