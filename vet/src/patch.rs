//! A strict reader for `git diff --binary` output: file headers, hunks and
//! binary blocks, with every line accounted for.
//!
//! It exists so that path checks happen before git touches the clone, and so
//! that line counts and added text come from the patch rather than from
//! anything the patch claims about itself. Anything it does not recognise is
//! an error, never skipped: a line git would read as a second, traditional
//! diff (`--- x` / `+++ y` outside a file section) must not slip past the
//! checks. Hunks are read by their counts, as git reads them, so a removed
//! SQL comment (`--- note`) inside a hunk is content and not a header.

use std::ops::Range;

/// What a file section does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Added,
    Modified,
    Deleted,
    Renamed,
    Copied,
}

/// One line of a hunk body.
#[derive(Debug, Clone)]
pub(crate) struct BodyLine {
    /// b' ', b'+' or b'-'.
    pub op: u8,
    /// Line number in the new file (for `+` and context lines); the old
    /// file's number for `-` lines.
    pub line_no: u32,
    /// The text without the op byte or the newline, as a range of the patch.
    pub text: Range<usize>,
}

/// One `diff --git` section.
#[derive(Debug, Clone)]
pub(crate) struct FileDiff {
    pub op: Op,
    /// Path before the change (`None` for an added file).
    pub old_path: Option<String>,
    /// Path after the change (`None` for a deleted file).
    pub new_path: Option<String>,
    pub old_mode: Option<u32>,
    pub new_mode: Option<u32>,
    /// Carries a `GIT binary patch`.
    pub binary: bool,
    /// `Binary files … differ`: a binary change without its data, which
    /// git cannot apply.
    pub binary_without_data: bool,
    /// Every path-like string the headers carry, for the safety checks
    /// (header halves, `---`/`+++`, rename and copy lines).
    pub names: Vec<String>,
    /// The raw `diff --git` line after the command, for a fragment check
    /// where names with spaces are ambiguous.
    pub header: String,
    /// Hunk bodies, hunk after hunk; `hunk_starts` indexes into it.
    pub lines: Vec<BodyLine>,
    pub hunk_starts: Vec<usize>,
    pub added: u64,
    pub removed: u64,
}

impl FileDiff {
    /// The path the change is reported under: the new one, or the old one
    /// for a deletion.
    pub fn path(&self) -> &str {
        self.new_path.as_deref().or(self.old_path.as_deref()).unwrap_or("")
    }
}

/// A patch that is not well-formed `git diff` output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    /// 1-based line of the patch.
    pub line: usize,
    pub message: String,
}

struct Lines<'a> {
    data: &'a [u8],
    /// (start, end-without-newline) of every line.
    spans: Vec<(usize, usize)>,
    pos: usize,
}

impl<'a> Lines<'a> {
    fn new(data: &'a [u8]) -> Self {
        let mut spans = Vec::with_capacity(data.len() / 40 + 1);
        let mut start = 0;
        for (i, &b) in data.iter().enumerate() {
            if b == b'\n' {
                spans.push((start, i));
                start = i + 1;
            }
        }
        if start < data.len() {
            spans.push((start, data.len()));
        }
        Lines { data, spans, pos: 0 }
    }
    fn peek(&self) -> Option<&'a [u8]> {
        self.spans.get(self.pos).map(|&(s, e)| &self.data[s..e])
    }
    fn span(&self) -> Option<(usize, usize)> {
        self.spans.get(self.pos).copied()
    }
    fn advance(&mut self) {
        self.pos += 1;
    }
    /// 1-based number of the current line.
    fn number(&self) -> usize {
        self.pos + 1
    }
    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError { line: self.number(), message: message.into() }
    }
}

/// Reads a whole patch. An empty patch reads as no files.
pub(crate) fn parse(data: &[u8]) -> Result<Vec<FileDiff>, ParseError> {
    let mut lines = Lines::new(data);
    let mut files = Vec::new();
    while let Some(line) = lines.peek() {
        let Some(rest) = line.strip_prefix(b"diff --git ") else {
            // git apply would skip leading prose, but it would also apply a
            // traditional diff hidden in it; nothing here may be unread.
            return Err(lines.err("text outside a `diff --git` section"));
        };
        let header = utf8(rest).map_err(|m| lines.err(m))?;
        lines.advance();
        files.push(parse_file(&mut lines, header)?);
    }
    Ok(files)
}

fn utf8(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "header is not UTF-8".to_owned())
}

fn parse_file(lines: &mut Lines<'_>, header: String) -> Result<FileDiff, ParseError> {
    let (head_old, head_new) = header_names(&header).map_err(|m| lines.err(m))?.unwrap_or((None, None));
    let mut file = FileDiff {
        op: Op::Modified,
        old_path: None,
        new_path: None,
        old_mode: None,
        new_mode: None,
        binary: false,
        binary_without_data: false,
        names: head_old.iter().chain(head_new.iter()).cloned().collect(),
        header,
        lines: Vec::new(),
        hunk_starts: Vec::new(),
        added: 0,
        removed: 0,
    };
    let (mut rename_from, mut rename_to, mut copy_from, mut copy_to) = (None, None, None, None);
    let (mut minus, mut plus): (Option<Option<String>>, Option<Option<String>>) = (None, None);
    let mut created = false;
    let mut deleted = false;

    // Extended header lines, then at most one content part.
    while let Some(line) = lines.peek() {
        if line.starts_with(b"diff --git ") {
            break;
        }
        let text = utf8(line).map_err(|m| lines.err(m))?;
        let mode = |v: &str| parse_mode(v).ok_or_else(|| lines.err(format!("bad mode {v:?}")));
        if let Some(v) = text.strip_prefix("old mode ") {
            file.old_mode = Some(mode(v)?);
        } else if let Some(v) = text.strip_prefix("new mode ") {
            file.new_mode = Some(mode(v)?);
        } else if let Some(v) = text.strip_prefix("deleted file mode ") {
            file.old_mode = Some(mode(v)?);
            deleted = true;
        } else if let Some(v) = text.strip_prefix("new file mode ") {
            file.new_mode = Some(mode(v)?);
            created = true;
        } else if text.starts_with("similarity index ") || text.starts_with("dissimilarity index ") {
        } else if let Some(v) = text.strip_prefix("index ") {
            // `index abc..def 100644`: the trailing mode is the file's mode
            // on both sides.
            if let Some((_, m)) = v.split_once(' ') {
                let m = mode(m)?;
                file.old_mode.get_or_insert(m);
                file.new_mode.get_or_insert(m);
            }
        } else if let Some(v) = text.strip_prefix("rename from ") {
            rename_from = Some(plain_name(v).map_err(|m| lines.err(m))?);
        } else if let Some(v) = text.strip_prefix("rename to ") {
            rename_to = Some(plain_name(v).map_err(|m| lines.err(m))?);
        } else if let Some(v) = text.strip_prefix("copy from ") {
            copy_from = Some(plain_name(v).map_err(|m| lines.err(m))?);
        } else if let Some(v) = text.strip_prefix("copy to ") {
            copy_to = Some(plain_name(v).map_err(|m| lines.err(m))?);
        } else if let Some(v) = text.strip_prefix("--- ") {
            minus = Some(side_name(v).map_err(|m| lines.err(m))?);
            lines.advance();
            let Some(next) = lines.peek().and_then(|l| l.strip_prefix(b"+++ ")) else {
                return Err(lines.err("`---` line without `+++`"));
            };
            let next = utf8(next).map_err(|m| lines.err(m))?;
            plus = Some(side_name(&next).map_err(|m| lines.err(m))?);
            lines.advance();
            parse_hunks(lines, &mut file)?;
            break;
        } else if text.starts_with("Binary files ") && text.ends_with(" differ") {
            file.binary_without_data = true;
            lines.advance();
            break;
        } else if text == "GIT binary patch" {
            file.binary = true;
            lines.advance();
            parse_binary(lines)?;
            break;
        } else {
            return Err(lines.err(format!("unexpected header line {:?}", truncate(&text))));
        }
        lines.advance();
    }

    for name in [&rename_from, &rename_to, &copy_from, &copy_to].into_iter().flatten() {
        file.names.push(name.clone());
    }
    for name in [&minus, &plus].into_iter().flatten().flatten() {
        file.names.push(name.clone());
    }
    if minus == Some(None) {
        created = true;
    }
    if plus == Some(None) {
        deleted = true;
    }
    let err = |m: &str| ParseError {
        line: lines.number(),
        message: format!("{m} (in `diff --git {}`)", file.header),
    };
    if created && deleted {
        return Err(err("a file both created and deleted"));
    }
    let minus = minus.flatten();
    let plus = plus.flatten();
    if let (Some(from), Some(to)) = (&rename_from, &rename_to) {
        file.op = Op::Renamed;
        file.old_path = Some(from.clone());
        file.new_path = Some(to.clone());
    } else if let (Some(from), Some(to)) = (&copy_from, &copy_to) {
        file.op = Op::Copied;
        file.old_path = Some(from.clone());
        file.new_path = Some(to.clone());
    } else if rename_from.is_some() || rename_to.is_some() || copy_from.is_some() || copy_to.is_some() {
        return Err(err("a rename or copy with one side missing"));
    } else if created {
        file.op = Op::Added;
        file.new_path = plus.clone().or(head_new.clone());
    } else if deleted {
        file.op = Op::Deleted;
        file.old_path = minus.clone().or(head_old.clone());
    } else {
        file.old_path = minus.clone().or(head_old.clone());
        file.new_path = plus.clone().or(head_new.clone());
        if file.old_path != file.new_path {
            return Err(err("old and new names differ without a rename"));
        }
    }
    if file.old_path.is_none() && file.new_path.is_none() {
        return Err(err("the header names no file"));
    }
    // git refuses names that disagree between the header and `---`/`+++`;
    // so does this reader, so both see the same file.
    let check = |side: &Option<String>, want: &Option<String>| match (side, want) {
        (Some(a), Some(b)) if a != b => Err(err("`---`/`+++` names disagree with the header")),
        _ => Ok(()),
    };
    if matches!(file.op, Op::Modified | Op::Renamed | Op::Copied | Op::Deleted) {
        check(&minus, &file.old_path)?;
    }
    if matches!(file.op, Op::Modified | Op::Renamed | Op::Copied | Op::Added) {
        check(&plus, &file.new_path)?;
    }
    Ok(file)
}

fn parse_mode(v: &str) -> Option<u32> {
    let v = v.trim_end();
    if v.is_empty() || v.len() > 7 || !v.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return None;
    }
    u32::from_str_radix(v, 8).ok()
}

fn parse_hunks(lines: &mut Lines<'_>, file: &mut FileDiff) -> Result<(), ParseError> {
    if !lines.peek().is_some_and(|l| l.starts_with(b"@@ -")) {
        return Err(lines.err("`---`/`+++` without a hunk"));
    }
    while let Some(line) = lines.peek() {
        if !line.starts_with(b"@@ -") {
            break;
        }
        let (old_start, mut old_left, new_start, mut new_left) =
            hunk_header(line).ok_or_else(|| lines.err("bad hunk header"))?;
        lines.advance();
        file.hunk_starts.push(file.lines.len());
        let (mut old_no, mut new_no) = (old_start, new_start);
        while old_left > 0 || new_left > 0 {
            let Some((s, e)) = lines.span() else {
                return Err(lines.err("patch ends inside a hunk"));
            };
            let op = if s == e { b' ' } else { lines.data[s] };
            // An empty line is an empty context line: git accepts it, as
            // some tools strip the trailing space.
            let text = if s == e { s..e } else { s + 1..e };
            match op {
                b' ' if old_left > 0 && new_left > 0 => {
                    old_left -= 1;
                    new_left -= 1;
                    file.lines.push(BodyLine { op, line_no: new_no, text });
                    old_no += 1;
                    new_no += 1;
                }
                b'-' if old_left > 0 => {
                    old_left -= 1;
                    file.removed += 1;
                    file.lines.push(BodyLine { op, line_no: old_no, text });
                    old_no += 1;
                }
                b'+' if new_left > 0 => {
                    new_left -= 1;
                    file.added += 1;
                    file.lines.push(BodyLine { op, line_no: new_no, text });
                    new_no += 1;
                }
                b'\\' => {}
                _ => return Err(lines.err("hunk line does not match the hunk's counts")),
            }
            lines.advance();
        }
        // `\ No newline at end of file` after the last line.
        if lines.peek().is_some_and(|l| l.starts_with(b"\\ ")) {
            lines.advance();
        }
    }
    if let Some(line) = lines.peek()
        && !line.starts_with(b"diff --git ")
    {
        return Err(lines.err("text after a hunk"));
    }
    Ok(())
}

/// `@@ -a[,b] +c[,d] @@…` → (a, b, c, d).
fn hunk_header(line: &[u8]) -> Option<(u32, u32, u32, u32)> {
    let text = std::str::from_utf8(line).ok()?;
    let rest = text.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let range = |r: &str| -> Option<(u32, u32)> {
        match r.split_once(',') {
            Some((s, n)) => Some((s.parse().ok()?, n.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (a, b) = range(old)?;
    let (c, d) = range(new)?;
    // A zero-length side starts at the line before; numbering from there
    // plus one keeps `line_no` right for the lines that follow.
    let a = if b == 0 { a + 1 } else { a };
    let c = if d == 0 { c + 1 } else { c };
    Some((a, b, c, d))
}

fn parse_binary(lines: &mut Lines<'_>) -> Result<(), ParseError> {
    // A forward block and, from `git diff --binary`, a reverse block; each
    // is `literal N`/`delta N`, base85 lines, then an empty line.
    let mut blocks = 0;
    while let Some(line) = lines.peek() {
        let is_block = line
            .strip_prefix(b"literal ")
            .or_else(|| line.strip_prefix(b"delta "))
            .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit));
        if !is_block {
            break;
        }
        lines.advance();
        loop {
            let Some(data) = lines.peek() else {
                return Err(lines.err("binary patch ends without its blank line"));
            };
            lines.advance();
            if data.is_empty() {
                break;
            }
            // Each base85 line starts with its length as a letter.
            if !data[0].is_ascii_alphabetic() {
                return Err(ParseError { line: lines.number() - 1, message: "bad binary patch data".into() });
            }
        }
        blocks += 1;
    }
    if blocks == 0 {
        return Err(lines.err("`GIT binary patch` without data"));
    }
    if let Some(line) = lines.peek()
        && !line.starts_with(b"diff --git ")
    {
        return Err(lines.err("text after a binary patch"));
    }
    Ok(())
}

/// Strips git's one leading component (`a/`, `b/`, or any other prefix, as
/// `git apply -p1` does).
fn strip_prefix_component(name: &str) -> Result<String, String> {
    match name.split_once('/') {
        Some((_, rest)) if !rest.is_empty() => Ok(rest.to_owned()),
        _ => Err(format!("name {:?} lacks its a/ or b/ prefix", truncate(name))),
    }
}

/// A `---`/`+++` name: `/dev/null` (→ `None`) or a prefixed name, maybe
/// quoted, maybe followed by a tab (git adds one after names with spaces).
fn side_name(v: &str) -> Result<Option<String>, String> {
    let name = if v.starts_with('"') {
        let (name, _) = unquote(v)?;
        name
    } else {
        v.split('\t').next().unwrap_or("").to_owned()
    };
    if name == "/dev/null" {
        return Ok(None);
    }
    strip_prefix_component(&name).map(Some)
}

/// A `rename from`/`copy to` name: no prefix, maybe quoted.
fn plain_name(v: &str) -> Result<String, String> {
    if v.starts_with('"') {
        let (name, rest) = unquote(v)?;
        if !rest.trim().is_empty() {
            return Err("text after a quoted name".into());
        }
        return Ok(name);
    }
    Ok(v.to_owned())
}

/// Old and new name from a `diff --git` line.
type HeaderNames = (Option<String>, Option<String>);

/// The two names of `a/X b/Y`, as git reads them: quoted names are exact;
/// unquoted, the line is split where both halves name the same file, and
/// left unknown (`Ok(None)`) otherwise, for the other headers to settle.
fn header_names(header: &str) -> Result<Option<HeaderNames>, String> {
    if header.starts_with('"') {
        let (first, rest) = unquote(header)?;
        let rest = rest.trim_start_matches(' ');
        let second = if rest.starts_with('"') { unquote(rest)?.0 } else { rest.to_owned() };
        return Ok(Some((Some(strip_prefix_component(&first)?), Some(strip_prefix_component(&second)?))));
    }
    if let Some(q) = header.find(" \"") {
        let first = &header[..q];
        let (second, _) = unquote(&header[q + 1..])?;
        return Ok(Some((Some(strip_prefix_component(first)?), Some(strip_prefix_component(&second)?))));
    }
    for (i, _) in header.match_indices(' ') {
        let (a, b) = (&header[..i], &header[i + 1..]);
        if let (Ok(a), Ok(b)) = (strip_prefix_component(a), strip_prefix_component(b))
            && a == b
        {
            return Ok(Some((Some(a), Some(b))));
        }
    }
    Ok(None)
}

/// Reads a C-quoted name (`"a/b\tc\303\244"`) from the start of `s`;
/// returns it and the text after the closing quote.
pub(crate) fn unquote(s: &str) -> Result<(String, &str), String> {
    let bytes = s.as_bytes();
    if bytes.first() != Some(&b'"') {
        return Err("expected a quoted name".into());
    }
    let mut out = Vec::new();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let name = String::from_utf8(out).map_err(|_| "name is not UTF-8".to_owned())?;
                return Ok((name, &s[i + 1..]));
            }
            b'\\' => {
                let c = *bytes.get(i + 1).ok_or("unfinished escape")?;
                let (byte, used) = match c {
                    b'a' => (7, 2),
                    b'b' => (8, 2),
                    b't' => (b'\t', 2),
                    b'n' => (b'\n', 2),
                    b'v' => (11, 2),
                    b'f' => (12, 2),
                    b'r' => (b'\r', 2),
                    b'"' => (b'"', 2),
                    b'\\' => (b'\\', 2),
                    b'0'..=b'3' => {
                        let digits = bytes.get(i + 1..i + 4).ok_or("short octal escape")?;
                        if !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                            return Err("bad octal escape".into());
                        }
                        let v = digits.iter().fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                        (u8::try_from(v).map_err(|_| "bad octal escape")?, 4)
                    }
                    _ => return Err("unknown escape".into()),
                };
                out.push(byte);
                i += used;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Err("unterminated quoted name".into())
}

fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_headers_hunks_and_binaries() {
        let patch = b"diff --git a/x y.txt b/x y.txt\nindex 1..2 100644\n--- a/x y.txt\t\n+++ b/x y.txt\t\n@@ -1 +1,2 @@\n a\n+b\ndiff --git \"a/bin \\303\\244\" \"b/bin \\303\\244\"\nnew file mode 100755\nindex 0000000..8274d31\nGIT binary patch\nliteral 6\nNcmb=e&B$Q}0000w0Ez$r\n\nliteral 0\nHcmV?d00001\n\ndiff --git a/old b/new\nsimilarity index 100%\nrename from old\nrename to new\n";
        let files = parse(patch).expect("parses");
        assert_eq!(files.len(), 3);
        assert_eq!(files[0].path(), "x y.txt");
        assert_eq!((files[0].added, files[0].removed), (1, 0));
        assert_eq!(files[1].path(), "bin ä");
        assert!(files[1].binary);
        assert_eq!(files[1].op, Op::Added);
        assert_eq!(files[1].new_mode, Some(0o100755));
        assert_eq!(files[2].op, Op::Renamed);
        assert_eq!(files[2].old_path.as_deref(), Some("old"));
    }

    #[test]
    fn a_removed_sql_comment_is_content_not_a_header() {
        let patch = b"diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,2 @@\n--- note\n+++ other\n select 1;\n";
        let files = parse(patch).expect("parses");
        assert_eq!((files[0].added, files[0].removed), (1, 1));
    }

    #[test]
    fn hidden_traditional_diffs_and_stray_text_are_errors() {
        assert!(parse(b"hello\n--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n").is_err());
        let extra = b"diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-a\n+b\n--- a/.git/config\n+++ b/.git/config\n";
        assert!(parse(extra).is_err());
        let mismatch = b"diff --git a/a b/a\n--- a/a\n+++ b/.git/hooks/x\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(parse(mismatch).is_err());
    }

    #[test]
    fn unquotes_c_style_names() {
        assert_eq!(unquote("\"a\\tb\\\"c\\303\\244\" rest").expect("ok"), ("a\tb\"cä".to_owned(), " rest"));
        assert!(unquote("\"open").is_err());
    }
}
