//! Maven version ordering (OSV's `Maven` ecosystem), as maven-artifact's
//! `org.apache.maven.artifact.versioning.ComparableVersion` orders versions in
//! Maven 3.9.
//!
//! A version is split into items at `.`, at `-` and where digits meet
//! non-digits (a transition counts as a `-`). Letters are compared without
//! case. A `-` (or a transition) opens a nested list, so everything after it
//! weighs less than an item after a `.`: `1-1 < 1.0.1`. Items are numbers,
//! qualifiers, and "combinations": a qualifier immediately followed by a number
//! (`rc1`, and `rc-1`, which Maven reads as `rc1`).
//!
//! - Numbers compare by value, leading zeros ignored. Maven keeps numbers of up
//!   to 9 digits, up to 18 digits and longer ones in three types that compare
//!   by type first; with leading zeros stripped that is numeric order, except
//!   for a zero written with ten or more digits, which Maven 3.8 and 3.9 keep
//!   in the wider type (`0000000000.1 > 0.1`; Maven 4 has since dropped
//!   this). That quirk is kept.
//! - Qualifiers order `alpha < beta < milestone < rc = cr < snapshot < "" = ga
//!   = final = release < sp`, then every other qualifier in ASCII order. `a`,
//!   `b` and `m` directly followed by a number are `alpha`, `beta` and
//!   `milestone`.
//! - A number is above any qualifier, combination or list; a list is above a
//!   qualifier or combination; a combination is above the bare qualifier of
//!   the same rank (`rc1 > rc`).
//! - Trailing "null" items (`0`, an empty list) are dropped from every list,
//!   and so is a null item directly before a qualifier, or before a list that
//!   starts with a qualifier or combination (`1.0.0-rc1` is `1-rc1`,
//!   `2.0.a == 2-a`). `ga`, `final` and `release` rank as the release but are
//!   not dropped, so `1.0.final-redhat < 1.0-sp1-redhat`.
//! - Lists compare item by item; a missing item compares as "null": a number
//!   above zero, a qualifier ranked above the release, or a list whose items
//!   do, make the longer version the greater.
//!
//! These are the rules of the maven-artifact source Maven 3.9 builds on
//! (MNG-5568, MNG-6572, MNG-6964, MNG-7644, MNG-7714); Maven's own
//! `ComparableVersionTest` facts pass with them (`tests/version_vectors.rs`).
//! Maven 3.8.7, checked on a machine with it, differs in three ways: it drops
//! `ga`, `final` and `release` as null (`1.0.final-redhat > 1.0-sp1-redhat`
//! there), has no combination items (`1-alpha-1 < 1-alpha.1` there), and drops
//! any null before a trailing list but none before a bare qualifier
//! (`1.0-1 == 1-1` there). `tests/vectors/SOURCES.md` has the details.
//!
//! Maven itself accepts any string. PatchPilot refuses the empty version and
//! any character that is not printable ASCII: Maven releases disagree on how
//! non-ASCII digits and letters order, and real coordinates do not use them.

use std::cmp::Ordering;

use super::VersionError;

/// Versions longer than this are refused: nesting follows the text, and no
/// real version comes near it.
const MAX_LENGTH: usize = 1024;

/// Maven's three integer types, by how many digits the number has once
/// leading zeros are stripped (a zero keeps all its digits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Width {
    /// Up to 9 digits (a Java `int`).
    Int,
    /// Up to 18 digits (a Java `long`).
    Long,
    /// More digits (a Java `BigInteger`).
    Big,
}

/// A number item.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Number {
    width: Width,
    /// The digits without leading zeros; empty for zero.
    value: String,
}

impl Number {
    fn zero() -> Number {
        Number { width: Width::Int, value: String::new() }
    }

    fn new(digits: &str) -> Number {
        let value = digits.trim_start_matches('0');
        // Maven strips leading zeros but keeps an all-zero number as written,
        // so its type follows the written length (checked with Maven 3.8.7:
        // `0000000000.1 > 0.1`).
        let significant = if value.is_empty() { digits.len() } else { value.len() };
        let width = match significant {
            0..=9 => Width::Int,
            10..=18 => Width::Long,
            _ => Width::Big,
        };
        Number { width, value: value.to_owned() }
    }

    fn is_zero(&self) -> bool {
        self.value.is_empty()
    }
}

impl Ord for Number {
    fn cmp(&self, other: &Self) -> Ordering {
        self.width
            .cmp(&other.width)
            .then_with(|| self.value.len().cmp(&other.value.len()))
            .then_with(|| self.value.as_bytes().cmp(other.value.as_bytes()))
    }
}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One item of a parsed version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Item(Kind);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Kind {
    Number(Number),
    /// A qualifier, lower-cased, `cr` already read as `rc`.
    Qualifier(String),
    /// A qualifier directly followed by a number (`rc1`, `alpha-2`).
    Combination(String, Number),
    /// The items after a `-` or a digit/letter transition.
    List(Vec<Item>),
}

/// The rank of a qualifier: the known ones by index, the release's
/// synonyms with the empty qualifier, every other one after them by text.
fn rank(qualifier: &str) -> (u8, &str) {
    let known = match qualifier {
        "alpha" => 0,
        "beta" => 1,
        "milestone" => 2,
        "rc" => 3,
        "snapshot" => 4,
        "" | "ga" | "final" | "release" => 5,
        "sp" => 6,
        other => return (7, other),
    };
    (known, "")
}

/// The rank of the release itself: what a missing qualifier compares as.
const RELEASE: (u8, &str) = (5, "");

impl Kind {
    /// Whether normalization may drop the item: zero, or an empty list.
    fn is_null(&self) -> bool {
        match self {
            Kind::Number(number) => number.is_zero(),
            Kind::Qualifier(qualifier) => qualifier.is_empty(),
            Kind::Combination(..) => false,
            Kind::List(items) => items.is_empty(),
        }
    }

    /// Compares with a missing item (the other version ended).
    fn cmp_missing(&self) -> Ordering {
        match self {
            Kind::Number(number) => {
                if number.is_zero() {
                    Ordering::Equal
                } else {
                    Ordering::Greater
                }
            }
            Kind::Qualifier(qualifier) | Kind::Combination(qualifier, _) => rank(qualifier).cmp(&RELEASE),
            Kind::List(items) => items
                .iter()
                .map(|item| item.0.cmp_missing())
                .find(|ordering| ordering.is_ne())
                .unwrap_or(Ordering::Equal),
        }
    }
}

impl Ord for Item {
    fn cmp(&self, other: &Self) -> Ordering {
        use Kind::{Combination, List, Number, Qualifier};
        match (&self.0, &other.0) {
            (Number(a), Number(b)) => a.cmp(b),
            (Number(_), _) => Ordering::Greater,
            (_, Number(_)) => Ordering::Less,
            (Qualifier(a), Qualifier(b)) => rank(a).cmp(&rank(b)),
            // A combination is above the bare qualifier of its rank.
            (Qualifier(a), Combination(b, _)) => rank(a).cmp(&rank(b)).then(Ordering::Less),
            (Combination(a, _), Qualifier(b)) => rank(a).cmp(&rank(b)).then(Ordering::Greater),
            (Combination(a, x), Combination(b, y)) => rank(a).cmp(&rank(b)).then_with(|| x.cmp(y)),
            (List(_), Qualifier(_) | Combination(..)) => Ordering::Greater,
            (Qualifier(_) | Combination(..), List(_)) => Ordering::Less,
            (List(a), List(b)) => compare_lists(a, b),
        }
    }
}

impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Item by item; where one list ends, the other's items compare with a
/// missing item.
fn compare_lists(a: &[Item], b: &[Item]) -> Ordering {
    let length = a.len().max(b.len());
    (0..length)
        .map(|index| match (a.get(index), b.get(index)) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(x), None) => x.0.cmp_missing(),
            (None, Some(y)) => y.0.cmp_missing().reverse(),
            (None, None) => Ordering::Equal,
        })
        .find(|ordering| ordering.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// A parsed Maven version. Equality and order are Maven's order, so `1.0`
/// equals `1` and `1.0.final` equals `1`.
#[derive(Debug, Clone)]
pub struct Version {
    items: Vec<Item>,
}

impl Version {
    /// Parses `text` as Maven does, refusing the empty version and anything but
    /// printable ASCII.
    pub fn parse(text: &str) -> Result<Version, VersionError> {
        let invalid = |reason: String| VersionError { scheme: "Maven", version: text.to_owned(), reason };
        if text.is_empty() {
            return Err(invalid("the version is empty".to_owned()));
        }
        if text.len() > MAX_LENGTH {
            return Err(invalid(format!("longer than {MAX_LENGTH} characters")));
        }
        if let Some(bad) = text.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(invalid(format!(
                "{bad:?} is not printable ASCII (Maven releases disagree on how such characters order)"
            )));
        }
        Ok(Version { items: Parser::new(&text.to_ascii_lowercase()).run() })
    }
}

/// The tokenizer. `lists` is the chain of open lists, outermost first: a new
/// list always opens as the last item of the current one, so the chain is
/// all the nesting there is.
struct Parser<'a> {
    text: &'a str,
    lists: Vec<Vec<Item>>,
    /// Start of the token being read.
    start: usize,
    /// Whether the last character read was a digit.
    digits: bool,
    /// Whether the token being read is a qualifier followed by digits.
    combination: bool,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        Parser { text, lists: vec![Vec::new()], start: 0, digits: false, combination: false }
    }

    fn current(&mut self) -> &mut Vec<Item> {
        if self.lists.is_empty() {
            self.lists.push(Vec::new());
        }
        let last = self.lists.len() - 1;
        &mut self.lists[last]
    }

    fn push(&mut self, kind: Kind) {
        self.current().push(Item(kind));
    }

    /// Opens a nested list, unless the current one is still empty.
    fn nest_unless_empty(&mut self) {
        if !self.current().is_empty() {
            self.lists.push(Vec::new());
        }
    }

    /// The token from `start` to `end` as an item.
    fn token(&self, end: usize) -> Kind {
        let token = &self.text[self.start..end];
        if self.combination {
            combination(token)
        } else if self.digits {
            Kind::Number(Number::new(token))
        } else {
            Kind::Qualifier(alias(token).to_owned())
        }
    }

    fn run(mut self) -> Vec<Item> {
        let bytes = self.text.as_bytes();
        for (index, &byte) in bytes.iter().enumerate() {
            match byte {
                b'.' => {
                    let item =
                        if index == self.start { Kind::Number(Number::zero()) } else { self.token(index) };
                    self.push(item);
                    self.combination = false;
                    self.start = index + 1;
                }
                b'-' => {
                    if index == self.start {
                        self.push(Kind::Number(Number::zero()));
                    } else if !self.digits && bytes.get(index + 1).is_some_and(u8::is_ascii_digit) {
                        // `rc-1` is read as `rc1`: the token goes on.
                        self.combination = true;
                        continue;
                    } else {
                        let item = self.token(index);
                        self.push(item);
                    }
                    self.start = index + 1;
                    self.nest_unless_empty();
                    self.combination = false;
                }
                digit if digit.is_ascii_digit() => {
                    if !self.digits && index > self.start {
                        // Letters then digits: one combination item, in a
                        // nested list.
                        self.combination = true;
                        self.nest_unless_empty();
                    }
                    self.digits = true;
                }
                _ => {
                    if self.digits && index > self.start {
                        // Digits then letters: the number ends, the rest is
                        // nested.
                        let item = self.token(index);
                        self.push(item);
                        self.start = index;
                        self.lists.push(Vec::new());
                        self.combination = false;
                    }
                    self.digits = false;
                }
            }
        }
        if self.text.len() > self.start {
            // A trailing qualifier after a `.` is nested as if after a `-`
            // (MNG-7644: `2.0.a == 2-a`).
            if !self.digits {
                self.nest_unless_empty();
            }
            let item = self.token(self.text.len());
            self.push(item);
        }
        // Close the lists innermost first, each normalized before its parent
        // sees it.
        let mut closed: Option<Vec<Item>> = None;
        while let Some(mut list) = self.lists.pop() {
            if let Some(child) = closed.take() {
                list.push(Item(Kind::List(child)));
            }
            normalize(&mut list);
            closed = Some(list);
        }
        closed.unwrap_or_default()
    }
}

/// `cr` is `rc`.
fn alias(qualifier: &str) -> &str {
    if qualifier == "cr" { "rc" } else { qualifier }
}

/// A combination token: a qualifier, an optional `-`, then digits.
fn combination(token: &str) -> Kind {
    let joined: String = token.chars().filter(|&c| c != '-').collect();
    let Some(split) = joined.find(|c: char| c.is_ascii_digit()) else {
        return Kind::Qualifier(alias(&joined).to_owned());
    };
    let (qualifier, digits) = joined.split_at(split);
    // The shorthands only count when a number follows.
    let qualifier = match qualifier {
        "a" => "alpha",
        "b" => "beta",
        "m" => "milestone",
        other => alias(other),
    };
    Kind::Combination(qualifier.to_owned(), Number::new(digits))
}

/// Drops null items that end the list, or that stand before a qualifier or
/// before a list starting with a qualifier or combination.
fn normalize(list: &mut Vec<Item>) {
    for index in (0..list.len()).rev() {
        if !list[index].0.is_null() {
            continue;
        }
        let drop = match list.get(index + 1).map(|next| &next.0) {
            None | Some(Kind::Qualifier(_)) => true,
            Some(Kind::List(items)) => {
                matches!(items.first().map(|item| &item.0), Some(Kind::Qualifier(_) | Kind::Combination(..)))
            }
            Some(_) => false,
        };
        if drop {
            list.remove(index);
        }
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_lists(&self.items, &other.items)
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

/// Compares two Maven versions; an error names the first refused one.
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
    fn osv_style_versions_of_real_advisories() {
        assert_eq!(order("5.2.20.RELEASE", "5.2.20"), Ordering::Equal);
        assert_eq!(order("5.2.20.RELEASE", "5.3.0"), Ordering::Less);
        assert_eq!(order("5.3.0-M1", "5.3.0"), Ordering::Less);
        assert_eq!(order("5.3.0-RC2", "5.3.0-M4"), Ordering::Greater);
        assert_eq!(order("2.12.7.1", "2.12.7"), Ordering::Greater);
        assert_eq!(order("1.2.3-SNAPSHOT", "1.2.3-rc1"), Ordering::Greater);
        assert_eq!(order("9.4.51.v20230217", "9.4.51"), Ordering::Greater);
        assert_eq!(order("32.0.0-android", "32.0.0-jre"), Ordering::Less);
    }

    #[test]
    fn nulls_are_dropped_where_maven_drops_them() {
        assert_eq!(order("1.0.0", "1"), Ordering::Equal);
        assert_eq!(order("1-0", "1"), Ordering::Equal);
        assert_eq!(order("1..", "1"), Ordering::Equal);
        assert_eq!(order("1.0.0-rc1", "1-rc-1"), Ordering::Equal);
        assert_eq!(order("1.0-1", "1"), Ordering::Greater);
        // `final` ranks as the release but is kept (MNG-7714).
        assert_eq!(order("1.0.final", "1"), Ordering::Equal);
        assert_eq!(order("1.0.final-redhat", "1.0-sp1-redhat"), Ordering::Less);
    }

    #[test]
    fn a_zero_of_ten_or_more_digits_is_maven_s_wider_type() {
        // Trailing, it is dropped like any zero.
        assert_eq!(order("1.0000000000", "1"), Ordering::Equal);
        // Elsewhere it compares as a Java `long`, above any `int` (Maven 3.8.7
        // agrees).
        assert_eq!(order("0000000000.1", "0.1"), Ordering::Greater);
        assert_eq!(order("1.0000000000.1", "1.0.1"), Ordering::Greater);
        assert_eq!(order("0000000000.1", "999999999.1"), Ordering::Greater);
        assert_eq!(order("1234567890", "999999999"), Ordering::Greater);
        assert_eq!(order("0001234567890", "1234567891"), Ordering::Less);
        assert_eq!(order("99999999999999999999", "1234567890"), Ordering::Greater);
    }

    #[test]
    fn refused_versions_name_themselves() {
        for bad in ["", "1.0 beta", "1.\u{0668}", "ζέβρα", "1\t", "\n"] {
            let error = compare(bad, "1").expect_err(bad);
            assert_eq!((error.scheme, error.version.as_str()), ("Maven", bad));
            assert!(compare("1", bad).is_err(), "{bad:?} second");
        }
        let long = "1.".repeat(MAX_LENGTH);
        assert!(compare(&long, "1").is_err());
    }

    #[test]
    fn deep_nesting_within_the_limit_compares() {
        let deep = "1-".repeat(MAX_LENGTH / 2 - 1);
        let deeper = format!("{deep}1");
        assert_eq!(order(&deep, &deeper), Ordering::Less);
    }
}
