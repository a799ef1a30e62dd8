//! Where a companion's version is written, each as an exact location: the
//! file, the line and the byte range of the version token alone.
//!
//! The shapes, and the names each companion goes by in them, come from the
//! table (`variables`, `modules`, `actions`, …):
//! - Makefile assignments (`GOLANGCI_LINT_VERSION ?= v1.55.2`), Dockerfile
//!   `ARG`/`ENV` defaults and workflow `env:` entries of those variables;
//! - `module@version` (`go install …/golangci-lint@v1.55.2`) and the
//!   golangci-lint installer (`install.sh | sh -s -- -b DIR v1.55.2`) in
//!   Makefile lines, Dockerfile `RUN`s and workflow lines;
//! - the `version:` input of a workflow step that `uses:` the companion's
//!   action, and only of that step;
//! - `.tool-versions`, single-version dotfiles, pre-commit `rev:` under the
//!   companion's repository, and `FROM <companion image>:<version>…`;
//! - npm: `engines.npm` and `packageManager` in package.json, `npm@…` in
//!   `npm install` commands; pip and setuptools: requirement specifiers in
//!   requirements files, `[build-system] requires` and `pip install`s.
//!
//! Some pins are found but must not be edited as a token: a go.mod
//! `require` (go.sum would go stale), a hash-pinned requirement or a
//! `packageManager` with a hash (the hash would no longer match). Those
//! carry the reason, and the planner turns them into notes.

use std::ops::Range;

use patchpilot_model::package_names;
use serde::Deserialize;

use super::table::Companion;
use super::text::{self, Span};
use super::tree::{File, Kind};
use super::version::{Op, Version};
use crate::dockerfile::model::args_of;
use crate::dockerfile::{Dockerfile, Instruction};

/// A written version of a companion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// The companion's name.
    pub companion: String,
    /// The file, relative to the workspace.
    pub path: String,
    /// 1-based line of the token.
    pub line: usize,
    /// The version token's bytes.
    pub span: Span,
    /// The token, parsed.
    pub written: Version,
    /// How the token is used.
    pub op: Op,
    /// What kind of pin: "Makefile variable GOLANGCI_LINT_VERSION".
    pub origin: String,
    /// Why it may not be edited as a token, when it may not.
    pub blocked: Option<String>,
}

/// The pins of `companions` in `files`; what is found but cannot be read
/// as a version goes to `notes`.
pub fn detect(files: &[File], companions: &[&Companion], notes: &mut Vec<String>) -> Vec<Pin> {
    let mut out = Vec::new();
    for file in files {
        let mut found = Found { file, out: &mut out, notes };
        for c in companions {
            found.file_pins(c);
        }
    }
    out.sort_by(|a, b| (&a.path, a.span.start).cmp(&(&b.path, b.span.start)));
    out.dedup_by(|a, b| a.path == b.path && a.span == b.span);
    out
}

/// Where a piece of scanned text sits in its file.
#[derive(Clone, Copy)]
enum Place<'a> {
    /// At this byte offset.
    At(usize),
    /// In a Dockerfile instruction's logical line.
    Args(&'a Instruction),
}

impl Place<'_> {
    fn span(&self, r: Range<usize>) -> Span {
        match self {
            Place::At(at) => at + r.start..at + r.end,
            Place::Args(ins) => ins.span_of(r),
        }
    }
}

struct Found<'f, 'o> {
    file: &'f File,
    out: &'o mut Vec<Pin>,
    notes: &'o mut Vec<String>,
}

impl Found<'_, '_> {
    /// Records `token` at `span` when it is a version and the bytes there
    /// are exactly the token (a continuation inside it, or anything else
    /// unexpected, and it is left alone).
    fn push(&mut self, c: &Companion, span: Span, op: Op, origin: String, blocked: Option<String>) {
        let Some(token) = self.file.text.get(span.clone()) else { return };
        let Some(written) = Version::parse(token) else { return };
        self.out.push(Pin {
            companion: c.name.clone(),
            path: self.file.path.clone(),
            line: text::line_of(&self.file.text, span.start),
            span,
            written,
            op,
            origin,
            blocked,
        });
    }

    fn note(&mut self, offset: usize, what: String) {
        let line = text::line_of(&self.file.text, offset);
        self.notes.push(format!("{}:{line}: {what}", self.file.path));
    }

    fn file_pins(&mut self, c: &Companion) {
        let file = self.file;
        match file.kind {
            Kind::Makefile => {
                for line in text::lines(&file.text) {
                    if let Some((r, name)) = make_assignment(line.text, &c.variables) {
                        let origin = format!("Makefile variable {name}");
                        self.push(c, line.start + r.start..line.start + r.end, Op::Plain, origin, None);
                    }
                    self.inline(c, line.text, Place::At(line.start));
                }
            }
            Kind::Dockerfile => self.dockerfile(c),
            Kind::Workflow => self.workflow(c),
            Kind::PreCommit => self.precommit(c),
            Kind::ToolVersions => {
                for line in text::lines(&file.text) {
                    let code = line.text.split('#').next().unwrap_or_default();
                    let words = words(code);
                    let Some((_, name)) = words.first() else { continue };
                    if !c.tool_versions.iter().any(|n| n == name) {
                        continue;
                    }
                    if let Some((r, _)) = words.get(1) {
                        let span = line.start + r.start..line.start + r.end;
                        self.push(c, span, Op::Plain, format!(".tool-versions {name}"), None);
                    }
                }
            }
            Kind::VersionFile if c.version_files.contains(&file.name) => {
                let trimmed = file.text.trim();
                let start = file.text.len() - file.text.trim_start().len();
                self.push(c, start..start + trimmed.len(), Op::Plain, file.name.clone(), None);
            }
            Kind::GoMod => self.go_mod(c),
            Kind::PackageJson => self.package_json(c),
            Kind::Requirements => self.requirements(c),
            Kind::Pyproject => self.pyproject(c),
            _ => {}
        }
    }

    /// Pins inside a command line: `module@version`, the installer, `npm@…`
    /// and `pip install` specifiers.
    fn inline(&mut self, c: &Companion, text: &str, place: Place<'_>) {
        for module in &c.modules {
            let needle = format!("{module}@");
            for (i, _) in text.match_indices(&needle) {
                let after = i + needle.len();
                let token = text::version_run(&text[after..]).trim_end_matches('.');
                if !token.is_empty() {
                    let origin = format!("{module}@{token}");
                    self.push(c, place.span(after..after + token.len()), Op::Plain, origin, None);
                }
            }
        }
        if let Some(repo) = &c.installer
            && text.contains(repo.as_str())
            && text.contains("install.sh")
            && let Some(s) = text.find("sh -s")
            && let Some(dashes) = text[s..].find(" -- ").map(|d| s + d + 4)
        {
            // The installer's arguments run to the end of the command.
            let args = words(&text[dashes..]);
            let args = args.iter().take_while(|(_, w)| !matches!(*w, "&&" | "||" | ";" | "|" | ")"));
            if let Some((r, w)) = args.filter(|(_, w)| Version::parse(unquote(w).1).is_some()).last() {
                let (q, inner) = unquote(w);
                let r = dashes + r.start + q..dashes + r.start + q + inner.len();
                self.push(c, place.span(r), Op::Plain, format!("{repo} install.sh"), None);
            }
        }
        if let Some(package) = &c.npm_package
            && (text.contains("npm install") || text.contains("npm i ") || text.contains("npm add"))
        {
            let prefix = format!("{package}@");
            for (r, w) in words(text) {
                let (q, inner) = unquote(w);
                let Some(spec) = inner.strip_prefix(&prefix) else { continue };
                let at = r.start + q + prefix.len();
                self.npm_pin(
                    c,
                    spec,
                    |sr| place.span(at + sr.start..at + sr.end),
                    format!("npm install {package}@"),
                );
            }
        }
        if let Some(package) = &c.pypi_package
            && text.contains("pip")
            && text.contains("install")
        {
            for (r, w) in words(text) {
                let (q, inner) = unquote(w);
                let at = r.start + q;
                self.requirement(
                    c,
                    package,
                    inner,
                    |sr| place.span(at + sr.start..at + sr.end),
                    "pip install",
                    None,
                );
            }
        }
    }

    /// An npm spec (`9`, `^8.0.0`, `9.x`, `latest`) at `map`ped offsets.
    fn npm_pin(&mut self, c: &Companion, spec: &str, map: impl Fn(Range<usize>) -> Span, origin: String) {
        match npm_spec(spec) {
            Ok(Some((op, r))) => self.push(c, map(r), op, origin, None),
            Ok(None) => {}
            Err(why) => {
                let at = map(0..0).start;
                self.note(at, format!("{} `{spec}` left alone: {why}", c.name));
            }
        }
    }

    /// The clauses of a requirement for `package`, each a pin.
    fn requirement(
        &mut self,
        c: &Companion,
        package: &str,
        spec: &str,
        map: impl Fn(Range<usize>) -> Span,
        origin: &str,
        blocked: Option<String>,
    ) {
        match requirement_clauses(spec, package) {
            None => {}
            Some(Ok(clauses)) => {
                for (op, r) in clauses {
                    self.push(c, map(r), op, format!("{origin} {spec}"), blocked.clone());
                }
            }
            Some(Err(why)) => {
                let at = map(0..0).start;
                self.note(at, format!("{} `{spec}` left alone: {why}", c.name));
            }
        }
    }

    fn dockerfile(&mut self, c: &Companion) {
        let file = self.file;
        let Ok(df) = Dockerfile::parse(&file.text) else { return };
        for (i, ins) in df.instructions().iter().enumerate() {
            match ins.keyword.as_str() {
                "ARG" => {
                    for arg in args_of(&df, i, ins) {
                        let Some(span) = arg.default_span else { continue };
                        if is_variable(c, &arg.name) {
                            self.push(c, span, Op::Plain, format!("Dockerfile ARG {}", arg.name), None);
                        }
                    }
                }
                "ENV" => {
                    let words = ins.words(df.escape());
                    let pairs: Vec<(String, Range<usize>)> =
                        if words.len() == 2 && !words[0].text.contains('=') {
                            // The legacy `ENV name value` form.
                            let (q, inner) = unquote(&words[1].text);
                            let start = words[1].range.start + q;
                            vec![(words[0].text.clone(), start..start + inner.len())]
                        } else {
                            words
                                .iter()
                                .filter_map(|w| {
                                    let (name, value) = w.text.split_once('=')?;
                                    let (q, inner) = unquote(value);
                                    let start = w.range.start + name.len() + 1 + q;
                                    Some((name.to_owned(), start..start + inner.len()))
                                })
                                .collect()
                        };
                    for (name, r) in pairs {
                        if is_variable(c, &name) {
                            self.push(c, ins.span_of(r), Op::Plain, format!("Dockerfile ENV {name}"), None);
                        }
                    }
                }
                "RUN" => self.inline(c, &ins.args, Place::Args(ins)),
                _ => {}
            }
        }
        for stage in df.stages() {
            let word = &stage.image;
            // Only a literal reference, written on one line, is edited.
            if word.text.contains('$') || word.span.len() != word.text.len() {
                continue;
            }
            let image = crate::dockerfile::ImageRef::parse(&word.text);
            let Some(tag) = &image.tag else { continue };
            let repo = image.repository.as_str();
            if !c.images.iter().any(|i| repo == i || repo.ends_with(&format!("/{i}"))) {
                continue;
            }
            let token = text::version_run(tag).trim_end_matches('.');
            let start = word.span.start + repo.len() + 1;
            self.push(c, start..start + token.len(), Op::Plain, format!("FROM {repo}:{tag}"), None);
        }
    }

    fn workflow(&mut self, c: &Companion) {
        let file = self.file;
        let doc = text::yaml_lines(&file.text);
        for (i, l) in doc.iter().enumerate() {
            self.inline(c, l.line.text, Place::At(l.line.start));
            let Some((key, col)) = l.key else { continue };
            if is_variable(c, key)
                && let Some((_, span)) = &l.value
            {
                self.push(c, span.clone(), Op::Plain, format!("workflow env {key}"), None);
            }
            if key != "uses" {
                continue;
            }
            let Some((uses, _)) = &l.value else { continue };
            let action = uses.split('@').next().unwrap_or_default();
            if !c.actions.iter().any(|a| a == action) {
                continue;
            }
            // The `version:` input of this step only: `with:` among the
            // step's own keys, `version:` directly under it.
            let Some(step) = text::item_range(&doc, i, col) else { continue };
            let Some(with) = step.clone().find(|&j| doc[j].key == Some(("with", col))) else { continue };
            let inputs = text::children(&doc, with);
            let first_col = doc[inputs.clone()].iter().find_map(|x| x.indent);
            let version = inputs
                .into_iter()
                .find(|&j| doc[j].key.is_some_and(|(k, kc)| k == "version" && Some(kc) == first_col));
            if let Some((_, span)) = version.and_then(|j| doc[j].value.clone()) {
                self.push(c, span, Op::Plain, format!("{action} version input"), None);
            }
        }
    }

    fn precommit(&mut self, c: &Companion) {
        let doc = text::yaml_lines(&self.file.text);
        let norm = |s: &str| s.trim_end_matches('/').trim_end_matches(".git").to_owned();
        for (i, l) in doc.iter().enumerate() {
            let (Some(("repo", col)), Some((repo, _))) = (l.key, &l.value) else { continue };
            if !c.precommit_repos.iter().any(|r| norm(r) == norm(repo)) {
                continue;
            }
            let Some(item) = text::item_range(&doc, i, col) else { continue };
            if let Some(span) = item
                .into_iter()
                .find(|&j| doc[j].key == Some(("rev", col)))
                .and_then(|j| doc[j].value.clone())
                .map(|v| v.1)
            {
                self.push(c, span, Op::Plain, format!("pre-commit rev of {repo}"), None);
            }
        }
    }

    fn go_mod(&mut self, c: &Companion) {
        let Some(module) = &c.go_mod_require else { return };
        for line in text::lines(&self.file.text) {
            let code = line.text.split("//").next().unwrap_or_default();
            let ws = words(code);
            let ws: Vec<_> =
                if ws.first().is_some_and(|(_, w)| *w == "require") { ws[1..].to_vec() } else { ws };
            let [(_, m), (r, _), ..] = ws.as_slice() else { continue };
            if m != module {
                continue;
            }
            let blocked = format!(
                "go.mod requires {module} (the tools pattern): bump it with `go get {module}@VERSION` so that go.sum follows; a token edit would leave go.sum stale"
            );
            let span = line.start + r.start..line.start + r.end;
            self.push(c, span, Op::Plain, format!("go.mod require {module}"), Some(blocked));
        }
    }

    fn package_json(&mut self, c: &Companion) {
        let Some(package) = &c.npm_package else { return };
        let Some(strings) = text::json_strings(&self.file.text) else {
            self.note(0, "not read as JSON".into());
            return;
        };
        for s in strings {
            let at = s.span.start;
            if s.path == ["engines", package.as_str()] {
                self.npm_pin(
                    c,
                    &s.raw,
                    |r| at + r.start..at + r.end,
                    format!("package.json engines.{package}"),
                );
            } else if s.path == ["packageManager"]
                && let Some(spec) = s.raw.strip_prefix(&format!("{package}@"))
            {
                let at = at + package.len() + 1;
                let (version, blocked) = match spec.split_once('+') {
                    Some((v, _)) => (v, Some("packageManager carries a hash of the release (`+sha…`): a bump needs the new release's hash".to_owned())),
                    None => (spec, None),
                };
                self.push(
                    c,
                    at..at + version.len(),
                    Op::Plain,
                    "package.json packageManager".into(),
                    blocked,
                );
            }
        }
    }

    fn requirements(&mut self, c: &Companion) {
        let Some(package) = &c.pypi_package else { return };
        for line in text::lines(&self.file.text) {
            let code = match line.text.find(" #") {
                Some(i) => &line.text[..i],
                None => line.text,
            };
            let lead = code.len() - code.trim_start().len();
            let spec = code.trim();
            if spec.is_empty() || spec.starts_with('#') || spec.starts_with('-') {
                continue;
            }
            let blocked = spec.contains("--hash").then(|| {
                "the requirement is hash-pinned (--hash): a bump needs the new release's hashes".to_owned()
            });
            let at = line.start + lead;
            self.requirement(c, package, spec, |r| at + r.start..at + r.end, "requirement", blocked);
        }
    }

    fn pyproject(&mut self, c: &Companion) {
        let Some(package) = &c.pypi_package else { return };
        #[derive(Deserialize)]
        struct Pyproject {
            #[serde(rename = "build-system")]
            build_system: Option<BuildSystem>,
        }
        #[derive(Deserialize)]
        struct BuildSystem {
            requires: Option<Vec<toml::Spanned<String>>>,
        }
        let text = &self.file.text;
        let parsed: Pyproject = match toml::from_str(text) {
            Ok(p) => p,
            Err(e) => {
                self.note(0, format!("not read as TOML: {}", e.message()));
                return;
            }
        };
        for req in parsed.build_system.and_then(|b| b.requires).unwrap_or_default() {
            let span = req.span();
            let value = req.get_ref();
            // Only a plain one-line string: its bytes are its value.
            let inner = span.start + 1..span.end.saturating_sub(1);
            if text.get(inner.clone()) != Some(value.as_str()) {
                continue;
            }
            let at = inner.start;
            self.requirement(
                c,
                package,
                value,
                |r| at + r.start..at + r.end,
                "[build-system] requires",
                None,
            );
        }
    }
}

/// Whether `name` is one of the companion's version variables.
fn is_variable(c: &Companion, name: &str) -> bool {
    c.variables.iter().any(|v| v.eq_ignore_ascii_case(name))
}

/// `NAME ?= value` (also `:=`, `::=`, `+=`, `=`, with `export`/`override`)
/// for one of `names`: the value's range in `line` and the name.
fn make_assignment<'a>(line: &'a str, names: &[String]) -> Option<(Range<usize>, &'a str)> {
    let mut rest = line.trim_start();
    for word in ["export ", "override "] {
        rest = rest.strip_prefix(word).map(str::trim_start).unwrap_or(rest);
    }
    let name_len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
    let name = &rest[..name_len];
    if name.is_empty() || !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
        return None;
    }
    let after = rest[name_len..].trim_start();
    let op = [":::=", "::=", ":=", "?=", "+=", "="].into_iter().find(|op| after.starts_with(op))?;
    if after[op.len()..].starts_with('=') {
        return None;
    }
    let value = after[op.len()..].trim_start();
    let value = value.split(['#', ' ', '\t']).next().unwrap_or_default();
    let (q, inner) = unquote(value);
    // `value` is a slice of `line`: its offset is the distance between them.
    let start = value.as_ptr() as usize - line.as_ptr() as usize + q;
    Some((start..start + inner.len(), name))
}

/// Whitespace-separated words and their ranges.
fn words(text: &str) -> Vec<(Range<usize>, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, ch) in text.char_indices() {
        match (ch.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((s..i, &text[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s..text.len(), &text[s..]));
    }
    out
}

/// A word without one pair of surrounding quotes: (quote length, inner).
fn unquote(word: &str) -> (usize, &str) {
    for q in ['"', '\''] {
        if word.len() >= 2 && word.starts_with(q) && word.ends_with(q) {
            return (1, &word[1..word.len() - 1]);
        }
    }
    (0, word)
}

/// An npm version spec: one comparator and its version token's range;
/// `None` for a tag (`latest`, `*`); an error for what this planner does
/// not edit (a compound range).
fn npm_spec(spec: &str) -> Result<Option<(Op, Range<usize>)>, String> {
    let trimmed = spec.trim();
    if trimmed.contains("||") || trimmed.contains(" - ") || trimmed.contains(char::is_whitespace) {
        return Err("a compound range".into());
    }
    let lead = spec.len() - spec.trim_start().len();
    let ops = [
        (">=", Op::Greater),
        ("<=", Op::LessEq),
        (">", Op::Greater),
        ("<", Op::Less),
        ("^", Op::Caret),
        ("~", Op::Tilde),
        ("=", Op::Exact),
    ];
    let (op, op_len) = ops
        .iter()
        .find(|(p, _)| trimmed.starts_with(p))
        .map(|(p, o)| (*o, p.len()))
        .unwrap_or((Op::Plain, 0));
    let body = &trimmed[op_len..];
    let token = text::version_run(body).trim_end_matches('.');
    if token.is_empty() || Version::parse(token).is_none() {
        return Ok(None);
    }
    // What follows may only be x-range wildcards (`9.x`, `9.*`).
    let rest = &body[token.len()..];
    if !rest.split('.').skip(1).all(|p| matches!(p, "x" | "X" | "*"))
        || !(rest.is_empty() || rest.starts_with('.'))
    {
        return Ok(None);
    }
    let at = lead + op_len;
    Ok(Some((op, at..at + token.len())))
}

/// Specifier clauses: each one's operator and version range.
type Clauses = Vec<(Op, Range<usize>)>;

/// The specifier clauses of `spec` when it is a requirement for `package`
/// (PEP 508 names compare normalized): each clause's operator and version
/// range. `None` when it names another package.
fn requirement_clauses(spec: &str, package: &str) -> Option<Result<Clauses, String>> {
    let name_len =
        spec.find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c))).unwrap_or(spec.len());
    if name_len == 0 || package_names::pypi(&spec[..name_len]) != package_names::pypi(package) {
        return None;
    }
    let mut at = name_len;
    let rest = &spec[at..];
    at += rest.len() - rest.trim_start().len();
    if spec[at..].starts_with('[') {
        at += spec[at..].find(']')? + 1;
    }
    let end = spec[at..].find(';').map(|i| at + i).unwrap_or(spec.len());
    if spec[at..end].trim_start().starts_with('@') {
        return None;
    }
    let mut clauses = Vec::new();
    let mut clause_at = at;
    for clause in spec[at..end].split(',') {
        let lead = clause.len() - clause.trim_start_matches([' ', '(']).len();
        let body = &clause[lead..];
        let ops = [
            ("===", Op::Exact),
            ("==", Op::Exact),
            ("~=", Op::Compatible),
            ("!=", Op::NotEq),
            ("<=", Op::LessEq),
            (">=", Op::Greater),
            ("<", Op::Less),
            (">", Op::Greater),
        ];
        if let Some((p, op)) = ops.iter().find(|(p, _)| body.starts_with(p)) {
            let after = &body[p.len()..];
            let gap = after.len() - after.trim_start().len();
            let version = after[gap..].split([' ', ')', '\t']).next().unwrap_or_default();
            if version.ends_with(".*") {
                return Some(Err(format!("`{}` is a wildcard", clause.trim())));
            }
            if Version::parse(version).is_none() {
                return Some(Err(format!("`{}` is not a plain release number", clause.trim())));
            }
            let start = clause_at + lead + p.len() + gap;
            clauses.push((*op, start..start + version.len()));
        } else if !body.trim().is_empty() {
            return Some(Err(format!("`{}` is not a specifier this planner reads", clause.trim())));
        }
        clause_at += clause.len() + 1;
    }
    Some(Ok(clauses))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::companion::table::Table;

    fn file(path: &str, text: &str) -> File {
        File::for_test(path, text)
    }

    /// (path, line, token, op) of every pin of `companion` in the file.
    fn pins(path: &str, text: &str, companion: &str) -> Vec<(usize, String, Op)> {
        let table = Table::embedded().expect("table");
        let c = table.companion(companion).expect("companion");
        let f = file(path, text);
        let mut notes = Vec::new();
        detect(std::slice::from_ref(&f), &[c], &mut notes)
            .into_iter()
            .map(|p| (p.line, text[p.span].to_owned(), p.op))
            .collect()
    }

    fn tokens(found: &[(usize, String, Op)]) -> Vec<&str> {
        found.iter().map(|(_, t, _)| t.as_str()).collect()
    }

    #[test]
    fn makefile_pins() {
        let mk = "GOLANGCI_LINT_VERSION ?= v1.55.2\nexport GOLANGCI_VERSION := 1.55.2 # pinned\nOTHER_VERSION = v9.9.9\nGOLANGCI_LINT_VER != echo v1.0.0\n\nlint:\n\tgo install github.com/golangci/golangci-lint/cmd/golangci-lint@v1.54.1\n\tcurl -sSfL https://raw.githubusercontent.com/golangci/golangci-lint/master/install.sh | sh -s -- -b $(GOPATH)/bin v1.53.3\n\tgo install github.com/golangci/golangci-lint/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)\n";
        let found = pins("Makefile", mk, "golangci-lint");
        assert_eq!(tokens(&found), vec!["v1.55.2", "1.55.2", "v1.54.1", "v1.53.3"], "{found:?}");
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), vec![1, 2, 7, 8]);
    }

    #[test]
    fn make_assignment_forms() {
        let names = vec!["V".to_owned()];
        for (line, value) in [
            ("V ?= v1.2.3", "v1.2.3"),
            ("V:=1.2", "1.2"),
            ("  override V = \"v3\"", "v3"),
            ("V ::= 4 # c", "4"),
        ] {
            let (r, _) = make_assignment(line, &names).expect(line);
            assert_eq!(&line[r], value, "{line}");
        }
        assert!(make_assignment("V == 1", &names).is_none());
        assert!(make_assignment("VV = 1", &names).is_none());
    }

    #[test]
    fn workflow_version_input_of_the_lint_step_only() {
        let wf = "env:\n  GOLANGCI_LINT_VERSION: v1.52.0\njobs:\n  lint:\n    steps:\n      - uses: actions/setup-go@v5\n        with:\n          go-version: '1.22'\n          version: v9.9.9\n      - name: golangci-lint\n        uses: golangci/golangci-lint-action@v6\n        with:\n          version: \"v1.55.2\"\n          args: --timeout 5m\n      - uses: other/action@v1\n        with:\n          version: v8.8.8\n      - run: go install github.com/golangci/golangci-lint/cmd/golangci-lint@v1.54.0\n";
        let found = pins(".github/workflows/lint.yml", wf, "golangci-lint");
        assert_eq!(tokens(&found), vec!["v1.52.0", "v1.55.2", "v1.54.0"], "{found:?}");
    }

    #[test]
    fn dockerfile_pins() {
        let df = "ARG GOLANGCI_LINT_VERSION=v1.55.2\nFROM golangci/golangci-lint:v1.54.2-alpine AS lint\nFROM golang:1.22\nENV GOLANGCI_VERSION=\"1.53.0\"\nRUN go install \\\n    github.com/golangci/golangci-lint/cmd/golangci-lint@v1.52.2 && \\\n    go install honnef.co/go/tools/cmd/staticcheck@2023.1.6\n";
        let found = pins("Dockerfile", df, "golangci-lint");
        assert_eq!(tokens(&found), vec!["v1.55.2", "v1.54.2", "1.53.0", "v1.52.2"], "{found:?}");
        assert_eq!(found[3].0, 6);
        assert_eq!(tokens(&pins("Dockerfile", df, "staticcheck")), vec!["2023.1.6"]);
    }

    #[test]
    fn dotfiles_precommit_and_gomod() {
        assert_eq!(tokens(&pins(".golangci-lint-version", "v1.55.2\n", "golangci-lint")), vec!["v1.55.2"]);
        assert_eq!(
            tokens(&pins(".tool-versions", "golang 1.22.5\ngolangci-lint 1.55.2\n", "golangci-lint")),
            vec!["1.55.2"]
        );
        let pc = "repos:\n  - repo: https://github.com/pre-commit/pre-commit-hooks\n    rev: v4.5.0\n  - repo: https://github.com/golangci/golangci-lint\n    rev: v1.55.2\n    hooks:\n      - id: golangci-lint\n";
        assert_eq!(tokens(&pins(".pre-commit-config.yaml", pc, "golangci-lint")), vec!["v1.55.2"]);
        let table = Table::embedded().expect("table");
        let c = table.companion("golangci-lint").expect("c");
        let f = file("go.mod", "module x\n\nrequire (\n\tgithub.com/golangci/golangci-lint v1.55.2\n)\n");
        let found = detect(std::slice::from_ref(&f), &[c], &mut Vec::new());
        assert_eq!(found.len(), 1);
        assert!(found[0].blocked.as_deref().is_some_and(|b| b.contains("go.sum")));
    }

    #[test]
    fn npm_pins() {
        let pj = "{\n  \"engines\": {\"node\": \">=18\", \"npm\": \"^8.0.0\"},\n  \"packageManager\": \"npm@9.8.1\"\n}\n";
        let found = pins("package.json", pj, "npm");
        assert_eq!(tokens(&found), vec!["8.0.0", "9.8.1"]);
        assert_eq!((found[0].2, found[1].2), (Op::Caret, Op::Plain));
        let df = "FROM node:22\nRUN npm install -g npm@9 && npm i -g npm@latest\nRUN npm install -g \"npm@9.8.x\"\n";
        let found = pins("Dockerfile", df, "npm");
        assert_eq!(tokens(&found), vec!["9", "9.8"]);
        assert_eq!(npm_spec(">=8 <10"), Err("a compound range".into()));
        assert_eq!(npm_spec("latest"), Ok(None));
        assert_eq!(npm_spec("9.x"), Ok(Some((Op::Plain, 0..1))));
        assert_eq!(npm_spec("~9.6.0"), Ok(Some((Op::Tilde, 1..6))));
    }

    #[test]
    fn python_pins() {
        let req = "# tools\npip==22.0 ; python_version < \"3.13\"\nsetuptools>=40,<66\nrequests==2.31.0\nsetuptools-scm==8.0\n-r other.txt\n";
        let found = pins("requirements-dev.txt", req, "setuptools");
        assert_eq!(
            found.iter().map(|f| (f.1.as_str(), f.2)).collect::<Vec<_>>(),
            vec![("40", Op::Greater), ("66", Op::Less)]
        );
        assert_eq!(tokens(&pins("requirements-dev.txt", req, "pip")), vec!["22.0"]);
        let pyproject = "[build-system]\nrequires = [\"setuptools<66\", 'wheel']\nbuild-backend = \"setuptools.build_meta\"\n";
        assert_eq!(tokens(&pins("pyproject.toml", pyproject, "setuptools")), vec!["66"]);
        let df = "FROM python:3.12\nRUN python -m pip install --upgrade pip==22.0.4 'setuptools<66.0'\n";
        assert_eq!(tokens(&pins("Dockerfile", df, "pip")), vec!["22.0.4"]);
        assert_eq!(tokens(&pins("Dockerfile", df, "setuptools")), vec!["66.0"]);
        assert!(matches!(requirement_clauses("pip==22.*", "pip"), Some(Err(_))));
        assert_eq!(requirement_clauses("pipx==1.0", "pip"), None);
        assert_eq!(requirement_clauses("Setup_Tools==1", "setup-tools"), Some(Ok(vec![(Op::Exact, 13..14)])));
    }
}
