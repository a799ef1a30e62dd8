//! Watching CI on a pull request's head commit: gather its check runs and
//! commit statuses, and once they are all done, triage each failure and
//! collect the evidence a repair run gets.

use crate::lifecycle::FailedCheck;
use crate::triage::{self, Verdict};
use patchpilot_forge::{CheckState, Forge, Repo};
use patchpilot_model::FailingCheck;

/// Lines of each failing log a repair run gets.
const LOG_LINES: usize = 200;

/// Where CI on a commit is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CiState {
    /// Not started, or still running.
    Pending,
    /// Every check passed.
    Passed,
    /// All done, some failed.
    Failed {
        /// Each failure, triaged.
        checks: Vec<FailedCheck>,
        /// The patch-caused failures' logs, trimmed and fenced as untrusted.
        evidence: String,
        /// The patch-caused failures whose command the forge knows.
        commands: Vec<FailingCheck>,
    },
}

/// Looks at CI on `sha` once.
pub async fn look(forge: &dyn Forge, repo: &Repo, sha: &str) -> Result<CiState, patchpilot_forge::Error> {
    let checks = forge.checks(repo, sha).await?;
    if checks.is_empty() || checks.iter().any(|c| c.state == CheckState::Pending) {
        return Ok(CiState::Pending);
    }
    let mut failed = Vec::new();
    let mut evidence = String::new();
    let mut commands = Vec::new();
    for check in checks.iter().filter(|c| c.state != CheckState::Passed) {
        let log = forge.check_log(repo, check).await.unwrap_or_default();
        let infrastructure = match triage::classify(check, &log) {
            Verdict::Infrastructure { reason } => Some(reason),
            Verdict::PatchCaused => {
                evidence.push_str(&triage::fence_log(&check.name, &triage::trim_log(&log, LOG_LINES)));
                // A command the forge cannot tell is no reason to stop:
                // the repair runs without that gate, and CI judges it.
                if let Ok(Some(command)) = forge.check_command(repo, check).await {
                    commands.push(FailingCheck { name: check.name.clone(), command });
                }
                None
            }
        };
        failed.push(FailedCheck { id: check.id.clone(), name: check.name.clone(), infrastructure });
    }
    if failed.is_empty() {
        return Ok(CiState::Passed);
    }
    Ok(CiState::Failed { checks: failed, evidence, commands })
}
