//! What a run came to, as the fleet hears of it: the [`SandboxResult`] the
//! controller waits for and the [`Retrospective`] the fleet condenses.
//!
//! The guest's retrospective is untrusted: it is read leniently, clipped,
//! and its identifiers and time are the run's, never the guest's. When the
//! guest wrote none (or nothing usable), one is built from the outcome.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use patchpilot_model::{RetroCategory, Retrospective, RetrospectiveReport, RunOutcome, SandboxResult};

use super::job::RunJob;

/// How a run ended, whatever stopped it.
#[derive(Debug, Clone)]
pub(super) struct Ended {
    pub outcome: RunOutcome,
    pub reason: String,
    /// The command's exit status; -1 when it never exited.
    pub exit_code: i32,
    pub egress_denied: u32,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    /// Uploaded artifacts, name → object key.
    pub objects: BTreeMap<String, String>,
    /// The guest's retrospective artifact, if it sent one.
    pub retrospective: Option<Vec<u8>>,
}

impl Ended {
    /// A run that never reached a VM.
    pub fn without_run(outcome: RunOutcome, reason: String, received_at: DateTime<Utc>) -> Ended {
        Ended {
            outcome,
            reason,
            exit_code: -1,
            egress_denied: 0,
            started_at: received_at,
            finished_at: Utc::now(),
            objects: BTreeMap::new(),
            retrospective: None,
        }
    }
}

/// The result the controller reads.
pub(super) fn result(job: &RunJob, ended: &Ended) -> SandboxResult {
    let object = |name: &str| ended.objects.get(name).cloned();
    SandboxResult {
        run_id: job.run_id.clone(),
        remediation_id: job.remediation_id.clone(),
        outcome: ended.outcome,
        reason: ended.reason.clone(),
        exit_code: (ended.exit_code >= 0).then_some(ended.exit_code),
        patch_object: object("patch"),
        transcript_object: object("transcript"),
        result_object: object("result"),
        session_object: object("session"),
        egress_denied: ended.egress_denied,
        started_at: Some(ended.started_at),
        finished_at: Some(ended.finished_at),
    }
}

/// The guest's retrospective when it sent a usable one; otherwise one built
/// from the outcome.
pub(super) fn retrospective(job: &RunJob, ended: &Ended) -> Retrospective {
    let parsed = ended.retrospective.as_deref().and_then(RetrospectiveReport::parse);
    // A report that says nothing else may still name its model.
    let model = parsed.as_ref().and_then(|r| r.model.clone());
    let from_guest = parsed.filter(|r| !r.is_empty());
    let report = from_guest.unwrap_or_else(|| {
        let mut report = RetrospectiveReport {
            category: match ended.outcome {
                RunOutcome::InfraError | RunOutcome::TimedOut => RetroCategory::Infrastructure,
                _ => RetroCategory::Unspecified,
            },
            summary: format!("{}: {}", ended.outcome, ended.reason),
            model,
            ..RetrospectiveReport::default()
        };
        if ended.outcome == RunOutcome::Completed {
            report.went_well.push(ended.reason.clone());
        } else {
            report.went_wrong.push(ended.reason.clone());
        }
        report
    });
    Retrospective::from_report(&job.run_id, &job.remediation_id, &report, Utc::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LimitsConfig;
    use patchpilot_model::{RunPurpose, SandboxRun, Wire as _};

    fn job() -> RunJob {
        let run = SandboxRun {
            run_id: "run-1_a".into(),
            remediation_id: "rem-1".into(),
            purpose: RunPurpose::Remediate,
            workspace_object: "workspaces/run-1_a.tar".into(),
            agent_command: vec!["true".into()],
            env: BTreeMap::new(),
            egress: Default::default(),
            limits: Default::default(),
            docker: false,
            attempt: 0,
            ci_logs_object: None,
            connections: Vec::new(),
            requested_at: None,
        };
        RunJob::from_wire(&run.encode(), &LimitsConfig::default()).expect("valid")
    }

    fn ended(outcome: RunOutcome, retro: Option<&str>) -> Ended {
        Ended {
            outcome,
            reason: "wall time 60s exceeded during the command; the VM was killed".into(),
            exit_code: -1,
            egress_denied: 2,
            started_at: Utc::now(),
            finished_at: Utc::now(),
            objects: [("patch".to_owned(), "runs/run-1_a/patch".to_owned())].into_iter().collect(),
            retrospective: retro.map(|s| s.as_bytes().to_vec()),
        }
    }

    #[test]
    fn results_carry_outcome_objects_and_denials() {
        let r = result(&job(), &ended(RunOutcome::TimedOut, None));
        assert_eq!(r.outcome, RunOutcome::TimedOut);
        assert_eq!(r.patch_object.as_deref(), Some("runs/run-1_a/patch"));
        assert_eq!(r.transcript_object, None);
        assert_eq!(r.session_object, None);
        assert_eq!(r.exit_code, None);
        assert_eq!(r.egress_denied, 2);
        assert_eq!(r.remediation_id, "rem-1");
        assert!(r.started_at.is_some() && r.finished_at.is_some());
    }

    #[test]
    fn a_session_artifact_becomes_the_session_object() {
        let mut e = ended(RunOutcome::Completed, None);
        e.objects.insert("session".into(), "runs/run-1_a/session".into());
        e.objects.insert("transcript".into(), "runs/run-1_a/transcript".into());
        let r = result(&job(), &e);
        assert_eq!(r.session_object.as_deref(), Some("runs/run-1_a/session"));
        assert_eq!(r.transcript_object.as_deref(), Some("runs/run-1_a/transcript"));
    }

    #[test]
    fn the_guest_offers_what_the_host_accepts_under_the_contract_names() {
        use patchpilot_model::context;
        use patchpilot_sandbox_guest::artifacts::{CONTEXT_ARTIFACTS, CONTEXT_DIR};
        assert_eq!(CONTEXT_DIR, context::CONTEXT_DIR);
        let offered: Vec<(&str, &str)> = CONTEXT_ARTIFACTS.iter().map(|a| (a.name, a.file)).collect();
        assert_eq!(
            offered,
            [
                ("result", context::RESULT),
                ("retrospective", context::RETROSPECTIVE),
                ("session", context::TRANSCRIPT)
            ]
        );
        for (name, _) in offered {
            assert!(crate::run::ARTIFACTS.contains(&name), "the host refuses {name}");
        }
    }

    #[test]
    fn retrospectives_come_from_the_guest_or_from_the_outcome() {
        let json = r#"{"run_id":"forged","went_well":["built"],"went_wrong":["",
            "rescan slow"],"category":"tooling","summary":"ok","extra":1}"#;
        let r = retrospective(&job(), &ended(RunOutcome::Completed, Some(json)));
        assert_eq!(r.run_id, "run-1_a");
        assert_eq!(r.report.went_well, vec!["built"]);
        assert_eq!(r.report.went_wrong, vec!["rescan slow"]);
        assert_eq!(r.report.category, RetroCategory::Tooling);
        assert_eq!(r.report.summary, "ok");
        assert_eq!(r.report.model, None, "the guest named no model");

        let json = r#"{"went_wrong":["proxy timeout"],"model":"gpt-4.1-mini\u0007"}"#;
        let r = retrospective(&job(), &ended(RunOutcome::AgentFailed, Some(json)));
        assert_eq!(r.report.model.as_deref(), Some("gpt-4.1-mini"), "named, control characters out");
        let r = retrospective(&job(), &ended(RunOutcome::TimedOut, Some(r#"{"model":"rules"}"#)));
        assert_eq!(r.report.model.as_deref(), Some("rules"), "kept when the rest is built from the outcome");

        let r = retrospective(&job(), &ended(RunOutcome::TimedOut, Some("not json")));
        assert_eq!(r.report.category, RetroCategory::Infrastructure);
        assert_eq!(r.report.went_wrong.len(), 1);
        assert!(r.report.went_wrong[0].starts_with("wall time 60s exceeded"));
        assert!(r.report.summary.starts_with("timed_out: "));

        let r = retrospective(&job(), &ended(RunOutcome::AgentFailed, None));
        assert_eq!(r.report.category, RetroCategory::Unspecified);
    }
}
