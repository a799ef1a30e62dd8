//! Edits JSON text by byte offsets: the members of an object with where
//! each key and value stands, and splicing new text in at those offsets.
//! An edit made this way leaves every other byte of the file as it was
//! (indentation, key order, spacing), where re-serialising a parsed value
//! would rewrite the whole file and bury the change in a noisy diff.
//! Callers parse the result again to check it is the JSON they meant.

use crate::dockerfile::Span;

/// `text` with the bytes of `span` replaced by `with`.
pub(super) fn splice(text: &str, span: Span, with: &str) -> String {
    format!(
        "{}{with}{}",
        text.get(..span.start).unwrap_or_default(),
        text.get(span.end..).unwrap_or_default()
    )
}

/// The blanks right before `at`.
pub(super) fn leading_ws(text: &str, at: usize) -> &str {
    let before = text.get(..at).unwrap_or_default();
    let start = before.trim_end_matches([' ', '\t', '\n', '\r']).len();
    before.get(start..).unwrap_or_default()
}

/// One member of a JSON object, by byte offsets.
pub(super) struct Member {
    pub(super) key: String,
    pub(super) key_start: usize,
    /// Just after the key's closing quote.
    pub(super) key_end: usize,
    pub(super) value: Span,
}

/// The first byte at or after `i` that is not JSON white space.
pub(super) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// From an opening quote to just after the closing one.
fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    i += 1;
    loop {
        match b.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// From the first byte of a value to just after it.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while b.get(j).is_some_and(|c| !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')) {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// The members of the object opening at `open`, and where it closes.
pub(super) fn object_members(text: &str, open: usize) -> Option<(usize, Vec<Member>)> {
    let b = text.as_bytes();
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let mut members = Vec::new();
    let mut i = skip_ws(b, open + 1);
    if b.get(i) == Some(&b'}') {
        return Some((i, members));
    }
    loop {
        let key_start = i;
        let key_end = skip_string(b, i)?;
        let key: String = serde_json::from_str(text.get(key_start..key_end)?).ok()?;
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let value_start = skip_ws(b, i + 1);
        let value_end = skip_value(b, value_start)?;
        members.push(Member { key, key_start, key_end, value: value_start..value_end });
        i = skip_ws(b, value_end);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b'}' => return Some((i, members)),
            _ => return None,
        }
    }
}
