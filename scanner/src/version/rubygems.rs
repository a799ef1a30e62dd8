//! RubyGems version ordering (OSV's `RubyGems` ecosystem), as `Gem::Version`
//! in RubyGems' `lib/rubygems/version.rb` orders versions.
//!
//! A valid version is digits, then `.`-separated runs of ASCII letters and
//! digits, then optionally a `-` part of letters, digits and `-`s with `.`s;
//! surrounding whitespace is ignored and a blank version is `0`. Each `-` is
//! read as `.pre.`, so `1.0.0-1` is the prerelease `1.0.0.pre.1`.
//!
//! The version splits into segments: runs of digits (numbers, no size limit)
//! and runs of letters (strings); the dots themselves play no part, so
//! `1.2.b1 == 1.2.b.1`. A version with a letter is a prerelease. Before
//! comparing, `canonical_segments` drops trailing zero segments (after a dot
//! or a letter) and, in a prerelease, the zero segments just before the first
//! letter: `1.0.0.a.1.0` is `[1, "a", 1]`. Segments then compare in order, a
//! string below a number, strings in byte order (so `A < a`), numbers by
//! value. When one version runs out, the other is greater if its next
//! non-zero segment is a number and less if it is a string:
//! `1.8.2.a < 1.8.2 < 1.8.2.1`.
//!
//! RubyGems' main branch has begun to read a `-` followed by a letter as a
//! plain dot (`1.0.0-beta.1 == 1.0.0.beta.1`) and to skip a `pre` segment
//! before a string segment. No release has that yet (the changelog runs to
//! 4.0.21 without it), the gems installed in images were written by releases,
//! and osv.dev compares RubyGems versions the released way, so PatchPilot
//! follows the releases.

use std::cmp::Ordering;

use super::VersionError;

/// One segment of a version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A run of digits, without leading zeros (`0` for zero).
    Number(String),
    /// A run of ASCII letters, case kept.
    Text(String),
}

impl Segment {
    fn is_zero(&self) -> bool {
        matches!(self, Segment::Number(digits) if digits == "0")
    }
}

impl Ord for Segment {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Segment::Number(a), Segment::Number(b)) => {
                a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes()))
            }
            (Segment::Number(_), Segment::Text(_)) => Ordering::Greater,
            (Segment::Text(_), Segment::Number(_)) => Ordering::Less,
            (Segment::Text(a), Segment::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
        }
    }
}

impl PartialOrd for Segment {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A parsed RubyGems version. Equality and order are `<=>`'s, so `1.0`
/// equals `1`.
#[derive(Debug, Clone)]
pub struct Version {
    /// The version as RubyGems keeps it: trimmed, `-` read as `.pre.`.
    normalized: String,
    canonical: Vec<Segment>,
}

/// Ruby's `\s`.
fn is_ruby_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r')
}

impl Version {
    /// Parses `text` as `Gem::Version.new` does.
    pub fn parse(text: &str) -> Result<Version, VersionError> {
        let trimmed = text.trim_matches(is_ruby_space);
        if let Err(reason) = check_pattern(trimmed) {
            return Err(VersionError {
                scheme: "RubyGems",
                version: text.to_owned(),
                reason: format!("malformed version number string: {reason}"),
            });
        }
        let normalized = if trimmed.is_empty() { "0".to_owned() } else { trimmed.replace('-', ".pre.") };
        let canonical = segments(&canonical_text(&normalized));
        Ok(Version { normalized, canonical })
    }

    /// Whether the version has a letter (after `-` became `.pre.`).
    pub fn is_prerelease(&self) -> bool {
        self.normalized.bytes().any(|byte| byte.is_ascii_alphabetic())
    }

    /// The segments compared, trailing and pre-letter zeros dropped.
    pub fn canonical_segments(&self) -> &[Segment] {
        &self.canonical
    }
}

/// Checks `Gem::Version::VERSION_PATTERN` on the trimmed text:
/// `[0-9]+(\.[0-9a-zA-Z]+)*(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?`, or nothing.
fn check_pattern(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Ok(());
    }
    let (release, pre) = match text.split_once('-') {
        Some((release, pre)) => (release, Some(pre)),
        None => (text, None),
    };
    let mut parts = release.split('.');
    let first = parts.next().unwrap_or_default();
    if first.is_empty() || !first.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(format!("`{first}` does not start with a number"));
    }
    for part in parts {
        if part.is_empty() || !part.bytes().all(|byte| byte.is_ascii_alphanumeric()) {
            return Err(format!("`{part}` is not a run of ASCII letters and digits"));
        }
    }
    if let Some(pre) = pre {
        // The first `-` is taken; later ones belong to the identifiers.
        for part in pre.split('.') {
            if part.is_empty() || !part.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-') {
                return Err(format!("`-{pre}` is not `-` then dot-separated letters, digits and `-`"));
            }
        }
    }
    Ok(())
}

/// The text `canonical_segments` splits: trailing zero segments dropped
/// (only after a dot or a letter, so `10` stays), then in a prerelease the
/// first run of zero segments that ends right before a letter.
fn canonical_text(version: &str) -> String {
    let bytes = version.as_bytes();
    let zeros_and_dots = |byte: &u8| *byte == b'.' || *byte == b'0';
    // Where the trailing run of `.` and `0` begins.
    let tail = bytes.len() - bytes.iter().rev().take_while(|byte| zeros_and_dots(byte)).count();
    let cut = if tail > 0 && bytes[tail - 1].is_ascii_alphabetic() {
        Some(tail)
    } else {
        // Otherwise the run may only start after one of its own dots.
        bytes[tail..].iter().position(|&byte| byte == b'.').map(|dot| tail + dot + 1)
    };
    let mut text = match cut {
        Some(cut) if cut < bytes.len() => version[..cut].to_owned(),
        _ => version.to_owned(),
    };
    if text.bytes().any(|byte| byte.is_ascii_alphabetic()) {
        let bytes = text.as_bytes();
        let found = (0..bytes.len()).find_map(|start| {
            if start > 0 && bytes[start - 1] != b'.' {
                return None;
            }
            let run = bytes[start..].iter().take_while(|byte| zeros_and_dots(byte)).count();
            let next = bytes.get(start + run)?;
            (run > 0 && next.is_ascii_alphabetic()).then_some(start..start + run)
        });
        if let Some(range) = found {
            text.replace_range(range, "");
        }
    }
    text
}

/// Runs of digits and runs of letters, everything else skipped.
fn segments(text: &str) -> Vec<Segment> {
    let mut segments = Vec::new();
    let bytes = text.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        let digit = bytes[index].is_ascii_digit();
        let letter = bytes[index].is_ascii_alphabetic();
        if !digit && !letter {
            index += 1;
            continue;
        }
        let length = bytes[index..]
            .iter()
            .take_while(|byte| if digit { byte.is_ascii_digit() } else { byte.is_ascii_alphabetic() })
            .count();
        let run = &text[index..index + length];
        segments.push(if digit {
            let value = run.trim_start_matches('0');
            Segment::Number(if value.is_empty() { "0".to_owned() } else { value.to_owned() })
        } else {
            Segment::Text(run.to_owned())
        });
        index += length;
    }
    segments
}

/// What the rest of a longer version weighs against the end of a shorter
/// one: its first string or non-zero number decides.
fn rest(segments: &[Segment]) -> Ordering {
    segments.iter().find(|segment| !segment.is_zero()).map_or(Ordering::Equal, |segment| match segment {
        Segment::Text(_) => Ordering::Less,
        Segment::Number(_) => Ordering::Greater,
    })
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (&self.canonical, &other.canonical);
        let common = a.len().min(b.len());
        a[..common]
            .cmp(&b[..common])
            .then_with(|| rest(&a[common..]))
            .then_with(|| rest(&b[common..]).reverse())
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

/// Compares two RubyGems versions; an error names the first malformed one.
pub fn compare(a: &str, b: &str) -> Result<Ordering, VersionError> {
    Ok(Version::parse(a)?.cmp(&Version::parse(b)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(a: &str, b: &str) -> Ordering {
        compare(a, b).expect("valid versions")
    }

    fn canonical(version: &str) -> String {
        let parsed = Version::parse(version).expect("valid");
        let texts: Vec<&str> = parsed
            .canonical_segments()
            .iter()
            .map(|segment| match segment {
                Segment::Number(digits) | Segment::Text(digits) => digits.as_str(),
            })
            .collect();
        texts.join(" ")
    }

    #[test]
    fn canonical_segments_drop_trailing_and_pre_letter_zeros_only() {
        assert_eq!(canonical("10"), "10");
        assert_eq!(canonical("10.0"), "10");
        assert_eq!(canonical("1.00.0"), "1");
        assert_eq!(canonical("0"), "0");
        assert_eq!(canonical("0.0"), "0");
        assert_eq!(canonical("1.a.0.0"), "1 a");
        assert_eq!(canonical("1.a0"), "1 a");
        assert_eq!(canonical("1.0a"), "1 a");
        assert_eq!(canonical("1.01a"), "1 1 a");
        // Only the first run before a letter goes.
        assert_eq!(canonical("1.0.a.0.b"), "1 a 0 b");
        assert_eq!(canonical("1.0.0.pre.1"), "1 pre 1");
    }

    #[test]
    fn real_gem_versions() {
        assert_eq!(order("1.13.4", "1.13.10"), Ordering::Less);
        assert_eq!(order("7.0.0.rc1", "7.0.0"), Ordering::Less);
        assert_eq!(order("7.0.0.rc1", "7.0.0.beta2"), Ordering::Greater);
        assert_eq!(order("2.0.0-1", "2.0.0.pre.1"), Ordering::Equal);
        assert_eq!(order("99999999999999999999.1", "99999999999999999999"), Ordering::Greater);
    }

    #[test]
    fn malformed_versions_name_themselves() {
        for bad in ["junk", "v1.0", "1..2", "1.", "1.0-", "1.0-a..b", "1.2 3.4", "1_0", "-1", "1.é"] {
            let error = compare(bad, "1").expect_err(bad);
            assert_eq!((error.scheme, error.version.as_str()), ("RubyGems", bad));
            assert!(compare("1", bad).is_err(), "{bad} second");
        }
    }
}
