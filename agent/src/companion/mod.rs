//! Companion bumps for repair runs: when the fix moves a toolchain (a Go
//! base image from `golang:1.21` to `golang:1.22.5`), tools that follow the
//! toolchain must follow too — a golangci-lint built for go1.21 cannot load
//! go1.22 code and CI lint goes red. Before any model is asked, the repair
//! run applies the table in `agent/data/companions.toml`: "toolchain X at
//! ≥ V needs companion T at ≥ W", each rule with its source.
//!
//! What it owns: reading the workspace for the toolchain versions it builds
//! with after the fix ([`toolchains`]) and for the places each companion's
//! version is written ([`pins`]); planning bumps to the table's minimum for
//! the detected toolchain (the fixing version, never the latest), only
//! forward, never across a major version the companion does not allow
//! (golangci-lint v1 → v2 needs a configuration migration: that is left as
//! a note for the model or a person); and applying the planned edits by
//! replacing exactly the version tokens, so that the file is byte-identical
//! except for them (line endings, quotes and the `v` prefix stay).
//!
//! What it must never do: run anything or reach the network (it reads files
//! and writes the planned tokens, nothing else); let text from the
//! repository choose a program, a path outside the workspace or what is
//! written (a replacement is a version the table produced, checked again
//! before it is written); follow a symbolic link or read vendored trees
//! (`vendor/`, `node_modules/`, `third_party/`).
//!
//! - [`table`]: the embedded table, parsed once and validated.
//! - [`version`]: dotted numeric versions and what a written constraint
//!   (`v1.55.2`, `setuptools<66`, `^8.0.0`) says about the minimum.
//! - [`tree`], [`text`]: the files read, and line/YAML/JSON views of them
//!   that keep byte offsets.

pub mod pins;
pub mod table;
pub mod text;
pub mod toolchains;
pub mod tree;
pub mod version;

use std::collections::BTreeMap;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

use self::table::{Companion, Rule, Table};
use self::text::Span;
use self::version::{Judgement, Version};
use crate::dockerfile::Edit;

pub use self::toolchains::ToolchainVersion;

/// What a repair run should change so that the companions follow the
/// toolchain, and what it found but leaves alone.
/// It serializes for the model tool, and a plan handed back is checked
/// again by [`apply`] (paths, tokens and replacements), never trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompanionPlan {
    /// Every toolchain version the workspace names (the highest of each
    /// toolchain is the one the bumps follow).
    pub toolchains: Vec<ToolchainVersion>,
    /// The token edits to make.
    pub bumps: Vec<CompanionBump>,
    /// Pins left alone and why, skipped files, what the table does not cover.
    pub notes: Vec<String>,
}

/// One version token to replace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompanionBump {
    /// `golangci-lint`.
    pub companion: String,
    /// The file, relative to the workspace.
    pub path: String,
    /// 1-based line of the token.
    pub line: usize,
    /// The token's bytes in the file.
    pub span: Span,
    /// The token as written: `v1.55.2`.
    pub from: String,
    /// What replaces it: `v1.56.0`.
    pub to: String,
    /// What kind of pin: "Makefile variable GOLANGCI_LINT_VERSION".
    pub origin: String,
    /// "go 1.22 needs golangci-lint ≥ v1.56.0: first release with go1.22 support".
    pub because: String,
    /// Where the table's rule comes from.
    pub source: String,
}

impl CompanionBump {
    /// The bump as one line of the run's record: what, where, why, source.
    pub fn describe(&self) -> String {
        format!(
            "{} {} → {} in {}:{} ({}; {})",
            self.companion, self.from, self.to, self.path, self.line, self.because, self.source
        )
    }

    /// The bump as a step of the run's result.
    pub fn step(&self) -> crate::remediate::Step {
        crate::remediate::Step {
            remediator: "companion".into(),
            summary: format!("bump {} {} → {} in {}", self.companion, self.from, self.to, self.path),
            reason: format!("{} ({})", self.because, self.source),
            fixes: Vec::new(),
            edits: Vec::new(),
            files: vec![self.path.clone()],
        }
    }
}

/// Why planned edits could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum CompanionError {
    /// The plan names a path that is not a plain relative path inside the
    /// workspace, or one that goes through a symbolic link.
    #[error("`{path}` is not a plain file path inside the workspace")]
    Path {
        /// The path as the plan has it.
        path: String,
    },
    /// A replacement is not a version token.
    #[error("{path}:{line}: `{to}` is not a version")]
    Replacement {
        /// The file.
        path: String,
        /// Its line.
        line: usize,
        /// The refused replacement.
        to: String,
    },
    /// The bytes at the planned span are not the planned `from`: the file
    /// changed since the plan was made.
    #[error("{path}:{line}: expected `{expected}` at bytes {span:?}, found `{found}`")]
    Stale {
        /// The file.
        path: String,
        /// Its line.
        line: usize,
        /// The planned span.
        span: Span,
        /// The planned `from`.
        expected: String,
        /// What is there.
        found: String,
    },
    /// A file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Two planned edits of one file overlap.
    #[error("cannot edit {path}")]
    Edit {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: crate::dockerfile::edit::Error,
    },
    /// A file could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Reads the workspace (never runs anything, never touches the network)
/// and plans the bumps.
///
/// # Examples
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("Dockerfile"), "FROM golang:1.22.5-alpine\n")?;
/// std::fs::write(dir.path().join("Makefile"), "GOLANGCI_LINT_VERSION ?= v1.55.2\n")?;
/// let plan = patchpilot_agent::companion::plan(dir.path());
/// assert_eq!(plan.bumps[0].to, "v1.56.0");
/// assert_eq!(plan.bumps[0].because, "go 1.22 needs golangci-lint ≥ v1.56.0: first release with go1.22 support");
/// # Ok(())
/// # }
/// ```
pub fn plan(workspace: &Path) -> CompanionPlan {
    let mut notes = Vec::new();
    let table = match Table::embedded() {
        Ok(t) => t,
        Err(e) => return CompanionPlan { notes: vec![e.to_string()], ..CompanionPlan::default() },
    };
    let files = tree::read(workspace, &mut notes);
    let toolchains = toolchains::detect(&files, &mut notes);
    // The version after the fix is the highest one named: a go.mod that
    // still says `go 1.21` builds with the 1.22 image all the same.
    let mut highest: BTreeMap<&str, (&ToolchainVersion, Version)> = BTreeMap::new();
    for t in &toolchains {
        let Some(v) = Version::parse(&t.version) else { continue };
        let entry = highest.entry(t.toolchain.as_str()).or_insert((t, v.clone()));
        if v.compare(&entry.1).is_gt() {
            *entry = (t, v);
        }
    }
    if highest.is_empty() {
        notes.push("no Go, Node.js or Python version found in the workspace: nothing to follow".into());
    }
    let companions: Vec<&Companion> =
        table.companions.iter().filter(|c| highest.contains_key(c.toolchain.as_str())).collect();
    let pins = pins::detect(&files, &companions, &mut notes);
    let configs: Vec<&str> =
        files.iter().filter(|f| f.kind == tree::Kind::GolangciConfig).map(|f| f.path.as_str()).collect();
    let mut bumps = Vec::new();
    for pin in &pins {
        let Some(c) = table.companion(&pin.companion) else { continue };
        let Some((origin, version)) = highest.get(c.toolchain.as_str()) else { continue };
        let from = &pin.written;
        let at = format!("{}:{} {} {}", pin.path, pin.line, c.name, from);
        let Some(rule) = table.rule_for(&c.toolchain, version, &c.name) else {
            notes.push(format!("{at}: the table has no rule for {} {version}; left alone", c.toolchain));
            continue;
        };
        let line = release_line(version, rule);
        let min = minimum(rule, from);
        let because = format!("{} {line} needs {} ≥ {min}: {}", c.toolchain, c.name, rule.reason);
        match version::judge(pin.op, from, &min) {
            Judgement::Admits => {
                notes.push(format!(
                    "{at} ({}) already admits {min}, which {} {line} needs; left alone",
                    pin.origin, c.toolchain
                ));
            }
            Judgement::Below(_) if pin.blocked.is_some() => {
                let why = pin.blocked.as_deref().unwrap_or_default();
                notes.push(format!("{at} is below {min} ({because}) but is not bumped: {why}"));
            }
            Judgement::Below(to) if !c.crosses_major && to.major() != from.major() => {
                let why = c.major_note.as_deref().unwrap_or("the companion may not cross a major version");
                let configs = if configs.is_empty() {
                    String::new()
                } else {
                    format!(" (configuration: {})", configs.join(", "))
                };
                notes.push(format!(
                    "{at} is below {min} ({because}) but is not bumped: {why}{configs}; see {}",
                    c.major_source.as_deref().unwrap_or(&rule.source)
                ));
            }
            Judgement::Below(to) => {
                // What the rule's source leaves open travels with the bump.
                if let Some(note) = &rule.note {
                    notes.push(format!("{} ≥ {min} for {} {line}: {note}", c.name, c.toolchain));
                }
                bumps.push(CompanionBump {
                    companion: c.name.clone(),
                    path: pin.path.clone(),
                    line: pin.line,
                    span: pin.span.clone(),
                    from: from.to_string(),
                    to: to.to_string(),
                    origin: pin.origin.clone(),
                    because,
                    source: rule.source.clone(),
                });
            }
        }
        if let Some(newest) = table.newest_since(&c.toolchain, &c.name)
            && version.truncated(newest.parts.len()).compare(&newest).is_gt()
        {
            notes.push(format!(
                "{} {version} ({}:{}) is newer than the table's newest {} rule ({} {newest}): {} may need more than {min}",
                c.toolchain, origin.path, origin.line, c.name, c.toolchain, c.name
            ));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    notes.retain(|n| seen.insert(n.clone()));
    CompanionPlan { toolchains, bumps, notes }
}

/// The toolchain's release line as the rule counts it: `1.22` of `1.22.5`.
fn release_line(version: &Version, rule: &Rule) -> Version {
    let parts = Version::parse(&rule.since).map(|s| s.parts.len()).unwrap_or(1);
    version.truncated(parts)
}

/// The rule's minimum in the scheme the pin is written in: staticcheck's
/// `2023.1.6` compares with the release name, `v0.4.6` with the tag.
fn minimum(rule: &Rule, written: &Version) -> Version {
    let release = rule.min_release.as_deref().and_then(Version::parse);
    let tag = Version::parse(&rule.min);
    match (release, tag) {
        (Some(release), _) if written.major() >= 2000 => release,
        (_, Some(tag)) => tag,
        // The table is validated: every minimum parses.
        _ => written.clone(),
    }
}

/// Applies the planned edits in place, touching only the version tokens;
/// returns the files changed. Every token is checked before anything is
/// written, so a stale plan changes nothing.
pub fn apply(workspace: &Path, plan: &CompanionPlan) -> Result<Vec<String>, CompanionError> {
    let mut by_file: BTreeMap<&str, Vec<&CompanionBump>> = BTreeMap::new();
    for bump in &plan.bumps {
        by_file.entry(bump.path.as_str()).or_default().push(bump);
    }
    let mut changed = Vec::new();
    for (path, bumps) in by_file {
        let full = plain_path(workspace, path)?;
        let text = std::fs::read_to_string(&full)
            .map_err(|source| CompanionError::Read { path: path.into(), source })?;
        let mut edits = Vec::new();
        for b in bumps {
            // The replacement is written into a Makefile or a Dockerfile:
            // it must be a version, whatever handed us the plan.
            if Version::parse(&b.to).is_none() {
                return Err(CompanionError::Replacement {
                    path: path.into(),
                    line: b.line,
                    to: b.to.clone(),
                });
            }
            let found = text.get(b.span.clone()).unwrap_or_default();
            if found != b.from {
                return Err(CompanionError::Stale {
                    path: path.into(),
                    line: b.line,
                    span: b.span.clone(),
                    expected: b.from.clone(),
                    found: found.into(),
                });
            }
            edits.push(Edit { span: b.span.clone(), replacement: b.to.clone(), reason: b.because.clone() });
        }
        let new = crate::dockerfile::apply(&text, &edits)
            .map_err(|source| CompanionError::Edit { path: path.into(), source })?;
        if new != text {
            changed.push((path.to_owned(), full, new));
        }
    }
    for (path, full, new) in &changed {
        std::fs::write(full, new).map_err(|source| CompanionError::Write { path: path.clone(), source })?;
    }
    Ok(changed.into_iter().map(|(p, _, _)| p).collect())
}

/// `workspace/path` when `path` is relative, has only normal components and
/// no symbolic link on the way.
fn plain_path(workspace: &Path, path: &str) -> Result<std::path::PathBuf, CompanionError> {
    let refuse = || CompanionError::Path { path: path.into() };
    let rel = Path::new(path);
    if path.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(refuse());
    }
    let mut at = workspace.to_path_buf();
    for part in rel.components() {
        at.push(part);
        let meta = std::fs::symlink_metadata(&at).map_err(|_| refuse())?;
        if meta.file_type().is_symlink() {
            return Err(refuse());
        }
    }
    if !std::fs::symlink_metadata(&at).map(|m| m.is_file()).unwrap_or(false) {
        return Err(refuse());
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (path, text) in files {
            let full = dir.path().join(path);
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent).expect("mkdir");
            }
            std::fs::write(full, text).expect("write");
        }
        dir
    }

    #[test]
    fn go_1_22_bumps_golangci_lint_to_the_fixing_version() {
        let dir = workspace(&[
            ("Dockerfile", "FROM golang:1.22.5-alpine\n"),
            ("go.mod", "module x\n\ngo 1.21\n"),
            ("Makefile", "GOLANGCI_LINT_VERSION ?= v1.55.2\nSTATICCHECK_VERSION ?= 2023.1.6\n"),
        ]);
        let plan = plan(dir.path());
        let got: Vec<(&str, &str, &str)> =
            plan.bumps.iter().map(|b| (b.companion.as_str(), b.from.as_str(), b.to.as_str())).collect();
        assert_eq!(
            got,
            vec![("golangci-lint", "v1.55.2", "v1.56.0"), ("staticcheck", "2023.1.6", "2023.1.7")]
        );
        assert_eq!(
            plan.bumps[0].because,
            "go 1.22 needs golangci-lint ≥ v1.56.0: first release with go1.22 support"
        );
        assert!(plan.bumps[0].source.starts_with("https://"));
        assert_eq!(plan.toolchains.len(), 2);
    }

    #[test]
    fn only_forward_and_never_v1_to_v2() {
        let dir = workspace(&[
            ("Dockerfile", "FROM golang:1.25.1\n"),
            ("Makefile", "GOLANGCI_LINT_VERSION ?= v1.64.8\n"),
            (".golangci.yml", "linters:\n  enable: [govet]\n"),
            ("tools/Makefile", "GOLANGCI_LINT_VERSION ?= v2.5.0\n"),
        ]);
        let plan = plan(dir.path());
        assert!(plan.bumps.is_empty(), "{:?}", plan.bumps);
        assert!(
            plan.notes.iter().any(|n| n.contains("Makefile:1 golangci-lint v1.64.8")
                && n.contains("migrat")
                && n.contains(".golangci.yml")),
            "{:#?}",
            plan.notes
        );
        assert!(
            plan.notes.iter().any(|n| n.contains("v2.5.0") && n.contains("already admits")),
            "{:#?}",
            plan.notes
        );
    }

    #[test]
    fn apply_refuses_stale_plans_odd_paths_and_non_versions() {
        let dir = workspace(&[
            ("Dockerfile", "FROM golang:1.22\n"),
            ("Makefile", "GOLANGCI_LINT_VERSION ?= v1.55.2\n"),
        ]);
        let good = plan(dir.path());
        assert_eq!(good.bumps.len(), 1);
        let mut bad = good.clone();
        bad.bumps[0].to = "v1.56.0; rm -rf /".into();
        assert!(matches!(apply(dir.path(), &bad), Err(CompanionError::Replacement { .. })));
        for path in ["../Makefile", "/etc/passwd", "", "./Makefile/.."] {
            let mut bad = good.clone();
            bad.bumps[0].path = path.into();
            assert!(matches!(apply(dir.path(), &bad), Err(CompanionError::Path { .. })), "{path}");
        }
        std::fs::write(dir.path().join("Makefile"), "GOLANGCI_LINT_VERSION ?= v1.55.3\n").expect("write");
        assert!(matches!(apply(dir.path(), &good), Err(CompanionError::Stale { .. })));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("Makefile")).expect("read"),
            "GOLANGCI_LINT_VERSION ?= v1.55.3\n"
        );
    }

    #[cfg(unix)]
    #[test]
    fn apply_never_writes_through_a_link() {
        let outside = workspace(&[("Makefile", "GOLANGCI_LINT_VERSION ?= v1.55.2\n")]);
        let dir = workspace(&[("Dockerfile", "FROM golang:1.22\n")]);
        std::os::unix::fs::symlink(outside.path(), dir.path().join("linked")).expect("symlink");
        let plan = CompanionPlan {
            bumps: vec![CompanionBump {
                companion: "golangci-lint".into(),
                path: "linked/Makefile".into(),
                line: 1,
                span: 25..32,
                from: "v1.55.2".into(),
                to: "v1.56.0".into(),
                origin: String::new(),
                because: String::new(),
                source: String::new(),
            }],
            ..CompanionPlan::default()
        };
        assert!(matches!(apply(dir.path(), &plan), Err(CompanionError::Path { .. })));
        assert_eq!(
            std::fs::read_to_string(outside.path().join("Makefile")).expect("read"),
            "GOLANGCI_LINT_VERSION ?= v1.55.2\n"
        );
    }
}
