//! The deterministic remediators. Each proposes edits together with the
//! findings it expects them to fix, or refuses a finding and says why.
//!
//! - [`base_image`]: bump the base image to the smallest tag of the same
//!   variant that clears the base-image findings.
//! - [`os_pins`]: drop `apk add`/`apt-get install` pins the new base makes
//!   obsolete, or raise them to the smallest fixed version in the
//!   distribution's index.
//! - [`downloads`]: bump `ARG`/`ENV` versions of downloaded binaries to the
//!   smallest release that fixes them.
//! - [`lockfiles`]: run the ecosystem's own tool to move a dependency to
//!   its fixing version.

pub mod base_image;
pub mod downloads;
pub mod index;
pub mod lockfiles;
pub mod os_pins;

use patchpilot_model::{Finding, StepRecord};

use crate::dockerfile::Edit;

pub use patchpilot_model::{CommandRun, FindingRef, Refusal, RefusalCategory};

/// A change a remediator proposes.
#[derive(Debug, Clone)]
pub struct Step {
    /// Which remediator: `base-image`, `os-pin`, `download`, `lockfile`.
    pub remediator: String,
    /// What it does, for people: "bump golang 1.22.1-alpine3.19 → 1.22.2-alpine3.19".
    pub summary: String,
    /// Why: the evidence that made it choose this change.
    pub reason: String,
    /// The findings it expects to fix.
    pub fixes: Vec<FindingRef>,
    /// Edits to the Dockerfile (empty for changes made by running a tool).
    pub edits: Vec<Edit>,
    /// Files the step changed or will change, relative to the workspace.
    pub files: Vec<String>,
}

impl Step {
    /// The step as the report records it (its edits are recorded apart).
    pub fn record(&self) -> StepRecord {
        StepRecord {
            remediator: self.remediator.clone(),
            summary: self.summary.clone(),
            reason: self.reason.clone(),
            fixes: self.fixes.clone(),
            files: self.files.clone(),
        }
    }
}

/// Runs `program args…` in `dir` (a workspace folder), recording it. The
/// environment is the agent's own; nothing from the repository chooses the
/// program.
pub fn run_command(
    workspace: &std::path::Path,
    dir: &str,
    program: &str,
    args: &[&str],
    log: &mut Vec<CommandRun>,
) -> bool {
    let started = std::time::Instant::now();
    let output = std::process::Command::new(program).args(args).current_dir(workspace.join(dir)).output();
    let (exit_code, error_excerpt) = match &output {
        Ok(o) => (
            o.status.code(),
            if o.status.success() {
                String::new()
            } else {
                first_lines(&String::from_utf8_lossy(&o.stderr), 12)
            },
        ),
        Err(e) => (None, format!("cannot run {program}: {e}")),
    };
    let ok = exit_code == Some(0);
    log.push(CommandRun {
        command: std::iter::once(program).chain(args.iter().copied()).collect::<Vec<_>>().join(" "),
        dir: dir.to_owned(),
        exit_code,
        duration: started.elapsed(),
        error_excerpt,
    });
    ok
}

/// The first `n` non-empty lines of `text`.
pub fn first_lines(text: &str, n: usize) -> String {
    text.lines().filter(|l| !l.trim().is_empty()).take(n).collect::<Vec<_>>().join("\n")
}

/// Whether `program` is on `PATH`.
pub fn have(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|p| p.join(program).is_file()))
        .unwrap_or(false)
}

/// Whether two findings are the same vulnerability in the same package:
/// same package name, and ids that meet through their aliases (a CVE
/// assessed by Trivy and a GHSA found by the rescan are one finding).
pub fn same_vulnerability(a: &Finding, b: &Finding) -> bool {
    if a.package.name != b.package.name {
        return false;
    }
    let ids_a = std::iter::once(&a.id).chain(&a.aliases);
    ids_a.into_iter().any(|id| id == &b.id || b.aliases.contains(id))
}

/// The version a finding's package has to reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// The smallest fixed version above the installed one, as the finding
    /// lists it.
    pub version: String,
    /// How the ecosystem orders versions.
    pub scheme: patchpilot_scanner::version::Scheme,
}

/// The smallest of `finding.fixed_versions` above the installed version,
/// compared with the ecosystem's scheme (the scanner sorts them, but a
/// finding from another scanner may not be sorted). Refuses when there is
/// no fix, none above the installed version, or no way to compare.
pub fn smallest_fix(finding: &Finding) -> Result<Fix, Refusal> {
    let refuse = |reason: String, category: RefusalCategory| Refusal {
        finding: FindingRef::from(finding),
        reason,
        category,
    };
    let package = &finding.package;
    if finding.fixed_versions.is_empty() {
        return Err(refuse(
            format!("no fixed version of {} is published for {}", package.name, finding.id),
            RefusalCategory::Policy,
        ));
    }
    let Some(scheme) = patchpilot_scanner::version::Scheme::for_ecosystem(&package.ecosystem) else {
        return Err(refuse(
            format!("no version comparison for ecosystem `{}` ({})", package.ecosystem, package.name),
            RefusalCategory::Tooling,
        ));
    };
    let mut above: Vec<&String> = Vec::new();
    let mut errors = Vec::new();
    for fixed in &finding.fixed_versions {
        match scheme.compare(fixed, &package.version) {
            Ok(std::cmp::Ordering::Greater) => above.push(fixed),
            Ok(_) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    above.sort_by(|a, b| scheme.compare(a, b).unwrap_or(std::cmp::Ordering::Equal));
    match above.first() {
        Some(v) => Ok(Fix { version: (*v).clone(), scheme }),
        None if errors.len() == finding.fixed_versions.len() => Err(refuse(
            format!("cannot compare the fixed versions of {}: {}", package.name, errors.join("; ")),
            RefusalCategory::Tooling,
        )),
        None => Err(refuse(
            format!(
                "every fixed version of {} ({}) is at or below the installed {}: its release line has no fix",
                package.name,
                finding.fixed_versions.join(", "),
                package.version
            ),
            RefusalCategory::Policy,
        )),
    }
}

/// The version scheme of an OSV ecosystem, or why there is none.
pub fn scheme_of(ecosystem: &str) -> Result<patchpilot_scanner::version::Scheme, String> {
    patchpilot_scanner::version::Scheme::for_ecosystem(ecosystem)
        .ok_or_else(|| format!("no version comparator for the ecosystem `{ecosystem}`"))
}
