//! What a repair run must keep: the version edits of the first run.

use std::path::Path;

use super::patch::{self, Op};
use super::{RejectReason, Rejection, RequiredEdit};

/// Derives the edits a repair must keep from the first run's patch.
///
/// The rule, deterministic and in patch order:
/// - only modified files are read (not added, deleted or renamed ones),
///   and not files in `vendor/` or `third_party/` trees or `go.sum`: those
///   follow the manifests and a forward `go mod tidy` rewrites them;
/// - within a hunk, each run of removed lines followed by a run of added
///   lines is paired position by position (the first `-` with the first
///   `+`, …);
/// - each added line carrying a version-like token (`\d+\.\d+(\.\d+)?`, or
///   an image tag right after `:` as in `alpine:edge`) becomes a
///   `must_contain` of its trimmed text, and its removed partner, if any and
///   different, the `must_not_contain`;
/// - duplicates are dropped.
///
/// A patch that does not parse yields nothing.
pub fn required_edits_from_patch(patch: &[u8]) -> Vec<RequiredEdit> {
    let Ok(files) = patch::parse(patch) else { return Vec::new() };
    let mut edits: Vec<RequiredEdit> = Vec::new();
    for file in files.iter().filter(|f| f.op == Op::Modified && !f.binary) {
        let path = file.path();
        let in_vendor = path.split('/').any(|c| c == "vendor" || c == "third_party");
        if in_vendor || path == "go.sum" || path.ends_with("/go.sum") {
            continue;
        }
        let ends: Vec<usize> = file.hunk_starts.iter().skip(1).copied().chain([file.lines.len()]).collect();
        for (&start, &end) in file.hunk_starts.iter().zip(&ends) {
            let hunk = &file.lines[start..end];
            let mut i = 0;
            while i < hunk.len() {
                if hunk[i].op == b' ' {
                    i += 1;
                    continue;
                }
                let removed: Vec<_> = hunk[i..].iter().take_while(|l| l.op == b'-').collect();
                let added: Vec<_> = hunk[i + removed.len()..].iter().take_while(|l| l.op == b'+').collect();
                i += removed.len() + added.len();
                for (k, line) in added.iter().enumerate() {
                    let text = String::from_utf8_lossy(&patch[line.text.clone()]).trim().to_owned();
                    if !has_version(&text) {
                        continue;
                    }
                    let before = removed
                        .get(k)
                        .map(|l| String::from_utf8_lossy(&patch[l.text.clone()]).trim().to_owned())
                        .filter(|b| !b.is_empty() && *b != text);
                    let edit =
                        RequiredEdit { path: path.to_owned(), must_contain: text, must_not_contain: before };
                    if !edits.contains(&edit) {
                        edits.push(edit);
                    }
                }
            }
        }
    }
    edits
}

/// `\d+\.\d+`, or `:` followed by a tag that starts with a letter or digit
/// after an image-name character (`golang:1.22`, `alpine:edge`).
fn has_version(text: &str) -> bool {
    let b = text.as_bytes();
    for i in 0..b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()) {
            let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            if b.get(i + digits) == Some(&b'.') && b.get(i + digits + 1).is_some_and(u8::is_ascii_digit) {
                return true;
            }
        }
        if b[i] == b':'
            && i > 0
            && (b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b'-' | b'_' | b'.' | b'/'))
            && b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric)
            && !text[i + 1..].starts_with("//")
        {
            let tag = b[i + 1..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
                .count();
            if tag > 0
                && b.get(i + 1 + tag)
                    .is_none_or(|c| c.is_ascii_whitespace() || matches!(c, b'@' | b'"' | b'\''))
            {
                return true;
            }
        }
    }
    false
}

/// Checks `edit` on the tree at `clone`: some line must contain
/// `must_contain`, and no line may contain `must_not_contain` unless it
/// also contains `must_contain` (so an old value that is a prefix of the
/// new one, `1.22` → `1.22.2`, does not trip it).
pub fn check(clone: &Path, edit: &RequiredEdit) -> Option<Rejection> {
    let reject =
        |detail: String| Rejection { path: edit.path.clone(), reason: RejectReason::RevertsFix, detail };
    if let Some((_, why)) = super::rules::unsafe_path(&edit.path) {
        return Some(reject(format!("the required edit names an unsafe path: {why}")));
    }
    let full = clone.join(&edit.path);
    // A symlink is not the file the first run edited.
    match std::fs::symlink_metadata(&full) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Some(reject("no longer a regular file".into())),
        Err(_) => {
            return Some(reject(format!("the file is gone; it must still contain `{}`", edit.must_contain)));
        }
    }
    let text = match std::fs::read(&full) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => return Some(reject(format!("unreadable: {e}"))),
    };
    if !text.lines().any(|l| l.contains(&edit.must_contain)) {
        return Some(reject(format!("no longer contains `{}`", edit.must_contain)));
    }
    if let Some(bad) = &edit.must_not_contain
        && let Some((n, _)) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(bad.as_str()) && !l.contains(&edit.must_contain))
    {
        return Some(reject(format!("line {} brings back `{bad}`", n + 1)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_tokens() {
        assert!(has_version("FROM golang:1.22.2-alpine3.19 AS build"));
        assert!(has_version("FROM alpine:edge"));
        assert!(has_version("\tgolang.org/x/net v0.23.0"));
        assert!(!has_version("RUN go build ./..."));
        assert!(!has_version("url: https://example.com"));
        assert!(!has_version("key: value"));
    }

    #[test]
    fn pairs_removed_and_added_lines_by_position() {
        let patch = b"diff --git a/Dockerfile b/Dockerfile\n--- a/Dockerfile\n+++ b/Dockerfile\n@@ -1,3 +1,3 @@\n-FROM golang:1.22.1-alpine3.19 AS build\n-RUN apk add curl=8.5.0-r0\n+FROM golang:1.22.2-alpine3.19 AS build\n+RUN apk add curl=8.9.1-r0\n WORKDIR /src\n";
        let edits = required_edits_from_patch(patch);
        assert_eq!(edits.len(), 2);
        assert_eq!(edits[0].must_contain, "FROM golang:1.22.2-alpine3.19 AS build");
        assert_eq!(edits[0].must_not_contain.as_deref(), Some("FROM golang:1.22.1-alpine3.19 AS build"));
        assert_eq!(edits[1].must_not_contain.as_deref(), Some("RUN apk add curl=8.5.0-r0"));
    }
}
