//! Language lockfiles: move a dependency to its fixing version with the
//! ecosystem's own tool, in the agent's scratch copy of the repository (the
//! final patch is the diff of that copy).
//!
//! - Go (`go.mod`): `go get <module>@<fixed>` then `go mod tidy` in each
//!   module folder whose `go.mod` requires the module (directly or
//!   `// indirect`) or whose `go.sum` lists it. `GOFLAGS=-mod=mod` so a
//!   `vendor/` folder does not stop the update, `GOWORK=off` so a `go.work`
//!   does not redirect it, `GOTOOLCHAIN=local` so a `toolchain` line in the
//!   repository cannot make Go download and run another toolchain.
//!   `stdlib` comes with the toolchain, not with `go.mod`, and is refused.
//! - Cargo (`Cargo.lock`): `cargo update --package <name>@<installed>
//!   --precise <fixed>`.
//! - npm (`package-lock.json`): for a direct dependency `npm install
//!   <name>@<fixed> --package-lock-only`; for a transitive one an
//!   `"overrides"` entry in `package.json`, then `npm install
//!   --package-lock-only`. Always `--ignore-scripts`: the repository's
//!   lifecycle scripts are untrusted.
//! - pip (`requirements*.txt`): `name==installed` becomes `name==fixed` as a
//!   text edit; markers, extras and comments stay. A pin with `--hash=`
//!   options is refused: the hashes would no longer match.
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

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use patchpilot_model::Finding;
use patchpilot_scanner::version::Scheme;
use serde_json::Value;

use super::{CommandRun, FindingRef, Fix, Refusal, RefusalCategory, Step, have, run_command, smallest_fix};
use crate::dockerfile::Span;

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

    fn go(&self, log: &mut Vec<CommandRun>) -> Result<Step, Refused> {
        let module = self.name;
        let want = if self.target.version.starts_with('v') {
            self.target.version.clone()
        } else {
            format!("v{}", self.target.version)
        };
        let scheme = Scheme::Semver;
        // (folder, version go.mod requires, if it names the module)
        let mut folders: Vec<(String, Option<String>)> = Vec::new();
        let mut already = Vec::new();
        let mut replaced = Vec::new();
        for rel in &self.files.go_mods {
            let Some(text) = self.read(rel) else { continue };
            let dir = folder_of(rel);
            let required = go_mod_requirement(&text, module);
            let listed = required.is_some()
                || self.read(&join_rel(&dir, "go.sum")).is_some_and(|sum| go_sum_lists(&sum, module));
            if !listed {
                continue;
            }
            if go_mod_replaces(&text, module) {
                replaced.push(rel.clone());
                continue;
            }
            match &required {
                Some(v) if scheme.compare(v, &want).is_ok_and(|o| o != Ordering::Less) => {
                    already.push(format!("{rel} ({v})"))
                }
                _ => folders.push((dir, required)),
            }
        }
        if folders.is_empty() {
            let reason = if !replaced.is_empty() {
                format!(
                    "{} replaces {module} with a `replace` directive; go get would not change what is built",
                    replaced.join(", ")
                )
            } else if !already.is_empty() {
                format!(
                    "{} already require {module} at or above {want}; the image was not built from this state of the repository",
                    already.join(", ")
                )
            } else {
                format!(
                    "no go.mod in the workspace requires {module} (searched {} go.mod files)",
                    self.files.go_mods.len()
                )
            };
            return Err((reason, RefusalCategory::Repository));
        }
        self.require_tool("go", &format!("`go get {module}@{want}`"))?;
        let get = format!("{module}@{want}");
        let env = ["GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local"];
        let mut attempts = Attempts::default();
        for (dir, before) in &folders {
            let mod_rel = join_rel(dir, "go.mod");
            let snapshot = Snapshot::take(self.workspace, &[mod_rel.clone(), join_rel(dir, "go.sum")]);
            let get_args: Vec<&str> = env.iter().copied().chain(["go", "get", get.as_str()]).collect();
            let tidy_args: Vec<&str> = env.iter().copied().chain(["go", "mod", "tidy"]).collect();
            let result = self
                .run(dir, "env", &get_args, log)
                .and_then(|()| self.run(dir, "env", &tidy_args, log))
                .and_then(|()| {
                    let text = self.read(&mod_rel).unwrap_or_default();
                    match go_mod_requirement(&text, module) {
                        Some(now) if scheme.compare(&now, &want).is_ok_and(|o| o != Ordering::Less) => {
                            Ok(now)
                        }
                        Some(now) => Err((
                            format!("{mod_rel} still requires {module} {now} after go get"),
                            RefusalCategory::Tooling,
                        )),
                        None if !self
                            .read(&join_rel(dir, "go.sum"))
                            .is_some_and(|s| go_sum_lists(&s, module)) =>
                        {
                            Ok("(no longer required)".to_owned())
                        }
                        None => Err((
                            format!("{mod_rel} does not name {module} after go get"),
                            RefusalCategory::Tooling,
                        )),
                    }
                });
            attempts.record(
                &snapshot,
                result.map(|now| {
                    format!("{mod_rel}: {} → {now}", before.as_deref().unwrap_or("(go.sum only)"))
                }),
            );
        }
        let from = folders.iter().find_map(|(_, v)| v.clone()).unwrap_or_else(|| "(indirect)".to_owned());
        self.finish(
            attempts,
            format!("{module} {from} → {want}"),
            format!("ran `go get {get}` and `go mod tidy` (GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local)"),
        )
    }

    fn installed_version(&self) -> &str {
        self.findings.first().map(|f| f.package.version.as_str()).unwrap_or_default()
    }

    fn cargo(&self, log: &mut Vec<CommandRun>) -> Result<Step, Refused> {
        let (name, installed, target) = (self.name, self.installed_version(), self.target.version.as_str());
        let locks: Vec<&String> = self
            .files
            .cargo_locks
            .iter()
            .filter(|rel| self.read(rel).is_some_and(|t| cargo_lock_has(&t, name, installed)))
            .filter(|rel| self.workspace.join(join_rel(&folder_of(rel), "Cargo.toml")).is_file())
            .collect();
        if locks.is_empty() {
            return Err((
                format!("no Cargo.lock (next to a Cargo.toml) in the workspace locks {name} {installed}"),
                RefusalCategory::Repository,
            ));
        }
        self.require_tool(
            "cargo",
            &format!("`cargo update --package {name}@{installed} --precise {target}`"),
        )?;
        let spec = format!("{name}@{installed}");
        let mut attempts = Attempts::default();
        for rel in locks {
            let dir = folder_of(rel);
            let snapshot = Snapshot::take(self.workspace, std::slice::from_ref(rel));
            let result = self
                .run(&dir, "cargo", &["update", "--package", &spec, "--precise", target], log)
                .and_then(|()| {
                    let text = self.read(rel).unwrap_or_default();
                    if cargo_lock_has(&text, name, target) && !cargo_lock_has(&text, name, installed) {
                        Ok(())
                    } else {
                        Err((
                            format!("{rel} does not lock {name} {target} after cargo update"),
                            RefusalCategory::Tooling,
                        ))
                    }
                });
            attempts.record(&snapshot, result.map(|()| rel.clone()));
        }
        self.finish(
            attempts,
            format!("{name} {installed} → {target}"),
            format!("ran `cargo update --package {spec} --precise {target}`"),
        )
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

    fn npm(&self, log: &mut Vec<CommandRun>) -> Result<Step, Refused> {
        let (name, installed, target) = (self.name, self.installed_version(), self.target.version.as_str());
        let same = |v: &str| v == installed || Scheme::Semver.compare(v, installed) == Ok(Ordering::Equal);
        let mut work = Vec::new();
        for rel in &self.files.npm_locks {
            let Some(lock) = self.read(rel).and_then(|t| serde_json::from_str::<Value>(&t).ok()) else {
                continue;
            };
            if npm_lock_versions(&lock, name).iter().any(|v| same(v)) {
                work.push(rel.clone());
            }
        }
        if work.is_empty() {
            return Err((
                format!("no package-lock.json in the workspace locks {name} {installed}"),
                RefusalCategory::Repository,
            ));
        }
        self.require_tool(
            "npm",
            &format!("`npm install --package-lock-only --ignore-scripts` for {name}@{target}"),
        )?;
        let mut attempts = Attempts::default();
        let mut how = Vec::new();
        for rel in work {
            let dir = folder_of(&rel);
            let manifest_rel = join_rel(&dir, "package.json");
            let Some(manifest_text) = self.read(&manifest_rel) else {
                attempts
                    .failures
                    .push((format!("{rel} has no package.json next to it"), RefusalCategory::Repository));
                continue;
            };
            let Ok(manifest) = serde_json::from_str::<Value>(&manifest_text) else {
                attempts
                    .failures
                    .push((format!("{manifest_rel} is not valid JSON"), RefusalCategory::Repository));
                continue;
            };
            let direct = ["dependencies", "devDependencies", "optionalDependencies"]
                .iter()
                .any(|section| manifest.get(section).and_then(|s| s.get(name)).is_some());
            let snapshot = Snapshot::take(self.workspace, &[manifest_rel.clone(), rel.clone()]);
            let spec = format!("{name}@{target}");
            let lock_only = ["--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund"];
            let result = if direct {
                how.push(format!("`npm install {spec} --package-lock-only --ignore-scripts` in {dir}"));
                let args: Vec<&str> = ["install", spec.as_str()].into_iter().chain(lock_only).collect();
                self.run(&dir, "npm", &args, log)
            } else {
                match add_override(&manifest_text, name, target) {
                    Ok(text) => match std::fs::write(self.workspace.join(&manifest_rel), text) {
                        Ok(()) => {
                            how.push(format!(
                                "an override {name} → {target} in {manifest_rel} and `npm install --package-lock-only \
                                 --ignore-scripts` in {dir}"
                            ));
                            let args: Vec<&str> = std::iter::once("install").chain(lock_only).collect();
                            self.run(&dir, "npm", &args, log)
                        }
                        Err(e) => {
                            Err((format!("cannot write {manifest_rel}: {e}"), RefusalCategory::Tooling))
                        }
                    },
                    Err(e) => Err(e),
                }
            };
            let result = result.and_then(|()| {
                let lock = self.read(&rel).and_then(|t| serde_json::from_str::<Value>(&t).ok()).unwrap_or(Value::Null);
                let versions = npm_lock_versions(&lock, name);
                let left = versions.iter().filter(|v| same(v)).count();
                let reached = versions
                    .iter()
                    .any(|v| Scheme::Semver.compare(v, target).is_ok_and(|o| o != Ordering::Less));
                if left == 0 && reached {
                    Ok(())
                } else {
                    Err((
                        format!("{rel} still locks {name} {installed} ({left} copies) after npm install; nested copies need an override"),
                        RefusalCategory::Repository,
                    ))
                }
            });
            attempts.record(&snapshot, result.map(|()| rel.clone()));
        }
        self.finish(attempts, format!("{name} {installed} → {target}"), format!("used {}", how.join(", ")))
    }

    fn pip(&self) -> Result<Step, Refused> {
        let (name, installed, target) = (self.name, self.installed_version(), self.target.version.as_str());
        let wanted = pep503(name);
        let same = |v: &str| v == installed || Scheme::Pep440.compare(v, installed) == Ok(Ordering::Equal);
        let mut edits: Vec<(String, String, Vec<Span>)> = Vec::new();
        let mut hashed = Vec::new();
        for rel in &self.files.requirements {
            let Some(text) = self.read(rel) else { continue };
            let mut spans = Vec::new();
            for pin in requirement_pins(&text) {
                if pep503(&pin.name) != wanted || !same(text.get(pin.version.clone()).unwrap_or_default()) {
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

/// The version `go.mod` requires of `module`, from `require` lines and
/// blocks (`// indirect` included).
fn go_mod_requirement(text: &str, module: &str) -> Option<String> {
    go_mod_directives(text, "require").into_iter().find(|(m, _)| m == module).map(|(_, v)| v)
}

/// Whether `go.mod` replaces `module` (any version).
fn go_mod_replaces(text: &str, module: &str) -> bool {
    go_mod_directives(text, "replace").iter().any(|(m, _)| m == module)
}

/// `(module, version)` of each `verb` directive, single-line or in a
/// block; comments dropped, quotes around module paths removed.
fn go_mod_directives(text: &str, verb: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    for raw in text.lines() {
        let line = raw.split("//").next().unwrap_or_default().trim();
        if in_block {
            if line.starts_with(')') {
                in_block = false;
                continue;
            }
            if let Some(entry) = go_mod_entry(line) {
                out.push(entry);
            }
            continue;
        }
        let Some(rest) = line.strip_prefix(verb).filter(|r| r.is_empty() || r.starts_with([' ', '\t', '(']))
        else {
            continue;
        };
        let rest = rest.trim();
        if rest == "(" {
            in_block = true;
        } else if let Some(entry) = go_mod_entry(rest) {
            out.push(entry);
        }
    }
    out
}

fn go_mod_entry(line: &str) -> Option<(String, String)> {
    let mut words = line.split_whitespace();
    let module = words.next()?.trim_matches('"').to_owned();
    let version = words.next().filter(|v| *v != "=>").unwrap_or_default().to_owned();
    Some((module, version))
}

/// Whether `go.sum` has the hash of `module`'s content (not only of its
/// `go.mod`, which Go also records for modules it never builds).
fn go_sum_lists(text: &str, module: &str) -> bool {
    text.lines().any(|l| {
        let mut words = l.split_whitespace();
        words.next() == Some(module) && words.next().is_some_and(|v| !v.ends_with("/go.mod"))
    })
}

/// Whether `Cargo.lock` has a `[[package]]` named `name` at `version`.
fn cargo_lock_has(text: &str, name: &str, version: &str) -> bool {
    let mut current: (Option<String>, Option<String>) = (None, None);
    let mut found = false;
    let mut check = |c: &(Option<String>, Option<String>)| {
        found |= c.0.as_deref() == Some(name) && c.1.as_deref() == Some(version);
    };
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            check(&current);
            current = (None, None);
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let value = value.trim().trim_matches('"').to_owned();
        match key.trim() {
            "name" => current.0 = Some(value),
            "version" => current.1 = Some(value),
            _ => {}
        }
    }
    check(&current);
    found
}

/// Every version `package-lock.json` locks `name` at: lockfile versions 2
/// and 3 (`packages`, keyed by `node_modules/…` paths) and 1 (nested
/// `dependencies`).
fn npm_lock_versions(lock: &Value, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(packages) = lock.get("packages").and_then(Value::as_object) {
        let top = format!("node_modules/{name}");
        let nested = format!("/node_modules/{name}");
        for (key, entry) in packages {
            if (key == &top || key.ends_with(&nested))
                && entry.get("link").and_then(Value::as_bool) != Some(true)
                && let Some(v) = entry.get("version").and_then(Value::as_str)
            {
                out.push(v.to_owned());
            }
        }
        return out;
    }
    fn walk(deps: &Value, name: &str, out: &mut Vec<String>) {
        let Some(map) = deps.as_object() else { return };
        for (key, entry) in map {
            if key == name
                && let Some(v) = entry.get("version").and_then(Value::as_str)
            {
                out.push(v.to_owned());
            }
            if let Some(inner) = entry.get("dependencies") {
                walk(inner, name, out);
            }
        }
    }
    if let Some(deps) = lock.get("dependencies") {
        walk(deps, name, &mut out);
    }
    out
}

/// `package.json` with `"overrides": {name: version}` added, written in the
/// file's own style (indentation, `": "` or `":"`); nothing else moves.
fn add_override(text: &str, name: &str, version: &str) -> Result<String, Refused> {
    let bad = |what: &str| (format!("package.json: {what}"), RefusalCategory::Repository);
    let parsed: Value = serde_json::from_str(text).map_err(|e| bad(&format!("not valid JSON: {e}")))?;
    if let Some(existing) = parsed.get("overrides") {
        if let Some(current) = existing.get(name) {
            return Err(bad(&format!(
                "already overrides {name} with {current}; not changing a maintained override"
            )));
        }
        if !existing.is_object() {
            return Err(bad("`overrides` is not an object"));
        }
    }
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""));
    let bytes = text.as_bytes();
    let open = skip_ws(bytes, 0);
    if bytes.get(open) != Some(&b'{') {
        return Err(bad("the top level is not an object"));
    }
    let (close, members) = object_members(text, open).ok_or_else(|| bad("cannot read its members"))?;
    let out = match (members.iter().find(|m| m.key == "overrides"), members.last()) {
        (Some(overrides), _) => {
            let (_, inner) =
                object_members(text, overrides.value.start).ok_or_else(|| bad("cannot read `overrides`"))?;
            let colon = text.get(overrides.key_end..overrides.value.start).unwrap_or(": ");
            match inner.first() {
                Some(first) => {
                    let ws = text.get(overrides.value.start + 1..first.key_start).unwrap_or_default();
                    let insert = format!("{}{colon}{},{ws}", quoted(name), quoted(version));
                    splice(text, first.key_start..first.key_start, &insert)
                }
                None => {
                    let ws = leading_ws(text, overrides.key_start);
                    let member = format!("{}{colon}{}", quoted(name), quoted(version));
                    let object = if ws.contains('\n') {
                        let indent = ws.rsplit('\n').next().unwrap_or_default();
                        format!("{{{ws}{indent}{member}{ws}}}")
                    } else {
                        format!("{{{member}}}")
                    };
                    splice(text, overrides.value.clone(), &object)
                }
            }
        }
        (None, Some(last)) => {
            let ws = leading_ws(text, last.key_start);
            let colon = text.get(last.key_end..last.value.start).unwrap_or(": ");
            let member = format!("{}{colon}{}", quoted(name), quoted(version));
            let object = if ws.contains('\n') {
                let indent = ws.rsplit('\n').next().unwrap_or_default();
                format!("{{{ws}{indent}{member}{ws}}}")
            } else {
                format!("{{{member}}}")
            };
            let insert = format!(",{ws}{}{colon}{object}", quoted("overrides"));
            splice(text, last.value.end..last.value.end, &insert)
        }
        (None, None) => splice(
            text,
            open..close + 1,
            &format!("{{\"overrides\": {{{}: {}}}}}", quoted(name), quoted(version)),
        ),
    };
    let check: Value =
        serde_json::from_str(&out).map_err(|e| bad(&format!("the override would not be valid JSON: {e}")))?;
    if check.get("overrides").and_then(|o| o.get(name)).and_then(Value::as_str) != Some(version) {
        return Err(bad("the override did not land where expected"));
    }
    Ok(out)
}

fn splice(text: &str, span: Span, with: &str) -> String {
    format!(
        "{}{with}{}",
        text.get(..span.start).unwrap_or_default(),
        text.get(span.end..).unwrap_or_default()
    )
}

/// The blanks right before `at`.
fn leading_ws(text: &str, at: usize) -> &str {
    let before = text.get(..at).unwrap_or_default();
    let start = before.trim_end_matches([' ', '\t', '\n', '\r']).len();
    before.get(start..).unwrap_or_default()
}

/// One member of a JSON object, by byte offsets.
struct Member {
    key: String,
    key_start: usize,
    /// Just after the key's closing quote.
    key_end: usize,
    value: Span,
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
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
fn object_members(text: &str, open: usize) -> Option<(usize, Vec<Member>)> {
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

/// PEP 503 normalised project name: lowercase, runs of `-_.` as one `-`.
fn pep503(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.push(c.to_ascii_lowercase());
            in_run = false;
        }
    }
    out
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
    use patchpilot_model::{Package, Severity};

    fn finding(id: &str, eco: &str, name: &str, version: &str, fixed: &[&str]) -> Finding {
        Finding {
            id: id.into(),
            aliases: Vec::new(),
            package: Package {
                name: name.into(),
                version: version.into(),
                kind: String::new(),
                ecosystem: eco.into(),
                source_name: String::new(),
                source_version: String::new(),
                path: String::new(),
                layer: String::new(),
                purl: String::new(),
            },
            fixed_versions: fixed.iter().map(|s| (*s).to_owned()).collect(),
            severity: Severity::High,
            cvss: Vec::new(),
            title: String::new(),
        }
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
    fn go_mod_requirements_in_lines_and_blocks() {
        let text = "module a\n\ngo 1.21\n\nrequire example.com/one v1.0.0\n\nrequire (\n\t\"example.com/two\" v0.3.1 // indirect\n\texample.com/three v2.0.0+incompatible\n)\n\nreplace example.com/three => ../three\n";
        assert_eq!(go_mod_requirement(text, "example.com/one").as_deref(), Some("v1.0.0"));
        assert_eq!(go_mod_requirement(text, "example.com/two").as_deref(), Some("v0.3.1"));
        assert_eq!(go_mod_requirement(text, "example.com/three").as_deref(), Some("v2.0.0+incompatible"));
        assert_eq!(go_mod_requirement(text, "example.com/on"), None);
        assert!(go_mod_replaces(text, "example.com/three"));
        let sum = "example.com/one v1.0.0/go.mod h1:abc=\nexample.com/two v0.3.1 h1:def=\nexample.com/two v0.3.1/go.mod h1:ghi=\n";
        assert!(
            !go_sum_lists(sum, "example.com/one"),
            "a go.mod hash alone is not a dependency that is built"
        );
        assert!(go_sum_lists(sum, "example.com/two"));
        assert!(!go_mod_replaces(text, "example.com/one"));
    }

    #[test]
    fn cargo_lock_entries() {
        let lock = "version = 3\n\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\ndependencies = [\n \"vulncrate\",\n]\n\n[[package]]\nname = \"vulncrate\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n";
        assert!(cargo_lock_has(lock, "vulncrate", "1.0.0"));
        assert!(!cargo_lock_has(lock, "vulncrate", "0.1.0"));
        assert!(!cargo_lock_has(lock, "app", "1.0.0"));
    }

    #[test]
    fn npm_lock_versions_v1_and_v3() {
        let v3: Value = serde_json::from_str(
            r#"{"lockfileVersion":3,"packages":{"":{"name":"app"},"node_modules/a":{"version":"1.0.0"},"node_modules/b/node_modules/a":{"version":"0.9.0"},"node_modules/xa":{"version":"5.0.0"},"node_modules/l/a":{"version":"1.0.0","link":true}}}"#,
        )
        .expect("json");
        assert_eq!(npm_lock_versions(&v3, "a"), vec!["1.0.0", "0.9.0"]);
        let v1: Value = serde_json::from_str(
            r#"{"lockfileVersion":1,"dependencies":{"a":{"version":"1.0.0"},"b":{"version":"2.0.0","dependencies":{"a":{"version":"0.9.0"}}}}}"#,
        )
        .expect("json");
        assert_eq!(npm_lock_versions(&v1, "a"), vec!["1.0.0", "0.9.0"]);
    }

    #[test]
    fn overrides_are_added_in_the_files_style() {
        let pretty = "{\n  \"name\": \"app\",\n  \"dependencies\": {\n    \"wrapper\": \"1.0.0\"\n  }\n}\n";
        assert_eq!(
            add_override(pretty, "vulnpkg", "1.1.0").expect("adds"),
            "{\n  \"name\": \"app\",\n  \"dependencies\": {\n    \"wrapper\": \"1.0.0\"\n  },\n  \"overrides\": {\n    \"vulnpkg\": \"1.1.0\"\n  }\n}\n"
        );
        let tight = r#"{"name":"app","dependencies":{"wrapper":"1.0.0"}}"#;
        assert_eq!(
            add_override(tight, "vulnpkg", "1.1.0").expect("adds"),
            r#"{"name":"app","dependencies":{"wrapper":"1.0.0"},"overrides":{"vulnpkg":"1.1.0"}}"#
        );
        let existing = "{\n\t\"overrides\": {\n\t\t\"other\": \"2.0.0\"\n\t}\n}";
        assert_eq!(
            add_override(existing, "vulnpkg", "1.1.0").expect("adds"),
            "{\n\t\"overrides\": {\n\t\t\"vulnpkg\": \"1.1.0\",\n\t\t\"other\": \"2.0.0\"\n\t}\n}"
        );
        let empty = "{\n  \"overrides\": {}\n}";
        assert_eq!(
            add_override(empty, "@scope/x", "1.1.0").expect("adds"),
            "{\n  \"overrides\": {\n    \"@scope/x\": \"1.1.0\"\n  }\n}"
        );
        let clash = r#"{"overrides":{"vulnpkg":"1.0.5"}}"#;
        assert_eq!(
            add_override(clash, "vulnpkg", "1.1.0").expect_err("refuses").1,
            RefusalCategory::Repository
        );
        assert!(add_override("[1]", "a", "1").is_err());
    }

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
        assert_eq!(pep503("Bar_Baz"), pep503("bar.baz"));
        assert_eq!(pep503("importlib_metadata"), "importlib-metadata");
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
