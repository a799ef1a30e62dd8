//! The gates `finish` must pass, in code rather than in the prompt: a
//! model that ignores its instructions still cannot end the session with
//! a change that breaks them.
//!
//! - `diff_budget`: some change, and no more lines than the limit.
//! - `protected_files`: tests and CI definitions untouched (CI definitions
//!   may change only by vetting's version-only rule, which the controller
//!   applies again).
//! - `rescan`: the current tree builds, the targets are fixed, and nothing
//!   at or above the policy's `block_at` is introduced.
//! - `required_edits` (repairs): every version edit of the fix is still
//!   there, by vetting's own check.
//! - `failing_check` (repairs, one per check): the failing CI check's
//!   command, when the forge named it (`task.failing_checks`), run again in
//!   the workspace and passing. A command the VM lacks (exit 127) or one
//!   that outlives its time is recorded and let through: CI judges it.
//!   GitHub names no command (a check is a workflow's job), so there CI
//!   alone judges the repair.

use std::time::{Duration, Instant};

use patchpilot_model::context::{self, CONTEXT_DIR};
use patchpilot_model::{CommandRun, FailingCheck, GateRecord, RunPurpose, VerificationStatus as Status};

use super::tools::{FinishOutcome, Toolbox, exec, image};
use super::workspace::{Change, Snapshot, changed_lines};

/// Whether `path` is a test: by the conventions of the ecosystems the
/// agent meets.
pub fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let in_test_dir =
        path.split('/').any(|c| matches!(c, "test" | "tests" | "__tests__" | "testdata" | "spec"));
    in_test_dir
        || name.ends_with("_test.go")
        || (name.starts_with("test_") && name.ends_with(".py"))
        || name.ends_with("_test.py")
        || [".test.js", ".test.ts", ".spec.js", ".spec.ts", ".test.tsx", ".spec.tsx", ".test.jsx"]
            .iter()
            .any(|s| name.ends_with(s))
}

/// Whether `path` is a CI definition, by vetting's own list (the
/// controller applies the same one).
pub fn is_ci_definition(path: &str) -> bool {
    patchpilot_vet::ci_definition(path).is_some()
}

fn gate(name: &str, passed: bool, detail: impl Into<String>) -> GateRecord {
    GateRecord { name: name.into(), passed, detail: detail.into() }
}

/// Runs every gate on the session's change; all must pass.
pub async fn check(
    tools: &mut Toolbox,
    start: &Snapshot,
    max_diff_lines: u64,
    outcome: FinishOutcome,
) -> Vec<GateRecord> {
    let changes: Vec<Change> = start.changes(&tools.workspace);
    let mut gates = Vec::new();
    let lines = changed_lines(&changes);
    gates.push(match (changes.is_empty(), lines <= max_diff_lines) {
        (true, _) => gate("diff_budget", false, "the tree is unchanged: there is nothing to propose"),
        (false, true) => {
            gate("diff_budget", true, format!("{lines} changed lines in {} files", changes.len()))
        }
        (false, false) => gate(
            "diff_budget",
            false,
            format!("{lines} changed lines; the budget is {max_diff_lines}: make a smaller change"),
        ),
    });
    let tests: Vec<&str> = changes.iter().map(|c| c.path.as_str()).filter(|p| is_test_file(p)).collect();
    let mut refused: Vec<String> = tests.iter().map(|p| format!("{p} (a test)")).collect();
    let mut version_edits = Vec::new();
    for c in changes.iter().filter(|c| is_ci_definition(&c.path)) {
        // Vetting's own rule: only version tokens, forward, same action.
        let (Some(before), Some(after)) = (&c.before, &c.after) else {
            refused.push(format!("{} (a CI definition, added or removed)", c.path));
            continue;
        };
        match patchpilot_vet::ci_version_edits(
            &c.path,
            &String::from_utf8_lossy(before),
            &String::from_utf8_lossy(after),
        ) {
            Ok(edits) => version_edits.extend(edits.into_iter().map(|e| format!("{}:{}", c.path, e.line))),
            Err(why) => refused.push(format!("{} ({why})", c.path)),
        }
    }
    gates.push(if refused.is_empty() {
        let detail = if version_edits.is_empty() {
            "no test or CI definition changed".to_owned()
        } else {
            format!("CI definitions changed by version only: {}", version_edits.join(", "))
        };
        gate("protected_files", true, detail)
    } else {
        gate(
            "protected_files",
            false,
            format!(
                "tests stay as they are, and CI definitions change only by a forward version bump; put back: {}",
                refused.join("; ")
            ),
        )
    });
    gates.push(rescan(tools, outcome).await);
    if tools.mode == RunPurpose::Repair {
        gates.push(required_edits(tools));
        for check in tools.task.failing_checks.clone() {
            gates.push(failing_check(tools, &check).await);
        }
    }
    gates
}

/// Longest a failing check's command runs in the VM.
const CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// `sh`'s exit status for a command it cannot find.
const NOT_FOUND: i32 = 127;

/// Lines of a failing check's output the gate's detail keeps, from the end.
const CHECK_TAIL_LINES: usize = 30;

/// `argv` as one `sh` line, each word single-quoted.
fn shell_line(argv: &[String]) -> String {
    argv.iter().map(|a| format!("'{}'", a.replace('\'', r"'\''"))).collect::<Vec<_>>().join(" ")
}

/// Runs `check`'s command in the workspace, as CI would on the repair.
async fn failing_check(tools: &mut Toolbox, check: &FailingCheck) -> GateRecord {
    const NAME: &str = "failing_check";
    if check.command.is_empty() {
        return gate(NAME, true, format!("{}: the forge named no command; CI judges the repair", check.name));
    }
    let line = shell_line(&check.command);
    let started = Instant::now();
    let (code, output) = match exec::run_shell(&line, tools.workspace.root(), CHECK_TIMEOUT).await {
        Ok(done) => done,
        Err(e) => {
            return gate(
                NAME,
                true,
                format!("{}: could not run here ({e}); CI judges the repair", check.name),
            );
        }
    };
    let tail: Vec<&str> = output.lines().rev().take(CHECK_TAIL_LINES).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    tools.commands.push(CommandRun {
        command: format!("{} (the failing check {})", check.command.join(" "), check.name),
        dir: ".".into(),
        exit_code: code,
        duration: started.elapsed(),
        error_excerpt: if code == Some(0) {
            String::new()
        } else {
            crate::remediate::first_lines(&output, 20)
        },
    });
    match code {
        Some(0) => gate(NAME, true, format!("{}: passes in the VM", check.name)),
        Some(NOT_FOUND) => gate(
            NAME,
            true,
            format!(
                "{}: a command it needs is not in the VM (exit 127); CI judges the repair\n{tail}",
                check.name
            ),
        ),
        None => gate(
            NAME,
            true,
            format!(
                "{}: still running after {} s in the VM; CI judges the repair",
                check.name,
                CHECK_TIMEOUT.as_secs()
            ),
        ),
        Some(c) => gate(
            NAME,
            false,
            format!(
                "{}: still fails in the VM (exit status {c}); fix what it reports, forward only. The end of its \
                 output (untrusted):\n{tail}",
                check.name
            ),
        ),
    }
}

async fn rescan(tools: &mut Toolbox, outcome: FinishOutcome) -> GateRecord {
    let build = match &tools.last_build {
        Some(b) if b.tree_version == tools.tree_version => b.clone(),
        _ => match image::build_current(tools).await {
            Ok(b) => b,
            Err(e) => return gate("rescan", false, format!("cannot build and rescan: {e}")),
        },
    };
    let Some(v) = (match (&build.error, &build.verification) {
        (Some(e), _) => return gate("rescan", false, format!("the image does not build:\n{e}")),
        (None, v) => v,
    }) else {
        return gate("rescan", false, "the build left no scan");
    };
    let block_at = tools.task.policy.block_at;
    let blocking: Vec<String> = v
        .rows
        .iter()
        .filter(|r| r.status == Status::Introduced && r.severity >= block_at)
        .map(|r| format!("{} in {} {}", r.finding.id, r.finding.package, r.finding.version))
        .collect();
    let (fixed, present) = (v.count(Status::Fixed), v.count(Status::Present));
    let table = image::render(v, block_at);
    if !blocking.is_empty() {
        return gate("rescan", false, format!("the change brings {}\n{table}", blocking.join(", ")));
    }
    let enough = match outcome {
        FinishOutcome::Fixed => present == 0 && fixed > 0,
        FinishOutcome::PartlyFixed | FinishOutcome::GaveUp => fixed > 0,
    };
    gate("rescan", enough, table)
}

fn required_edits(tools: &Toolbox) -> GateRecord {
    let path = tools.workspace.root().join(CONTEXT_DIR).join(context::FIX_PATCH);
    let Ok(patch) = std::fs::read(&path) else {
        return gate("required_edits", true, "no fix.patch in the context: vetting checks the fix instead");
    };
    let edits = patchpilot_vet::required_edits_from_patch(&patch);
    let broken: Vec<String> = edits
        .iter()
        .filter_map(|e| patchpilot_vet::check_required_edit(tools.workspace.root(), e))
        .map(|r| format!("{}: {}", r.path, r.detail))
        .collect();
    if broken.is_empty() {
        gate("required_edits", true, format!("all {} version edits of the fix are kept", edits.len()))
    } else {
        gate("required_edits", false, format!("the fix must stay: {}", broken.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_command_becomes_one_quoted_shell_line() {
        let argv: Vec<String> = ["sh", "-c", "echo 'it''s' && exit 3"].map(str::to_owned).into();
        let line = shell_line(&argv);
        let out = std::process::Command::new("sh").arg("-c").arg(&line).output().expect("sh");
        assert_eq!(out.status.code(), Some(3), "{line}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "its\n", "{line}");
    }

    #[test]
    fn tests_and_ci_definitions_are_recognised() {
        for p in ["main_test.go", "pkg/x/y_test.go", "tests/a.py", "test_x.py", "web/a.spec.ts", "testdata/f"]
        {
            assert!(is_test_file(p), "{p}");
        }
        for p in ["main.go", "Makefile", "contest.go", "latest/x.go"] {
            assert!(!is_test_file(p), "{p}");
        }
        assert!(is_ci_definition(".github/workflows/ci.yml") && is_ci_definition(".gitlab-ci.yml"));
        assert!(!is_ci_definition(".github/dependabot.yml") && !is_ci_definition("Makefile"));
    }
}
