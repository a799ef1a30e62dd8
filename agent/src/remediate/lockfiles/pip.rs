//! pip (`requirements*.txt`): `name==installed` becomes `name==fixed` as a
//! text edit; markers, extras and comments stay. A pin with `--hash=`
//! options is refused: the hashes would no longer match.

use std::cmp::Ordering;

use patchpilot_model::package_names;
use patchpilot_scanner::version::Scheme;

use super::{Attempts, Job, Refused};
use crate::dockerfile::Span;
use crate::remediate::{RefusalCategory, Step};

impl Job<'_> {
    /// Rewrites every exact pin of the installed version in the requirements files.
    pub(super) fn pip(&self) -> Result<Step, Refused> {
        let (name, installed, target) = (self.name, self.installed_version(), self.target.version.as_str());
        let wanted = package_names::pypi(name);
        let same = |v: &str| v == installed || Scheme::Pep440.compare(v, installed) == Ok(Ordering::Equal);
        let mut edits: Vec<(String, String, Vec<Span>)> = Vec::new();
        let mut hashed = Vec::new();
        for rel in &self.files.requirements {
            let Some(text) = self.read(rel) else { continue };
            let mut spans = Vec::new();
            for pin in requirement_pins(&text) {
                if package_names::pypi(&pin.name) != wanted
                    || !same(text.get(pin.version.clone()).unwrap_or_default())
                {
                    continue;
                }
                if pin.hashed {
                    hashed.push(format!("{rel}:{}", pin.line));
                } else {
                    spans.push(pin.version);
                }
            }
            if !spans.is_empty() {
                edits.push((rel.clone(), text, spans));
            }
        }
        if !hashed.is_empty() {
            return Err((
                format!(
                    "{name}=={installed} is pinned with --hash options ({}); changing the version would break the hashes, \
                     which must be regenerated with the project's own tool (pip-compile --generate-hashes)",
                    hashed.join(", ")
                ),
                RefusalCategory::Repository,
            ));
        }
        if edits.is_empty() {
            return Err((
                format!("no requirements*.txt in the workspace pins {name}=={installed}"),
                RefusalCategory::Repository,
            ));
        }
        let mut changed = Vec::new();
        let mut failures = Vec::new();
        for (rel, text, spans) in edits {
            let mut out = String::with_capacity(text.len());
            let mut at = 0;
            for span in &spans {
                out.push_str(text.get(at..span.start).unwrap_or_default());
                out.push_str(target);
                at = span.end;
            }
            out.push_str(text.get(at..).unwrap_or_default());
            match std::fs::write(self.workspace.join(&rel), out) {
                Ok(()) => changed.push(rel),
                Err(e) => failures.push((format!("cannot write {rel}: {e}"), RefusalCategory::Tooling)),
            }
        }
        let done = changed.clone();
        self.finish(
            Attempts { changed, done, failures },
            format!("{name} {installed} → {target}"),
            format!("changed the pin {name}=={installed} to =={target}"),
        )
    }
}

/// A `name==version` pin in a requirements file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pin {
    name: String,
    /// Where the version is in the file.
    version: Span,
    /// Whether its logical line (continuations joined) has `--hash`.
    hashed: bool,
    /// 1-based line.
    line: usize,
}

/// The exact pins of a requirements file (pip's format: `\` continues a
/// line, `#` after a blank starts a comment, `;` starts markers). Pins
/// with more than one specifier (`==1.0,!=1.0.1`) or `===` are not pins
/// this remediator edits.
fn requirement_pins(text: &str) -> Vec<Pin> {
    let mut pins = Vec::new();
    let mut offset = 0;
    let mut line_no = 0;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(first) = lines.next() {
        line_no += 1;
        let start = offset;
        offset += first.len();
        let first_line = line_no;
        let mut logical = first.to_owned();
        let mut last = first;
        while last.trim_end().ends_with('\\') {
            let Some(next) = lines.next() else { break };
            line_no += 1;
            offset += next.len();
            logical.push_str(next);
            last = next;
        }
        if let Some((name, version)) = parse_pin(first) {
            let hashed = strip_comments(&logical).contains("--hash");
            pins.push(Pin {
                name,
                version: start + version.start..start + version.end,
                hashed,
                line: first_line,
            });
        }
    }
    pins
}

/// The text without `#` comments (a `#` at the start or after a blank).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| {
            let cut =
                l.char_indices().find(|(i, c)| *c == '#' && (*i == 0 || l[..*i].ends_with([' ', '\t'])));
            match cut {
                Some((i, _)) => &l[..i],
                None => l,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `name[extras] == version` at the start of a line: the name and the
/// version's range within the line.
fn parse_pin(line: &str) -> Option<(String, Span)> {
    let b = line.as_bytes();
    let mut i = 0;
    while b.get(i).is_some_and(|c| *c == b' ' || *c == b'\t') {
        i += 1;
    }
    let name_start = i;
    while b.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-')) {
        i += 1;
    }
    if i == name_start || !b.get(name_start).is_some_and(u8::is_ascii_alphanumeric) {
        return None;
    }
    let name = line.get(name_start..i)?.to_owned();
    let skip_blanks = |mut i: usize| {
        while b.get(i).is_some_and(|c| *c == b' ' || *c == b'\t') {
            i += 1;
        }
        i
    };
    i = skip_blanks(i);
    if b.get(i) == Some(&b'[') {
        i += line.get(i..)?.find(']')? + 1;
        i = skip_blanks(i);
    }
    if line.get(i..i + 2) != Some("==") || line.get(i + 2..i + 3) == Some("=") {
        return None;
    }
    i = skip_blanks(i + 2);
    let version_start = i;
    while b.get(i).is_some_and(|c| !matches!(c, b' ' | b'\t' | b';' | b'#' | b',' | b'\\' | b'\n' | b'\r')) {
        i += 1;
    }
    if i == version_start || b.get(skip_blanks(i)) == Some(&b',') {
        return None;
    }
    Some((name, version_start..i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirement_pins_keep_markers_and_see_hashes_across_continuations() {
        let text = "# comment==1.0\nfoo==1.0\nBar_Baz [x,y] == 2.0 ; python_version<\"3.8\" # note\nqux==3.0,!=3.0.1\nexact===4.0\nhashed==5.0 \\\n    --hash=sha256:abc\n    # via x\nspaced==6.0 # --hash=not-an-option\n";
        let pins = requirement_pins(text);
        let got: Vec<(&str, &str, bool, usize)> =
            pins.iter().map(|p| (p.name.as_str(), &text[p.version.clone()], p.hashed, p.line)).collect();
        assert_eq!(
            got,
            vec![
                ("foo", "1.0", false, 2),
                ("Bar_Baz", "2.0", false, 3),
                ("hashed", "5.0", true, 6),
                ("spaced", "6.0", false, 9)
            ]
        );
        assert_eq!(package_names::pypi("Bar_Baz"), package_names::pypi("bar.baz"));
        assert_eq!(package_names::pypi("importlib_metadata"), "importlib-metadata");
    }
}
