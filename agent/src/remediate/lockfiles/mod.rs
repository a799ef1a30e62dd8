//! Language lockfiles: move a dependency to its fixing version with the
//! ecosystem's own tool, in the agent's scratch copy of the repository (the
//! final patch is the diff of that copy).
//!
//! One module per ecosystem, each with the reading of its own files:
//! - `go`: Go modules (`go.mod`, `go.sum`), with `go get` and `go mod tidy`;
//! - `cargo`: crates.io (`Cargo.lock`), with `cargo update --precise`;
//! - `npm`: npm (`package-lock.json`), with `npm install`, and an
//!   `"overrides"` entry in `package.json` for a transitive dependency,
//!   written with `json_splice` so the rest of the file keeps its bytes;
//! - `pip`: PyPI (`requirements*.txt`), as a text edit of the pin.
//!
//! What they share lives here: grouping the findings by package, the
//! checks on names and versions, finding the lockfiles, the snapshot that
//! puts files back after a failed run, and the step a run becomes.
//!
//! The target is always the smallest fixed version above the installed one
//! (for several findings on one package, the smallest that fixes them all),
//! never the newest release. Text from the repository is data: the only
//! values that reach a command line are the package name and versions from
//! the finding, checked against a conservative character set first. A tool
//! run that fails or does not produce the fixed version leaves the files as
//! they were.
//!
//! Folders named `vendor`, `node_modules`, `.git` and `.patchpilot` are not
//! searched, and symbolic links are not followed.

mod cargo;
mod go;
mod json_splice;
mod npm;
mod pip;

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use patchpilot_model::Finding;

use super::{CommandRun, FindingRef, Fix, Refusal, RefusalCategory, Step, have, run_command, smallest_fix};

/// Runs the ecosystem tools for the Go, crates.io, npm and PyPI findings,
/// changing files under `workspace`; every run lands in `log`. Findings of
/// other ecosystems are not this remediator's and are left alone.
pub fn apply(workspace: &Path, findings: &[Finding], log: &mut Vec<CommandRun>) -> (Vec<Step>, Vec<Refusal>) {
    apply_with(workspace, findings, log, &have)
}

/// [`apply`] with the question "is this program installed" answered by
/// `installed`.
fn apply_with(
    workspace: &Path,
    findings: &[Finding],
    log: &mut Vec<CommandRun>,
    installed: &dyn Fn(&str) -> bool,
) -> (Vec<Step>, Vec<Refusal>) {
    let files = Files::find(workspace);
    let mut steps = Vec::new();
    let mut refusals = Vec::new();
    // Go is grouped by module (go.mod has its own version of it); the
    // others by package and installed version, which locate the entry.
    let mut groups: BTreeMap<(Ecosystem, String, String), Vec<&Finding>> = BTreeMap::new();
    for f in findings {
        let Some(eco) = Ecosystem::of(&f.package.ecosystem) else { continue };
        let installed_key = if eco == Ecosystem::Go { String::new() } else { f.package.version.clone() };
        groups.entry((eco, f.package.name.clone(), installed_key)).or_default().push(f);
    }
    for ((eco, name, _), group) in groups {
        let refuse_all = |reason: String, category: RefusalCategory| -> Vec<Refusal> {
            group
                .iter()
                .map(|f| Refusal { finding: FindingRef::from(*f), reason: reason.clone(), category })
                .collect()
        };
        if eco == Ecosystem::Go && (name == "stdlib" || name == "toolchain") {
            refusals.extend(refuse_all(
                "the Go standard library comes with the Go toolchain, not with go.mod: it is fixed by building \
                 with a newer Go (bump the golang builder base image or the toolchain the build downloads)"
                    .to_owned(),
                RefusalCategory::Tooling,
            ));
            continue;
        }
        if !valid_name(&name) {
            refusals.extend(refuse_all(
                format!(
                    "package name `{}` has characters PatchPilot does not pass to a tool",
                    name.escape_debug()
                ),
                RefusalCategory::Repository,
            ));
            continue;
        }
        let mut targeted: Vec<(&Finding, Fix)> = Vec::new();
        for f in &group {
            match smallest_fix(f) {
                Ok(fix) => targeted.push((*f, fix)),
                Err(r) => refusals.push(r),
            }
        }
        // The smallest version fixing every targeted finding: the largest
        // of their smallest fixes.
        let Some(target) = targeted
            .iter()
            .map(|(_, fix)| fix.clone())
            .max_by(|a, b| a.scheme.compare(&a.version, &b.version).unwrap_or(Ordering::Equal))
        else {
            continue;
        };
        let fixed: Vec<&Finding> = targeted.iter().map(|(f, _)| *f).collect();
        let bad_version = [target.version.as_str()]
            .into_iter()
            .chain(fixed.iter().map(|f| f.package.version.as_str()))
            .find(|v| !valid_version(v));
        if let Some(v) = bad_version {
            refusals.extend(fixed.iter().map(|f| Refusal {
                finding: FindingRef::from(*f),
                reason: format!(
                    "version `{}` has characters PatchPilot does not pass to a tool",
                    v.escape_debug()
                ),
                category: RefusalCategory::Repository,
            }));
            continue;
        }
        let job = Job { workspace, files: &files, name: &name, findings: &fixed, target: &target, installed };
        let outcome = match eco {
            Ecosystem::Go => job.go(log),
            Ecosystem::Cargo => job.cargo(log),
            Ecosystem::Npm => job.npm(log),
            Ecosystem::Pip => job.pip(),
        };
        match outcome {
            Ok(step) => steps.push(step),
            Err((reason, category)) => refusals.extend(fixed.iter().map(|f| Refusal {
                finding: FindingRef::from(*f),
                reason: reason.clone(),
                category,
            })),
        }
    }
    (steps, refusals)
}

/// The lockfile ecosystems this remediator handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ecosystem {
    Go,
    Cargo,
    Npm,
    Pip,
}

impl Ecosystem {
    fn of(osv: &str) -> Option<Ecosystem> {
        match osv {
            "Go" => Some(Ecosystem::Go),
            "crates.io" => Some(Ecosystem::Cargo),
            "npm" => Some(Ecosystem::Npm),
            "PyPI" => Some(Ecosystem::Pip),
            _ => None,
        }
    }
}

/// Names that may reach a command line: `[A-Za-z0-9._/@-]+`, not starting
/// with `-` (it would read as an option).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '@' | '-'))
}

/// Versions that may reach a command line or a file: no blanks, no shell
/// metacharacters, no leading `-`.
fn valid_version(version: &str) -> bool {
    !version.is_empty()
        && !version.starts_with('-')
        && version.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '~'))
}

/// The lockfiles and manifests of the workspace, relative paths with `/`.
#[derive(Debug, Default)]
struct Files {
    go_mods: Vec<String>,
    cargo_locks: Vec<String>,
    npm_locks: Vec<String>,
    requirements: Vec<String>,
}

impl Files {
    fn find(workspace: &Path) -> Files {
        let mut files = Files::default();
        let mut pending = vec![String::new()];
        while let Some(rel) = pending.pop() {
            let dir = workspace.join(&rel);
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot list folder; lockfiles in it are not seen");
                    continue;
                }
            };
            let mut names: Vec<(String, std::fs::FileType)> = entries
                .filter_map(Result::ok)
                .filter_map(|e| Some((e.file_name().into_string().ok()?, e.file_type().ok()?)))
                .collect();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, kind) in names {
                let path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
                if kind.is_dir() {
                    if !matches!(name.as_str(), "vendor" | "node_modules" | ".git" | ".patchpilot") {
                        pending.push(path);
                    }
                } else if kind.is_file() {
                    match name.as_str() {
                        "go.mod" => files.go_mods.push(path),
                        "Cargo.lock" => files.cargo_locks.push(path),
                        "package-lock.json" => files.npm_locks.push(path),
                        n if n.starts_with("requirements") && n.ends_with(".txt") => {
                            files.requirements.push(path)
                        }
                        _ => {}
                    }
                }
            }
        }
        for list in
            [&mut files.go_mods, &mut files.cargo_locks, &mut files.npm_locks, &mut files.requirements]
        {
            list.sort();
        }
        files
    }
}

/// The folder of a relative file path, `.` for the top.
fn folder_of(rel: &str) -> String {
    match rel.rsplit_once('/') {
        Some((dir, _)) => dir.to_owned(),
        None => ".".to_owned(),
    }
}

/// `dir/name`, without a leading `./`.
fn join_rel(dir: &str, name: &str) -> String {
    if dir == "." { name.to_owned() } else { format!("{dir}/{name}") }
}

/// File contents before a tool ran, to restore them when the run fails and
/// to tell which files it changed.
struct Snapshot {
    files: Vec<(String, PathBuf, Option<Vec<u8>>)>,
}

impl Snapshot {
    fn take(workspace: &Path, rels: &[String]) -> Snapshot {
        Snapshot {
            files: rels
                .iter()
                .map(|rel| {
                    let path = workspace.join(rel);
                    let before = std::fs::read(&path).ok();
                    (rel.clone(), path, before)
                })
                .collect(),
        }
    }

    /// The files whose contents differ now.
    fn changed(&self) -> Vec<String> {
        self.files
            .iter()
            .filter(|(_, path, before)| std::fs::read(path).ok() != *before)
            .map(|(rel, _, _)| rel.clone())
            .collect()
    }

    /// Puts every file back as it was (removing files that did not exist).
    fn restore(&self) {
        for (rel, path, before) in &self.files {
            let result = match before {
                Some(bytes) => std::fs::write(path, bytes),
                None if path.exists() => std::fs::remove_file(path),
                None => Ok(()),
            };
            if let Err(e) = result {
                tracing::warn!(file = %rel, error = %e, "cannot restore file after a failed tool run");
            }
        }
    }
}

/// Broad cause of a failed tool run, from its error output.
fn classify(excerpt: &str) -> RefusalCategory {
    let text = excerpt.to_ascii_lowercase();
    const NETWORK: [&str; 15] = [
        "could not resolve",
        "couldn't resolve",
        "no such host",
        "connection refused",
        "timed out",
        "dial tcp",
        "enotfound",
        "econnrefused",
        "etimedout",
        "eai_again",
        "failed to download",
        "unable to update registry",
        "failed to fetch",
        "network is unreachable",
        "tls handshake",
    ];
    const CONFLICT: [&str; 8] = [
        "failed to select a version",
        "did not match any packages",
        "eresolve",
        "eoverride",
        "conflicting requirements",
        "requires go >=",
        "cannot find module providing",
        "is replaced",
    ];
    if NETWORK.iter().any(|w| text.contains(w)) {
        RefusalCategory::Infrastructure
    } else if CONFLICT.iter().any(|w| text.contains(w)) {
        RefusalCategory::Repository
    } else {
        RefusalCategory::Tooling
    }
}

type Refused = (String, RefusalCategory);

/// What one tool did across the folders it ran in.
#[derive(Debug, Default)]
struct Attempts {
    /// Files changed by the runs that reached the target.
    changed: Vec<String>,
    /// One line per folder that reached it.
    done: Vec<String>,
    /// Why the others did not.
    failures: Vec<Refused>,
}

impl Attempts {
    /// Keeps a folder's changes when its run reached the target; otherwise
    /// puts its files back.
    fn record(&mut self, snapshot: &Snapshot, result: Result<String, Refused>) {
        match result {
            Ok(done) => {
                self.changed.extend(snapshot.changed());
                self.done.push(done);
            }
            Err(e) => {
                snapshot.restore();
                self.failures.push(e);
            }
        }
    }
}

/// One package to move, and what the workspace holds.
struct Job<'a> {
    workspace: &'a Path,
    files: &'a Files,
    name: &'a str,
    findings: &'a [&'a Finding],
    target: &'a Fix,
    installed: &'a dyn Fn(&str) -> bool,
}

impl Job<'_> {
    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.workspace.join(rel)).ok()
    }

    fn ids(&self) -> String {
        let mut ids: Vec<&str> = self.findings.iter().map(|f| f.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        ids.join(", ")
    }

    fn fixes(&self) -> Vec<FindingRef> {
        let mut refs: Vec<FindingRef> = self.findings.iter().map(|f| FindingRef::from(*f)).collect();
        refs.sort();
        refs.dedup();
        refs
    }

    fn require_tool(&self, program: &str, action: &str) -> Result<(), Refused> {
        if (self.installed)(program) {
            Ok(())
        } else {
            Err((
                format!("`{program}` is not installed in the sandbox, so {action} cannot run"),
                RefusalCategory::Tooling,
            ))
        }
    }

    /// Runs `program args` in `dir`; on failure, the error and its cause.
    fn run(&self, dir: &str, program: &str, args: &[&str], log: &mut Vec<CommandRun>) -> Result<(), Refused> {
        if run_command(self.workspace, dir, program, args, log) {
            return Ok(());
        }
        let excerpt = log.last().map(|c| c.error_excerpt.clone()).unwrap_or_default();
        let shown = std::iter::once(program).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
        Err((format!("`{shown}` failed in {dir}: {excerpt}"), classify(&excerpt)))
    }

    fn installed_version(&self) -> &str {
        self.findings.first().map(|f| f.package.version.as_str()).unwrap_or_default()
    }

    /// A step from the files a tool changed, or the first failure.
    fn finish(&self, attempts: Attempts, summary: String, action: String) -> Result<Step, Refused> {
        let Attempts { changed, done, failures } = attempts;
        if done.is_empty() {
            let category = failures.first().map(|(_, c)| *c).unwrap_or(RefusalCategory::Tooling);
            let reasons: Vec<String> = failures.into_iter().map(|(r, _)| r).collect();
            return Err((reasons.join("; "), category));
        }
        let mut reason = format!(
            "{} fixed in {} {}, the smallest fixed version above the installed {}; {action} for {}",
            self.ids(),
            self.name,
            self.target.version,
            self.installed_version(),
            done.join(", ")
        );
        if !failures.is_empty() {
            let reasons: Vec<String> = failures.into_iter().map(|(r, _)| r).collect();
            reason.push_str(&format!("; not changed: {}", reasons.join("; ")));
        }
        Ok(Step {
            remediator: "lockfile".to_owned(),
            summary,
            reason,
            fixes: self.fixes(),
            edits: Vec::new(),
            files: changed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use patchpilot_model::{Package, Severity};

    fn finding(id: &str, eco: &str, name: &str, version: &str, fixed: &[&str]) -> Finding {
        Finding::new(id, Package::new(name, version, eco), Severity::High).fixed_in(fixed.iter().copied())
    }

    #[test]
    fn smallest_fix_is_the_smallest_above_the_installed_version() {
        let f = finding("GHSA-x", "Go", "golang.org/x/net", "v0.20.0", &["0.23.0", "0.17.0", "0.21.0"]);
        assert_eq!(smallest_fix(&f).expect("fix").version, "0.21.0");
        let none = finding("GHSA-y", "Go", "m", "v1.5.0", &["1.4.3"]);
        assert_eq!(smallest_fix(&none).expect_err("no fix above").category, RefusalCategory::Policy);
        let unfixed = finding("GHSA-z", "npm", "m", "1.0.0", &[]);
        assert_eq!(smallest_fix(&unfixed).expect_err("no fix").category, RefusalCategory::Policy);
        let py = finding("PYSEC-1", "PyPI", "m", "1.0", &["1.0.post1", "2.0"]);
        assert_eq!(smallest_fix(&py).expect("fix").version, "1.0.post1");
    }

    #[test]
    fn names_and_versions_that_could_be_options_or_shell_are_refused() {
        assert!(valid_name("golang.org/x/net"));
        assert!(valid_name("@babel/core"));
        assert!(!valid_name("-rf"));
        assert!(!valid_name("a b"));
        assert!(!valid_name("x;rm"));
        assert!(valid_version("v1.2.3+incompatible"));
        assert!(valid_version("1.0.0-rc.1"));
        assert!(!valid_version("1.0 "));
        assert!(!valid_version("1.0$(x)"));
        assert!(!valid_version("--upgrade"));
    }

    #[test]
    fn bad_names_and_missing_tools_run_nothing() {
        let ws = tempfile::tempdir().expect("tempdir");
        std::fs::write(ws.path().join("go.mod"), "module a\n\ngo 1.19\n\nrequire example.com/vuln v1.0.0\n")
            .expect("write");
        std::fs::write(
            ws.path().join("Cargo.lock"),
            "version = 3\n\n[[package]]\nname = \"-p\"\nversion = \"1.0.0\"\n",
        )
        .expect("write");
        let findings = vec![
            finding("GHSA-go", "Go", "example.com/vuln", "v1.0.0", &["1.1.0"]),
            finding("GHSA-bad", "crates.io", "-p", "1.0.0", &["1.0.1"]),
            finding("GHSA-std", "Go", "stdlib", "v1.21.0", &["1.21.9"]),
        ];
        let mut log = Vec::new();
        let (steps, refusals) = apply_with(ws.path(), &findings, &mut log, &|_| false);
        assert!(steps.is_empty());
        assert!(log.is_empty(), "nothing runs: {log:?}");
        let by_id: BTreeMap<&str, &Refusal> = refusals.iter().map(|r| (r.finding.id.as_str(), r)).collect();
        assert_eq!(by_id["GHSA-go"].category, RefusalCategory::Tooling);
        assert!(by_id["GHSA-go"].reason.contains("`go` is not installed"), "{}", by_id["GHSA-go"].reason);
        assert_eq!(by_id["GHSA-bad"].category, RefusalCategory::Repository);
        assert!(by_id["GHSA-std"].reason.contains("toolchain"));
    }

    #[test]
    fn failures_are_classified_by_their_output() {
        assert_eq!(
            classify("dial tcp: lookup proxy.golang.org: no such host"),
            RefusalCategory::Infrastructure
        );
        assert_eq!(
            classify("error: failed to select a version for the requirement `vulncrate = \"~1.0\"`"),
            RefusalCategory::Repository
        );
        assert_eq!(classify("npm error code ERESOLVE"), RefusalCategory::Repository);
        assert_eq!(classify("segmentation fault"), RefusalCategory::Tooling);
    }
}
