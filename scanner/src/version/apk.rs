//! apk version ordering (Alpine, Wolfi, Chainguard).
//!
//! The rules are those of apk-tools 3.x `src/version.c`: a version is
//! `digits{.digits}...{letter}{_suffix{digits}}...{~hash}{-rN}`. Tokens are
//! compared in turn; numbers compare numerically, except that a later number
//! with a leading zero on either side compares as a byte string (`1.02 <
//! 1.1`, `8.2.0015 < 8.2.002`, following Gentoo). Pre-release suffixes
//! (`_alpha < _beta < _pre < _rc`) sort before the bare version and
//! post-release suffixes (`_cvs < _svn < _git < _hg < _p`) after it. When one
//! version runs out of tokens first, the other is newer unless its next token
//! is a pre-release suffix.
//!
//! apk still orders strings its own validator rejects (its test data has
//! `1.0 < 1.0bc # invalid. do string sort`); a scanner must not guess, so a
//! version that `apk_version_validate` would refuse is an error here.

use std::cmp::Ordering;

use super::VersionError;

/// A suffix after `_`, in apk's order; [`Suffix::is_pre_release`] tells the
/// ones that sort before the bare version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Suffix {
    /// `_alpha`.
    Alpha,
    /// `_beta`.
    Beta,
    /// `_pre`.
    Pre,
    /// `_rc`.
    Rc,
    /// `_cvs`.
    Cvs,
    /// `_svn`.
    Svn,
    /// `_git`.
    Git,
    /// `_hg`.
    Hg,
    /// `_p` (patch level).
    P,
}

impl Suffix {
    fn from_word(word: &str) -> Option<Suffix> {
        Some(match word {
            "alpha" => Suffix::Alpha,
            "beta" => Suffix::Beta,
            "pre" => Suffix::Pre,
            "rc" => Suffix::Rc,
            "cvs" => Suffix::Cvs,
            "svn" => Suffix::Svn,
            "git" => Suffix::Git,
            "hg" => Suffix::Hg,
            "p" => Suffix::P,
            _ => return None,
        })
    }

    /// Whether the suffix marks a release before the bare version.
    pub fn is_pre_release(self) -> bool {
        matches!(self, Suffix::Alpha | Suffix::Beta | Suffix::Pre | Suffix::Rc)
    }
}

/// One token of an apk version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Token {
    /// The leading number.
    InitialDigits(String),
    /// A number after a `.`.
    Digits(String),
    /// The single letter after the numbers (`1.2.3b`).
    Letter(u8),
    /// A `_suffix`.
    Suffix(Suffix),
    /// The number right after a suffix (`_rc2`).
    SuffixNumber(String),
    /// A `~` followed by a lowercase hex commit id.
    CommitHash(String),
    /// The package revision (`-r3`).
    Revision(String),
}

impl Token {
    /// apk's token kinds are ordered; the order decides which version is
    /// newer when one runs out of tokens or the kinds differ.
    fn rank(&self) -> u8 {
        match self {
            Token::InitialDigits(_) => 0,
            Token::Digits(_) => 1,
            Token::Letter(_) => 2,
            Token::Suffix(_) => 3,
            Token::SuffixNumber(_) => 4,
            Token::CommitHash(_) => 5,
            Token::Revision(_) => 6,
        }
    }
}

/// Rank of the end of a version, above every token.
const END_RANK: u8 = 7;

/// A parsed, valid apk version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    tokens: Vec<Token>,
}

impl Version {
    /// Parses `text`, refusing anything apk's validator refuses.
    pub fn parse(text: &str) -> Result<Version, VersionError> {
        let invalid = |reason: String| VersionError { scheme: "apk", version: text.to_owned(), reason };
        let bytes = text.as_bytes();
        let mut position = take_while(bytes, 0, |byte| byte.is_ascii_digit());
        if position == 0 {
            return Err(invalid("does not start with a digit".to_owned()));
        }
        let mut tokens = vec![Token::InitialDigits(slice(text, 0, position))];
        while let Some(&byte) = bytes.get(position) {
            let previous = tokens.last().map_or(0, Token::rank);
            let at = position;
            let token = match byte {
                b'a'..=b'z' if previous <= 1 => {
                    position += 1;
                    Token::Letter(byte)
                }
                b'.' if previous <= 1 => {
                    let end = take_while(bytes, position + 1, |byte| byte.is_ascii_digit());
                    if end == position + 1 {
                        return Err(invalid(format!("no number after `.` at byte {at}")));
                    }
                    let digits = slice(text, position + 1, end);
                    position = end;
                    Token::Digits(digits)
                }
                b'0'..=b'9' if previous == 3 => {
                    let end = take_while(bytes, position, |byte| byte.is_ascii_digit());
                    let digits = slice(text, position, end);
                    position = end;
                    Token::SuffixNumber(digits)
                }
                b'_' if previous <= 4 => {
                    let end = take_while(bytes, position + 1, |byte| byte.is_ascii_lowercase());
                    let word = slice(text, position + 1, end);
                    let Some(suffix) = Suffix::from_word(&word) else {
                        return Err(invalid(format!("unknown suffix `_{word}` at byte {at}")));
                    };
                    position = end;
                    Token::Suffix(suffix)
                }
                b'~' if previous < 5 => {
                    let end =
                        take_while(bytes, position + 1, |byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
                    if end == position + 1 {
                        return Err(invalid(format!("no commit hash after `~` at byte {at}")));
                    }
                    let hash = slice(text, position + 1, end);
                    position = end;
                    Token::CommitHash(hash)
                }
                b'-' if previous < 6 => {
                    if bytes.get(position + 1) != Some(&b'r') {
                        return Err(invalid(format!("`-` not followed by `r` at byte {at}")));
                    }
                    let end = take_while(bytes, position + 2, |byte| byte.is_ascii_digit());
                    if end == position + 2 {
                        return Err(invalid(format!("no revision number after `-r` at byte {at}")));
                    }
                    let digits = slice(text, position + 2, end);
                    position = end;
                    Token::Revision(digits)
                }
                _ => {
                    let shown = text.get(at..).and_then(|rest| rest.chars().next()).unwrap_or('?');
                    return Err(invalid(format!("unexpected `{shown}` at byte {at}")));
                }
            };
            tokens.push(token);
        }
        Ok(Version { tokens })
    }

    /// The tokens, in order.
    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let mut index = 0;
        loop {
            let mine = self.tokens.get(index);
            let theirs = other.tokens.get(index);
            let my_rank = mine.map_or(END_RANK, Token::rank);
            let their_rank = theirs.map_or(END_RANK, Token::rank);
            if my_rank != their_rank || my_rank == END_RANK {
                return tail_order(mine, theirs, my_rank, their_rank);
            }
            if let (Some(mine), Some(theirs)) = (mine, theirs) {
                let order = token_order(mine, theirs);
                if order != Ordering::Equal {
                    return order;
                }
            }
            index += 1;
        }
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Decides between two versions equal up to the first position where their
/// token kinds differ (or both end).
fn tail_order(mine: Option<&Token>, theirs: Option<&Token>, my_rank: u8, their_rank: u8) -> Ordering {
    if my_rank == their_rank {
        return Ordering::Equal;
    }
    if let Some(Token::Suffix(suffix)) = mine
        && suffix.is_pre_release()
    {
        return Ordering::Less;
    }
    if let Some(Token::Suffix(suffix)) = theirs
        && suffix.is_pre_release()
    {
        return Ordering::Greater;
    }
    // A higher-ranked token (or the end) means "less": `1.0` < `1.0.1`,
    // `1.0-r1` < `1.0a`.
    their_rank.cmp(&my_rank)
}

/// Compares two tokens of the same kind.
fn token_order(mine: &Token, theirs: &Token) -> Ordering {
    match (mine, theirs) {
        (Token::Digits(a), Token::Digits(b)) => {
            // Gentoo's rule: a leading zero makes the number a fraction-like
            // string, so `02 < 1` and `0015 < 002`.
            if a.starts_with('0') || b.starts_with('0') {
                a.as_bytes().cmp(b.as_bytes())
            } else {
                compare_decimal(a, b)
            }
        }
        (Token::InitialDigits(a), Token::InitialDigits(b))
        | (Token::SuffixNumber(a), Token::SuffixNumber(b))
        | (Token::Revision(a), Token::Revision(b)) => compare_decimal(a, b),
        (Token::Letter(a), Token::Letter(b)) => a.cmp(b),
        (Token::Suffix(a), Token::Suffix(b)) => a.cmp(b),
        (Token::CommitHash(a), Token::CommitHash(b)) => a.as_bytes().cmp(b.as_bytes()),
        _ => mine.rank().cmp(&theirs.rank()),
    }
}

/// Compares two runs of ASCII digits as unbounded integers.
fn compare_decimal(a: &str, b: &str) -> Ordering {
    let a = a.trim_start_matches('0');
    let b = b.trim_start_matches('0');
    a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

fn take_while(bytes: &[u8], start: usize, keep: impl Fn(u8) -> bool) -> usize {
    let mut end = start;
    while bytes.get(end).is_some_and(|&byte| keep(byte)) {
        end += 1;
    }
    end
}

/// The ASCII text between two byte positions the parser has checked.
fn slice(text: &str, start: usize, end: usize) -> String {
    text.get(start..end).unwrap_or_default().to_owned()
}

/// Compares two apk versions; an error names the first invalid one.
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
    fn numbers_compare_numerically_without_leading_zeros() {
        assert_eq!(order("1.10", "1.9"), Ordering::Greater);
        assert_eq!(order("10", "9"), Ordering::Greater);
        assert_eq!(order("2.2.3-r10", "2.2.3-r9"), Ordering::Greater);
    }

    #[test]
    fn leading_zero_switches_to_string_order_after_the_first_number() {
        assert_eq!(order("1.02", "1.1"), Ordering::Less);
        assert_eq!(order("8.2.0015", "8.2.002"), Ordering::Less);
        assert_eq!(order("8.2.0", "8.2.001"), Ordering::Less);
        // The initial number is always numeric: `006` is six.
        assert_eq!(order("006", "5"), Ordering::Greater);
        assert_eq!(order("06", "6"), Ordering::Equal);
    }

    #[test]
    fn suffix_order_and_position_relative_to_the_bare_version() {
        let ordered = [
            "1.0_alpha",
            "1.0_beta",
            "1.0_pre",
            "1.0_rc",
            "1.0",
            "1.0_cvs",
            "1.0_svn",
            "1.0_git",
            "1.0_hg",
            "1.0_p",
        ];
        for pair in ordered.windows(2) {
            assert_eq!(order(pair[0], pair[1]), Ordering::Less, "{} < {}", pair[0], pair[1]);
            assert_eq!(order(pair[1], pair[0]), Ordering::Greater, "{} > {}", pair[1], pair[0]);
        }
        assert_eq!(order("1.0_rc1", "1.0_rc2"), Ordering::Less);
        assert_eq!(order("1.0_alpha_pre2", "1.0_alpha"), Ordering::Less);
    }

    #[test]
    fn revisions_letters_and_commit_hashes() {
        assert_eq!(order("1.0", "1.0-r0"), Ordering::Less);
        assert_eq!(order("1.0-r0", "1.0-r0"), Ordering::Equal);
        assert_eq!(order("1.0a", "1.0-r5"), Ordering::Greater);
        assert_eq!(order("1.0b", "1.0a"), Ordering::Greater);
        assert_eq!(order("1.0~1234", "1.0~2345"), Ordering::Less);
        assert_eq!(order("1.0~1234-r1", "1.0~1234-r0"), Ordering::Greater);
        assert_eq!(order("1.0~abc", "1.0"), Ordering::Greater);
    }

    #[test]
    fn huge_numbers_do_not_overflow() {
        assert_eq!(order("1.0_pre20191002222144999999999", "1.0_pre20191002222145"), Ordering::Greater);
        assert_eq!(order("99999999999999999999999", "99999999999999999999998"), Ordering::Greater);
    }

    #[test]
    fn invalid_versions_are_errors_naming_the_version() {
        for bad in [
            "",
            "a",
            ".1",
            "_pre1",
            "-r1",
            "1.",
            "1..2",
            "1.0bc",
            "1.0a1",
            "1.0a.1",
            "1.0_",
            "1.0_foo",
            "1.0_1",
            "1.0-r",
            "1.0-1",
            "1.0-r1-r2",
            "1.0-r1_p1",
            "1.0-r1.1",
            "1.0~",
            "1.0~xyz",
            "1.0~ab_pre1",
            "1.0-r1~ab",
            "1.0A",
            "1.0 ",
            "1.0é",
        ] {
            let error = compare(bad, "1.0").expect_err(bad);
            assert_eq!(error.version, bad);
            assert_eq!(error.scheme, "apk");
            assert!(compare("1.0", bad).is_err(), "{bad} as the second operand");
        }
    }

    #[test]
    fn valid_shapes_parse() {
        for good in [
            "1.2",
            "0.1_pre2",
            "0.1_pre2~1234abcd",
            "0.1_p1_pre2",
            "0.1_git20240101_pre1",
            "2.5.1a-r1",
            "1.0.0_pre20191002222144-r0",
            "3.1_p16",
            "2.12r-r4",
        ] {
            assert_eq!(compare(good, good), Ok(Ordering::Equal), "{good}");
        }
    }

    #[test]
    fn token_listing_reflects_the_grammar() {
        let version = Version::parse("1.2b_rc3~ab-r4").expect("valid");
        assert_eq!(
            version.tokens(),
            &[
                Token::InitialDigits("1".into()),
                Token::Digits("2".into()),
                Token::Letter(b'b'),
                Token::Suffix(Suffix::Rc),
                Token::SuffixNumber("3".into()),
                Token::CommitHash("ab".into()),
                Token::Revision("4".into()),
            ]
        );
    }
}
