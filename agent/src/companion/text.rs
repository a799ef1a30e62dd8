//! Reading text without changing it: physical lines with their byte
//! offsets (CRLF or LF), a line-level view of YAML (indentation, list
//! dashes, `key: value` with the value's span inside its quotes), and the
//! string values of a JSON document with their paths and spans.
//!
//! None of these are full parsers: they find where a value is so that an
//! edit can replace exactly its bytes. What they do not understand they
//! skip; they never fail on odd input.

use std::ops::Range;

/// A byte range of a file.
pub type Span = Range<usize>;

/// One physical line: 1-based number, where it starts, its text without
/// the line break (`\r\n` or `\n`).
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    /// 1-based.
    pub number: usize,
    /// Byte offset of its first character.
    pub start: usize,
    /// Its text without the line break.
    pub text: &'a str,
}

/// The physical lines of `text`.
pub fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let body = raw.strip_suffix('\n').unwrap_or(raw);
        let body = body.strip_suffix('\r').unwrap_or(body);
        out.push(Line { number: i + 1, start, text: body });
        start += raw.len();
    }
    out
}

/// The 1-based line of byte `offset`.
pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// The longest run at the start of `s` of characters a version token may
/// hold (`v`, digits, dots): what follows `@` or `==`.
pub fn version_run(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'v')).unwrap_or(s.len());
    &s[..end]
}

/// One line of a YAML document, as far as keys and scalars go.
#[derive(Debug, Clone)]
pub struct YamlLine<'a> {
    /// The physical line.
    pub line: Line<'a>,
    /// Column of its first non-space character; `None` for blank and
    /// comment-only lines.
    pub indent: Option<usize>,
    /// Whether it starts a list item (`- …`).
    pub dash: bool,
    /// `key` and its column, for `key:` and `- key:` lines.
    pub key: Option<(&'a str, usize)>,
    /// The scalar after `key:` (or after `- ` for a bare list item): its
    /// text without quotes or trailing comment, and its file span.
    pub value: Option<(&'a str, Span)>,
}

/// Reads `text` as YAML lines.
pub fn yaml_lines(text: &str) -> Vec<YamlLine<'_>> {
    lines(text).into_iter().map(yaml_line).collect()
}

fn yaml_line(line: Line<'_>) -> YamlLine<'_> {
    let text = line.text;
    let content_at = text.len() - text.trim_start_matches(' ').len();
    let content = &text[content_at..];
    let blank = YamlLine { line, indent: None, dash: false, key: None, value: None };
    if content.trim().is_empty() || content.starts_with('#') {
        return blank;
    }
    let (dash, mut at) = match content.strip_prefix('-') {
        Some(rest) if rest.is_empty() || rest.starts_with(' ') => {
            (true, content_at + 1 + (rest.len() - rest.trim_start_matches(' ').len()))
        }
        _ => (false, content_at),
    };
    let mut out = YamlLine { indent: Some(content_at), dash, ..blank };
    let body = &text[at..];
    if let Some((key, after)) = yaml_key(body) {
        out.key = Some((key, at));
        at += body.len() - after.len();
    } else if !dash {
        return out;
    }
    out.value = scalar(&text[at..]).map(|(v, r)| (v, line.start + at + r.start..line.start + at + r.end));
    out
}

/// `key: rest` → (`key`, `rest`); quoted keys lose their quotes.
fn yaml_key(body: &str) -> Option<(&str, &str)> {
    let (key, after) = match body.chars().next()? {
        q @ ('"' | '\'') => {
            let end = body[1..].find(q)? + 1;
            (&body[1..end], body[end + 1..].strip_prefix(':')?)
        }
        _ => {
            let colon = body.find(':')?;
            let key = &body[..colon];
            if key.is_empty() || key.contains(char::is_whitespace) || key.contains(['{', '[', '"', '\'']) {
                return None;
            }
            (key, &body[colon + 1..])
        }
    };
    if !after.is_empty() && !after.starts_with([' ', '\t']) {
        return None;
    }
    Some((key, after))
}

/// The scalar at the start of `s` (after spaces): quoted (span inside the
/// quotes) or plain (up to a ` #` comment, trimmed). Flow collections and
/// block markers (`|`, `>`) are not scalars here.
fn scalar(s: &str) -> Option<(&str, Span)> {
    let lead = s.len() - s.trim_start().len();
    let rest = &s[lead..];
    match rest.chars().next()? {
        q @ ('"' | '\'') => {
            let end = rest[1..].find(q)? + 1;
            Some((&rest[1..end], lead + 1..lead + end))
        }
        '[' | '{' | '|' | '>' | '&' | '*' | '!' | '#' => None,
        _ => {
            let end = rest.find(" #").or_else(|| rest.find("\t#")).unwrap_or(rest.len());
            let value = rest[..end].trim_end();
            (!value.is_empty()).then(|| (value, lead..lead + value.len()))
        }
    }
}

/// The items of a flow list value (`['3.11', "3.12"]`) on one line, with
/// their file spans.
pub fn flow_list<'a>(line: &Line<'a>, after_key: usize) -> Vec<(&'a str, Span)> {
    let text = line.text;
    let Some(open) = text[after_key.min(text.len())..].find('[').map(|i| i + after_key) else {
        return Vec::new();
    };
    let Some(close) = text[open..].find(']').map(|i| i + open) else { return Vec::new() };
    let mut out = Vec::new();
    let mut at = open + 1;
    for item in text[open + 1..close].split(',') {
        if let Some((v, r)) = scalar(item) {
            out.push((v, line.start + at + r.start..line.start + at + r.end));
        }
        at += item.len() + 1;
    }
    out
}

/// The lines of the list item (`- …`) that contains line `i`, whose keys
/// sit at `key_col`: from its dash line to the line before the next line
/// indented at or left of the dash.
pub fn item_range(doc: &[YamlLine<'_>], i: usize, key_col: usize) -> Option<Range<usize>> {
    let start = (0..=i).rev().find(|&j| {
        let l = &doc[j];
        l.indent.is_some() && (l.dash && l.key.is_some_and(|(_, c)| c == key_col) || l.indent < Some(key_col))
    })?;
    if !doc[start].dash {
        return None;
    }
    let dash_col = doc[start].indent?;
    let end =
        (start + 1..doc.len()).find(|&j| doc[j].indent.is_some_and(|c| c <= dash_col)).unwrap_or(doc.len());
    Some(start..end)
}

/// The lines nested under the key on line `i` (indented further than it).
pub fn children(doc: &[YamlLine<'_>], i: usize) -> Range<usize> {
    let col = doc[i].key.map(|(_, c)| c).unwrap_or(0);
    let end = (i + 1..doc.len()).find(|&j| doc[j].indent.is_some_and(|c| c <= col)).unwrap_or(doc.len());
    i + 1..end
}

/// A string value in a JSON document: the keys leading to it and the span
/// of its contents (inside the quotes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonString {
    /// Object keys from the root (array positions are not recorded).
    pub path: Vec<String>,
    /// The raw contents (escapes not decoded).
    pub raw: String,
    /// Where the contents are.
    pub span: Span,
}

/// The string values of `text`, a JSON document; `None` when it is not
/// JSON this reader follows.
pub fn json_strings(text: &str) -> Option<Vec<JsonString>> {
    let mut reader = JsonReader { bytes: text.as_bytes(), at: 0, out: Vec::new(), depth: 0 };
    reader.value(&mut Vec::new())?;
    reader.skip_ws();
    (reader.at == reader.bytes.len()).then_some(reader.out)
}

struct JsonReader<'a> {
    bytes: &'a [u8],
    at: usize,
    out: Vec<JsonString>,
    depth: usize,
}

impl JsonReader<'_> {
    fn skip_ws(&mut self) {
        while self.bytes.get(self.at).is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    /// A string starting at `self.at`: its content span.
    fn string(&mut self) -> Option<Span> {
        if self.bytes.get(self.at) != Some(&b'"') {
            return None;
        }
        let start = self.at + 1;
        let mut i = start;
        loop {
            match self.bytes.get(i)? {
                b'"' => break,
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
        self.at = i + 1;
        Some(start..i)
    }

    fn value(&mut self, path: &mut Vec<String>) -> Option<()> {
        // Deep nesting is not what a package.json looks like.
        if self.depth > 64 {
            return None;
        }
        self.skip_ws();
        match *self.bytes.get(self.at)? {
            b'"' => {
                let span = self.string()?;
                let raw = std::str::from_utf8(&self.bytes[span.clone()]).ok()?.to_owned();
                self.out.push(JsonString { path: path.clone(), raw, span });
            }
            b'{' => {
                self.depth += 1;
                self.at += 1;
                self.skip_ws();
                if self.bytes.get(self.at) == Some(&b'}') {
                    self.at += 1;
                } else {
                    loop {
                        self.skip_ws();
                        let key = self.string()?;
                        let key = std::str::from_utf8(&self.bytes[key]).ok()?.to_owned();
                        self.skip_ws();
                        if self.bytes.get(self.at) != Some(&b':') {
                            return None;
                        }
                        self.at += 1;
                        path.push(key);
                        self.value(path)?;
                        path.pop();
                        self.skip_ws();
                        match self.bytes.get(self.at)? {
                            b',' => self.at += 1,
                            b'}' => {
                                self.at += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                self.depth -= 1;
            }
            b'[' => {
                self.depth += 1;
                self.at += 1;
                self.skip_ws();
                if self.bytes.get(self.at) == Some(&b']') {
                    self.at += 1;
                } else {
                    loop {
                        self.value(path)?;
                        self.skip_ws();
                        match self.bytes.get(self.at)? {
                            b',' => self.at += 1,
                            b']' => {
                                self.at += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                self.depth -= 1;
            }
            _ => {
                // Numbers, true, false, null.
                let start = self.at;
                while self.bytes.get(self.at).is_some_and(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b))
                {
                    self.at += 1;
                }
                if self.at == start {
                    return None;
                }
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_offsets_across_crlf() {
        let text = "a\r\nbb\nccc";
        let l = lines(text);
        assert_eq!(l.len(), 3);
        assert_eq!((l[1].start, l[1].text, l[1].number), (3, "bb", 2));
        assert_eq!(&text[l[2].start..l[2].start + 3], "ccc");
        assert_eq!(line_of(text, 7), 3);
    }

    #[test]
    fn yaml_keys_values_and_items() {
        let text = "jobs:\r\n  lint:\r\n    steps:\r\n      - uses: golangci/golangci-lint-action@v6\r\n        with:\r\n          version: \"v1.55.2\" # pinned\r\n      - run: make\r\n";
        let doc = yaml_lines(text);
        let (key, col) = doc[3].key.expect("key");
        assert_eq!((key, col, doc[3].dash), ("uses", 8, true));
        let (v, span) = doc[5].value.clone().expect("value");
        assert_eq!((v, &text[span]), ("v1.55.2", "v1.55.2"));
        assert_eq!(item_range(&doc, 5, 8), Some(3..6));
        assert_eq!(children(&doc, 4), 5..6);
        let flow = "python-version: ['3.11', \"3.12\"]";
        let l = lines(flow);
        let items = flow_list(&l[0], 15);
        assert_eq!(items.iter().map(|(v, _)| *v).collect::<Vec<_>>(), vec!["3.11", "3.12"]);
        assert_eq!(&flow[items[1].1.clone()], "3.12");
    }

    #[test]
    fn json_string_paths() {
        let text = "{\n  \"name\": \"x\",\n  \"engines\": {\"node\": \">=20\", \"npm\": \"^8.0.0\"},\n  \"files\": [\"a\", {\"b\": 1}],\n  \"packageManager\": \"npm@9.8.1\"\n}\n";
        let strings = json_strings(text).expect("json");
        let npm = strings.iter().find(|s| s.path == ["engines", "npm"]).expect("engines.npm");
        assert_eq!(&text[npm.span.clone()], "^8.0.0");
        assert!(strings.iter().any(|s| s.path == ["packageManager"] && s.raw == "npm@9.8.1"));
        assert!(json_strings("{\"a\": }").is_none());
        assert!(json_strings("{} trailing").is_none());
    }
}
