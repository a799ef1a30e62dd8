//! NuGet version ordering (OSV's `NuGet` ecosystem), as NuGet.Versioning's
//! `NuGetVersion` parses versions and `VersionComparer.Default` orders them.
//!
//! A version is SemVer 2.0 with NuGet's widening: one to four numeric parts
//! (`1`, `1.2`, `1.2.3`, `1.2.3.4`; missing parts are 0, leading zeros are
//! allowed, so `1.0.01 == 1.0.1.0`), then optional `-` release labels and `+`
//! build metadata, with surrounding whitespace trimmed. Release labels are
//! dot-separated `[0-9A-Za-z-]+`, numeric ones without leading zeros;
//! metadata parts are `[0-9A-Za-z-]+`.
//!
//! Order: the four numbers in turn, then a version without labels above one
//! with them, then labels left to right (a label .NET's `int.TryParse` reads
//! as a number compares numerically and below any other label, other labels
//! compare ASCII case-insensitively), a longer label list above its prefix.
//! Metadata is ignored.
//!
//! Two parser quirks are kept because NuGet accepts those versions: an empty
//! numeric part is 0 (`1..2` is `1.0.2`, `.1` is `0.1`) and a trailing `.`
//! ends the numbers (`1.` is `1.0`, but `1.2.3.4.` has five parts). A numeric part above 2,147,483,647 is
//! refused: NuGet keeps parts in 32-bit integers and silently wraps such a
//! part (or throws), so it has no NuGet order.

use std::cmp::Ordering;

use super::VersionError;

/// A parsed NuGet version. Equality and order are `VersionComparer.Default`'s,
/// so `1.0 == 1.0.0.0` and `1.0.0-BETA == 1.0.0-beta+build`.
#[derive(Debug, Clone)]
pub struct Version {
    numbers: [u32; 4],
    labels: Vec<String>,
}

impl Version {
    /// Parses `text` as `NuGetVersion.TryParse` does.
    pub fn parse(text: &str) -> Result<Version, VersionError> {
        let invalid = |reason: String| VersionError { scheme: "NuGet", version: text.to_owned(), reason };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(invalid("the version is empty".to_owned()));
        }
        // The numbers end at the first `-` or `+`; labels at the next `+`.
        let (head, metadata) = match trimmed.find(['-', '+']) {
            Some(at) if trimmed[at..].starts_with('+') => (&trimmed[..at], Some(&trimmed[at + 1..])),
            _ => match trimmed.split_once('+') {
                Some((head, metadata)) => (head, Some(metadata)),
                None => (trimmed, None),
            },
        };
        let (core, labels) = match head.split_once('-') {
            Some((core, labels)) => (core, Some(labels)),
            None => (head, None),
        };
        let numbers = parse_numbers(core).map_err(invalid)?;
        let labels: Vec<String> = match labels {
            None => Vec::new(),
            Some(labels) => labels
                .split('.')
                .map(|label| check_part(label, "release label", false).map(str::to_owned))
                .collect::<Result<_, _>>()
                .map_err(invalid)?,
        };
        if let Some(metadata) = metadata {
            for part in metadata.split('.') {
                check_part(part, "build metadata part", true).map_err(invalid)?;
            }
        }
        Ok(Version { numbers, labels })
    }

    /// Major, minor, patch and revision.
    pub fn numbers(&self) -> [u32; 4] {
        self.numbers
    }

    /// The release labels, as written.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }
}

/// One to four `.`-separated numeric parts.
fn parse_numbers(core: &str) -> Result<[u32; 4], String> {
    if core.is_empty() {
        return Err("there is no version number".to_owned());
    }
    // An empty part, a trailing one included, is 0; NuGet reads `1.` as
    // `1.0` but refuses `1.2.3.4.`.
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() > 4 {
        return Err(format!("`{core}` has more than four numeric parts"));
    }
    let mut numbers = [0; 4];
    for (slot, part) in numbers.iter_mut().zip(&parts) {
        if !part.bytes().all(|byte| byte.is_ascii_digit()) {
            return Err(format!("`{part}` in `{core}` is not a number"));
        }
        let digits = part.trim_start_matches('0');
        *slot = if digits.is_empty() {
            0
        } else {
            digits
                .parse::<i32>()
                .ok()
                .and_then(|number| u32::try_from(number).ok())
                .ok_or_else(|| format!("`{part}` is larger than NuGet's 32-bit version numbers"))?
        };
    }
    Ok(numbers)
}

/// A label or metadata part: non-empty `[0-9A-Za-z-]`; a numeric label may not
/// have a leading zero.
fn check_part<'a>(part: &'a str, what: &str, leading_zeros: bool) -> Result<&'a str, String> {
    if part.is_empty() {
        return Err(format!("a {what} is empty"));
    }
    if !part.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-') {
        return Err(format!("{what} `{part}` is not [0-9A-Za-z-]"));
    }
    if !leading_zeros
        && part.len() > 1
        && part.starts_with('0')
        && part.bytes().all(|byte| byte.is_ascii_digit())
    {
        return Err(format!("numeric {what} `{part}` has a leading zero"));
    }
    Ok(part)
}

/// Compares two labels: numbers (as .NET reads an `int`, sign included)
/// numerically and first, others ASCII case-insensitively.
fn compare_labels(a: &str, b: &str) -> Ordering {
    match (a.parse::<i32>(), b.parse::<i32>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Err(_), Err(_)) => a
            .bytes()
            .map(|byte| byte.to_ascii_uppercase())
            .cmp(b.bytes().map(|byte| byte.to_ascii_uppercase())),
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.numbers.cmp(&other.numbers).then_with(|| {
            match (self.labels.is_empty(), other.labels.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    let pairs = self.labels.iter().zip(&other.labels);
                    pairs
                        .map(|(a, b)| compare_labels(a, b))
                        .find(|ordering| ordering.is_ne())
                        .unwrap_or_else(|| self.labels.len().cmp(&other.labels.len()))
                }
            }
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

/// Compares two NuGet versions; an error names the first invalid one.
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
    fn four_parts_and_parser_quirks() {
        assert_eq!(Version::parse("1").expect("valid").numbers(), [1, 0, 0, 0]);
        assert_eq!(Version::parse("1.2.3.4").expect("valid").numbers(), [1, 2, 3, 4]);
        assert_eq!(Version::parse("1..2").expect("valid").numbers(), [1, 0, 2, 0]);
        assert_eq!(Version::parse(".1").expect("valid").numbers(), [0, 1, 0, 0]);
        assert_eq!(Version::parse("1.").expect("valid").numbers(), [1, 0, 0, 0]);
        assert_eq!(Version::parse(" 13.0.1 ").expect("valid").numbers(), [13, 0, 1, 0]);
        assert_eq!(order("13.0.1", "13.0.1.1"), Ordering::Less);
        assert_eq!(order("13.0.1-beta2", "13.0.1"), Ordering::Less);
    }

    #[test]
    fn labels_compare_like_dotnet() {
        assert_eq!(order("1.0.0-alpha.10", "1.0.0-alpha.9"), Ordering::Greater);
        assert_eq!(order("1.0.0-alpha.9", "1.0.0-alpha.a"), Ordering::Less);
        assert_eq!(order("1.0.0-RC.1", "1.0.0-rc.1"), Ordering::Equal);
        // int.TryParse reads a leading `-` as a sign.
        assert_eq!(order("1.0.0--1", "1.0.0-0"), Ordering::Less);
        // Too large for an int: compared as text.
        assert_eq!(order("1.0.0-99999999999", "1.0.0-a"), Ordering::Less);
        assert_eq!(order("1.0.0-99999999999", "1.0.0-5"), Ordering::Greater);
    }

    #[test]
    fn invalid_versions_name_themselves() {
        for bad in [
            "",
            " ",
            "a",
            "1.2.3.4.5",
            "1.2.3.4.",
            "1.0.0-",
            "1.0.0+",
            "1.0.0-01",
            "1.0.0-a..b",
            "1.0.0-a_b",
            "1.0.0+a+b",
            "1.0.0-+x",
            "-1.0",
            "2147483648",
            "1.0 .0",
            "v1.0",
        ] {
            let error = compare(bad, "1.0").expect_err(bad);
            assert_eq!((error.scheme, error.version.as_str()), ("NuGet", bad));
            assert!(compare("1.0", bad).is_err(), "{bad:?} second");
        }
        assert!(compare("2147483647.0", "1").is_ok());
    }
}
