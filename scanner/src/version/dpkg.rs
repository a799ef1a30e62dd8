//! Debian version ordering (Debian, Ubuntu).
//!
//! A version is `[epoch:]upstream_version[-debian_revision]` (Debian Policy
//! 5.6.12, deb-version(5)). Parsing follows dpkg's `parseversion()`
//! (`lib/dpkg/parsehelp.c`): surrounding blanks are ignored, the epoch is a
//! non-negative number no larger than `INT_MAX`, the revision is what follows
//! the last hyphen, and a version whose upstream part is empty, does not start
//! with a digit or holds a character outside `[A-Za-z0-9.+~:-]` (revision:
//! `[A-Za-z0-9.+~]`) is refused. dpkg only *warns* about the last two, but it
//! reports them as parse failures, and a scanner should not rank a string
//! dpkg itself calls malformed. One leniency of dpkg is not copied: `strtol`
//! lets it read a signed epoch (`+1:2.0`); here the epoch is digits only.
//!
//! Ordering is dpkg's `verrevcmp()` (`lib/dpkg/version.c`): epochs compare
//! numerically, then upstream, then revision, each by alternating runs of
//! non-digits (compared character by character with `~` before everything,
//! even the end of the string, and letters before other characters) and runs
//! of digits (compared numerically).

use std::cmp::Ordering;

use super::VersionError;

/// A parsed, valid Debian version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    epoch: u32,
    upstream: String,
    revision: String,
}

/// dpkg stores the epoch in an `int` and refuses anything above `INT_MAX`.
const MAX_EPOCH: u32 = i32::MAX as u32;

impl Version {
    /// Parses `text` as dpkg does.
    pub fn parse(text: &str) -> Result<Version, VersionError> {
        let invalid = |reason: &str| VersionError {
            scheme: "dpkg",
            version: text.to_owned(),
            reason: reason.to_owned(),
        };
        // dpkg trims blanks (space and tab) only; anything else is a syntax error below.
        let trimmed = text.trim_matches(|character| character == ' ' || character == '\t');
        if trimmed.is_empty() {
            return Err(invalid("version string is empty"));
        }
        if trimmed.contains([' ', '\t']) {
            return Err(invalid("version string has embedded spaces"));
        }
        let (epoch, rest) = match trimmed.split_once(':') {
            Some((epoch, rest)) => {
                if epoch.is_empty() {
                    return Err(invalid("epoch is empty"));
                }
                if !epoch.bytes().all(|byte| byte.is_ascii_digit()) {
                    return Err(invalid("epoch is not a number"));
                }
                let epoch = epoch.parse::<u32>().ok().filter(|&epoch| epoch <= MAX_EPOCH);
                let Some(epoch) = epoch else {
                    return Err(invalid("epoch is too big"));
                };
                if rest.is_empty() {
                    return Err(invalid("nothing after the epoch colon"));
                }
                (epoch, rest)
            }
            None => (0, trimmed),
        };
        let (upstream, revision) = match rest.rsplit_once('-') {
            Some((upstream, revision)) => {
                if revision.is_empty() {
                    return Err(invalid("revision is empty after `-`"));
                }
                (upstream, revision)
            }
            None => (rest, ""),
        };
        if upstream.is_empty() {
            return Err(invalid("upstream version is empty"));
        }
        if !upstream.starts_with(|character: char| character.is_ascii_digit()) {
            return Err(invalid("upstream version does not start with a digit"));
        }
        if let Some(bad) = upstream.chars().find(|&character| !is_upstream_character(character)) {
            return Err(invalid(&format!("invalid character `{bad}` in upstream version")));
        }
        if let Some(bad) = revision.chars().find(|&character| !is_revision_character(character)) {
            return Err(invalid(&format!("invalid character `{bad}` in revision")));
        }
        Ok(Version { epoch, upstream: upstream.to_owned(), revision: revision.to_owned() })
    }

    /// The epoch (0 when absent).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The upstream version.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// The Debian revision (empty when absent).
    pub fn revision(&self) -> &str {
        &self.revision
    }
}

fn is_upstream_character(character: char) -> bool {
    character.is_ascii_alphanumeric() || matches!(character, '.' | '+' | '~' | '-' | ':')
}

fn is_revision_character(character: char) -> bool {
    character.is_ascii_alphanumeric() || matches!(character, '.' | '+' | '~')
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.epoch
            .cmp(&other.epoch)
            .then_with(|| compare_part(&self.upstream, &other.upstream))
            .then_with(|| compare_part(&self.revision, &other.revision))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The weight of one character in a non-digit run; `None` is the end of the
/// run (or of the string), which weighs like a digit.
fn weight(character: Option<u8>) -> i32 {
    match character {
        None => 0,
        Some(byte) if byte.is_ascii_digit() => 0,
        Some(byte) if byte.is_ascii_alphabetic() => i32::from(byte),
        Some(b'~') => -1,
        Some(byte) => i32::from(byte) + 256,
    }
}

/// dpkg's `verrevcmp` over one upstream version or revision.
pub fn compare_part(a: &str, b: &str) -> Ordering {
    let a = a.as_bytes();
    let b = b.as_bytes();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        while a.get(i).is_some_and(|byte| !byte.is_ascii_digit())
            || b.get(j).is_some_and(|byte| !byte.is_ascii_digit())
        {
            let order = weight(a.get(i).copied()).cmp(&weight(b.get(j).copied()));
            if order != Ordering::Equal {
                return order;
            }
            i += 1;
            j += 1;
        }
        while a.get(i) == Some(&b'0') {
            i += 1;
        }
        while b.get(j) == Some(&b'0') {
            j += 1;
        }
        let mut first_difference = Ordering::Equal;
        while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
            if !x.is_ascii_digit() || !y.is_ascii_digit() {
                break;
            }
            if first_difference == Ordering::Equal {
                first_difference = x.cmp(y);
            }
            i += 1;
            j += 1;
        }
        if a.get(i).is_some_and(u8::is_ascii_digit) {
            return Ordering::Greater;
        }
        if b.get(j).is_some_and(u8::is_ascii_digit) {
            return Ordering::Less;
        }
        if first_difference != Ordering::Equal {
            return first_difference;
        }
    }
    Ordering::Equal
}

/// Compares two Debian versions; an error names the first invalid one.
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
    fn tilde_sorts_before_everything_even_the_end() {
        assert_eq!(order("1.0~rc1", "1.0"), Ordering::Less);
        assert_eq!(order("1.0~~", "1.0~"), Ordering::Less);
        assert_eq!(order("1.0~rc1-1", "1.0~rc2-1"), Ordering::Less);
        assert_eq!(order("1.0-1~bpo1", "1.0-1"), Ordering::Less);
    }

    #[test]
    fn letters_sort_before_other_characters() {
        assert_eq!(order("1.0a", "1.0+"), Ordering::Less);
        assert_eq!(order("1.0+", "1.0."), Ordering::Less);
        assert_eq!(order("1.0Z", "1.0a"), Ordering::Less);
    }

    #[test]
    fn epoch_dominates_and_defaults_to_zero() {
        assert_eq!(order("1:0.1", "9.9"), Ordering::Greater);
        assert_eq!(order("0:1.0-1", "1.0-1"), Ordering::Equal);
        assert_eq!(order("  1:2.3-4\t", "1:2.3-4"), Ordering::Equal);
    }

    #[test]
    fn numbers_ignore_leading_zeros_and_do_not_overflow() {
        assert_eq!(order("1.0000-1", "1.0-1"), Ordering::Equal);
        assert_eq!(order("1.09", "1.9"), Ordering::Equal);
        assert_eq!(
            order("1.123456789012345678901234567890", "1.123456789012345678901234567889"),
            Ordering::Greater
        );
    }

    #[test]
    fn revision_is_after_the_last_hyphen() {
        let version = Version::parse("2:1.2-3-4").expect("valid");
        assert_eq!((version.epoch(), version.upstream(), version.revision()), (2, "1.2-3", "4"));
        // A colon is allowed in the upstream version once an epoch is present.
        let version = Version::parse("0:09azAZ.-+~:-0").expect("valid");
        assert_eq!((version.upstream(), version.revision()), ("09azAZ.-+~:", "0"));
    }

    #[test]
    fn invalid_versions_are_errors_naming_the_version() {
        // Cases from dpkg's lib/dpkg/t/t-version.c test_version_parse() and
        // what dpkg 1.21 reports as bad syntax.
        for bad in [
            "",
            "  ",
            "0:",
            "0:0 0-1",
            "-1:0-1",
            "999999999999999999999999:0-1",
            "2147483648:1",
            "a:0-0",
            "A:0-0",
            "-0",
            "0:-0",
            "0:abc3-0",
            "0:0a!-0",
            "0:0a_-0",
            "0:0-0:0",
            "0:0-0_",
            "1.0-",
            ":1",
            "1.0@x",
            "+1:2.0",
        ] {
            let error = compare(bad, "1.0").expect_err(bad);
            assert_eq!(error.version, bad);
            assert_eq!(error.scheme, "dpkg");
            assert!(compare("1.0", bad).is_err(), "{bad} as the second operand");
        }
    }

    #[test]
    fn largest_epoch_is_accepted() {
        assert_eq!(order("2147483647:1", "2147483646:9"), Ordering::Greater);
    }
}
