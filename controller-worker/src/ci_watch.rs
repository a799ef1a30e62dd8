//! Watching CI on a pull request's head commit: gather its check runs and
//! commit statuses, and once they are all done, triage each failure and
//! collect the evidence a repair run gets.

use std::time::Duration;

use crate::forge::{CheckState, Forge, Repo};
use crate::lifecycle::FailedCheck;
use crate::triage::{self, Verdict};

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
    },
}

/// Looks at CI on `sha` once.
pub async fn look(forge: &dyn Forge, repo: &Repo, sha: &str) -> Result<CiState, crate::forge::Error> {
    let checks = forge.checks(repo, sha).await?;
    if checks.is_empty() || checks.iter().any(|c| c.state == CheckState::Pending) {
        return Ok(CiState::Pending);
    }
    let mut failed = Vec::new();
    let mut evidence = String::new();
    for check in checks.iter().filter(|c| c.state != CheckState::Passed) {
        let log = forge.check_log(repo, check).await.unwrap_or_default();
        let infrastructure = match triage::classify(check, &log) {
            Verdict::Infrastructure { reason } => Some(reason),
            Verdict::PatchCaused => {
                evidence.push_str(&triage::fence_log(&check.name, &triage::trim_log(&log, LOG_LINES)));
                None
            }
        };
        failed.push(FailedCheck { id: check.id.clone(), name: check.name.clone(), infrastructure });
    }
    if failed.is_empty() {
        return Ok(CiState::Passed);
    }
    Ok(CiState::Failed { checks: failed, evidence })
}

/// How long to wait before look number `n` (from 0): 2 s doubling to a
/// minute, so a quick CI is seen quickly and a slow one is not hammered.
pub fn poll_delay(n: u32) -> Duration {
    Duration::from_secs(2u64.saturating_mul(1u64 << n.min(5)).min(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polling_backs_off_to_a_minute() {
        assert_eq!(poll_delay(0), Duration::from_secs(2));
        assert_eq!(poll_delay(3), Duration::from_secs(16));
        assert_eq!(poll_delay(10), Duration::from_secs(60));
    }
}
