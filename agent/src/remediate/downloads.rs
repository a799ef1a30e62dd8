//! Versioned downloads: binaries a Dockerfile fetches with `curl`, `wget` or
//! `ADD <url>`, whose version is an `ARG` or `ENV` value spliced into the
//! URL (`ARG HELM_VERSION=3.14.2` … `get.helm.sh/helm-v${HELM_VERSION}-…`).
//!
//! A finding belongs to a binary when its `package.path` is the binary's
//! path in the image (the scanner reports the Go modules linked into a
//! binary, from its build info, at the binary's path). The controller puts a
//! release index in the run's context (`.patchpilot/releases.json`): for
//! each binary, its releases and the module versions each one contains. The
//! remediator finds the version variable, takes the release whose version is
//! its value as the current one, and picks the smallest later release in
//! which every targeted module is at or above the finding's smallest fixed
//! version. The newest release is never the goal: the smallest bump carries
//! the least unrelated change.
//!
//! The rules for what a variable is come from the Dockerfile reference:
//! `ARG name[=default]`, `ENV name=value …` and the legacy `ENV name value`,
//! values optionally quoted, `$name`/`${name}` substitution (also inside
//! other `ARG`/`ENV` values, which is how `ENV URL=…/${VERSION}/…` feeds a
//! later `curl $URL`). Only the value token of the declaration changes; its
//! quotes and its `v` prefix (or its absence) stay as written.
//!
//! A bump is refused rather than proposed when the download is checked
//! against a digest written into the Dockerfile (`ADD --checksum=`, or a
//! `sha256sum -c` in the same stage with a literal digest or a variable
//! holding one): the release index carries no digests, so the bump could
//! only fail the build.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use patchpilot_model::Finding;
use patchpilot_scanner::version::Scheme;

use super::{FindingRef, Fix, Refusal, RefusalCategory, Step, smallest_fix};
use crate::dockerfile::model::{args_of, expand};
use crate::dockerfile::{Dockerfile, Edit, Instruction, Span};

pub use patchpilot_model::{Binary, Release, ReleaseIndex};

/// An `ARG` or `ENV` declaration of one variable.
#[derive(Debug, Clone)]
struct Declaration {
    name: String,
    value: Option<String>,
    /// Where the value is in the file (inside its quotes).
    value_span: Option<Span>,
    keyword: &'static str,
    /// 1-based line of the value (or of the instruction).
    line: usize,
}

/// One URL a `RUN curl`/`wget` or an `ADD` fetches.
#[derive(Debug, Clone)]
struct Download {
    /// Index of its instruction.
    instruction: usize,
    /// The word as written.
    text: String,
    /// Fully expanded with the file's `ARG`/`ENV` values.
    expanded: String,
    /// Every variable the word uses, directly or through other values.
    vars: BTreeSet<String>,
}

/// Proposes one version bump per binary whose findings a later release fixes.
///
/// Findings whose `package.path` is no binary's `path` are not this
/// remediator's and are neither fixed nor refused. The steps' `files` are
/// left empty: the caller knows which Dockerfile `df` was read from.
pub fn plan(df: &Dockerfile, findings: &[Finding], releases: &ReleaseIndex) -> (Vec<Step>, Vec<Refusal>) {
    let mut steps = Vec::new();
    let mut refusals = Vec::new();
    let declarations = declarations(df);
    let downloads = downloads(df, &declarations);
    for binary in &releases.binaries {
        let own: Vec<&Finding> =
            findings.iter().filter(|f| same_path(&f.package.path, &binary.path)).collect();
        if own.is_empty() {
            continue;
        }
        match plan_binary(df, binary, &own, &declarations, &downloads) {
            Ok((step, refused)) => {
                steps.extend(step);
                refusals.extend(refused);
            }
            Err((reason, category)) => refusals.extend(own.iter().map(|f| Refusal {
                finding: FindingRef::from(*f),
                reason: reason.clone(),
                category,
            })),
        }
    }
    (steps, refusals)
}

type Refused = (String, RefusalCategory);

fn plan_binary(
    df: &Dockerfile,
    binary: &Binary,
    findings: &[&Finding],
    declarations: &[Declaration],
    downloads: &[Download],
) -> Result<(Option<Step>, Vec<Refusal>), Refused> {
    let name = &binary.name;
    let variable = version_variable(binary, declarations, downloads)?;
    let current_value = variable.value.clone();
    let current =
        binary.releases.iter().find(|r| strip_v(&r.version) == strip_v(&current_value)).ok_or_else(|| {
            (format!("{name}: no release {current_value} in the release index"), RefusalCategory::Repository)
        })?;
    semver(&current.version).map_err(|e| {
        (
            format!("{name}: current release `{}` is not a semantic version: {e}", current.version),
            RefusalCategory::Repository,
        )
    })?;
    let current_is_pre = is_pre_release(&current.version);
    // Later releases, smallest first. A stable image is not moved onto a
    // pre-release; one already on a pre-release may move to another.
    let mut later: Vec<&Release> = binary
        .releases
        .iter()
        .filter(|r| semver_cmp(&r.version, &current.version) == Some(Ordering::Greater))
        .filter(|r| current_is_pre || !is_pre_release(&r.version))
        .collect();
    later.sort_by(|a, b| semver_cmp(&a.version, &b.version).unwrap_or(Ordering::Equal));

    let mut refusals = Vec::new();
    let mut targeted: Vec<(&Finding, Fix)> = Vec::new();
    for &f in findings {
        match smallest_fix(f) {
            Ok(fix) => targeted.push((f, fix)),
            Err(r) => refusals.push(r),
        }
    }
    let fixes = |release: &Release, f: &Finding, fix: &Fix| -> bool {
        release
            .modules
            .get(&f.package.name)
            .is_some_and(|have| module_at_least(fix.scheme, have, &fix.version))
    };
    let (fixable, unfixable): (Vec<_>, Vec<_>) =
        targeted.into_iter().partition(|(f, fix)| later.iter().any(|r| fixes(r, f, fix)));
    for (f, fix) in unfixable {
        let newest = later.last().map(|r| {
            let have = r.modules.get(&f.package.name).map(String::as_str).unwrap_or("no such module");
            format!(" (newest listed: {} with {have})", r.version)
        });
        refusals.push(Refusal {
            finding: FindingRef::from(f),
            reason: format!(
                "no release of {name} after {} in the release index has {} at or above {}{}",
                current.version,
                f.package.name,
                fix.version,
                newest.unwrap_or_default()
            ),
            category: RefusalCategory::Policy,
        });
    }
    if fixable.is_empty() {
        return Ok((None, refusals));
    }
    // The smallest release fixing everything fixable; when releases
    // disagree (a fix in one line, a regression in the next), the smallest
    // one fixing the most.
    let count = |r: &Release| fixable.iter().filter(|(f, fix)| fixes(r, f, fix)).count();
    let chosen = later
        .iter()
        .find(|r| count(r) == fixable.len())
        .or_else(|| {
            let best = later.iter().map(|r| count(r)).max().unwrap_or(0);
            later.iter().find(|r| count(r) == best)
        })
        .copied()
        .ok_or_else(|| (format!("{name}: no later release"), RefusalCategory::Policy))?;
    let (fixed, left): (Vec<_>, Vec<_>) = fixable.into_iter().partition(|(f, fix)| fixes(chosen, f, fix));
    for (f, fix) in left {
        refusals.push(Refusal {
            finding: FindingRef::from(f),
            reason: format!(
                "{name} {} fixes the other findings but has {} {} below {}; no single release fixes them all",
                chosen.version,
                f.package.name,
                chosen.modules.get(&f.package.name).map(String::as_str).unwrap_or("(absent)"),
                fix.version
            ),
            category: RefusalCategory::Policy,
        });
    }

    let new_value = restyle(&chosen.version, &current_value);
    if let Some(pin) = pinned_checksum(df, declarations, variable.instruction) {
        let reason = format!(
            "{name} {current_value} → {new_value} would fix them, but the download is checked against {pin}, \
             and the release index has no checksum for {new_value}: the bump would fail the build"
        );
        refusals.extend(fixed.iter().map(|(f, _)| Refusal {
            finding: FindingRef::from(*f),
            reason: reason.clone(),
            category: RefusalCategory::Repository,
        }));
        return Ok((None, refusals));
    }
    let evidence: Vec<String> = fixed
        .iter()
        .map(|(f, fix)| {
            format!(
                "{} {} ≥ {} ({})",
                f.package.name,
                chosen.modules.get(&f.package.name).map(String::as_str).unwrap_or_default(),
                fix.version,
                f.id
            )
        })
        .collect();
    let reason = format!(
        "{name} is downloaded with ${{{}}} ({} at line {}) in `{}`; {} is the smallest release after {} \
         in the release index whose modules fix the findings: {}",
        variable.name,
        variable.keyword,
        variable.line,
        variable.download,
        chosen.version,
        current.version,
        evidence.join(", ")
    );
    let edits: Vec<Edit> = variable
        .spans
        .iter()
        .map(|span| Edit { span: span.clone(), replacement: new_value.clone(), reason: reason.clone() })
        .collect();
    // The edit must land exactly on the old value; anything else means the
    // spans and the text disagree, and a bump would corrupt the file.
    if variable.spans.iter().any(|s| df.text().get(s.clone()) != Some(current_value.as_str())) {
        return Err((
            format!("{name}: the value of {} is not where the parser put it", variable.name),
            RefusalCategory::Repository,
        ));
    }
    let mut fixes_refs: Vec<FindingRef> = fixed.iter().map(|(f, _)| FindingRef::from(*f)).collect();
    fixes_refs.sort();
    fixes_refs.dedup();
    let step = Step {
        remediator: "download".to_owned(),
        summary: format!("{name} {current_value} → {new_value}"),
        reason,
        fixes: fixes_refs,
        edits,
        files: Vec::new(),
    };
    Ok((Some(step), refusals))
}

/// The variable holding a binary's version.
struct VersionVariable {
    name: String,
    value: String,
    keyword: &'static str,
    line: usize,
    /// Every declaration's value span carrying the current value.
    spans: Vec<Span>,
    /// A download word using it, for the reason.
    download: String,
    /// The instruction of that download.
    instruction: usize,
}

fn version_variable(
    binary: &Binary,
    declarations: &[Declaration],
    downloads: &[Download],
) -> Result<VersionVariable, Refused> {
    let name = &binary.name;
    let lower = name.to_ascii_lowercase();
    let upper_key: String =
        name.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_uppercase();
    let names_binary = |var: &str, d: &Download| {
        d.expanded.to_ascii_lowercase().contains(&lower)
            || (!upper_key.is_empty() && var.to_ascii_uppercase().replace('_', "").contains(&upper_key))
    };
    let is_release = |value: &str| binary.releases.iter().any(|r| strip_v(&r.version) == strip_v(value));
    // (names the binary, variable) → a download using it.
    let mut candidates: BTreeMap<(bool, String), &Download> = BTreeMap::new();
    for d in downloads {
        for var in &d.vars {
            if declarations.iter().any(|x| &x.name == var && x.value.as_deref().is_some_and(is_release)) {
                candidates.entry((names_binary(var, d), var.clone())).or_insert(d);
            }
        }
    }
    let best = candidates.keys().map(|(named, _)| *named).max();
    let chosen: Vec<(&String, &&Download)> =
        candidates.iter().filter(|((named, _), _)| Some(*named) == best).map(|((_, v), d)| (v, d)).collect();
    let (var, download) = match chosen.as_slice() {
        [one] => *one,
        [] => return Err(no_variable(binary, declarations, downloads, &names_binary)),
        many => {
            let names: Vec<&str> = many.iter().map(|(v, _)| v.as_str()).collect();
            return Err((
                format!(
                    "{name}: several variables in download URLs hold one of its release versions: {}",
                    names.join(", ")
                ),
                RefusalCategory::Repository,
            ));
        }
    };
    // The last declaration with a release value is the one in force where
    // the final image is built; every declaration with that same value is
    // the same pin and moves with it.
    let in_force = declarations
        .iter()
        .rev()
        .find(|x| &x.name == var && x.value.as_deref().is_some_and(is_release))
        .ok_or_else(|| (format!("{name}: {var} has no default"), RefusalCategory::Repository))?;
    let value = in_force.value.clone().unwrap_or_default();
    let spans = declarations
        .iter()
        .filter(|x| &x.name == var && x.value.as_deref() == Some(value.as_str()))
        .filter_map(|x| x.value_span.clone())
        .collect();
    Ok(VersionVariable {
        name: var.clone(),
        value,
        keyword: in_force.keyword,
        line: in_force.line,
        spans,
        download: download.text.clone(),
        instruction: download.instruction,
    })
}

/// Why no version variable was found, as precisely as the file allows: a
/// variable of the binary's download without a default (the version comes
/// from `--build-arg`), then one whose value is no release in the index.
fn no_variable(
    binary: &Binary,
    declarations: &[Declaration],
    downloads: &[Download],
    names_binary: &dyn Fn(&str, &Download) -> bool,
) -> Refused {
    let name = &binary.name;
    let related: Vec<(&String, &Download)> = downloads
        .iter()
        .flat_map(|d| d.vars.iter().map(move |v| (v, d)))
        .filter(|(v, d)| names_binary(v, d))
        .collect();
    for (var, d) in &related {
        if declarations.iter().filter(|x| &x.name == *var).all(|x| x.value.is_none()) {
            return (
                format!(
                    "{name} is downloaded with ${{{var}}} in `{}`, but {var} has no default in the Dockerfile \
                     (it comes from --build-arg); there is no value to bump",
                    d.text
                ),
                RefusalCategory::Repository,
            );
        }
    }
    for (var, d) in &related {
        let value = declarations.iter().rev().filter(|x| &x.name == *var).find_map(|x| x.value.as_deref());
        if let Some(value) = value
            && strip_v(value).starts_with(|c: char| c.is_ascii_digit())
        {
            return (
                format!(
                    "{name} is downloaded with ${{{var}}} = `{value}` in `{}`, but the release index has no release {value}",
                    d.text
                ),
                RefusalCategory::Repository,
            );
        }
    }
    (
        format!("no ARG or ENV version of {name} feeds a curl, wget or ADD download URL in the Dockerfile"),
        RefusalCategory::Repository,
    )
}

/// Every `ARG` and `ENV` declaration, in file order.
fn declarations(df: &Dockerfile) -> Vec<Declaration> {
    let text = df.text();
    let line_of = |offset: usize| text.get(..offset).map(|t| t.matches('\n').count() + 1).unwrap_or(1);
    let mut out = Vec::new();
    for (i, ins) in df.instructions().iter().enumerate() {
        match ins.keyword.as_str() {
            "ARG" => out.extend(args_of(df, i, ins).into_iter().map(|a| Declaration {
                line: line_of(a.default_span.as_ref().map(|s| s.start).unwrap_or(ins.span.start)),
                name: a.name,
                value: a.default,
                value_span: a.default_span,
                keyword: "ARG",
            })),
            "ENV" => out.extend(env_of(df, ins).into_iter().map(|mut d| {
                d.line = line_of(d.value_span.as_ref().map(|s| s.start).unwrap_or(ins.span.start));
                d
            })),
            _ => {}
        }
    }
    out
}

/// The declarations of one `ENV`: `ENV a=1 b="2"`, or the legacy
/// `ENV name the rest of the line`.
fn env_of(df: &Dockerfile, ins: &Instruction) -> Vec<Declaration> {
    let words = ins.words(df.escape());
    let Some(first) = words.first() else { return Vec::new() };
    let declaration = |name: &str, start: usize, raw: &str| {
        let (inner, q) = unquote(raw);
        let at = start + q;
        Declaration {
            name: name.to_owned(),
            value: Some(inner.to_owned()),
            value_span: Some(ins.span_of(at..at + inner.len())),
            keyword: "ENV",
            line: 0,
        }
    };
    if !first.text.contains('=') {
        let (Some(second), Some(last)) = (words.get(1), words.last()) else {
            return vec![Declaration {
                name: first.text.clone(),
                value: None,
                value_span: None,
                keyword: "ENV",
                line: 0,
            }];
        };
        let raw = ins.args.get(second.range.start..last.range.end).unwrap_or_default();
        return vec![declaration(&first.text, second.range.start, raw)];
    }
    words
        .iter()
        .filter_map(|w| {
            let (name, value) = w.text.split_once('=')?;
            Some(declaration(name, w.range.start + name.len() + 1, value))
        })
        .collect()
}

fn unquote(s: &str) -> (&str, usize) {
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return (&s[1..s.len() - 1], 1);
        }
    }
    (s, 0)
}

/// Every URL fetched by `curl`/`wget` in a `RUN` (shell or exec form,
/// heredoc bodies included) or by `ADD`.
fn downloads(df: &Dockerfile, declarations: &[Declaration]) -> Vec<Download> {
    let values: BTreeMap<&str, &str> =
        declarations.iter().filter_map(|d| Some((d.name.as_str(), d.value.as_deref()?))).collect();
    let lookup = |name: &str| values.get(name).map(|v| (*v).to_owned());
    let resolve = |word: &str| {
        let mut text = word.to_owned();
        let mut vars = BTreeSet::new();
        // Values may name other variables (`ENV URL=…/${VERSION}/…`):
        // expand until nothing changes, a few rounds at most (cycles).
        for _ in 0..8 {
            let (next, used) = expand(&text, &lookup);
            let before = vars.len();
            vars.extend(used);
            if next == text && vars.len() == before {
                break;
            }
            text = next;
        }
        (text, vars)
    };
    let mut out = Vec::new();
    let mut push = |instruction: usize, word: &str| {
        let (expanded, vars) = resolve(word);
        if expanded.contains("://") && !vars.is_empty() {
            out.push(Download { instruction, text: word.to_owned(), expanded, vars });
        }
    };
    for (i, ins) in df.instructions().iter().enumerate() {
        match ins.keyword.as_str() {
            "RUN" => {
                for word in fetched_words(&run_tokens(df, ins)) {
                    push(i, &word);
                }
            }
            "ADD" => {
                let sources: Vec<String> = if ins.is_exec_form() {
                    serde_json::from_str::<Vec<String>>(ins.args.trim()).unwrap_or_default()
                } else {
                    let (_, first) = ins.flags(df.escape());
                    ins.words(df.escape()).into_iter().skip(first).map(|w| w.text).collect()
                };
                let count = sources.len().saturating_sub(1);
                for source in sources.iter().take(count) {
                    push(i, unquote(source).0);
                }
            }
            _ => {}
        }
    }
    out
}

/// The shell words of a `RUN`: its arguments (or each exec-form element,
/// split on blanks) and the words of its heredoc bodies.
fn run_tokens(df: &Dockerfile, ins: &Instruction) -> Vec<String> {
    let mut tokens: Vec<String> = if ins.is_exec_form() {
        serde_json::from_str::<Vec<String>>(ins.args.trim())
            .unwrap_or_default()
            .iter()
            .flat_map(|e| e.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .collect()
    } else {
        let (_, first) = ins.flags(df.escape());
        ins.words(df.escape()).into_iter().skip(first).map(|w| w.text).collect()
    };
    for heredoc in &ins.heredocs {
        if let Some(body) = df.text().get(heredoc.body.clone()) {
            for line in body.lines() {
                tokens.push(";".to_owned());
                tokens.extend(line.split_whitespace().map(str::to_owned));
            }
        }
    }
    tokens
}

/// The arguments of `curl` and `wget` commands, quotes removed.
fn fetched_words(tokens: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut fetching = false;
    for token in tokens {
        let bare = token.strip_prefix("$(").unwrap_or(token).trim_start_matches(['(', '`']);
        let ends_command = bare.ends_with(';') || bare.ends_with(')') || bare.ends_with('`');
        let bare = bare.trim_end_matches([';', ')', '`']);
        if matches!(bare, "&&" | "||" | "|" | "" | "then" | "do") {
            fetching = false;
            continue;
        }
        let unquoted = bare.trim_matches(['"', '\'']);
        let program = unquoted.rsplit('/').next().unwrap_or(unquoted);
        if !fetching && matches!(program, "curl" | "wget") {
            fetching = true;
        } else if fetching && !bare.starts_with('-') {
            out.push(unquote(bare).0.trim_matches(['"', '\'']).to_owned());
        }
        if ends_command {
            fetching = false;
        }
    }
    out
}

/// A checksum written into the Dockerfile that the download at
/// instruction `at` is checked against: `ADD --checksum=`, or, in the same
/// stage, a `RUN` with `sha256sum`/`sha1sum`/`shasum`/… and a hex digest
/// literal or a variable holding one. A version bump alone would fail it.
fn pinned_checksum(df: &Dockerfile, declarations: &[Declaration], at: usize) -> Option<String> {
    let instructions = df.instructions();
    let download = instructions.get(at)?;
    if download.keyword == "ADD" && download.flags(df.escape()).0.iter().any(|(name, _)| name == "checksum") {
        return Some("its ADD --checksum".to_owned());
    }
    let stage_start =
        instructions.get(..at)?.iter().rposition(|i| i.keyword == "FROM").map(|i| i + 1).unwrap_or(0);
    let stage_end = instructions
        .get(at..)?
        .iter()
        .position(|i| i.keyword == "FROM")
        .map(|i| at + i)
        .unwrap_or(instructions.len());
    let values: BTreeMap<&str, &str> =
        declarations.iter().filter_map(|d| Some((d.name.as_str(), d.value.as_deref()?))).collect();
    let is_digest = |s: &str| s.len() >= 32 && s.bytes().all(|b| b.is_ascii_hexdigit());
    let line_of = |offset: usize| df.text().get(..offset).map(|t| t.matches('\n').count() + 1).unwrap_or(1);
    for ins in instructions.get(stage_start..stage_end)? {
        if ins.keyword != "RUN" {
            continue;
        }
        let text = run_tokens(df, ins).join(" ");
        let checks =
            ["sha1sum", "sha256sum", "sha512sum", "shasum", "md5sum"].iter().any(|t| text.contains(t));
        if !checks {
            continue;
        }
        let line = line_of(ins.span.start);
        if text.split(|c: char| !c.is_ascii_alphanumeric()).any(|t| t.len() >= 40 && is_digest(t)) {
            return Some(format!("a digest written in the RUN at line {line}"));
        }
        let lookup = |name: &str| values.get(name).map(|v| (*v).to_owned());
        let (_, used) = expand(&text, &lookup);
        if let Some(var) = used.iter().find(|v| values.get(v.as_str()).is_some_and(|value| is_digest(value)))
        {
            return Some(format!("the digest in {var}, used by the RUN at line {line}"));
        }
    }
    None
}

fn same_path(a: &str, b: &str) -> bool {
    let norm = |p: &str| p.trim_start_matches("./").trim_start_matches('/').to_owned();
    !a.is_empty() && norm(a) == norm(b)
}

fn strip_v(v: &str) -> &str {
    let v = v.trim();
    v.strip_prefix('v').filter(|rest| rest.starts_with(|c: char| c.is_ascii_digit())).unwrap_or(v)
}

/// `version` written the way `like` writes versions: with or without `v`.
fn restyle(version: &str, like: &str) -> String {
    let bare = strip_v(version);
    if like.trim().starts_with('v') && strip_v(like) != like.trim() {
        format!("v{bare}")
    } else {
        bare.to_owned()
    }
}

fn semver(v: &str) -> Result<(), String> {
    Scheme::Semver.compare(v, v).map(|_| ()).map_err(|e| e.to_string())
}

fn semver_cmp(a: &str, b: &str) -> Option<Ordering> {
    Scheme::Semver.compare(a, b).ok()
}

fn is_pre_release(v: &str) -> bool {
    let core = strip_v(v).split('+').next().unwrap_or_default();
    core.contains('-')
}

/// Whether module version `have` is at or above `fixed`. Go toolchain
/// versions (`go1.22.2`, `go1.21`, `go1.21rc2`) are brought to the
/// semantic form OSV uses for `stdlib` first.
fn module_at_least(scheme: Scheme, have: &str, fixed: &str) -> bool {
    let (have, fixed) = (go_semver(have), go_semver(fixed));
    scheme.compare(&have, &fixed).is_ok_and(|o| o != Ordering::Less)
}

/// `go1.21` → `1.21.0`, `go1.21rc2` → `1.21.0-rc.2`, `go1.22.2` →
/// `1.22.2`; anything else unchanged.
fn go_semver(v: &str) -> String {
    let Some(rest) = v.trim().strip_prefix("go").filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    else {
        return v.trim().to_owned();
    };
    let split = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (numbers, pre) = rest.split_at(split);
    let mut parts: Vec<&str> = numbers.split('.').collect();
    while parts.len() < 3 {
        parts.push("0");
    }
    let core = parts.join(".");
    match pre.find(|c: char| c.is_ascii_digit()) {
        Some(d) if !pre.is_empty() => format!("{core}-{}.{}", &pre[..d], &pre[d..]),
        _ if !pre.is_empty() => format!("{core}-{pre}"),
        _ => core,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_toolchain_versions_become_semantic() {
        assert_eq!(go_semver("go1.22.2"), "1.22.2");
        assert_eq!(go_semver("go1.21"), "1.21.0");
        assert_eq!(go_semver("go1.21rc2"), "1.21.0-rc.2");
        assert_eq!(go_semver("v0.23.0"), "v0.23.0");
        assert!(module_at_least(Scheme::Semver, "go1.22.2", "1.22.2"));
        assert!(!module_at_least(Scheme::Semver, "go1.21rc2", "1.21.0"));
        assert!(module_at_least(Scheme::Semver, "v0.23.0", "0.23.0"));
    }

    #[test]
    fn env_forms_and_their_value_spans() {
        let text = "FROM x\nENV A=1 B=\"two words\" C='3'\nENV LEGACY v0.13.0\nENV SPACED some value here\n";
        let df = Dockerfile::parse(text).expect("parses");
        let all = declarations(&df);
        let got: Vec<(&str, Option<&str>, &str)> = all
            .iter()
            .map(|d| (d.name.as_str(), d.value.as_deref(), &text[d.value_span.clone().expect("span")]))
            .collect();
        assert_eq!(
            got,
            vec![
                ("A", Some("1"), "1"),
                ("B", Some("two words"), "two words"),
                ("C", Some("3"), "3"),
                ("LEGACY", Some("v0.13.0"), "v0.13.0"),
                ("SPACED", Some("some value here"), "some value here"),
            ]
        );
        assert_eq!(all[3].line, 3);
    }

    #[test]
    fn fetched_words_stop_at_command_boundaries() {
        let tokens: Vec<String> =
            "curl -fsSL \"https://a/${V}/x\" -o /tmp/x && tar xf /tmp/${V}.tgz | wget -q http://b/$W; echo http://c/$Z && apk add curl && curl -L ${BASE}/${FILE} | tar xz"
                .split_whitespace()
                .map(str::to_owned)
                .collect();
        assert_eq!(
            fetched_words(&tokens),
            vec!["https://a/${V}/x", "/tmp/x", "http://b/$W", "${BASE}/${FILE}"]
        );
    }

    #[test]
    fn restyling_keeps_the_v_convention() {
        assert_eq!(restyle("3.14.4", "v3.14.2"), "v3.14.4");
        assert_eq!(restyle("v3.14.4", "3.14.2"), "3.14.4");
        assert_eq!(restyle("v3.14.4", "v3.14.2"), "v3.14.4");
    }
}
