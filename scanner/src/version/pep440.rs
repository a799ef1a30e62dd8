//! PEP 440 version ordering (PyPI).
//!
//! The accepted syntax is PEP 440's "permissive" form, as pypa/packaging's
//! `VERSION_PATTERN` accepts it: case-insensitive, optional surrounding
//! whitespace and leading `v`, `[N!]N(.N)*`, then optional pre-release
//! (`a`/`alpha`, `b`/`beta`, `rc`/`c`/`pre`/`preview`), post-release (`.postN`,
//! `-N`, `rev`, `r`) and development (`.devN`) parts with optional `.`, `-` or
//! `_` separators and implicit zeros, then an optional local part `+segments`.
//!
//! Ordering follows PEP 440's "Summary of permitted suffixes and relative
//! ordering" as packaging implements it: epoch, then the release with trailing
//! zeros ignored (`1.0 == 1.0.0`), then pre-release (a development release
//! without pre- or post-release sorts before every pre-release of its version),
//! post-release, development release, and finally the local version, whose
//! numeric segments sort above alphanumeric ones. Numbers have no size limit.

use std::cmp::Ordering;

use super::VersionError;

/// A number written in decimal, kept as digits so no size overflows; leading
/// zeros are dropped (`007` is 7).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Number(String);

impl Number {
    fn new(digits: &str) -> Number {
        let trimmed = digits.trim_start_matches('0');
        Number(if trimmed.is_empty() { "0".to_owned() } else { trimmed.to_owned() })
    }

    fn zero() -> Number {
        Number("0".to_owned())
    }

    fn is_zero(&self) -> bool {
        self.0 == "0"
    }

    /// The digits, without leading zeros.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Ord for Number {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.len().cmp(&other.0.len()).then_with(|| self.0.as_bytes().cmp(other.0.as_bytes()))
    }
}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The kind of a pre-release, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PreRelease {
    /// `a`, `alpha`.
    Alpha,
    /// `b`, `beta`.
    Beta,
    /// `rc`, `c`, `pre`, `preview`.
    Candidate,
}

/// A segment of the local version label.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LocalSegment {
    /// Letters and digits, lowercased.
    Text(String),
    /// Digits only.
    Number(Number),
}

impl Ord for LocalSegment {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (LocalSegment::Text(a), LocalSegment::Text(b)) => a.cmp(b),
            (LocalSegment::Text(_), LocalSegment::Number(_)) => Ordering::Less,
            (LocalSegment::Number(_), LocalSegment::Text(_)) => Ordering::Greater,
            (LocalSegment::Number(a), LocalSegment::Number(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for LocalSegment {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A parsed, valid PEP 440 version. Equality and order follow PEP 440, so
/// `1.0` equals `1.0.0` and `1.0c1` equals `1.0rc1`.
#[derive(Debug, Clone)]
pub struct Version {
    epoch: Number,
    release: Vec<Number>,
    pre: Option<(PreRelease, Number)>,
    post: Option<Number>,
    dev: Option<Number>,
    local: Option<Vec<LocalSegment>>,
}

/// Where a missing part sorts: the variants' order is the sort order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Bounded<T> {
    Lowest,
    Value(T),
    Highest,
}

impl Version {
    /// Parses `text` with PEP 440's permissive syntax.
    pub fn parse(text: &str) -> Result<Version, VersionError> {
        let invalid = |reason: &str| VersionError {
            scheme: "PEP 440",
            version: text.to_owned(),
            reason: reason.to_owned(),
        };
        if !text.is_ascii() {
            return Err(invalid("contains non-ASCII characters"));
        }
        let lowered =
            text.trim_matches(|character: char| character.is_ascii_whitespace() || character == '\x0b');
        let lowered = lowered.to_ascii_lowercase();
        let mut rest = lowered.strip_prefix('v').unwrap_or(&lowered);

        let (first, after_first) = split_digits(rest);
        if first.is_empty() {
            return Err(invalid("does not start with a release number"));
        }
        let epoch = match after_first.strip_prefix('!') {
            Some(after_epoch) => {
                rest = after_epoch;
                Number::new(first)
            }
            None => Number::zero(),
        };
        let mut release = Vec::new();
        loop {
            let (digits, after) = split_digits(rest);
            if digits.is_empty() {
                return Err(invalid("release segment is not a number"));
            }
            release.push(Number::new(digits));
            rest = after;
            match rest.strip_prefix('.') {
                Some(next) if next.starts_with(|character: char| character.is_ascii_digit()) => rest = next,
                _ => break,
            }
        }

        let Some(suffixes) = parse_suffixes(rest) else {
            return Err(invalid("unrecognised pre-, post-, development or local part"));
        };
        Ok(Version {
            epoch,
            release,
            pre: suffixes.pre,
            post: suffixes.post,
            dev: suffixes.dev,
            local: suffixes.local,
        })
    }

    /// The epoch (0 when absent).
    pub fn epoch(&self) -> &Number {
        &self.epoch
    }

    /// The release numbers as written (trailing zeros kept).
    pub fn release(&self) -> &[Number] {
        &self.release
    }

    /// The pre-release, normalised.
    pub fn pre(&self) -> Option<&(PreRelease, Number)> {
        self.pre.as_ref()
    }

    /// The post-release number.
    pub fn post(&self) -> Option<&Number> {
        self.post.as_ref()
    }

    /// The development release number.
    pub fn dev(&self) -> Option<&Number> {
        self.dev.as_ref()
    }

    /// The local version segments, normalised.
    pub fn local(&self) -> Option<&[LocalSegment]> {
        self.local.as_deref()
    }

    fn release_without_trailing_zeros(&self) -> &[Number] {
        let kept = self.release.iter().rposition(|number| !number.is_zero()).map_or(0, |last| last + 1);
        self.release.get(..kept).unwrap_or_default()
    }

    fn pre_key(&self) -> Bounded<&(PreRelease, Number)> {
        match (&self.pre, &self.post, &self.dev) {
            // `1.0.dev1` comes before `1.0a1`.
            (None, None, Some(_)) => Bounded::Lowest,
            (None, _, _) => Bounded::Highest,
            (Some(pre), _, _) => Bounded::Value(pre),
        }
    }

    fn post_key(&self) -> Bounded<&Number> {
        self.post.as_ref().map_or(Bounded::Lowest, Bounded::Value)
    }

    fn dev_key(&self) -> Bounded<&Number> {
        self.dev.as_ref().map_or(Bounded::Highest, Bounded::Value)
    }

    fn local_key(&self) -> Bounded<&[LocalSegment]> {
        self.local.as_deref().map_or(Bounded::Lowest, Bounded::Value)
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.epoch
            .cmp(&other.epoch)
            .then_with(|| self.release_without_trailing_zeros().cmp(other.release_without_trailing_zeros()))
            .then_with(|| self.pre_key().cmp(&other.pre_key()))
            .then_with(|| self.post_key().cmp(&other.post_key()))
            .then_with(|| self.dev_key().cmp(&other.dev_key()))
            .then_with(|| self.local_key().cmp(&other.local_key()))
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

/// What follows the release numbers.
#[derive(Debug, Default)]
struct Suffixes {
    pre: Option<(PreRelease, Number)>,
    post: Option<Number>,
    dev: Option<Number>,
    local: Option<Vec<LocalSegment>>,
}

/// Every pre-, post- and development part packaging's regular expression
/// could read at the start of `text`, most preferred first (the regex's
/// greedy choice), each with what is left after it; the last candidate is
/// always "absent". Trying them in this order and keeping the first that lets
/// the whole string match reproduces the regex's backtracking.
type Candidates<'a, T> = Vec<(Option<T>, &'a str)>;

fn parse_suffixes(text: &str) -> Option<Suffixes> {
    for (pre, after_pre) in pre_candidates(text) {
        for (post, after_post) in post_candidates(after_pre) {
            for (dev, after_dev) in labelled_candidates(after_post, &["dev"]) {
                if let Some(local) = parse_local(after_dev) {
                    return Some(Suffixes {
                        pre: pre.clone(),
                        post: post.clone(),
                        dev: dev.map(|(_, number)| number),
                        local,
                    });
                }
            }
        }
    }
    None
}

const PRE_LABELS: [&str; 8] = ["alpha", "a", "beta", "b", "preview", "pre", "c", "rc"];
const POST_LABELS: [&str; 3] = ["post", "rev", "r"];

fn pre_candidates(text: &str) -> Candidates<'_, (PreRelease, Number)> {
    labelled_candidates(text, &PRE_LABELS)
        .into_iter()
        .map(|(found, rest)| {
            let pre = found.map(|(label, number)| {
                let kind = match label {
                    "a" | "alpha" => PreRelease::Alpha,
                    "b" | "beta" => PreRelease::Beta,
                    _ => PreRelease::Candidate,
                };
                (kind, number)
            });
            (pre, rest)
        })
        .collect()
}

fn post_candidates(text: &str) -> Candidates<'_, Number> {
    let mut candidates = Vec::new();
    // `1.0-5` is `1.0.post5`; the regex tries this alternative first.
    if let Some(after_hyphen) = text.strip_prefix('-') {
        let (digits, rest) = split_digits(after_hyphen);
        if !digits.is_empty() {
            candidates.push((Some(Number::new(digits)), rest));
        }
    }
    for (found, rest) in labelled_candidates(text, &POST_LABELS) {
        candidates.push((found.map(|(_, number)| number), rest));
    }
    candidates
}

/// Candidates for `[-_.]?(label)[-_.]?([0-9]+)?`, then "absent".
fn labelled_candidates<'a>(text: &'a str, labels: &[&'static str]) -> Candidates<'a, (&'static str, Number)> {
    let mut candidates = Vec::new();
    let mut starts = Vec::new();
    if let Some(after_separator) = text.strip_prefix(['-', '_', '.']) {
        starts.push(after_separator);
    }
    starts.push(text);
    for start in starts {
        for &label in labels {
            let Some(after_label) = start.strip_prefix(label) else { continue };
            let mut number_starts = Vec::new();
            if let Some(after_separator) = after_label.strip_prefix(['-', '_', '.']) {
                number_starts.push(after_separator);
            }
            number_starts.push(after_label);
            for number_start in number_starts {
                let (digits, rest) = split_digits(number_start);
                if !digits.is_empty() {
                    candidates.push((Some((label, Number::new(digits))), rest));
                }
                // The number is optional and implicitly zero.
                candidates.push((Some((label, Number::zero())), number_start));
            }
        }
    }
    candidates.push((None, text));
    candidates
}

/// `(+[a-z0-9]+([-_.][a-z0-9]+)*)?` and nothing after it.
fn parse_local(text: &str) -> Option<Option<Vec<LocalSegment>>> {
    if text.is_empty() {
        return Some(None);
    }
    let label = text.strip_prefix('+')?;
    let mut segments = Vec::new();
    for segment in label.split(['-', '_', '.']) {
        if segment.is_empty() || !segment.bytes().all(|byte| byte.is_ascii_alphanumeric()) {
            return None;
        }
        segments.push(if segment.bytes().all(|byte| byte.is_ascii_digit()) {
            LocalSegment::Number(Number::new(segment))
        } else {
            LocalSegment::Text(segment.to_owned())
        });
    }
    Some(Some(segments))
}

/// Splits off the leading ASCII digits.
fn split_digits(text: &str) -> (&str, &str) {
    let end = text.bytes().take_while(u8::is_ascii_digit).count();
    (text.get(..end).unwrap_or_default(), text.get(end..).unwrap_or_default())
}

/// Compares two PEP 440 versions; an error names the first invalid one.
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
    fn equal_after_normalisation() {
        for (a, b) in [
            ("1.0a1", "1.0.0a1"),
            ("1.0", "1.0.0.0"),
            ("1.0c1", "1.0rc1"),
            ("1.0-pre1", "1.0rc1"),
            ("1.0preview", "1.0rc0"),
            ("1.0-5", "1.0.post5"),
            ("1.0.r", "1.0.post0"),
            ("1.0-DEV", "1.0.dev0"),
            ("v1.0", "1.0"),
            ("  V1.0\t\n", "1.0"),
            ("00!1.2", "1.2"),
            ("1.01", "1.1"),
            ("1.0+AbC", "1.0+abc"),
            ("1.0+a-b_c", "1.0+a.b.c"),
            ("1.0+007", "1.0+7"),
            ("1.0a-1", "1.0a1"),
            ("1.0a-", "1.0a0"),
        ] {
            assert_eq!(order(a, b), Ordering::Equal, "{a} == {b}");
        }
    }

    #[test]
    fn development_release_before_pre_releases_and_post_after_release() {
        let ordered = [
            "1.0.dev1",
            "1.0a1.dev1",
            "1.0a1",
            "1.0b1",
            "1.0rc1",
            "1.0",
            "1.0+local",
            "1.0.post1.dev1",
            "1.0.post1",
            "1.1.dev1",
        ];
        for pair in ordered.windows(2) {
            assert_eq!(order(pair[0], pair[1]), Ordering::Less, "{} < {}", pair[0], pair[1]);
        }
    }

    #[test]
    fn epoch_dominates() {
        assert_eq!(order("1!0.1", "2024.1"), Ordering::Greater);
    }

    #[test]
    fn parts_are_normalised() {
        let version = Version::parse("2!1.2.0c3.post4-dev5+Ubuntu-1.2").expect("valid");
        assert_eq!(version.epoch().as_str(), "2");
        assert_eq!(version.release().iter().map(Number::as_str).collect::<Vec<_>>(), ["1", "2", "0"]);
        assert_eq!(version.pre(), Some(&(PreRelease::Candidate, Number::new("3"))));
        assert_eq!(version.post(), Some(&Number::new("4")));
        assert_eq!(version.dev(), Some(&Number::new("5")));
        assert_eq!(
            version.local(),
            Some(
                &[
                    LocalSegment::Text("ubuntu".into()),
                    LocalSegment::Number(Number::new("1")),
                    LocalSegment::Number(Number::new("2"))
                ][..]
            )
        );
    }

    #[test]
    fn numbers_have_no_size_limit() {
        assert_eq!(order("1.99999999999999999999999", "1.99999999999999999999998"), Ordering::Greater);
    }

    #[test]
    fn invalid_versions_are_errors_naming_the_version() {
        for bad in [
            "",
            "french toast",
            "1.0+a+",
            "1.0++",
            "1.0+_foobar",
            "1.0+foo&asd",
            "1.0+1+1",
            "1.0.",
            ".1",
            "1..0",
            "1.0-",
            "1.0a1b1",
            "1.0.post1.post2",
            "1.0gamma",
            "1!",
            "!1.0",
            "1.0+",
            "1.0 1",
            "1.0é",
        ] {
            let error = compare(bad, "1.0").expect_err(bad);
            assert_eq!(error.version, bad);
            assert_eq!(error.scheme, "PEP 440");
            assert!(compare("1.0", bad).is_err(), "{bad} as the second operand");
        }
    }
}
