//! A lossless Dockerfile parser.
//!
//! The file's text is kept as it is; parsing only records where things are.
//! Printing is the text itself (byte-identical by construction), and an edit
//! replaces exactly the byte range of the token it changes, so nothing else
//! moves: comments, continuations, spacing, heredocs and case survive.
//!
//! The grammar follows BuildKit's Dockerfile frontend: parser directives
//! (`# syntax=`, `# escape=`, `# check=`) only at the very top; the escape
//! character (`\` or `` ` ``) at the end of a line continues the
//! instruction, comment lines and empty lines inside a continuation are
//! dropped from it; `RUN`, `COPY` and `ADD` may carry heredocs (`<<EOF`,
//! `<<-EOF`, quoted delimiters), whose bodies belong to the instruction.

use std::ops::Range;

/// A byte range of the original text.
pub type Span = Range<usize>;

/// A parser directive from the top of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// Lowercase name: `syntax`, `escape`, `check`.
    pub name: String,
    /// The value as written.
    pub value: String,
    /// The whole directive line (without its newline).
    pub span: Span,
}

/// One word of an instruction's arguments: its text with continuations
/// removed and quotes kept, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The word as the logical line has it.
    pub text: String,
    /// Where it is in [`Instruction::args`].
    pub range: Range<usize>,
    /// From its first to its last byte in the file (a continuation inside
    /// the word is included).
    pub span: Span,
}

/// A heredoc body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heredoc {
    /// The delimiter word.
    pub delimiter: String,
    /// The body, without the delimiter line.
    pub body: Span,
}

/// One instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    /// The keyword in upper case: `FROM`, `RUN`…
    pub keyword: String,
    /// Where the keyword is.
    pub keyword_span: Span,
    /// From the keyword to the end of the instruction's last line (heredoc
    /// bodies and their delimiter lines included), without the final
    /// newline.
    pub span: Span,
    /// The arguments after the keyword as one logical line: continuations
    /// joined, comment and empty lines inside them dropped.
    pub args: String,
    /// For each byte of `args`, its offset in the file.
    args_map: Vec<usize>,
    /// Heredoc bodies, in order.
    pub heredocs: Vec<Heredoc>,
}

impl Instruction {
    /// The file offset of byte `i` of [`Instruction::args`] (one past the
    /// end maps to just after the last byte).
    pub fn offset(&self, i: usize) -> usize {
        match self.args_map.get(i) {
            Some(&o) => o,
            None => self.args_map.last().map(|o| o + 1).unwrap_or(self.keyword_span.end),
        }
    }

    /// The file span of `args[range]`.
    pub fn span_of(&self, range: Range<usize>) -> Span {
        if range.is_empty() {
            let at = self.offset(range.start);
            return at..at;
        }
        self.offset(range.start)..self.offset(range.end - 1) + 1
    }

    /// The arguments split into words: whitespace separates, quotes and the
    /// escape character keep whitespace inside a word.
    pub fn words(&self, escape: char) -> Vec<Word> {
        split_words(&self.args, escape)
            .into_iter()
            .map(|r| Word { text: self.args[r.clone()].to_owned(), span: self.span_of(r.clone()), range: r })
            .collect()
    }

    /// Leading `--name=value` flags and the index of the first word after
    /// them.
    pub fn flags(&self, escape: char) -> (Vec<(String, Word)>, usize) {
        let words = self.words(escape);
        let mut flags = Vec::new();
        let mut i = 0;
        while let Some(w) = words.get(i) {
            let Some(flag) = w.text.strip_prefix("--") else { break };
            let name = flag.split('=').next().unwrap_or_default().to_ascii_lowercase();
            flags.push((name, w.clone()));
            i += 1;
        }
        (flags, i)
    }

    /// Whether the arguments are a JSON array (exec form).
    pub fn is_exec_form(&self) -> bool {
        self.args.trim_start().starts_with('[')
    }
}

/// Splits `text` into word ranges, shell-like: whitespace separates words
/// outside quotes; the escape character protects the next character.
pub fn split_words(text: &str, escape: char) -> Vec<Range<usize>> {
    let mut words = Vec::new();
    let mut start: Option<usize> = None;
    let mut quote: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if start.is_none() && !c.is_whitespace() {
            start = Some(i);
        }
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) if c == escape && quote == Some('"') => {
                chars.next();
            }
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == escape => {
                chars.next();
            }
            None if c.is_whitespace() => {
                if let Some(s) = start.take() {
                    words.push(s..i);
                }
            }
            None => {}
        }
    }
    if let Some(s) = start {
        words.push(s..text.len());
    }
    words
}

/// Why a Dockerfile could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// A parsed Dockerfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dockerfile {
    text: String,
    escape: char,
    directives: Vec<Directive>,
    instructions: Vec<Instruction>,
}

/// Physical lines: (start, end without the line break, end with it).
fn lines(text: &str) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    while start < bytes.len() {
        let nl = bytes[start..].iter().position(|&b| b == b'\n').map(|p| start + p);
        let (end, next) = match nl {
            Some(n) => (if n > start && bytes[n - 1] == b'\r' { n - 1 } else { n }, n + 1),
            None => (bytes.len(), bytes.len()),
        };
        out.push((start, end, next));
        start = next;
    }
    out
}

fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

fn directive(line: &str) -> Option<(String, String)> {
    let rest = line.trim().strip_prefix('#')?.trim_start();
    let (name, value) = rest.split_once('=')?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) || name.contains(' ') {
        return None;
    }
    Some((name.to_ascii_lowercase(), value.trim().to_owned()))
}

/// Heredoc delimiters named in a logical line: `<<EOF`, `<<-EOF`,
/// `<<"EOF"`, `<<'EOF'`. Returns (delimiter, strip leading tabs).
fn heredoc_markers(args: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut rest = args;
    while let Some(i) = rest.find("<<") {
        let after = &rest[i + 2..];
        let (strip, after) = match after.strip_prefix('-') {
            Some(a) => (true, a),
            None => (false, after),
        };
        let (word, consumed) = match after.chars().next() {
            Some(q @ ('"' | '\'')) => match after[1..].find(q) {
                Some(end) => (after[1..1 + end].to_owned(), 2 + end),
                None => (String::new(), 0),
            },
            _ => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                    .unwrap_or(after.len());
                (after[..end].to_owned(), end)
            }
        };
        if !word.is_empty() && word.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') {
            out.push((word, strip));
        }
        let skip = i + 2 + usize::from(strip) + consumed.max(1);
        rest = rest.get(skip..).unwrap_or_default();
    }
    out
}

impl Dockerfile {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Dockerfile, ParseError> {
        let all = lines(text);
        let mut escape = '\\';
        let mut directives = Vec::new();
        let mut i = 0;
        // Directives: only before anything else, one of each at most.
        while let Some(&(s, e, _)) = all.get(i) {
            let line = &text[s..e];
            match directive(line) {
                Some((name, value)) if matches!(name.as_str(), "syntax" | "escape" | "check") => {
                    if directives.iter().any(|d: &Directive| d.name == name) {
                        break;
                    }
                    if name == "escape" {
                        // Docker's original parser took the first character
                        // of the value (`# escape = ``` is a backtick).
                        escape = match value.chars().next() {
                            Some('\\') => '\\',
                            Some('`') => '`',
                            _ => {
                                let other = value.as_str();
                                return Err(ParseError {
                                    line: i + 1,
                                    reason: format!("invalid escape token `{other}`"),
                                });
                            }
                        };
                    }
                    directives.push(Directive { name, value, span: s..e });
                    i += 1;
                }
                _ => break,
            }
        }
        let mut instructions = Vec::new();
        while i < all.len() {
            let (s, e, _) = all[i];
            let line = &text[s..e];
            if line.trim().is_empty() || is_comment(line) {
                i += 1;
                continue;
            }
            let first_line = i;
            // Keyword.
            let kw_start = s + (line.len() - line.trim_start().len());
            let kw_len = text[kw_start..e].find(char::is_whitespace).unwrap_or(e - kw_start);
            let keyword_span = kw_start..kw_start + kw_len;
            let keyword = text[keyword_span.clone()].to_ascii_uppercase();
            // Logical line from after the keyword.
            let mut args = String::new();
            let mut map = Vec::new();
            let mut seg_start = keyword_span.end;
            let mut last_end;
            loop {
                let (_, seg_end, _) = all[i];
                let seg = &text[seg_start..seg_end];
                let trimmed = seg.trim_end();
                let continues = trimmed.ends_with(escape);
                let keep = if continues { &seg[..trimmed.len() - escape.len_utf8()] } else { seg };
                for (off, ch) in keep.char_indices() {
                    let mut buf = [0u8; 4];
                    let encoded = ch.encode_utf8(&mut buf);
                    args.push_str(encoded);
                    for b in 0..encoded.len() {
                        map.push(seg_start + off + b);
                    }
                }
                last_end = seg_end;
                i += 1;
                if !continues {
                    break;
                }
                // Skip comment and empty lines inside the continuation.
                while let Some(&(ns, ne, _)) = all.get(i) {
                    let next = &text[ns..ne];
                    if next.trim().is_empty() || is_comment(next) {
                        i += 1;
                    } else {
                        break;
                    }
                }
                match all.get(i) {
                    Some(&(ns, _, _)) => seg_start = ns,
                    None => break,
                }
            }
            // Heredocs.
            let mut heredocs = Vec::new();
            if matches!(keyword.as_str(), "RUN" | "COPY" | "ADD") {
                for (delimiter, strip) in heredoc_markers(&args) {
                    let body_start = all.get(i).map(|l| l.0).unwrap_or(text.len());
                    let mut found = false;
                    while let Some(&(hs, he, _)) = all.get(i) {
                        let l = &text[hs..he];
                        let candidate = if strip { l.trim_start_matches('\t') } else { l };
                        i += 1;
                        if candidate == delimiter {
                            heredocs.push(Heredoc { delimiter: delimiter.clone(), body: body_start..hs });
                            last_end = he;
                            found = true;
                            break;
                        }
                    }
                    if !found {
                        return Err(ParseError {
                            line: first_line + 1,
                            reason: format!("heredoc `{delimiter}` is never closed"),
                        });
                    }
                }
            }
            instructions.push(Instruction {
                keyword,
                keyword_span: keyword_span.clone(),
                span: keyword_span.start..last_end,
                args,
                args_map: map,
                heredocs,
            });
        }
        Ok(Dockerfile { text: text.to_owned(), escape, directives, instructions })
    }

    /// The text, as parsed (printing is identity).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The escape character in force.
    pub fn escape(&self) -> char {
        self.escape
    }

    /// The parser directives.
    pub fn directives(&self) -> &[Directive] {
        &self.directives
    }

    /// The instructions in order.
    pub fn instructions(&self) -> &[Instruction] {
        &self.instructions
    }

    /// The span of the whole physical lines holding `span`, newline of the
    /// last included: what to delete to remove those lines entirely.
    pub fn line_span(&self, span: &Span) -> Span {
        let start = self.text[..span.start].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let end = match self.text[span.end..].find('\n') {
            Some(i) => span.end + i + 1,
            None => self.text.len(),
        };
        start..end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuations_comments_and_heredocs() {
        let text = "# syntax=docker/dockerfile:1\n# escape=\\\nFROM alpine:3.19 AS base\n\n# a comment\nRUN apk add \\\n    # pinned for CVE-1\n    libssl3=3.1.4-r5 \\\n\n    libcrypto3=3.1.4-r5\nRUN <<EOF\necho hi\nEOF\nCMD [\"sh\"]";
        let df = Dockerfile::parse(text).expect("parses");
        assert_eq!(df.directives().len(), 2);
        let kw: Vec<&str> = df.instructions().iter().map(|i| i.keyword.as_str()).collect();
        assert_eq!(kw, vec!["FROM", "RUN", "RUN", "CMD"]);
        let run = &df.instructions()[1];
        let words: Vec<String> = run.words('\\').into_iter().map(|w| w.text).collect();
        assert_eq!(words, vec!["apk", "add", "libssl3=3.1.4-r5", "libcrypto3=3.1.4-r5"]);
        let pin = &run.words('\\')[2];
        assert_eq!(&text[pin.span.clone()], "libssl3=3.1.4-r5");
        let heredoc = &df.instructions()[2].heredocs[0];
        assert_eq!(&text[heredoc.body.clone()], "echo hi\n");
        assert_eq!(df.text(), text);
    }

    #[test]
    fn backtick_escape() {
        let text = "# escape=`\nFROM mcr.microsoft.com/windows/servercore:ltsc2022\nRUN powershell -Command `\n    Write-Host hi\n";
        let df = Dockerfile::parse(text).expect("parses");
        assert_eq!(df.escape(), '`');
        assert!(df.instructions()[1].args.contains("Write-Host hi"));
    }

    #[test]
    fn directives_stop_at_the_first_other_line() {
        let df = Dockerfile::parse("FROM x\n# escape=`\nRUN a \\\n b\n").expect("parses");
        assert!(df.directives().is_empty());
        assert_eq!(df.escape(), '\\');
        assert!(df.instructions()[1].args.contains("a  b"));
    }

    #[test]
    fn unclosed_heredoc_is_an_error() {
        let err = Dockerfile::parse("FROM x\nRUN <<EOF\necho\n").expect_err("unclosed");
        assert_eq!(err.line, 2);
    }
}
