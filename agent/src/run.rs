//! One remediation run, start to finish: plan with every remediator, apply
//! the edits, verify by build and rescan, and leave the working tree
//! patched only when the rebuilt image is better.
//!
//! Order matters. The base image is chosen first, because it decides
//! which OS pins are obsolete; then pins, downloads and lockfiles. A
//! finding no remediator claims is refused with the reason nothing
//! applies. When verification shows nothing fixed, the build failed, or a
//! finding at or above the policy's severity came in, every file is put
//! back as it was: the run returns no patch, and says why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use patchpilot_model::context::CONTEXT_DIR;
use patchpilot_model::{Finding, Task};
use patchpilot_registry::oci::PlatformChoice;
use patchpilot_registry::{Registry, RegistryConfig};

use crate::dockerfile::{Dockerfile, Edit, apply};
use crate::remediate::os_pins::{self, PinContext};
use crate::remediate::{
    CommandRun, FindingRef, Refusal, RefusalCategory, Step, base_image, downloads, lockfiles,
    same_vulnerability,
};
use crate::report::{BaseRecord, EditRecord, Outcome, PlanStats, RunResult};
use crate::scans::{ScannedImage, Scans};
use crate::verify::{self, Builder, Status};

/// How to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Build and rescan (the default); without it the changes stay
    /// unverified.
    pub verify: bool,
    /// Plan and diff only: the working tree is left as it was.
    pub dry_run: bool,
    /// Image blobs and scratch files; outside the workspace, so nothing of
    /// it lands in the patch.
    pub cache_dir: PathBuf,
    /// Advisory DB folder when the task names none.
    pub db_dir: PathBuf,
    /// Prefix of the tags verification builds (`<prefix>:before`/`:after`).
    pub image_prefix: String,
    /// Registry access of a caller outside a sandbox (the CLI on a local
    /// checkout, with the operator's credentials). `None` in a sandbox: the
    /// task's settings, which hold no credential.
    pub registry: Option<RegistryConfig>,
}

/// Files a run may change, as they were before it: the Dockerfile, and the
/// manifests and lockfiles the ecosystem tools touch.
#[derive(Debug, Default)]
struct Snapshot {
    files: BTreeMap<String, Option<Vec<u8>>>,
}

/// Manifest and lockfile names the lockfile remediator's tools may write.
const TOOL_FILES: &[&str] = &[
    "go.mod",
    "go.sum",
    "go.work",
    "go.work.sum",
    "Cargo.toml",
    "Cargo.lock",
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "requirements.txt",
    "pyproject.toml",
    "poetry.lock",
    "Pipfile",
    "Pipfile.lock",
];

/// Folders never searched for manifests: other people's code and output.
const SKIP_DIRS: &[&str] = &[".git", CONTEXT_DIR, "node_modules", "vendor", "target", "dist", "third_party"];

impl Snapshot {
    fn take(workspace: &Path, dockerfile: &str) -> Snapshot {
        let mut snap = Snapshot::default();
        snap.add(workspace, dockerfile);
        let mut stack = vec![(PathBuf::new(), 0usize)];
        while let Some((rel, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(workspace.join(&rel)) else { continue };
            for entry in entries.filter_map(Result::ok) {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Ok(kind) = entry.file_type() else { continue };
                let path = rel.join(&name);
                if kind.is_dir() && depth < 8 && !SKIP_DIRS.contains(&name.as_str()) {
                    stack.push((path, depth + 1));
                } else if kind.is_file()
                    && (TOOL_FILES.contains(&name.as_str())
                        || (name.starts_with("requirements") && name.ends_with(".txt")))
                {
                    snap.add(workspace, &path.to_string_lossy());
                }
            }
        }
        snap
    }

    fn add(&mut self, workspace: &Path, rel: &str) {
        self.files.insert(rel.to_owned(), std::fs::read(workspace.join(rel)).ok());
    }

    /// Adds files a step reports that were not snapshotted (created by a
    /// tool): absent before.
    fn note_created(&mut self, rel: &str) {
        self.files.entry(rel.to_owned()).or_insert(None);
    }

    /// Files whose content changed, with old and new text.
    fn changed(&self, workspace: &Path) -> Vec<(String, Vec<u8>, Vec<u8>)> {
        self.files
            .iter()
            .filter_map(|(rel, before)| {
                let now = std::fs::read(workspace.join(rel)).ok();
                (now != *before)
                    .then(|| (rel.clone(), before.clone().unwrap_or_default(), now.unwrap_or_default()))
            })
            .collect()
    }

    fn restore(&self, workspace: &Path) -> std::io::Result<()> {
        for (rel, before) in &self.files {
            let path = workspace.join(rel);
            match before {
                Some(bytes) => {
                    if std::fs::read(&path).ok().as_ref() != Some(bytes) {
                        std::fs::write(&path, bytes)?;
                    }
                }
                None => {
                    if path.exists() {
                        std::fs::remove_file(&path)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A unified diff of the changed files, `a/…` and `b/…` as git writes.
pub fn unified_diff(changes: &[(String, Vec<u8>, Vec<u8>)]) -> String {
    let mut out = String::new();
    for (rel, before, after) in changes {
        let (old, new) = (String::from_utf8_lossy(before), String::from_utf8_lossy(after));
        let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
        out.push_str(&format!("diff --git a/{rel} b/{rel}\n"));
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{rel}"), &format!("b/{rel}"))
                .to_string(),
        );
    }
    out
}

/// What a run is told about where it is.
struct Plan {
    steps: Vec<Step>,
    refusals: Vec<Refusal>,
    notes: Vec<String>,
    problems: Vec<String>,
    base: Option<BaseRecord>,
    current_base: Option<std::sync::Arc<ScannedImage>>,
    new_text: String,
    edits: Vec<EditRecord>,
}

/// The registry client and scanner a run of `task` uses; the error is a
/// problem line (`infrastructure: …` or `repository: …`).
pub fn scans_for(task: &Task, options: &Options) -> Result<Scans, String> {
    let registry_config = options.registry.clone().unwrap_or_else(|| RegistryConfig {
        insecure: task.registry.insecure.clone(),
        timeout_secs: task.registry.timeout_secs,
        ..RegistryConfig::default()
    });
    let registry = Registry::new(&registry_config)
        .map_err(|e| format!("infrastructure: registry client: {}", patchpilot_model::error_chain(&e)))?;
    let platform = task
        .platform
        .as_deref()
        .map(str::parse::<PlatformChoice>)
        .transpose()
        .map_err(|e| format!("repository: platform {:?}: {e}", task.platform))?
        .unwrap_or_default();
    let db_dir = task.db.clone().unwrap_or_else(|| options.db_dir.clone());
    Ok(Scans::new(registry, db_dir, options.cache_dir.join("blobs"), platform))
}

/// Runs the remediation of `task` on `workspace`.
pub async fn remediate(workspace: &Path, task: &Task, options: &Options) -> RunResult {
    let started = Instant::now();
    let mut commands: Vec<CommandRun> = Vec::new();
    let mut result = RunResult::new(task);
    let dockerfile_path = workspace.join(&task.dockerfile);
    let text = match std::fs::read_to_string(&dockerfile_path) {
        Ok(t) => t,
        Err(e) => return failed(result, format!("repository: cannot read {}: {e}", task.dockerfile)),
    };
    let df = match Dockerfile::parse(&text) {
        Ok(df) => df,
        Err(e) => return failed(result, format!("repository: {}: {e}", task.dockerfile)),
    };
    let scans = match scans_for(task, options) {
        Ok(s) => s,
        Err(problem) => return failed(result, problem),
    };

    let mut snapshot = Snapshot::take(workspace, &task.dockerfile);
    let plan = plan(workspace, task, &df, &scans, &mut commands, &mut snapshot, Remediators::ALL).await;
    let stats = scans.stats();
    result.stats = PlanStats {
        planning: started.elapsed(),
        registry: stats.registry,
        scanning: stats.scanning,
        images_scanned: stats.images_scanned,
    };
    result.steps = plan.steps;
    result.refusals = plan.refusals;
    result.notes = plan.notes;
    result.problems = plan.problems;
    result.base = plan.base;
    result.edits = plan.edits;

    if result.steps.is_empty() {
        result.outcome = Outcome::NotFixed;
        result.summary = format!("nothing to change: {} finding(s) refused", result.refusals.len());
        return finish(result, commands, workspace, &snapshot, false);
    }
    if plan.new_text != text
        && let Err(e) = std::fs::write(&dockerfile_path, &plan.new_text)
    {
        let _ = snapshot.restore(workspace);
        return failed(result, format!("repository: cannot write {}: {e}", task.dockerfile));
    }
    if options.dry_run || !options.verify {
        let changed = snapshot.changed(workspace);
        result.diff = unified_diff(&changed);
        result.outcome = if changed.is_empty() { Outcome::NotFixed } else { Outcome::Unverified };
        result.summary = summary(&result, "not verified");
        let keep = !options.dry_run && !changed.is_empty();
        return finish(result, commands, workspace, &snapshot, keep);
    }

    // Verification.
    let builder = match Builder::connect(task.platform.clone(), options.cache_dir.join("build")).await {
        Ok(b) => b,
        Err(e) => {
            result.outcome = Outcome::Failed;
            result.problems.push(format!("tooling: {e}"));
            result.summary = "cannot verify: no Docker daemon".into();
            return finish(result, commands, workspace, &snapshot, false);
        }
    };
    let context = workspace.join(&task.context);
    let (before_tag, after_tag) =
        (format!("{}:before", options.image_prefix), format!("{}:after", options.image_prefix));
    let baseline: Vec<Finding>;
    let baseline_kind;
    let before_started = Instant::now();
    match builder.build_and_scan(&context, &text, &before_tag, &scans).await {
        Ok(before) => {
            // The baseline's build is a command the run ran, and under TCG
            // one of its longest: the report keeps it with the others.
            commands.push(build_command(
                &before_tag,
                &task.dockerfile,
                Some(0),
                before.build_time,
                String::new(),
            ));
            baseline = before.scanned.assessment.findings.clone();
            baseline_kind = "the original Dockerfile, rebuilt".to_owned();
            result.baseline = baseline.clone();
            builder.remove(&before_tag).await;
        }
        Err(e) => {
            commands.push(build_command(
                &before_tag,
                &task.dockerfile,
                Some(1),
                before_started.elapsed(),
                crate::remediate::first_lines(&e.to_string(), 3),
            ));
            let mut known: Vec<Finding> = task.findings.clone();
            if let Some(base) = &plan.current_base {
                known.extend(base.assessment.findings.iter().cloned());
            }
            baseline = known;
            baseline_kind = format!(
                "the assessment and the original base's scan (the original Dockerfile does not build any more: {})",
                crate::remediate::first_lines(&e.to_string(), 3)
            );
        }
    }
    let verify_started = Instant::now();
    let built = builder.build_and_scan(&context, &plan.new_text, &after_tag, &scans).await;
    let (built, command) = match built {
        Ok(b) => {
            let run = build_command(&after_tag, &task.dockerfile, Some(0), b.build_time, String::new());
            (b, run)
        }
        Err(e) => {
            let excerpt = match &e {
                verify::Error::Build { excerpt } => excerpt.clone(),
                other => other.to_string(),
            };
            commands.push(build_command(
                &after_tag,
                &task.dockerfile,
                Some(1),
                verify_started.elapsed(),
                excerpt.clone(),
            ));
            let infra = matches!(e, verify::Error::Daemon { .. } | verify::Error::Context { .. });
            result.outcome = Outcome::BuildFailed;
            result.problems.push(format!(
                "{}the patched image does not build:\n{excerpt}",
                if infra { "infrastructure: " } else { "" }
            ));
            result.summary = "the patched image does not build; no patch".into();
            return finish(result, commands, workspace, &snapshot, false);
        }
    };
    commands.push(command);
    builder.remove(&after_tag).await;
    let rows = verify::compare(&task.findings, &baseline, &built.scanned);
    let verification = verify::Verification {
        image: built.tag.clone(),
        image_id: built.id.clone(),
        build_time: built.build_time,
        scan_time: built.scan_time,
        rows,
        baseline: baseline_kind,
    };
    let fixed = verification.count(Status::Fixed);
    let worse: Vec<String> = verification
        .rows
        .iter()
        .filter(|r| r.status == Status::Introduced && r.severity >= task.policy.block_at)
        .map(|r| format!("{} in {} {} ({})", r.finding.id, r.finding.package, r.finding.version, r.severity))
        .collect();
    // Steps whose claims the rescan disproves.
    for step in &result.steps {
        let missed: Vec<&FindingRef> = step
            .fixes
            .iter()
            .filter(|f| verification.rows.iter().any(|r| r.status == Status::Present && &r.finding == *f))
            .collect();
        if !missed.is_empty() {
            result.problems.push(format!(
                "{} ({}) was expected to fix {}, which the rescan still finds",
                step.remediator,
                step.summary,
                missed.iter().map(|f| f.id.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    result.verification = Some(verification);
    if !worse.is_empty() {
        result.outcome = Outcome::Rejected;
        result.summary = format!("the patched image brings {}; no patch", worse.join(", "));
        for f in &task.findings {
            result.refusals.push(Refusal {
                finding: FindingRef::from(f),
                reason: format!(
                    "the patched image brings a finding at or above {}: {}",
                    task.policy.block_at,
                    worse.join(", ")
                ),
                category: RefusalCategory::Policy,
            });
        }
        return finish(result, commands, workspace, &snapshot, false);
    }
    if fixed == 0 {
        result.outcome = Outcome::NotFixed;
        result.summary =
            format!("the rebuilt image still has all {} finding(s); no patch", task.findings.len());
        return finish(result, commands, workspace, &snapshot, false);
    }
    let changed = snapshot.changed(workspace);
    if changed.is_empty() {
        // A rebuild alone fixed it: there is nothing to commit, and the
        // image only needs rebuilding.
        result.outcome = Outcome::NotFixed;
        result.summary = format!(
            "a rebuild without changes fixes {fixed} finding(s); the image needs rebuilding, not a patch"
        );
        return finish(result, commands, workspace, &snapshot, false);
    }
    result.diff = unified_diff(&changed);
    result.outcome = if fixed == task.findings.len() { Outcome::Fixed } else { Outcome::PartlyFixed };
    result.summary = summary(&result, "verified");
    finish(result, commands, workspace, &snapshot, true)
}

fn build_command(
    tag: &str,
    dockerfile: &str,
    exit_code: Option<i32>,
    duration: std::time::Duration,
    error_excerpt: String,
) -> CommandRun {
    CommandRun {
        command: format!("docker build -f {dockerfile} -t {tag} (through the sandbox's daemon)"),
        dir: ".".into(),
        exit_code,
        duration,
        error_excerpt,
    }
}

fn summary(result: &RunResult, verified: &str) -> String {
    let fixes: usize = {
        let mut all: Vec<&FindingRef> = result.steps.iter().flat_map(|s| s.fixes.iter()).collect();
        all.sort();
        all.dedup();
        all.len()
    };
    let what: Vec<&str> = result.steps.iter().map(|s| s.summary.as_str()).collect();
    match &result.verification {
        Some(v) => format!(
            "{}; {verified}: {} fixed, {} still present, {} introduced",
            what.join("; "),
            v.count(Status::Fixed),
            v.count(Status::Present),
            v.count(Status::Introduced)
        ),
        None => format!("{}; expected to fix {fixes} finding(s), {verified}", what.join("; ")),
    }
}

fn failed(mut result: RunResult, problem: String) -> RunResult {
    result.outcome = Outcome::Failed;
    result.summary = problem.split_once(": ").map(|(_, r)| r.to_owned()).unwrap_or_else(|| problem.clone());
    result.problems.push(problem);
    result
}

/// Keeps or puts back the working tree, and records the commands.
fn finish(
    mut result: RunResult,
    commands: Vec<CommandRun>,
    workspace: &Path,
    snapshot: &Snapshot,
    keep: bool,
) -> RunResult {
    result.commands = commands;
    if !keep {
        if let Err(e) = snapshot.restore(workspace) {
            result.problems.push(format!("cannot put the working tree back: {e}"));
        }
        result.patch = false;
        if result.outcome != Outcome::Unverified && result.outcome != Outcome::NotFixed {
            result.diff.clear();
        }
    } else {
        result.patch = true;
    }
    result
}

/// Which remediators a plan keeps the changes of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remediators {
    /// `base-image`.
    pub base_image: bool,
    /// `os-pin` (and `rebuild`).
    pub os_pins: bool,
    /// `download`.
    pub downloads: bool,
    /// `lockfile`.
    pub lockfiles: bool,
}

impl Remediators {
    /// All of them, in the fast path's order.
    pub const ALL: Remediators =
        Remediators { base_image: true, os_pins: true, downloads: true, lockfiles: true };
    /// None of them.
    pub const NONE: Remediators =
        Remediators { base_image: false, os_pins: false, downloads: false, lockfiles: false };

    fn keeps(&self, remediator: &str) -> bool {
        match remediator {
            "base-image" => self.base_image,
            "os-pin" | "rebuild" => self.os_pins,
            "download" => self.downloads,
            "lockfile" => self.lockfiles,
            _ => false,
        }
    }
}

/// What [`apply_rules`] did.
#[derive(Debug, Default)]
pub struct RulesApplied {
    /// The changes made.
    pub steps: Vec<Step>,
    /// Findings the remediators refused, and why.
    pub refusals: Vec<Refusal>,
    /// Facts they recorded.
    pub notes: Vec<String>,
    /// What went wrong.
    pub problems: Vec<String>,
    /// Commands they ran.
    pub commands: Vec<CommandRun>,
}

/// Runs the chosen remediators on the workspace as it is now and writes
/// their Dockerfile edits: the remediators as the model agent's tools.
pub async fn apply_rules(
    workspace: &Path,
    task: &Task,
    scans: &Scans,
    which: Remediators,
) -> Result<RulesApplied, String> {
    let path = workspace.join(&task.dockerfile);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", task.dockerfile))?;
    let df = Dockerfile::parse(&text).map_err(|e| format!("{}: {e}", task.dockerfile))?;
    let mut commands = Vec::new();
    let mut snapshot = Snapshot::default();
    let plan = plan(workspace, task, &df, scans, &mut commands, &mut snapshot, which).await;
    if plan.new_text != text {
        std::fs::write(&path, &plan.new_text)
            .map_err(|e| format!("cannot write {}: {e}", task.dockerfile))?;
    }
    Ok(RulesApplied {
        steps: plan.steps,
        refusals: plan.refusals,
        notes: plan.notes,
        problems: plan.problems,
        commands,
    })
}

/// Runs the remediators and merges their edits; only the steps of `which`
/// are kept (the base image is always planned: the pins depend on it).
async fn plan(
    workspace: &Path,
    task: &Task,
    df: &Dockerfile,
    scans: &Scans,
    commands: &mut Vec<CommandRun>,
    snapshot: &mut Snapshot,
    which: Remediators,
) -> Plan {
    let mut plan = Plan {
        steps: Vec::new(),
        refusals: Vec::new(),
        notes: Vec::new(),
        problems: Vec::new(),
        base: None,
        current_base: None,
        new_text: df.text().to_owned(),
        edits: Vec::new(),
    };
    let findings = &task.findings;
    // 1. The base image.
    let mut chosen_reference = String::new();
    let base = match base_image::plan(df, findings, scans, task.policy.block_at).await {
        Ok(b) => Some(b),
        Err(e) => {
            plan.problems.push(format!("infrastructure: {}", patchpilot_model::error_chain(&e)));
            None
        }
    };
    if let Some(b) = &base {
        plan.notes.extend(b.notes.iter().cloned());
        plan.refusals.extend(b.refusals.iter().cloned());
        plan.current_base = b.current.clone();
        if let (Some(current), Some(chosen)) = (&b.current, &b.chosen) {
            chosen_reference = chosen.reference.clone();
            plan.base = Some(BaseRecord {
                current: current.reference.clone(),
                chosen: chosen.reference.clone(),
                candidates_scanned: b.candidates_scanned.clone(),
            });
        }
        plan.steps.extend(b.step.clone());
    }
    // 2. OS package pins, against the chosen base.
    crate::install_crypto_provider();
    let client = match reqwest::Client::builder().timeout(std::time::Duration::from_secs(60)).build() {
        Ok(c) => c,
        Err(e) => {
            plan.problems.push(format!("tooling: HTTP client: {e}"));
            reqwest::Client::new()
        }
    };
    let chosen = base.as_ref().and_then(|b| b.chosen.clone());
    let pins = os_pins::plan(
        df,
        PinContext {
            findings,
            base: chosen.as_deref(),
            base_reference: &chosen_reference,
            indexes: &task.package_indexes,
            client: &client,
        },
    )
    .await;
    plan.notes.extend(pins.notes);
    plan.refusals.extend(pins.refusals);
    plan.steps.extend(pins.steps);
    // 3. Versioned downloads.
    let (steps, refusals) = downloads::plan(df, findings, &task.releases);
    plan.steps.extend(steps);
    plan.refusals.extend(refusals);
    // 4. Lockfiles, with the ecosystem's own tools (they write files, so
    // they run only when asked for).
    let (steps, refusals) = if !which.lockfiles {
        (Vec::new(), Vec::new())
    } else {
        let (workspace, findings) = (workspace.to_owned(), findings.clone());
        let mut log = Vec::new();
        let joined = tokio::task::spawn_blocking(move || {
            let out = lockfiles::apply(&workspace, &findings, &mut log);
            (out, log)
        })
        .await;
        match joined {
            Ok((out, log)) => {
                commands.extend(log);
                out
            }
            Err(e) => {
                plan.problems.push(format!("tooling: the lockfile remediator stopped: {e}"));
                (Vec::new(), Vec::new())
            }
        }
    };
    for step in &steps {
        step.files.iter().for_each(|f| snapshot.note_created(f));
    }
    plan.steps.extend(steps);
    plan.refusals.extend(refusals);

    plan.steps.retain(|s| which.keeps(&s.remediator));
    // Merge the Dockerfile edits, step by step; a step whose edits clash
    // with an earlier one's is dropped and its findings refused.
    let mut accepted: Vec<Edit> = Vec::new();
    let mut kept = Vec::new();
    for mut step in std::mem::take(&mut plan.steps) {
        let mut trial = accepted.clone();
        trial.extend(step.edits.iter().cloned());
        match apply(df.text(), &trial) {
            Ok(text) => {
                accepted = trial;
                plan.new_text = text;
                if !step.edits.is_empty() && !step.files.contains(&task.dockerfile) {
                    step.files.push(task.dockerfile.clone());
                }
                kept.push(step);
            }
            Err(e) => {
                for f in &step.fixes {
                    plan.refusals.push(Refusal {
                        finding: f.clone(),
                        reason: format!(
                            "{} ({}) edits the same text as an earlier change: {e}",
                            step.remediator, step.summary
                        ),
                        category: RefusalCategory::Repository,
                    });
                }
            }
        }
    }
    plan.steps = kept;
    accepted.sort_by_key(|e| e.span.start);
    plan.edits = accepted
        .iter()
        .map(|e| EditRecord {
            file: task.dockerfile.clone(),
            line: df.text()[..e.span.start].matches('\n').count() + 1,
            before: df.text()[e.span.clone()].to_owned(),
            after: e.replacement.clone(),
            reason: e.reason.clone(),
        })
        .collect();

    // A refusal is moot when another step fixes the same finding (the base
    // has no fix, but the raised pin does).
    let claimed: Vec<&FindingRef> = plan.steps.iter().flat_map(|s| s.fixes.iter()).collect();
    let (moot, refusals): (Vec<Refusal>, Vec<Refusal>) =
        std::mem::take(&mut plan.refusals).into_iter().partition(|r| claimed.contains(&&r.finding));
    plan.refusals = refusals;
    for r in moot {
        plan.notes.push(format!(
            "{} in {}: {} — fixed by another change instead",
            r.finding.id, r.finding.package, r.reason
        ));
    }
    // Findings nobody claimed or refused.
    for f in findings {
        let r = FindingRef::from(f);
        if !claimed.contains(&&r) && !plan.refusals.iter().any(|x| x.finding == r) {
            let (reason, category) = unclaimed_reason(f, plan.current_base.as_deref(), task);
            plan.refusals.push(Refusal { finding: r, reason, category });
        }
    }
    plan.refusals.sort_by(|a, b| a.finding.cmp(&b.finding));
    plan.refusals.dedup_by(|a, b| a.finding == b.finding && a.reason == b.reason);
    plan
}

/// Why nothing claimed `f`, and the category: a binary the release index
/// does not describe is missing context; anything else is the repository's
/// shape.
fn unclaimed_reason(f: &Finding, base: Option<&ScannedImage>, task: &Task) -> (String, RefusalCategory) {
    let in_base = base.is_some_and(|b| b.assessment.findings.iter().any(|x| same_vulnerability(f, x)));
    let at = if f.package.path.is_empty() { String::new() } else { format!(" at {}", f.package.path) };
    let kind = if f.package.kind.is_empty() { "unknown type" } else { f.package.kind.as_str() };
    if in_base {
        return (
            format!(
                "{} {} comes with the base image, and no base change was possible",
                f.package.name, f.package.version
            ),
            RefusalCategory::Repository,
        );
    }
    let path = f.package.path.trim_start_matches('/');
    let binary = matches!(kind, "go-module" | "cargo") && !path.is_empty();
    let described = task.releases.binaries.iter().any(|b| b.path.trim_start_matches('/') == path);
    if binary && !described {
        return (
            format!(
                "{} {} is built into {path}, which no lockfile in the workspace builds and the task's release index does not describe; with its releases, the download remediator could bump it",
                f.package.name, f.package.version
            ),
            RefusalCategory::Context,
        );
    }
    (
        format!(
            "no remediator applies: {} {} ({kind}){at} is not installed by a pinned package, a versioned download or a lockfile this run can change",
            f.package.name, f.package.version
        ),
        RefusalCategory::Repository,
    )
}
