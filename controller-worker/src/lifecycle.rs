//! The remediation lifecycle as a pure state machine: given the stored
//! state and what just happened, the next state and the actions to take.
//!
//! ```text
//! queued → preparing → running → vetting → publishing → ci_pending → succeeded
//!             ▲   (each with a purpose:                      │
//!             │    remediate, or repair)                     │ checks failed,
//!             └──────────── preparing{repair} ◄──────────────┘ the patch's fault
//!
//! any state → needs_human (repair limit, vet refusal, no change, a step
//!             that cannot succeed once a PR exists)
//!           | failed (runs keep failing, a step that cannot succeed before
//!             a PR exists, an unusable job) | superseded
//! ```
//!
//! Keeping the decisions here, free of I/O, is what makes the controller
//! boring: the executor persists the new state *before* it performs the
//! actions, and every action is idempotent (a run id derived from the
//! remediation, revision and attempt; a branch pushed with a lease; a PR
//! looked up by branch before it is opened; comments carrying a marker), so
//! a crash between the two replays the actions without duplicating them.
//!
//! It must never choose to revert a fix: a CI failure the patch caused
//! leads to a repair (forward fix) or to a person, never to dropping the
//! change.

use patchpilot_model::{RemediationState, RunPurpose};
use serde::{Deserialize, Serialize};

/// Limits the machine enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Repair runs before the PR goes to a person.
    pub max_repairs: u32,
    /// Re-runs of infrastructure failures per head commit.
    pub max_infra_retries: u32,
    /// Sandbox runs that end in an infrastructure error, retried before the
    /// remediation fails.
    pub max_run_retries: u32,
    /// Attempts of one step that keeps failing for a transient reason
    /// (forge or object store down) before the remediation ends; the
    /// executor backs off between them.
    pub max_step_attempts: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_repairs: 3, max_infra_retries: 2, max_run_retries: 2, max_step_attempts: 8 }
    }
}

/// Where a remediation is. Stored as JSON with the remediation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum State {
    /// A job arrived; nothing done yet.
    Queued,
    /// Cloning and packing the workspace for a run.
    Preparing {
        /// Remediate or repair.
        purpose: RunPurpose,
    },
    /// A sandbox run is working.
    Running {
        /// Remediate or repair.
        purpose: RunPurpose,
        /// The run's id.
        run_id: String,
    },
    /// The run's patch is being vetted.
    Vetting {
        /// Remediate or repair.
        purpose: RunPurpose,
        /// The run whose patch it is.
        run_id: String,
    },
    /// Committing, pushing, opening or updating the PR.
    Publishing {
        /// The run whose patch it is.
        run_id: String,
    },
    /// Watching CI on the PR's head commit.
    CiPending {
        /// The commit CI runs on.
        head_sha: String,
    },
    /// CI is green.
    Succeeded,
    /// Handed to a person.
    NeedsHuman {
        /// Why.
        reason: String,
    },
    /// Gave up.
    Failed {
        /// Why.
        reason: String,
    },
    /// The findings are gone or a newer revision replaced this work.
    Superseded,
}

impl State {
    /// The state's name, without its details.
    pub fn kind(&self) -> RemediationState {
        match self {
            State::Queued => RemediationState::Queued,
            State::Preparing { .. } => RemediationState::Preparing,
            State::Running { .. } => RemediationState::Running,
            State::Vetting { .. } => RemediationState::Vetting,
            State::Publishing { .. } => RemediationState::Publishing,
            State::CiPending { .. } => RemediationState::CiPending,
            State::Succeeded => RemediationState::Succeeded,
            State::NeedsHuman { .. } => RemediationState::NeedsHuman,
            State::Failed { .. } => RemediationState::Failed,
            State::Superseded => RemediationState::Superseded,
        }
    }
}

/// Counters that survive state changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counters {
    /// Repair runs requested so far.
    pub repairs: u32,
    /// Infrastructure re-runs on the current head commit.
    pub infra_retries: u32,
    /// Sandbox runs retried after infrastructure errors, this step.
    pub run_retries: u32,
    /// Runs requested so far (names the next run).
    pub runs: u32,
    /// Failed attempts of the current step in a row; any other event
    /// resets it.
    pub step_failures: u32,
}

/// How a sandbox run ended, as the controller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// A patch came back.
    Patch,
    /// The run finished without changes.
    NoChange {
        /// The agent's reason.
        reason: String,
    },
    /// The agent failed or hit a limit.
    AgentFailed {
        /// Why.
        reason: String,
    },
    /// The VM or the host failed; worth retrying.
    Infrastructure {
        /// Why.
        reason: String,
    },
}

/// A failed check after triage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedCheck {
    /// The check's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// `Some(reason)` when triage says infrastructure.
    pub infrastructure: Option<String>,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The planner published (a revision of) the job with findings.
    Job,
    /// The planner says the findings are all gone.
    Resolved,
    /// The workspace is packed; a run was requested under this id.
    RunRequested {
        /// Run id.
        run_id: String,
    },
    /// The run ended.
    RunEnded(RunEnd),
    /// Vetting accepted the patch.
    VetAccepted,
    /// Vetting refused the patch.
    VetRefused {
        /// The report, for the PR comment and the hand-off.
        report: String,
    },
    /// The branch is pushed and the PR open or updated at this commit.
    Published {
        /// The head commit.
        head_sha: String,
    },
    /// Every check on the head passed.
    ChecksPassed,
    /// Checks finished and some failed.
    ChecksFailed(Vec<FailedCheck>),
    /// The job cannot be worked at all (it does not decode, its repository
    /// URL names no repository): the remediation fails.
    Abandon {
        /// Why.
        reason: String,
    },
    /// The step in hand failed. A transient failure (forge down) is
    /// counted and the step retried later, up to
    /// [`Limits::max_step_attempts`]; a permanent one (the run has no
    /// patch, the Dockerfile is not in the repository) ends the work now.
    StepFailed {
        /// Why, with the cause.
        reason: String,
        /// Whether retrying cannot help.
        permanent: bool,
    },
}

/// Something for the executor to do after the new state is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Clone, write `.patchpilot/`, pack, publish a SandboxRun with this id.
    RequestRun {
        /// Remediate or repair.
        purpose: RunPurpose,
        /// Deterministic run id.
        run_id: String,
    },
    /// Fetch the run's patch and vet it.
    Vet {
        /// Remediate or repair (a repair's patch must keep the fix).
        purpose: RunPurpose,
        /// The run.
        run_id: String,
    },
    /// Commit, push, open or update the PR.
    Publish {
        /// The run whose patch is published.
        run_id: String,
    },
    /// Poll checks on the head.
    WatchChecks {
        /// The commit.
        head_sha: String,
    },
    /// Re-run failed checks (infrastructure).
    Rerun {
        /// Check ids.
        check_ids: Vec<String>,
    },
    /// Comment on the PR (with a marker so a replay does not repeat it).
    Comment {
        /// Marker that identifies this comment.
        key: String,
        /// Text.
        body: String,
    },
    /// Add the hand-off label.
    LabelNeedsHuman,
    /// Send a notification.
    Notify(Notice),
    /// Close the PR with a comment (findings gone or superseded).
    ClosePr {
        /// Why.
        reason: String,
    },
}

/// Which notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Notice {
    /// CI green.
    Green,
    /// Handed to a person.
    NeedsHuman,
    /// Gave up.
    Failed,
}

/// Whether an action is a side effect (kept in the outbox) rather than the
/// main line the state itself implies.
pub fn is_side_effect(action: &Action) -> bool {
    matches!(
        action,
        Action::Rerun { .. }
            | Action::Comment { .. }
            | Action::LabelNeedsHuman
            | Action::Notify(_)
            | Action::ClosePr { .. }
    )
}

/// The deterministic id of run number `n` of a remediation revision.
pub fn run_id(remediation_id: &str, revision: u32, n: u32) -> String {
    let clean: String =
        remediation_id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(40).collect();
    format!("{clean}-r{revision}-{n}")
}

/// The machine for one remediation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// Remediation id.
    pub remediation_id: String,
    /// Job revision being worked.
    pub revision: u32,
    /// Current state.
    pub state: State,
    /// Counters.
    pub counters: Counters,
    /// Whether a PR exists (so hand-offs and closes know where to talk).
    pub has_pr: bool,
    /// Side effects decided by a transition and not yet confirmed done
    /// (comments, labels, notifications, re-runs, closing the PR). Stored
    /// with the state, so a crash between deciding and doing replays them;
    /// each is idempotent (comments carry their key as a marker).
    #[serde(default)]
    pub outbox: Vec<Action>,
}

impl Machine {
    /// A new machine for a job.
    pub fn new(remediation_id: &str, revision: u32) -> Machine {
        Machine {
            remediation_id: remediation_id.to_owned(),
            revision,
            state: State::Queued,
            counters: Counters::default(),
            has_pr: false,
            outbox: Vec::new(),
        }
    }

    /// The main-line action the current state calls for, recomputed from
    /// the stored state alone: what a controller resuming after a crash
    /// does next. Side effects are in [`Machine::outbox`].
    pub fn pending(&self) -> Option<Action> {
        match &self.state {
            State::Queued => None,
            State::Preparing { purpose } => Some(Action::RequestRun {
                purpose: *purpose,
                run_id: run_id(&self.remediation_id, self.revision, self.counters.runs),
            }),
            // Waiting for the result; nothing to do but listen.
            State::Running { .. } => None,
            State::Vetting { purpose, run_id } => {
                Some(Action::Vet { purpose: *purpose, run_id: run_id.clone() })
            }
            State::Publishing { run_id } => Some(Action::Publish { run_id: run_id.clone() }),
            State::CiPending { head_sha } => Some(Action::WatchChecks { head_sha: head_sha.clone() }),
            State::Succeeded | State::NeedsHuman { .. } | State::Failed { .. } | State::Superseded => None,
        }
    }

    /// Marks a side effect done.
    pub fn complete(&mut self, action: &Action) {
        if let Some(i) = self.outbox.iter().position(|a| a == action) {
            self.outbox.remove(i);
        }
    }

    /// Applies `event` like [`Machine::on`] and keeps the side effects in
    /// the outbox; returns the main-line action to take next.
    pub fn apply(&mut self, event: Event, limits: &Limits) -> Option<Action> {
        if !matches!(event, Event::StepFailed { .. }) {
            self.counters.step_failures = 0;
        }
        let actions = self.on(event, limits);
        for action in actions {
            if is_side_effect(&action) {
                self.outbox.push(action);
            }
        }
        self.pending()
    }

    /// Whether nothing more will happen without a new job.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self.state,
            State::Succeeded | State::NeedsHuman { .. } | State::Failed { .. } | State::Superseded
        )
    }

    fn next_run(&mut self, purpose: RunPurpose) -> Vec<Action> {
        self.counters.runs += 1;
        let run_id = run_id(&self.remediation_id, self.revision, self.counters.runs);
        self.state = State::Preparing { purpose };
        vec![Action::RequestRun { purpose, run_id }]
    }

    fn hand_off(&mut self, reason: String) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.has_pr {
            actions.push(Action::LabelNeedsHuman);
            actions.push(Action::Comment {
                key: format!("needs-human-r{}-{}", self.revision, self.counters.runs),
                body: format!("PatchPilot is handing this pull request to a person.\n\n{reason}"),
            });
        }
        actions.push(Action::Notify(Notice::NeedsHuman));
        self.state = State::NeedsHuman { reason };
        actions
    }

    fn fail(&mut self, reason: String) -> Vec<Action> {
        self.state = State::Failed { reason };
        vec![Action::Notify(Notice::Failed)]
    }

    /// Ends work that cannot go on: with a PR open a person takes it over
    /// (the fix stays); without one the remediation fails.
    fn give_up(&mut self, reason: String) -> Vec<Action> {
        if self.has_pr { self.hand_off(reason) } else { self.fail(reason) }
    }

    /// Applies `event`; returns the actions to perform once the new state
    /// is stored. Events that do not fit the state change nothing (a late
    /// result of a superseded run, a duplicate delivery).
    pub fn on(&mut self, event: Event, limits: &Limits) -> Vec<Action> {
        use State::*;
        match (self.state.clone(), event) {
            (_, Event::StepFailed { reason, permanent }) if !self.is_terminal() => {
                self.counters.step_failures += 1;
                let attempts = self.counters.step_failures;
                if permanent {
                    self.counters.step_failures = 0;
                    self.give_up(format!("A step cannot succeed: {reason}"))
                } else if attempts >= limits.max_step_attempts {
                    self.counters.step_failures = 0;
                    self.give_up(format!("A step failed {attempts} times in a row: {reason}"))
                } else {
                    Vec::new()
                }
            }
            (_, Event::Abandon { reason }) if !self.is_terminal() => self.fail(reason),
            (_, Event::Resolved) => {
                let actions = if self.has_pr {
                    vec![Action::ClosePr {
                        reason: "The findings this pull request fixes are gone from the image.".into(),
                    }]
                } else {
                    Vec::new()
                };
                self.state = Superseded;
                actions
            }
            (Queued, Event::Job) => self.next_run(RunPurpose::Remediate),
            // A newer revision restarts the work from the current state of
            // the PR: a fresh remediation run on the new finding set.
            (state, Event::Job) if !matches!(state, Queued) => {
                self.counters.repairs = 0;
                self.counters.infra_retries = 0;
                self.counters.run_retries = 0;
                self.next_run(RunPurpose::Remediate)
            }
            (Preparing { purpose }, Event::RunRequested { run_id }) => {
                self.state = Running { purpose, run_id };
                Vec::new()
            }
            (Running { purpose, run_id }, Event::RunEnded(end)) => match end {
                RunEnd::Patch => {
                    self.counters.run_retries = 0;
                    self.state = Vetting { purpose, run_id: run_id.clone() };
                    vec![Action::Vet { purpose, run_id }]
                }
                RunEnd::NoChange { reason } => self.hand_off(format!("The run made no change: {reason}")),
                RunEnd::AgentFailed { reason } => self.hand_off(format!("The run failed: {reason}")),
                RunEnd::Infrastructure { reason } => {
                    if self.counters.run_retries >= limits.max_run_retries {
                        self.fail(format!("sandbox runs kept failing: {reason}"))
                    } else {
                        self.counters.run_retries += 1;
                        self.next_run(purpose)
                    }
                }
            },
            (Vetting { run_id, .. }, Event::VetAccepted) => {
                self.state = Publishing { run_id: run_id.clone() };
                vec![Action::Publish { run_id }]
            }
            (Vetting { .. }, Event::VetRefused { report }) => {
                self.hand_off(format!("Vetting refused the run's patch:\n\n{report}"))
            }
            (Publishing { .. }, Event::Published { head_sha }) => {
                self.has_pr = true;
                self.counters.infra_retries = 0;
                self.state = CiPending { head_sha: head_sha.clone() };
                vec![Action::WatchChecks { head_sha }]
            }
            (CiPending { .. }, Event::ChecksPassed) => {
                self.state = Succeeded;
                vec![Action::Notify(Notice::Green)]
            }
            (CiPending { head_sha }, Event::ChecksFailed(failed)) => {
                let patch_caused: Vec<&FailedCheck> =
                    failed.iter().filter(|c| c.infrastructure.is_none()).collect();
                if patch_caused.is_empty() {
                    if self.counters.infra_retries >= limits.max_infra_retries {
                        let reasons: Vec<String> =
                            failed.iter().filter_map(|c| c.infrastructure.clone()).collect();
                        return self.hand_off(format!(
                            "CI kept failing for infrastructure reasons after {} re-runs: {}",
                            self.counters.infra_retries,
                            reasons.join("; ")
                        ));
                    }
                    self.counters.infra_retries += 1;
                    return vec![
                        Action::Rerun { check_ids: failed.iter().map(|c| c.id.clone()).collect() },
                        Action::WatchChecks { head_sha },
                    ];
                }
                if self.counters.repairs >= limits.max_repairs {
                    let names: Vec<&str> = patch_caused.iter().map(|c| c.name.as_str()).collect();
                    return self.hand_off(format!(
                        "CI still fails ({}) after {} repair run(s).",
                        names.join(", "),
                        self.counters.repairs
                    ));
                }
                self.counters.repairs += 1;
                self.next_run(RunPurpose::Repair)
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits { max_repairs: 2, max_infra_retries: 1, max_run_retries: 1, max_step_attempts: 3 }
    }

    fn step_failed(permanent: bool) -> Event {
        Event::StepFailed { reason: "forge: rejected".into(), permanent }
    }

    #[test]
    fn a_permanent_step_failure_fails_before_a_pr_and_hands_off_after() {
        let l = limits();
        let mut m = Machine::new("rem-1", 1);
        m.apply(Event::Job, &l);
        assert_eq!(m.on(step_failed(true), &l), vec![Action::Notify(Notice::Failed)]);
        assert!(
            matches!(&m.state, State::Failed { reason } if reason.contains("forge: rejected")),
            "{:?}",
            m.state
        );

        let mut m = Machine::new("rem-2", 1);
        to_ci(&mut m, &l, "abc");
        let actions = m.on(step_failed(true), &l);
        assert!(actions.contains(&Action::LabelNeedsHuman), "{actions:?}");
        assert!(matches!(m.state, State::NeedsHuman { .. }), "{:?}", m.state);
    }

    #[test]
    fn transient_step_failures_count_up_to_the_limit_and_progress_resets_them() {
        let l = limits();
        let mut m = Machine::new("rem-1", 1);
        m.apply(Event::Job, &l);
        for _ in 1..l.max_step_attempts {
            m.apply(step_failed(false), &l);
            assert!(matches!(m.state, State::Preparing { .. }), "{:?}", m.state);
        }
        assert_eq!(m.counters.step_failures, l.max_step_attempts - 1);
        let run = run_id(&m.remediation_id, m.revision, m.counters.runs);
        m.apply(Event::RunRequested { run_id: run }, &l);
        assert_eq!(m.counters.step_failures, 0, "progress resets the count");
        for _ in 0..l.max_step_attempts {
            m.apply(step_failed(false), &l);
        }
        assert!(
            matches!(&m.state, State::Failed { reason } if reason.contains("3 times in a row")),
            "{:?}",
            m.state
        );
        // Stored machines from before the counter read as zero.
        let old = r#"{"repairs":1,"infra_retries":0,"run_retries":0,"runs":2}"#;
        assert_eq!(serde_json::from_str::<Counters>(old).expect("reads").step_failures, 0);
    }

    fn requested(actions: &[Action]) -> String {
        actions
            .iter()
            .find_map(|a| match a {
                Action::RequestRun { run_id, .. } => Some(run_id.clone()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Drives a machine from a job to CI pending.
    fn to_ci(m: &mut Machine, l: &Limits, sha: &str) {
        let a = if m.state == State::Queued { m.on(Event::Job, l) } else { Vec::new() };
        let run = if a.is_empty() {
            match &m.state {
                State::Preparing { .. } => run_id(&m.remediation_id, m.revision, m.counters.runs),
                _ => String::new(),
            }
        } else {
            requested(&a)
        };
        m.on(Event::RunRequested { run_id: run }, l);
        assert!(matches!(m.on(Event::RunEnded(RunEnd::Patch), l).as_slice(), [Action::Vet { .. }]));
        assert!(matches!(m.on(Event::VetAccepted, l).as_slice(), [Action::Publish { .. }]));
        assert_eq!(
            m.on(Event::Published { head_sha: sha.into() }, l),
            vec![Action::WatchChecks { head_sha: sha.into() }]
        );
    }

    #[test]
    fn a_clean_run_goes_from_job_to_green() {
        let l = limits();
        let mut m = Machine::new("rem-1", 1);
        to_ci(&mut m, &l, "abc");
        assert_eq!(m.on(Event::ChecksPassed, &l), vec![Action::Notify(Notice::Green)]);
        assert_eq!(m.state, State::Succeeded);
        assert_eq!(m.counters.runs, 1);
    }

    #[test]
    fn infrastructure_failures_are_rerun_without_a_repair_then_handed_off() {
        let l = limits();
        let mut m = Machine::new("rem-1", 1);
        to_ci(&mut m, &l, "abc");
        let infra = vec![FailedCheck {
            id: "7".into(),
            name: "build".into(),
            infrastructure: Some("DNS failure".into()),
        }];
        let a = m.on(Event::ChecksFailed(infra.clone()), &l);
        assert_eq!(a[0], Action::Rerun { check_ids: vec!["7".into()] });
        assert_eq!(m.counters.repairs, 0, "no repair for infrastructure");
        let a = m.on(Event::ChecksFailed(infra), &l);
        assert!(a.contains(&Action::LabelNeedsHuman), "{a:?}");
        assert!(matches!(m.state, State::NeedsHuman { .. }));
    }

    #[test]
    fn patch_caused_failures_get_repairs_until_the_limit() {
        let l = limits();
        let mut m = Machine::new("rem-1", 1);
        to_ci(&mut m, &l, "a1");
        let lint = vec![FailedCheck { id: "9".into(), name: "lint".into(), infrastructure: None }];
        for (i, sha) in ["a2", "a3"].iter().enumerate() {
            let a = m.on(Event::ChecksFailed(lint.clone()), &l);
            assert!(matches!(&a[..], [Action::RequestRun { purpose: RunPurpose::Repair, .. }]), "{a:?}");
            assert_eq!(m.counters.repairs, i as u32 + 1);
            to_ci(&mut m, &l, sha);
        }
        let a = m.on(Event::ChecksFailed(lint), &l);
        assert!(
            a.contains(&Action::LabelNeedsHuman) && a.contains(&Action::Notify(Notice::NeedsHuman)),
            "{a:?}"
        );
        match &m.state {
            State::NeedsHuman { reason } => assert!(reason.contains("after 2 repair run(s)"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_refused_patch_goes_to_a_person_and_never_to_the_pr() {
        let l = limits();
        let mut m = Machine::new("rem-1", 1);
        let a = m.on(Event::Job, &l);
        m.on(Event::RunRequested { run_id: requested(&a) }, &l);
        m.on(Event::RunEnded(RunEnd::Patch), &l);
        let a = m.on(Event::VetRefused { report: "- `target/app`: build output".into() }, &l);
        assert_eq!(a, vec![Action::Notify(Notice::NeedsHuman)], "no PR yet: nothing to label or comment");
        assert!(matches!(m.state, State::NeedsHuman { .. }));
    }

    #[test]
    fn run_ids_are_deterministic_so_a_replayed_request_is_the_same_run() {
        let l = limits();
        let mut a = Machine::new("rem-1", 3);
        let mut b = Machine::new("rem-1", 3);
        assert_eq!(requested(&a.on(Event::Job, &l)), requested(&b.on(Event::Job, &l)));
        assert_eq!(run_id("rem-1", 3, 1), "rem-1-r3-1");
    }

    #[test]
    fn sandbox_infrastructure_errors_are_retried_then_fail() {
        let l = limits();
        let mut m = Machine::new("rem-1", 1);
        let a = m.on(Event::Job, &l);
        m.on(Event::RunRequested { run_id: requested(&a) }, &l);
        let a = m.on(Event::RunEnded(RunEnd::Infrastructure { reason: "VM died".into() }), &l);
        assert_eq!(requested(&a), "rem-1-r1-2");
        m.on(Event::RunRequested { run_id: requested(&a) }, &l);
        let a = m.on(Event::RunEnded(RunEnd::Infrastructure { reason: "VM died".into() }), &l);
        assert_eq!(a, vec![Action::Notify(Notice::Failed)]);
    }

    #[test]
    fn late_and_duplicate_events_change_nothing_and_resolution_closes_the_pr() {
        let l = limits();
        let mut m = Machine::new("rem-1", 1);
        to_ci(&mut m, &l, "abc");
        let before = m.clone();
        assert!(m.on(Event::VetAccepted, &l).is_empty());
        assert!(m.on(Event::RunEnded(RunEnd::Patch), &l).is_empty());
        assert_eq!(m, before);
        let a = m.on(Event::Resolved, &l);
        assert!(matches!(&a[..], [Action::ClosePr { .. }]));
        assert_eq!(m.state, State::Superseded);
    }

    #[test]
    fn a_resumed_machine_knows_its_next_step_and_keeps_undone_side_effects() {
        let l = limits();
        let mut m = Machine::new("rem-1", 1);
        assert_eq!(
            m.apply(Event::Job, &l),
            Some(Action::RequestRun { purpose: RunPurpose::Remediate, run_id: "rem-1-r1-1".into() })
        );
        // A crash here: the stored machine alone says to request the same run.
        let stored: Machine = serde_json::from_str(&serde_json::to_string(&m).unwrap_or_default())
            .unwrap_or_else(|_| Machine::new("x", 0));
        assert_eq!(stored.pending(), m.pending());
        m.apply(Event::RunRequested { run_id: "rem-1-r1-1".into() }, &l);
        assert_eq!(m.pending(), None, "running: wait for the result");
        m.apply(Event::RunEnded(RunEnd::Patch), &l);
        m.apply(Event::VetAccepted, &l);
        assert_eq!(
            m.apply(Event::Published { head_sha: "abc".into() }, &l),
            Some(Action::WatchChecks { head_sha: "abc".into() })
        );
        let infra =
            vec![FailedCheck { id: "7".into(), name: "build".into(), infrastructure: Some("DNS".into()) }];
        m.apply(Event::ChecksFailed(infra.clone()), &l);
        assert_eq!(m.outbox, vec![Action::Rerun { check_ids: vec!["7".into()] }]);
        m.complete(&Action::Rerun { check_ids: vec!["7".into()] });
        assert!(m.outbox.is_empty());
        assert_eq!(m.apply(Event::ChecksFailed(infra), &l), None);
        assert!(
            m.outbox.contains(&Action::LabelNeedsHuman)
                && m.outbox.contains(&Action::Notify(Notice::NeedsHuman))
        );
        assert!(m.outbox.iter().any(|a| matches!(a, Action::Comment { .. })));
    }

    #[test]
    fn states_survive_a_round_trip_through_storage() {
        let l = limits();
        let mut m = Machine::new("rem-1", 1);
        to_ci(&mut m, &l, "abc");
        let stored = serde_json::to_string(&m).unwrap_or_default();
        let back: Machine = serde_json::from_str(&stored).unwrap_or_else(|_| Machine::new("x", 0));
        assert_eq!(back, m);
        assert!(stored.contains("\"state\":\"ci_pending\""), "{stored}");
    }
}
