//! RPM version ordering (Red Hat family, SUSE, Amazon Linux, Mariner…).
//!
//! A version is `[epoch:]version[-release]`, split as rpm's `parseEVR()`
//! (`rpmio/rpmver.c`) does: the epoch is the leading digits before a `:`, the
//! release is what follows the last `-`. Ordering is `rpmverCmp()`: a missing
//! epoch counts as `0`, then version and release compare with `rpmvercmp()`
//! (`rpmio/rpmvercmp.c`), and a version without a release sorts before the same
//! version with one (`1.0 < 1.0-1`, as `rpm.vercmp` reports).
//!
//! `rpmvercmp` walks both strings by segments: anything that is not an ASCII
//! letter or digit separates segments, except `~`, which sorts before
//! everything (even the end: `1.0~rc1 < 1.0`), and `^`, which sorts after the
//! end but before anything else (`1.0 < 1.0^git1 < 1.0.1`). Digit segments
//! compare numerically, letter segments by bytes, and a digit segment is newer
//! than a letter segment.
//!
//! rpm accepts nearly any string, so few are refused here: an empty string,
//! an empty version or release, a non-numeric epoch before a `:`, and
//! whitespace, control or non-ASCII characters (which rpm would silently treat
//! as separators, making `1.1.α` equal to `1.1.β`).

use std::cmp::Ordering;

use super::VersionError;

/// A parsed, valid `[epoch:]version[-release]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Evr {
    epoch: Option<String>,
    version: String,
    release: Option<String>,
}

impl Evr {
    /// Parses `text` as rpm splits an EVR string.
    pub fn parse(text: &str) -> Result<Evr, VersionError> {
        let invalid = |reason: &str| VersionError {
            scheme: "rpm",
            version: text.to_owned(),
            reason: reason.to_owned(),
        };
        if text.is_empty() {
            return Err(invalid("version string is empty"));
        }
        if let Some(bad) = text.chars().find(|character| !character.is_ascii_graphic()) {
            return Err(invalid(&format!("character {bad:?} is not printable ASCII")));
        }
        let (epoch, rest) = match text.split_once(':') {
            Some((epoch, rest)) => {
                if epoch.is_empty() || !epoch.bytes().all(|byte| byte.is_ascii_digit()) {
                    return Err(invalid("the part before `:` is not a numeric epoch"));
                }
                if rest.contains(':') {
                    return Err(invalid("more than one `:`"));
                }
                (Some(epoch.to_owned()), rest)
            }
            None => (None, text),
        };
        let (version, release) = match rest.rsplit_once('-') {
            Some((version, release)) => {
                if release.is_empty() {
                    return Err(invalid("release is empty after `-`"));
                }
                (version, Some(release.to_owned()))
            }
            None => (rest, None),
        };
        if version.is_empty() {
            return Err(invalid("version is empty"));
        }
        Ok(Evr { epoch, version: version.to_owned(), release })
    }

    /// The epoch as written, when given.
    pub fn epoch(&self) -> Option<&str> {
        self.epoch.as_deref()
    }

    /// The version.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The release, when given.
    pub fn release(&self) -> Option<&str> {
        self.release.as_deref()
    }
}

impl Ord for Evr {
    fn cmp(&self, other: &Self) -> Ordering {
        let my_epoch = self.epoch.as_deref().unwrap_or("0");
        let their_epoch = other.epoch.as_deref().unwrap_or("0");
        rpmvercmp(my_epoch, their_epoch).then_with(|| rpmvercmp(&self.version, &other.version)).then_with(
            || match (&self.release, &other.release) {
                (Some(mine), Some(theirs)) => rpmvercmp(mine, theirs),
                (Some(_), None) => Ordering::Greater,
                (None, Some(_)) => Ordering::Less,
                (None, None) => Ordering::Equal,
            },
        )
    }
}

impl PartialOrd for Evr {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// rpm's segment comparison of two version (or release) strings.
pub fn rpmvercmp(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let a = a.as_bytes();
    let b = b.as_bytes();
    let (mut i, mut j) = (0, 0);
    let is_separator = |byte: &u8| !byte.is_ascii_alphanumeric() && *byte != b'~' && *byte != b'^';
    while i < a.len() || j < b.len() {
        while a.get(i).is_some_and(is_separator) {
            i += 1;
        }
        while b.get(j).is_some_and(is_separator) {
            j += 1;
        }
        let (here_a, here_b) = (a.get(i).copied(), b.get(j).copied());
        if here_a == Some(b'~') || here_b == Some(b'~') {
            if here_a != Some(b'~') {
                return Ordering::Greater;
            }
            if here_b != Some(b'~') {
                return Ordering::Less;
            }
            i += 1;
            j += 1;
            continue;
        }
        // A caret is like a tilde, except that the end of the other string
        // sorts before it: `1.0 < 1.0^git1`.
        if here_a == Some(b'^') || here_b == Some(b'^') {
            if here_a.is_none() {
                return Ordering::Less;
            }
            if here_b.is_none() {
                return Ordering::Greater;
            }
            if here_a != Some(b'^') {
                return Ordering::Greater;
            }
            if here_b != Some(b'^') {
                return Ordering::Less;
            }
            i += 1;
            j += 1;
            continue;
        }
        if here_a.is_none() || here_b.is_none() {
            break;
        }
        let numeric = here_a.is_some_and(|byte| byte.is_ascii_digit());
        let in_segment = |byte: &u8| if numeric { byte.is_ascii_digit() } else { byte.is_ascii_alphabetic() };
        let start_a = i;
        while a.get(i).is_some_and(in_segment) {
            i += 1;
        }
        let start_b = j;
        while b.get(j).is_some_and(in_segment) {
            j += 1;
        }
        let segment_a = a.get(start_a..i).unwrap_or_default();
        let segment_b = b.get(start_b..j).unwrap_or_default();
        if segment_b.is_empty() {
            // Segments of different kinds: a number is newer than letters.
            return if numeric { Ordering::Greater } else { Ordering::Less };
        }
        let order = if numeric {
            let segment_a = trim_leading_zeros(segment_a);
            let segment_b = trim_leading_zeros(segment_b);
            segment_a.len().cmp(&segment_b.len()).then_with(|| segment_a.cmp(segment_b))
        } else {
            segment_a.cmp(segment_b)
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    // Whichever string still has something left is newer; leftovers made of
    // separators only were skipped above.
    match (i < a.len(), j < b.len()) {
        (false, false) => Ordering::Equal,
        (false, true) => Ordering::Less,
        (true, _) => Ordering::Greater,
    }
}

fn trim_leading_zeros(digits: &[u8]) -> &[u8] {
    let zeros = digits.iter().take_while(|&&byte| byte == b'0').count();
    digits.get(zeros..).unwrap_or_default()
}

/// Compares two `[epoch:]version[-release]` strings; an error names the
/// first invalid one.
pub fn compare(a: &str, b: &str) -> Result<Ordering, VersionError> {
    Ok(Evr::parse(a)?.cmp(&Evr::parse(b)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(a: &str, b: &str) -> Ordering {
        compare(a, b).expect("valid versions")
    }

    #[test]
    fn epoch_then_version_then_release() {
        assert_eq!(order("1:1.0-1", "2.0-1"), Ordering::Greater);
        assert_eq!(order("0:1.0-1", "1.0-1"), Ordering::Equal);
        assert_eq!(order("1.0-2", "1.0-10"), Ordering::Less);
        assert_eq!(order("01:1.0", "1:1.0"), Ordering::Equal);
    }

    #[test]
    fn missing_release_sorts_first() {
        assert_eq!(order("1.0", "1.0-1"), Ordering::Less);
        assert_eq!(order("1.0-0", "1.0"), Ordering::Greater);
    }

    #[test]
    fn tilde_and_caret() {
        assert_eq!(order("1.0~rc1-1", "1.0-1"), Ordering::Less);
        assert_eq!(order("1.0^git1-1", "1.0-1"), Ordering::Greater);
        assert_eq!(order("1.0^git1", "1.0.1"), Ordering::Less);
        assert_eq!(order("2.4.6-1.el9~bootstrap", "2.4.6-1.el9"), Ordering::Less);
    }

    #[test]
    fn separators_are_interchangeable_and_leading_zeros_ignored() {
        assert_eq!(order("2_0", "2.0"), Ordering::Equal);
        assert_eq!(order("1.0010", "1.10"), Ordering::Equal);
        assert_eq!(order("1.0.", "1.0"), Ordering::Equal);
        assert_eq!(
            order("1.123456789012345678901234567890", "1.123456789012345678901234567889"),
            Ordering::Greater
        );
    }

    #[test]
    fn letters_lose_to_numbers() {
        assert_eq!(order("1.a", "1.1"), Ordering::Less);
        assert_eq!(order("1.1", "1.a"), Ordering::Greater);
        assert_eq!(order("3.0.0-1.el9", "3.0.0-1.fc40"), Ordering::Less);
    }

    #[test]
    fn parts_are_split_like_parse_evr() {
        let evr = Evr::parse("3:1.2-3-4.el9").expect("valid");
        assert_eq!((evr.epoch(), evr.version(), evr.release()), (Some("3"), "1.2-3", Some("4.el9")));
        let evr = Evr::parse("1.2").expect("valid");
        assert_eq!((evr.epoch(), evr.version(), evr.release()), (None, "1.2", None));
    }

    #[test]
    fn invalid_versions_are_errors_naming_the_version() {
        for bad in ["", ":1.0", "a:1.0", "1:2:3", "1:", "1:-1", "-1", "1.0-", "1.0 -1", "1.0\t", "1.1.α"] {
            let error = compare(bad, "1.0").expect_err(bad);
            assert_eq!(error.version, bad);
            assert_eq!(error.scheme, "rpm");
            assert!(compare("1.0", bad).is_err(), "{bad} as the second operand");
        }
    }
}
