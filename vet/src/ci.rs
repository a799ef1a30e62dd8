//! CI definitions: the one change a run may make to them is moving a pinned
//! version forward (a linter, an action's ref, a toolchain, an image tag),
//! in place; every other change stays refused.
//!
//! Why the exception: a Go bump can make a pinned linter fail CI, and the
//! fix is a newer pin in the workflow. Why so narrow: CI runs with the
//! repository's secrets and decides whether a change is good, so a run must
//! not change what CI runs or how.
//!
//! How it is decided, in two steps:
//! - from the patch ([`patch_shape`]): the file is changed in place, as
//!   text, with its mode kept, and each run of removed lines is followed by
//!   as many added lines;
//! - from the contents ([`compare`]): the HEAD blob against the staged one,
//!   diffed line by line, so hunk headers cannot misstate what changed.
//!   Removed and added lines must pair one to one; in each pair the text
//!   around the version tokens ([`pieces`]) is byte-identical (line endings
//!   included), an action or image keeps its owner and name, no ref becomes
//!   a commit SHA, and every version that changes moves forward.

use std::cmp::Ordering;

use similar::{DiffOp, TextDiff};

use super::patch::{FileDiff, Op};
use super::{CiVersionEdit, VersionChange};

/// Why a ref may not become a commit SHA.
pub(crate) const COMMIT_SHA: &str =
    "a ref is never a commit SHA: a commit from a fork's network can pose as the action's own";

/// The refusal detail for a CI definition that is not a version-only edit.
pub(crate) fn refusal(what: &str, why: &str) -> String {
    format!("{what}: {why}; a run may only move pinned versions forward, in place")
}

/// The patch's side of the rule: what its headers and hunks say.
pub(crate) fn patch_shape(file: &FileDiff) -> Result<(), String> {
    let op = match file.op {
        Op::Modified => None,
        Op::Added => Some("a new file"),
        Op::Deleted => Some("a deleted file"),
        Op::Renamed => Some("a rename"),
        Op::Copied => Some("a copy"),
    };
    if let Some(op) = op {
        return Err(op.into());
    }
    if file.binary || file.binary_without_data {
        return Err("a binary change".into());
    }
    if file.old_mode != file.new_mode {
        return Err("a mode change".into());
    }
    if file.new_mode.is_some_and(|m| m != 0o100644 && m != 0o100755) {
        return Err("not a regular file".into());
    }
    if file.lines.iter().all(|l| l.op == b' ') {
        return Err("no line changes".into());
    }
    let ends = file.hunk_starts.iter().skip(1).copied().chain([file.lines.len()]);
    for (start, end) in file.hunk_starts.iter().copied().zip(ends) {
        let hunk = &file.lines[start..end];
        let mut i = 0;
        while i < hunk.len() {
            if hunk[i].op == b' ' {
                i += 1;
                continue;
            }
            let removed = hunk[i..].iter().take_while(|l| l.op == b'-').count();
            let added = hunk[i + removed..].iter().take_while(|l| l.op == b'+').count();
            if removed != added {
                let first = &hunk[i];
                return Err(unpaired(first.line_no as usize, removed, added));
            }
            i += removed + added;
        }
    }
    Ok(())
}

/// The detail for removed and added lines that do not pair up; `line` is
/// the old file's for removed lines, the new file's for added ones.
fn unpaired(line: usize, removed: usize, added: usize) -> String {
    match (removed, added) {
        (_, 0) => format!("line {line} is removed without an added line to pair with"),
        (0, _) => format!("line {line} is added without a removed line to pair with"),
        _ => format!(
            "at line {line}, {removed} lines are replaced by {added}; removed and added lines pair one to one"
        ),
    }
}

/// The contents' side of the rule, which decides: every change between
/// `old` and `new` is a version-only edit, or the first one that is not
/// is named (with its line).
pub fn compare(path: &str, old: &str, new: &str) -> Result<Vec<CiVersionEdit>, String> {
    let diff = TextDiff::from_lines(old, new);
    let old_lines: Vec<&str> = diff.iter_old_slices().collect();
    let new_lines: Vec<&str> = diff.iter_new_slices().collect();
    let mut edits = Vec::new();
    for op in diff.ops() {
        match *op {
            DiffOp::Equal { .. } => {}
            DiffOp::Delete { old_index, old_len, .. } => return Err(unpaired(old_index + 1, old_len, 0)),
            DiffOp::Insert { new_index, new_len, .. } => return Err(unpaired(new_index + 1, 0, new_len)),
            DiffOp::Replace { old_index, old_len, new_index, new_len } => {
                if old_len != new_len {
                    return Err(unpaired(new_index + 1, old_len, new_len));
                }
                for k in 0..old_len {
                    let line = new_index + k + 1;
                    let versions = pair(old_lines[old_index + k], new_lines[new_index + k])
                        .map_err(|why| format!("line {line}: {why}"))?;
                    edits.push(CiVersionEdit {
                        path: path.to_owned(),
                        line: u32::try_from(line).unwrap_or(u32::MAX),
                        old: old_lines[old_index + k].trim().to_owned(),
                        new: new_lines[new_index + k].trim().to_owned(),
                        versions,
                    });
                }
            }
        }
    }
    Ok(edits)
}

/// One changed line against its original: the versions that moved, or why
/// the change is more than that. Both lines keep their line endings, so a
/// changed ending is a change of text.
fn pair(old: &str, new: &str) -> Result<Vec<VersionChange>, String> {
    if new_commit_sha(old, new) {
        return Err(COMMIT_SHA.into());
    }
    let (old_ref, new_ref) = (reference(old), reference(new));
    if old_ref != new_ref {
        let kind = old_ref.as_ref().or(new_ref.as_ref()).map(|r| r.0);
        return Err(match kind {
            Some(RefKind::Action) => "the action's owner or name changes; only its ref may".into(),
            _ => "the image's registry, owner or name changes; only its tag may".into(),
        });
    }
    let (old_pieces, new_pieces) = (pieces(old), pieces(new));
    let same_shape = old_pieces.len() == new_pieces.len()
        && old_pieces.iter().zip(&new_pieces).all(|pair| match pair {
            (Piece::Text(a), Piece::Text(b)) => a == b,
            (Piece::Version(_), Piece::Version(_)) => true,
            _ => false,
        });
    if !same_shape {
        return Err("text other than versions changes".into());
    }
    let mut moved = Vec::new();
    for pair in old_pieces.iter().zip(&new_pieces) {
        let (Piece::Version(from), Piece::Version(to)) = pair else { continue };
        if from == to {
            continue;
        }
        let (Some(a), Some(b)) = (Version::parse(from), Version::parse(to)) else {
            // `pieces` only yields what parses; kept as a refusal, not a panic.
            return Err(format!("{from} → {to} is not a version change"));
        };
        if a.prefixed != b.prefixed {
            return Err(format!("a version keeps its form: {from} → {to}"));
        }
        if order(&a, &b) != Ordering::Less {
            return Err(format!("versions only move forward: {from} → {to}"));
        }
        moved.push(VersionChange { from: (*from).to_owned(), to: (*to).to_owned() });
    }
    if moved.is_empty() {
        return Err("the line changes but no version does".into());
    }
    Ok(moved)
}

/// A piece of a line: a version token, or the text between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    Version(&'a str),
    Text(&'a str),
}

/// Splits a line into version tokens and the text around them.
///
/// A version token is `v?\d+(\.\d+){0,3}`, optionally followed by a
/// pre-release `-alpha`, `-beta`, `-pre` or `-rc` with a number (`-rc.1`,
/// `-beta2`), standing alone: not inside a word (`python3`), not followed by
/// a letter, digit, `_` or a fifth component. A word of seven or more hex
/// digits is a commit SHA and never a version. A bare number (no `v`, no
/// dot) counts only as a ref or tag (right after `@` or `:`, as in
/// `node:20`) or as the value of a key ending in `version`
/// (`node-version: 20`): elsewhere (`exit 0`, `--max-warnings 0`,
/// `timeout-minutes: 10`) a number is not a version, and moving it could
/// weaken a check. Nor is a URL's host (`http://10.0.0.1/`): moving it
/// fetches from another machine.
pub(crate) fn pieces(line: &str) -> Vec<Piece<'_>> {
    let b = line.as_bytes();
    let bare_allowed_by_key = key_names_a_version(line);
    let mut out = Vec::new();
    let (mut text_start, mut i) = (0, 0);
    while i < b.len() {
        let starts = (b[i].is_ascii_digit()
            || (b[i] == b'v' && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b'_' | b'.')));
        if !starts {
            i += 1;
            continue;
        }
        let word = b[i..].iter().take_while(|c| c.is_ascii_alphanumeric()).count();
        if word >= 7 && b[i..i + word].iter().all(u8::is_ascii_hexdigit) {
            i += word;
            continue;
        }
        let after_scheme = i >= 2 && &b[i - 2..i] == b"//";
        let Some(end) = version_end(b, i).filter(|_| !after_scheme) else {
            i += 1;
            continue;
        };
        let token = &line[i..end];
        let bare = !token.starts_with('v') && !token.contains('.');
        let tag_or_ref = i > 0 && matches!(b[i - 1], b'@' | b':');
        if bare && !tag_or_ref && !bare_allowed_by_key {
            i = end;
            continue;
        }
        if text_start < i {
            out.push(Piece::Text(&line[text_start..i]));
        }
        out.push(Piece::Version(token));
        text_start = end;
        i = end;
    }
    if text_start < b.len() {
        out.push(Piece::Text(&line[text_start..]));
    }
    out
}

/// Where the version token starting at `i` ends, if one does.
fn version_end(b: &[u8], i: usize) -> Option<usize> {
    let digits = |at: usize| b.get(at..).map_or(0, |r| r.iter().take_while(|c| c.is_ascii_digit()).count());
    let mut j = i + usize::from(b[i] == b'v');
    let first = digits(j);
    // Nine digits at most, so every component fits a u64 with room.
    if first == 0 || first > 9 {
        return None;
    }
    j += first;
    let mut components = 1;
    while components < 4 && b.get(j) == Some(&b'.') {
        let n = digits(j + 1);
        if n == 0 || n > 9 {
            break;
        }
        j += 1 + n;
        components += 1;
    }
    if b.get(j) == Some(&b'-')
        && let Some(len) = pre_release(&b[j + 1..])
    {
        j += 1 + len;
    }
    match b.get(j) {
        Some(c) if c.is_ascii_alphanumeric() || *c == b'_' => None,
        Some(b'.') if b.get(j + 1).is_some_and(u8::is_ascii_digit) => None,
        _ => Some(j),
    }
}

/// Pre-release labels, in the order semver sorts them.
const PRE_RELEASES: [&str; 4] = ["alpha", "beta", "pre", "rc"];

/// The length of a pre-release label and its number (`rc.1`, `beta2`) at
/// the start of `rest`, if there is one.
fn pre_release(rest: &[u8]) -> Option<usize> {
    let label = PRE_RELEASES.iter().find(|l| rest.starts_with(l.as_bytes()))?;
    let mut k = label.len();
    if rest.get(k) == Some(&b'.') {
        k += 1;
    }
    let n = rest[k..].iter().take_while(|c| c.is_ascii_digit()).count();
    (n > 0 && n <= 9).then_some(k + n)
}

/// Whether the line is `key: value` (maybe a list item) with a key ending
/// in `version`, such as `go-version` or `NODE_VERSION`.
fn key_names_a_version(line: &str) -> bool {
    let t = line.trim_start();
    let t = t.strip_prefix("- ").unwrap_or(t).trim_start();
    let Some((key, _)) = t.split_once(':') else { return false };
    let key = key.trim().trim_matches(['"', '\'']);
    !key.is_empty()
        && key.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_'))
        && key.to_ascii_lowercase().ends_with("version")
}

/// Whether `new` holds a 7–40 hex-digit word with both letters and digits
/// (so neither a plain number nor a word like `defaced`) that `old` does
/// not: a ref moved to a commit. Only the detail depends on it; such a
/// change is refused either way.
fn new_commit_sha(old: &str, new: &str) -> bool {
    let old_words = hex_words(old);
    hex_words(new).iter().any(|w| !old_words.contains(w))
}

fn hex_words(line: &str) -> Vec<&str> {
    line.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| {
            (7..=40).contains(&w.len())
                && w.bytes().all(|c| c.is_ascii_hexdigit())
                && w.bytes().any(|c| c.is_ascii_alphabetic())
                && w.bytes().any(|c| c.is_ascii_digit())
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RefKind {
    /// `uses: owner/name[/path]@ref`.
    Action,
    /// `image:`/`container:` (or `uses: docker://…`): `registry/owner/name:tag`.
    Image,
}

/// The action or image a `uses:`, `image:` or `container:` line names,
/// without its ref, tag or digest.
fn reference(line: &str) -> Option<(RefKind, String)> {
    let t = line.trim();
    let t = t.strip_prefix("- ").unwrap_or(t).trim_start();
    let (key, value) = t.split_once(':')?;
    let kind = match key.trim().trim_matches(['"', '\'']) {
        "uses" => RefKind::Action,
        "image" | "container" => RefKind::Image,
        _ => return None,
    };
    let value = value.split(" #").next().unwrap_or("").trim().trim_matches(['"', '\'']);
    if value.is_empty() {
        return None;
    }
    Some(match (kind, value.strip_prefix("docker://")) {
        (RefKind::Action, Some(image)) => (RefKind::Image, image_name(image).to_owned()),
        (RefKind::Action, None) => {
            (RefKind::Action, value.rsplit_once('@').map_or(value, |(name, _)| name).to_owned())
        }
        (RefKind::Image, _) => (RefKind::Image, image_name(value).to_owned()),
    })
}

/// `registry:5000/owner/name:tag@sha256:…` → `registry:5000/owner/name`.
fn image_name(value: &str) -> &str {
    let value = value.split('@').next().unwrap_or(value);
    let last = value.rfind('/').map_or(0, |i| i + 1);
    match value[last..].find(':') {
        Some(colon) => &value[..last + colon],
        None => value,
    }
}

/// A parsed version token.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    /// Written with a leading `v`.
    prefixed: bool,
    /// One to four numeric components.
    parts: Vec<u64>,
    /// The pre-release: its label's rank in [`PRE_RELEASES`] and number.
    pre: Option<(usize, u64)>,
}

impl Version {
    fn parse(token: &str) -> Option<Version> {
        let prefixed = token.starts_with('v');
        let rest = token.strip_prefix('v').unwrap_or(token);
        let (numbers, pre) = match rest.split_once('-') {
            Some((numbers, pre)) => (numbers, Some(pre)),
            None => (rest, None),
        };
        let parts = numbers.split('.').map(|p| p.parse().ok()).collect::<Option<Vec<u64>>>()?;
        let pre = match pre {
            None => None,
            Some(pre) => {
                let rank = PRE_RELEASES.iter().position(|l| pre.starts_with(l))?;
                let number = pre[PRE_RELEASES[rank].len()..].trim_start_matches('.');
                Some((rank, number.parse().ok()?))
            }
        };
        Some(Version { prefixed, parts, pre })
    }
}

/// Numeric order, component by component (missing ones are 0, so `1.22`
/// equals `1.22.0`); a pre-release comes before its release. The `v` is
/// not compared.
fn order(a: &Version, b: &Version) -> Ordering {
    let len = a.parts.len().max(b.parts.len());
    let part = |v: &Version, i: usize| v.parts.get(i).copied().unwrap_or(0);
    (0..len).map(|i| part(a, i).cmp(&part(b, i))).find(|o| o.is_ne()).unwrap_or(Ordering::Equal).then_with(
        || match (a.pre, b.pre) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(x), Some(y)) => x.cmp(&y),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(line: &str) -> Vec<&str> {
        pieces(line)
            .into_iter()
            .filter_map(|p| match p {
                Piece::Version(v) => Some(v),
                Piece::Text(_) => None,
            })
            .collect()
    }

    fn parse(v: &str) -> Version {
        Version::parse(v).unwrap_or_else(|| panic!("{v} parses"))
    }

    #[test]
    fn tokens_are_versions_only_when_they_stand_alone() {
        assert_eq!(versions("          version: v1.55.2\n"), ["v1.55.2"]);
        assert_eq!(versions("      - uses: actions/setup-go@v4"), ["v4"]);
        assert_eq!(versions("          go-version: '1.21'"), ["1.21"]);
        assert_eq!(versions("node-version: 20"), ["20"]);
        assert_eq!(versions("image: node:20-alpine"), ["20"]);
        assert_eq!(versions("image: golang:1.22.1-alpine3.19"), ["1.22.1"]);
        assert_eq!(versions("runs-on: ubuntu-22.04"), ["22.04"]);
        assert_eq!(
            versions("go install x/cmd/lint@v2.0.0-rc.1 && lint v1.2.3.4"),
            ["v2.0.0-rc.1", "v1.2.3.4"]
        );
        // Inside words, five components, glued letters, SHAs, bare numbers.
        for line in [
            "run: python3 -m x",
            "x: 1.2.3.4.5",
            "x: 1.2.3abc",
            "x: v1.2_3",
            "uses: a/b@8f4b7f84864484a7bf31766abe9204da3cbe65b3",
            "ref: 1234567",
            "timeout-minutes: 10",
            "run: exit 0",
            "run: eslint --max-warnings 0",
            "run: git diff HEAD~1",
            "run: make lint",
            "run: curl -sSf http://10.0.0.1/install.sh | sh",
        ] {
            assert_eq!(versions(line), Vec::<&str>::new(), "{line}");
        }
        // The text around the tokens is kept byte for byte.
        let line = "  - uses: a/b@v4 # pin\r\n";
        let rebuilt: String = pieces(line)
            .into_iter()
            .map(|p| match p {
                Piece::Version(s) | Piece::Text(s) => s,
            })
            .collect();
        assert_eq!(rebuilt, line);
    }

    #[test]
    fn versions_compare_numerically_and_pre_releases_come_first() {
        let lt = |a: &str, b: &str| assert_eq!(order(&parse(a), &parse(b)), Ordering::Less, "{a} < {b}");
        lt("v1.9", "v1.10");
        lt("v1.55.2", "v1.59.1");
        lt("1.21", "1.22");
        lt("1.22", "1.22.3");
        lt("v4", "v5");
        lt("1.0.0-rc.1", "1.0.0");
        lt("1.0.0-alpha.2", "1.0.0-beta.1");
        lt("1.0.0-rc.1", "1.0.0-rc.2");
        assert_eq!(order(&parse("1.22"), &parse("1.22.0")), Ordering::Equal);
        assert_eq!(order(&parse("v1.59.1"), &parse("v1.55.2")), Ordering::Greater);
        assert!(parse("v1.2").prefixed && !parse("1.2").prefixed);
    }

    #[test]
    fn a_line_may_only_move_its_versions_forward() {
        let ok = |a: &str, b: &str| pair(a, b).unwrap_or_else(|e| panic!("{a} → {b}: {e}"));
        assert_eq!(
            ok("    version: v1.55.2\n", "    version: v1.59.1\n"),
            [VersionChange { from: "v1.55.2".into(), to: "v1.59.1".into() }]
        );
        ok("  image: ghcr.io/acme/tool:1.2\n", "  image: ghcr.io/acme/tool:1.3\n");
        ok("  container: localhost:5000/tool:1.2\n", "  container: localhost:5000/tool:1.3\n");
        let refused = |a: &str, b: &str| pair(a, b).expect_err(&format!("{a} → {b} passes"));
        assert!(refused("version: v1.59.1", "version: v1.55.2").contains("only move forward"));
        assert!(refused("version: 1.22", "version: 1.22.0").contains("only move forward"));
        assert!(refused("version: 1.22", "version: v1.23").contains("keeps its form"));
        assert!(refused("uses: a/b@v4", "uses: a/b@8f4b7f8").contains("commit SHA"));
        assert!(refused("uses: a/tool-1.2@v4", "uses: a/tool-1.3@v4").contains("owner or name"));
        assert!(refused("uses: a/b@v4", "uses: evil/b@v4").contains("owner or name"));
        assert!(refused("image: a/b-1.2:3.4", "image: a/b-1.3:3.4").contains("image's"));
        assert!(refused("uses: docker://a/b:1.2", "uses: docker://e/b:1.3").contains("image's"));
        assert!(refused("version: v1.55.2\n", "version: v1.59.1\r\n").contains("other than versions"));
        assert!(refused("version: v1.55.2", "version: v1.59.1-custom").contains("other than versions"));
        assert!(refused("timeout-minutes: 10", "timeout-minutes: 60").contains("other than versions"));
    }

    #[test]
    fn contents_must_pair_line_for_line() {
        let old = "a: v1\nb: v2\nc: 3.0\n";
        let edits = compare("ci.yml", old, "a: v1\nb: v3\nc: 3.1\n").expect("passes");
        assert_eq!(
            edits.iter().map(|e| (e.line, e.new.as_str())).collect::<Vec<_>>(),
            [(2, "b: v3"), (3, "c: 3.1")]
        );
        assert!(
            compare("ci.yml", old, "a: v1\nb: v2\nx: y\nc: 3.0\n")
                .expect_err("insert")
                .contains("line 3 is added")
        );
        assert!(compare("ci.yml", old, "a: v1\nc: 3.0\n").expect_err("delete").contains("line 2 is removed"));
        // A reorder with a bump pairs the wrong lines.
        assert!(compare("ci.yml", old, "b: v3\na: v1\nc: 3.0\n").is_err());
        // A missing final newline is a change of text.
        assert!(compare("ci.yml", old, "a: v1\nb: v2\nc: 3.1").is_err());
    }

    #[test]
    fn image_names_drop_only_tag_and_digest() {
        assert_eq!(image_name("registry:5000/owner/name:tag@sha256:abc"), "registry:5000/owner/name");
        assert_eq!(image_name("registry:5000/owner/name"), "registry:5000/owner/name");
        assert_eq!(image_name("golang:1.22"), "golang");
        assert_eq!(reference("  - uses: a/b/c@v1 # x").map(|r| r.1).as_deref(), Some("a/b/c"));
        assert_eq!(reference("    image:"), None);
    }
}
