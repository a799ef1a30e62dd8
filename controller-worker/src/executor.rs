//! The executor: drives each remediation's [`Machine`] from its stored
//! state, one step at a time, under a lease.
//!
//! A step is: take (or renew) the lease, load the machine, do one thing,
//! store what happened. The one thing is, in order of precedence:
//!
//! 1. a newer job revision (or the first): feed it to the machine;
//! 2. the oldest side effect in the outbox (comment, label, re-run,
//!    notification, close), then mark it done;
//! 3. the main-line action the state implies ([`Machine::pending`]): pack
//!    and request a sandbox run, vet, publish, look at CI;
//! 4. while a run is out: look for its result, or give up on it after the
//!    run timeout.
//!
//! Waiting (for a run, for CI) is a `wake_at` in the row, not a held lease
//! or a sleeping task, so a controller can stop at any moment. Every action
//! is safe to repeat after a crash: run requests carry their run id as the
//! message id, publishing compares trees before pushing and looks the PR up
//! by branch, comments carry a marker and are not posted twice.
//! Notifications are the one exception, at least once: a crash between
//! sending one and storing that it was sent sends it again.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use patchpilot_fleet::artifacts::ArtifactStore;
use patchpilot_fleet::bus::{StreamName, topics, trace};
use patchpilot_fleet::{Bus, error_chain};
use patchpilot_model::{
    ErrorKind, JobReason, RemediationJob, RunLimits, RunOutcome, RunPurpose, SandboxResult, Wire as _,
};
use patchpilot_vet::{VetContext, VetReport, required_edits_from_patch, vet_patch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::ci_watch::{self, CiState};
use crate::config::ControllerConfig;
use crate::lifecycle::{Action, Event, Machine, Notice, RunEnd, State};
use crate::notify::{self, Notification, Notifier};
use crate::publish::{self, RunAccount};
use crate::publisher::{self, PublishRequest};
use crate::runs::{self, RunRequestSpec};
use crate::store::{self, Details, Lease, RunRecord, Store};
use crate::workspace::{self, ContextSpec};
use patchpilot_forge::{Access, Forge, Repo};

/// Largest patch or result fetched from the object store.
const MAX_ARTIFACT_BYTES: u64 = 64 * 1024 * 1024;
/// Steps one remediation may take in one go before others get a turn.
const STEPS_PER_TURN: usize = 32;
/// First wait after a step failed for a reason outside the patch (forge
/// down); it doubles with every failure in a row.
const STEP_RETRY: Duration = Duration::from_secs(15);
/// The longest wait between attempts of a failing step.
const STEP_RETRY_MAX: Duration = Duration::from_secs(600);
/// Where the sandbox puts the workspace.
const GUEST_WORKSPACE: &str = "/workspace";
/// Marker prefix of comments the controller posts.
pub const COMMENT_MARKER: &str = "<!-- patchpilot:comment=";

/// What stops the executor (a step's own failures only delay it).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] store::Error),
}

/// Why a step could not be done. Not an `Error` itself, so that every
/// cause converts into it by its kind with `?`.
#[derive(Debug)]
enum StepError {
    /// Outside the patch (the forge, the object store, the database):
    /// retried with backoff, up to [`Limits::max_step_attempts`](crate::lifecycle::Limits).
    Transient(Box<dyn std::error::Error + Send + Sync>),
    /// Retrying cannot help (the run has no patch, the patch no longer
    /// vets, the Dockerfile is not in the repository): the work ends now.
    Permanent {
        /// Why, for the hand-off and the stored state.
        reason: String,
    },
}

impl StepError {
    fn permanent(reason: impl Into<String>) -> StepError {
        StepError::Permanent { reason: reason.into() }
    }

    /// The reason with its whole cause chain, and whether it is permanent.
    fn describe(&self) -> (String, bool) {
        match self {
            StepError::Transient(e) => (error_chain(e.as_ref()), false),
            StepError::Permanent { reason } => (reason.clone(), true),
        }
    }
}

/// A failure a step can meet, and whether retrying may help.
trait StepCause: std::error::Error + Send + Sync + Sized + 'static {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Transient
    }
}

impl<E: StepCause> From<E> for StepError {
    fn from(e: E) -> Self {
        match e.kind() {
            ErrorKind::Transient => StepError::Transient(Box::new(e)),
            ErrorKind::Permanent => StepError::Permanent { reason: error_chain(&e) },
        }
    }
}

impl StepCause for patchpilot_forge::Error {
    fn kind(&self) -> ErrorKind {
        patchpilot_forge::Error::kind(self)
    }
}
impl StepCause for publisher::Error {
    fn kind(&self) -> ErrorKind {
        match self {
            publisher::Error::Forge(e) => e.kind(),
            publisher::Error::NothingStaged(_) => ErrorKind::Permanent,
            _ => ErrorKind::Transient,
        }
    }
}
impl StepCause for workspace::Error {
    fn kind(&self) -> ErrorKind {
        match self {
            workspace::Error::Invalid(_) => ErrorKind::Permanent,
            _ => ErrorKind::Transient,
        }
    }
}
impl StepCause for store::Error {}
impl StepCause for patchpilot_git::GitError {}
impl StepCause for patchpilot_forge::credential::RemoteGitError {}
impl StepCause for patchpilot_vet::VetError {}
impl StepCause for std::io::Error {}
impl StepCause for patchpilot_fleet::artifacts::Error {}
impl StepCause for patchpilot_fleet::bus::Error {}

/// What a main-line action came to.
enum Step {
    /// Feed this to the machine.
    Event(Event),
    /// Nothing yet; look again after this long.
    Wait(Duration),
}

/// The executor and everything it acts through.
#[derive(Debug)]
pub struct Executor {
    store: Store,
    forge: Arc<dyn Forge>,
    bus: Bus,
    artifacts: ArtifactStore,
    notifiers: Vec<Notifier>,
    config: ControllerConfig,
    owner: String,
}

impl Executor {
    /// An executor named `owner` (unique per controller process).
    pub fn new(
        store: Store,
        forge: Arc<dyn Forge>,
        bus: Bus,
        artifacts: ArtifactStore,
        notifiers: Vec<Notifier>,
        config: ControllerConfig,
        owner: String,
    ) -> Executor {
        Executor { store, forge, bus, artifacts, notifiers, config, owner }
    }

    /// Works on due remediations until `shutdown` fires; the step in hand
    /// finishes first.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), Error> {
        let tick = Duration::from_millis(self.config.tick_millis);
        loop {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            match self.tick(&shutdown).await {
                Ok(_) => {}
                // The database is the executor's only must-have; keep
                // trying rather than exit, the lease protects the rows.
                Err(e) => tracing::warn!(error = %error_chain(&e), "executor tick failed"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(tick) => {}
            }
        }
    }

    /// One pass over the due remediations; returns how many it worked on.
    pub async fn tick(&self, shutdown: &CancellationToken) -> Result<usize, Error> {
        let due = self.store.due(16).await?;
        let mut worked = 0;
        for remediation_id in due {
            if shutdown.is_cancelled() {
                break;
            }
            let Some(lease) = self.store.acquire(&remediation_id, &self.owner, self.config.lease()).await?
            else {
                continue;
            };
            worked += 1;
            let span = tracing::info_span!("remediation", remediation_id = %remediation_id, otel.name = "controller.remediation");
            if let Ok(Some(tp)) = self.store.traceparent(&remediation_id).await {
                // Only fails when the span is disabled; the work goes on.
                let _ = span.set_parent(trace::from_traceparent(&tp));
            }
            let outcome = self.advance(&lease, shutdown).instrument(span).await;
            // Given back whatever happened; `wake_at` says when it is due.
            let released = self.store.release(&lease).await;
            match outcome {
                Ok(()) | Err(Error::Store(store::Error::LeaseLost { .. })) => {}
                Err(e) => tracing::warn!(remediation_id, error = %error_chain(&e), "remediation step failed"),
            }
            released?;
        }
        Ok(worked)
    }

    /// Takes steps on one remediation until it waits, finishes, or has had
    /// its turn.
    async fn advance(&self, lease: &Lease, shutdown: &CancellationToken) -> Result<(), Error> {
        let id = &lease.remediation_id;
        for step in 0..STEPS_PER_TURN {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            // Renews the lease before every step after the first (the tick
            // has just taken it; same owner keeps its epoch); lost means
            // another controller took over: stop touching the row.
            if step > 0 && self.store.acquire(id, &self.owner, self.config.lease()).await?.is_none() {
                return Err(store::Error::LeaseLost { remediation_id: id.clone() }.into());
            }
            let Some((mut machine, revision, job_bytes)) = self.store.load(id).await? else { return Ok(()) };
            let from = machine.state.clone();
            let job = match decode_job(&job_bytes) {
                Ok(job) => job,
                Err(reason) => {
                    machine.revision = revision;
                    machine.apply(Event::Abandon { reason }, &self.config.limits);
                    self.store.save(lease, &from, &machine, "abandon").await?;
                    return Ok(());
                }
            };
            let repo = match Repo::from_url(&job.target.repo_url) {
                Ok(repo) => repo,
                Err(e) => {
                    machine.revision = revision;
                    let reason = format!("target.repo_url: {e}");
                    machine.apply(Event::Abandon { reason }, &self.config.limits);
                    self.store.save(lease, &from, &machine, "abandon").await?;
                    return Ok(());
                }
            };

            // 1. A newer revision, or the first.
            if revision > machine.revision || machine.state == State::Queued {
                machine.revision = revision;
                let event = if job.reason == JobReason::Resolved { Event::Resolved } else { Event::Job };
                let name = event_name(&event);
                machine.apply(event, &self.config.limits);
                self.store.save(lease, &from, &machine, &name).await?;
                tracing::info!(revision, state = %machine.state.kind(), "job taken");
                continue;
            }
            let details = self.store.details(id).await?;

            // 2. Side effects decided earlier.
            if let Some(action) = machine.outbox.first().cloned() {
                match self.side_effect(&machine, &job, &repo, &details, &action).await {
                    Ok(()) => {
                        machine.complete(&action);
                        self.store
                            .save(lease, &from, &machine, &format!("done:{}", action_name(&action)))
                            .await?;
                        continue;
                    }
                    Err(e) => {
                        // A side effect is never dropped: the outbox keeps
                        // it until it is done.
                        let (reason, permanent) = e.describe();
                        tracing::warn!(
                            action = action_name(&action),
                            reason,
                            permanent,
                            "side effect failed; retrying later"
                        );
                        self.store.snooze(lease, STEP_RETRY).await?;
                        return Ok(());
                    }
                }
            }

            // 3 and 4. The main line.
            let step = match (&machine.state, machine.pending()) {
                (State::Running { run_id, .. }, _) => self.await_result(run_id).await,
                (_, Some(action)) => {
                    let span = tracing::info_span!("step", action = action_name(&action));
                    self.perform(lease, &machine, &job, &repo, &details, &action).instrument(span).await
                }
                (_, None) => return Ok(()),
            };
            match step {
                Ok(Step::Event(event)) => {
                    let name = event_name(&event);
                    machine.apply(event, &self.config.limits);
                    self.store.save(lease, &from, &machine, &name).await?;
                    tracing::info!(from = %from.kind(), to = %machine.state.kind(), event = %name, "transition");
                }
                Ok(Step::Wait(wait)) => {
                    self.store.snooze(lease, wait).await?;
                    return Ok(());
                }
                Err(e) => {
                    let (reason, permanent) = e.describe();
                    let state = machine.state.kind();
                    machine
                        .apply(Event::StepFailed { reason: reason.clone(), permanent }, &self.config.limits);
                    self.store.save(lease, &from, &machine, "step_failed").await?;
                    if machine.is_terminal() {
                        tracing::warn!(%state, reason, permanent, to = %machine.state.kind(), "step failed; the work ends");
                        // Its side effects (notice, hand-off comment) next.
                        continue;
                    }
                    let attempts = machine.counters.step_failures;
                    tracing::warn!(%state, reason, attempts, "step failed; retrying later");
                    self.store.snooze(lease, step_backoff(attempts)).await?;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Performs a main-line action.
    async fn perform(
        &self,
        lease: &Lease,
        machine: &Machine,
        job: &RemediationJob,
        repo: &Repo,
        details: &Details,
        action: &Action,
    ) -> Result<Step, StepError> {
        match action {
            Action::RequestRun { purpose, run_id } => {
                self.request_run(machine, job, repo, details, *purpose, run_id).await
            }
            Action::Vet { purpose, run_id } => {
                let record = self.run_record(run_id).await?;
                let scratch = self.scratch(&machine.remediation_id)?;
                let report = self
                    .apply_run_patch(scratch.path(), machine, job, repo, details, *purpose, &record)
                    .await?;
                Ok(Step::Event(if report.accepted {
                    Event::VetAccepted
                } else {
                    Event::VetRefused { report: report.to_string() }
                }))
            }
            Action::Publish { run_id } => self.publish(lease, machine, job, repo, details, run_id).await,
            Action::WatchChecks { head_sha } => {
                match ci_watch::look(self.forge.as_ref(), repo, head_sha).await? {
                    CiState::Pending => {
                        Ok(Step::Wait(ci_backoff(self.config.ci_poll_secs, details.in_state_secs)))
                    }
                    CiState::Passed => Ok(Step::Event(Event::ChecksPassed)),
                    CiState::Failed { checks, evidence, commands } => {
                        if !evidence.is_empty() {
                            self.store.set_ci_evidence(lease, &evidence, &commands).await?;
                        }
                        Ok(Step::Event(Event::ChecksFailed(checks)))
                    }
                }
            }
            // Side effects never come from `pending()`.
            other => Err(StepError::permanent(format!("{} is not a main-line action", action_name(other)))),
        }
    }

    /// Clones, writes `.patchpilot/`, packs to the object store and
    /// publishes the SandboxRun (message id = run id, so a replay after a
    /// crash is deduplicated by the bus).
    async fn request_run(
        &self,
        machine: &Machine,
        job: &RemediationJob,
        repo: &Repo,
        details: &Details,
        purpose: RunPurpose,
        run_id: &str,
    ) -> Result<Step, StepError> {
        let scratch = self.scratch(&machine.remediation_id)?;
        let ws = scratch.path().join("ws");
        let remote = self.forge.remote(repo, Access::Read).await?;
        let branch = self.base_for(job, details, purpose);
        let base_sha = workspace::clone(&remote, &branch, &ws).await?;
        // Read before anything is packed: a job naming no Dockerfile fails
        // here, naming the path, rather than late in the VM.
        let dockerfile = match std::fs::read_to_string(ws.join(&job.target.dockerfile)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StepError::permanent(format!(
                    "target.dockerfile: {} is not in {repo} at {branch} ({base_sha})",
                    job.target.dockerfile
                )));
            }
            Err(e) => return Err(e.into()),
        };
        let spec = ContextSpec {
            run_id: run_id.to_owned(),
            remediation_id: machine.remediation_id.clone(),
            purpose,
            dockerfile: job.target.dockerfile.clone(),
            context: if job.target.context.is_empty() { ".".into() } else { job.target.context.clone() },
            image: job.images.first().map(|i| i.image_ref.clone()),
            findings: job.findings.clone(),
            operator_instructions: self.config.instructions.get(&repo.to_string()).cloned(),
            ci_evidence: match purpose {
                RunPurpose::Repair => details.ci_evidence.clone(),
                RunPurpose::Remediate => None,
            },
            failing_checks: match purpose {
                RunPurpose::Repair => details.failing_checks.clone(),
                RunPurpose::Remediate => Vec::new(),
            },
            insecure_registries: self.config.insecure_registries.clone(),
            db: self.config.agent_db.clone().or_else(|| {
                self.config
                    .agent_db_source
                    .as_ref()
                    .map(|_| Path::new(GUEST_WORKSPACE).join(".patchpilot/db"))
            }),
            model: self.config.model.clone(),
            fix_patch: match purpose {
                RunPurpose::Repair => self.fix_patch(machine).await?,
                RunPurpose::Remediate => None,
            },
        };
        workspace::write_context(&ws, &spec)?;
        if let Some(source) = &self.config.agent_db_source {
            workspace::copy_tree(source, &ws.join(".patchpilot/db"))?;
        }
        let packed = workspace::pack(&ws)?;
        let object = format!("workspaces/{run_id}.tar.gz");
        self.artifacts.put_bytes(&object, &packed).await?;

        let mut egress = runs::egress_policy(&job.findings, &runs::registry_hosts(&dockerfile));
        // The model's endpoint is one more host the run may reach; the
        // run's environment still carries no credential.
        let model_host = self.config.model.as_ref().and_then(|m| m.endpoint_host());
        for host in self.config.allow_hosts.iter().chain(model_host.as_ref()) {
            if !egress.allow_hosts.contains(host) {
                egress.allow_hosts.push(host.clone());
            }
        }
        let run = runs::sandbox_run(&RunRequestSpec {
            run_id: run_id.to_owned(),
            remediation_id: machine.remediation_id.clone(),
            purpose,
            attempt: machine.counters.repairs,
            workspace_object: object,
            ci_logs_object: None,
            agent_command: self.config.agent_command.clone(),
            egress,
            limits: RunLimits::default(),
            docker: self.config.agent_docker,
            connections: self.config.connections_for(&repo.to_string()),
        });
        // Recorded before it is published, so a result can never arrive
        // for a run the store does not know.
        self.store
            .record_run_request(run_id, &machine.remediation_id, machine.revision, purpose, &base_sha)
            .await?;
        let ack = self.bus.publish(&topics::SANDBOX_RUNS, None, run_id, &run).await?;
        // A republished request (after a crash) is a duplicate whose ack
        // carries the original's sequence.
        self.store.record_run_published(run_id, ack.sequence).await?;
        tracing::info!(
            run_id,
            %purpose,
            bytes = packed.len(),
            "sandbox run requested"
        );
        Ok(Step::Event(Event::RunRequested { run_id: run_id.to_owned() }))
    }

    /// The run's result, or how long to wait for it.
    async fn await_result(&self, run_id: &str) -> Result<Step, StepError> {
        let Some(record) = self.store.run(run_id).await? else {
            return Ok(Step::Event(Event::RunEnded(RunEnd::Infrastructure {
                reason: format!("run {run_id} was never recorded as requested"),
            })));
        };
        let timeout = self.config.run_timeout_secs as f64;
        match record.result {
            Some(result) => Ok(Step::Event(Event::RunEnded(run_end(&result)))),
            None if record.age_secs >= timeout => {
                // While the work queue holds the request, the run is waiting
                // for a free slot or being worked on (the worker bounds that
                // by the run's wall time, and a dead worker's run is
                // redelivered): timing it out would only queue it twice.
                // Only a request that left the queue without a result is
                // lost.
                if let Some(seq) = record.request_seq
                    && self.bus.holds(StreamName::SandboxRuns, seq).await?
                {
                    tracing::info!(
                        run_id,
                        waited_secs = record.age_secs as u64,
                        "run still queued or running past run_timeout_secs; waiting for its result"
                    );
                    return Ok(Step::Wait(Duration::from_secs_f64(timeout.clamp(1.0, 60.0))));
                }
                let reason = format!(
                    "no result within {} s, and the request is no longer queued",
                    self.config.run_timeout_secs
                );
                tracing::warn!(run_id, %reason, "sandbox run lost");
                Ok(Step::Event(Event::RunEnded(RunEnd::Infrastructure { reason })))
            }
            // A result wakes the remediation; this is the deadline.
            None => Ok(Step::Wait(Duration::from_secs_f64((timeout - record.age_secs).max(1.0)))),
        }
    }

    /// The patch of the run that made this revision's fix, if one did: what
    /// a repair must keep (vetting checks it; the repair run reads it as
    /// `.patchpilot/fix.patch`).
    async fn fix_patch(&self, machine: &Machine) -> Result<Option<Vec<u8>>, StepError> {
        let fix = self.store.latest_fix(&machine.remediation_id, machine.revision).await?;
        match fix.and_then(|f| f.result).and_then(|r| r.patch_object) {
            Some(object) => Ok(Some(self.artifacts.get_bytes(&object, MAX_ARTIFACT_BYTES).await?)),
            None => Ok(None),
        }
    }

    /// The stored record of a run this controller requested.
    async fn run_record(&self, run_id: &str) -> Result<RunRecord, StepError> {
        self.store.run(run_id).await?.ok_or_else(|| StepError::permanent(format!("run {run_id} unknown")))
    }

    /// Clones the base the run worked on into `dir/clone` and vets the
    /// run's patch there; on acceptance the change is staged.
    #[allow(clippy::too_many_arguments)]
    async fn apply_run_patch(
        &self,
        dir: &Path,
        machine: &Machine,
        job: &RemediationJob,
        repo: &Repo,
        details: &Details,
        purpose: RunPurpose,
        record: &RunRecord,
    ) -> Result<VetReport, StepError> {
        let base_sha = record.base_sha.as_str();
        let Some(patch_object) = record.result.as_ref().and_then(|r| r.patch_object.as_deref()) else {
            return Err(StepError::permanent(format!("run {} has no patch", record.run_id)));
        };
        let patch = self.artifacts.get_bytes(patch_object, MAX_ARTIFACT_BYTES).await?;
        let context = match purpose {
            RunPurpose::Remediate => {
                VetContext { repo_name: Some(repo.name.clone()), ..VetContext::remediate() }
            }
            RunPurpose::Repair => {
                let required = match self.fix_patch(machine).await? {
                    Some(fix_patch) => required_edits_from_patch(&fix_patch),
                    None => Vec::new(),
                };
                VetContext { repo_name: Some(repo.name.clone()), ..VetContext::repair(required) }
            }
        };
        let remote = self.forge.remote(repo, Access::Read).await?;
        let clone = dir.join("clone");
        let head = workspace::clone(&remote, &self.base_for(job, details, purpose), &clone).await?;
        if head != base_sha {
            // The branch moved since the run started (most often: this very
            // patch was pushed before a crash). The patch applies where the
            // run began; publishing then finds its tree already pushed.
            let git = patchpilot_git::Git::new(&clone);
            let fetch = ["fetch", "-q", "--no-tags", "--depth", "1", &remote.url, base_sha];
            patchpilot_forge::credential::run_git_remote(&git, &remote, &fetch).await?;
            git.run(&["checkout", "-q", "--detach", base_sha]).await?;
        }
        Ok(vet_patch(&clone, &patch, &self.config.vet, &context).await?)
    }

    /// Re-applies the vetted patch (vetting is deterministic) and publishes
    /// it: commit, push, open or update the PR.
    async fn publish(
        &self,
        lease: &Lease,
        machine: &Machine,
        job: &RemediationJob,
        repo: &Repo,
        details: &Details,
        run_id: &str,
    ) -> Result<Step, StepError> {
        let record = self.run_record(run_id).await?;
        let purpose = record.purpose;
        let scratch = self.scratch(&machine.remediation_id)?;
        let report =
            self.apply_run_patch(scratch.path(), machine, job, repo, details, purpose, &record).await?;
        if !report.accepted {
            return Err(StepError::permanent(format!(
                "the patch of {run_id} no longer passes vetting:\n{report}"
            )));
        }
        let fix_report = self
            .store
            .latest_fix(&machine.remediation_id, machine.revision)
            .await?
            .and_then(|fix| fix.result)
            .and_then(|r| r.result_object);
        let account = match fix_report {
            Some(object) => RunAccount::parse(&self.artifacts.get_bytes(&object, MAX_ARTIFACT_BYTES).await?),
            None => RunAccount::Missing,
        };
        if let RunAccount::Unreadable(why) = &account {
            tracing::warn!(reason = %why, "the fix's report does not parse; the PR says so");
        }
        let dockerfile = &job.target.dockerfile;
        let branch =
            details.branch.clone().unwrap_or_else(|| publish::branch_name(dockerfile, &job.findings));
        let title = publish::title(dockerfile, &job.findings);
        let body = publish::body(
            &machine.remediation_id,
            machine.revision,
            dockerfile,
            &job.findings,
            &account,
            &report.ci_version_edits,
        );
        let message = match purpose {
            RunPurpose::Remediate => publish::commit_message(dockerfile, &job.findings, &account),
            RunPurpose::Repair => format!(
                "Repair CI after: {title}\n\nForward fix from sandbox run {run_id}; the fix stays in place.\n\nFixes: {}\n",
                publish::finding_ids(&job.findings).join(", ")
            ),
        };
        let base = self.base_for(job, details, RunPurpose::Remediate);
        let published = publisher::publish_change(
            self.forge.as_ref(),
            &PublishRequest {
                repo,
                clone: &scratch.path().join("clone"),
                base_branch: &base,
                head_branch: &branch,
                message: &message,
                title: &title,
                body: &body,
                labels: &self.config.labels,
            },
        )
        .await?;
        self.store.set_pull_request(lease, &branch, published.pr.number, &published.pr.url).await?;
        tracing::info!(pr = %published.pr.url, head = %published.head_sha, pushed = published.pushed, "published");
        Ok(Step::Event(Event::Published { head_sha: published.head_sha }))
    }

    /// Performs a side effect from the outbox.
    async fn side_effect(
        &self,
        machine: &Machine,
        job: &RemediationJob,
        repo: &Repo,
        details: &Details,
        action: &Action,
    ) -> Result<(), StepError> {
        let forge = self.forge.as_ref();
        match action {
            Action::Rerun { check_ids } => {
                let State::CiPending { head_sha } = &machine.state else { return Ok(()) };
                for check in forge.checks(repo, head_sha).await? {
                    if check_ids.contains(&check.id) {
                        forge.rerun(repo, &check).await?;
                    }
                }
            }
            Action::Comment { key, body } => {
                if let Some(number) = details.pr_number {
                    let mut text = body.clone();
                    if key.starts_with("needs-human") {
                        text.push_str(&self.runs_tried(&machine.remediation_id).await?);
                    }
                    self.comment_once(repo, number, key, &text).await?;
                }
            }
            Action::LabelNeedsHuman => {
                if let Some(number) = details.pr_number {
                    forge
                        .add_labels(repo, number, std::slice::from_ref(&self.config.needs_human_label))
                        .await?;
                }
            }
            Action::ClosePr { reason } => {
                if let Some(number) = details.pr_number {
                    let key = format!("closed-r{}", machine.revision);
                    self.comment_once(repo, number, &key, reason).await?;
                    forge.close_pull_request(repo, number).await?;
                }
            }
            Action::Notify(notice) => {
                let n = notification(*notice, machine, job, repo, details);
                for notifier in &self.notifiers {
                    // One notifier down must not hold the others (or the
                    // lifecycle) hostage: its own retries are inside send.
                    if let Err(e) = notifier.send(&n).await {
                        tracing::warn!(notifier = notifier.kind(), error = %error_chain(&e), "notification not delivered");
                    }
                }
            }
            Action::RequestRun { .. }
            | Action::Vet { .. }
            | Action::Publish { .. }
            | Action::WatchChecks { .. } => {}
        }
        Ok(())
    }

    /// What was tried, for a hand-off comment: every sandbox run and how
    /// it ended.
    async fn runs_tried(&self, remediation_id: &str) -> Result<String, StepError> {
        let runs = self.store.runs_of(remediation_id).await?;
        if runs.is_empty() {
            return Ok(String::new());
        }
        let mut text = String::from("\n\n### What was tried\n\n| run | purpose | outcome |\n|---|---|---|\n");
        for (run_id, purpose, outcome) in runs {
            text.push_str(&format!(
                "| `{run_id}` | {purpose} | {} |\n",
                outcome.map(RunOutcome::as_str).unwrap_or("no result")
            ));
        }
        text.push_str(
            "\nEach run's record, and the agent's session where a model took part: \
             `patchpilot runs show RUN [--transcript]`.\n",
        );
        Ok(text)
    }

    /// Posts `body` with a marker for `key` unless a comment with that
    /// marker is already there.
    async fn comment_once(&self, repo: &Repo, number: u64, key: &str, body: &str) -> Result<(), StepError> {
        let marker = format!("{COMMENT_MARKER}{key} -->");
        let existing = self.forge.comments(repo, number).await?;
        if existing.iter().any(|c| c.body.contains(&marker)) {
            return Ok(());
        }
        self.forge.comment(repo, number, &format!("{body}\n\n{marker}")).await?;
        Ok(())
    }

    /// The branch a run starts from: the target branch for a remediation,
    /// the PR's branch for a repair (a forward fix on top of the fix).
    fn base_for(&self, job: &RemediationJob, details: &Details, purpose: RunPurpose) -> String {
        let target = if job.target.branch.is_empty() { "main".to_owned() } else { job.target.branch.clone() };
        match (purpose, &details.branch) {
            (RunPurpose::Repair, Some(branch)) => branch.clone(),
            _ => target,
        }
    }

    /// A scratch folder for one step, removed when dropped.
    fn scratch(&self, remediation_id: &str) -> Result<tempfile::TempDir, StepError> {
        std::fs::create_dir_all(&self.config.work_dir)?;
        let prefix: String =
            remediation_id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(40).collect();
        // 0700 (tempfile leaves the umask's mode): with the local forge's
        // CI, repository code runs under another uid on this machine, and
        // must not read the clones and patches of other remediations.
        Ok(tempfile::Builder::new()
            .prefix(&format!("{prefix}-"))
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&self.config.work_dir)?)
    }
}

/// How long to wait after the `attempts`-th failure in a row of a step:
/// [`STEP_RETRY`], doubling, at most [`STEP_RETRY_MAX`].
fn step_backoff(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    (STEP_RETRY * 2u32.pow(doublings)).min(STEP_RETRY_MAX)
}

/// How long to wait before looking at pending CI again: the configured
/// interval at first, then a quarter of the time CI has been pending, up
/// to a minute, so a quick CI is seen quickly and a slow one not hammered.
pub fn ci_backoff(poll_secs: u64, pending_secs: f64) -> Duration {
    let secs = (pending_secs / 4.0).clamp(poll_secs as f64, 60f64.max(poll_secs as f64));
    Duration::from_secs_f64(secs)
}

fn decode_job(bytes: &[u8]) -> Result<RemediationJob, String> {
    RemediationJob::decode(bytes).map_err(|e| format!("the stored job is unusable: {e}"))
}

/// How the controller reads a sandbox result.
pub fn run_end(result: &SandboxResult) -> RunEnd {
    match result.outcome {
        RunOutcome::Completed if result.patch_object.is_some() => RunEnd::Patch,
        RunOutcome::Completed => RunEnd::NoChange {
            reason: if result.reason.is_empty() {
                "the agent changed nothing".into()
            } else {
                result.reason.clone()
            },
        },
        RunOutcome::AgentFailed | RunOutcome::TimedOut | RunOutcome::LimitExceeded => {
            RunEnd::AgentFailed { reason: format!("{}: {}", result.outcome, result.reason) }
        }
        RunOutcome::InfraError => {
            RunEnd::Infrastructure { reason: format!("{}: {}", result.outcome, result.reason) }
        }
    }
}

fn notification(
    notice: Notice,
    machine: &Machine,
    job: &RemediationJob,
    repo: &Repo,
    details: &Details,
) -> Notification {
    let pr_url = details.pr_url.clone().unwrap_or_default();
    let (event, summary) = match (&notice, &machine.state) {
        (Notice::Green, _) => (
            notify::Event::Green,
            format!(
                "CI is green on the fix for {} CVE(s) in {} after {} repair run(s).",
                publish::finding_ids(&job.findings).len(),
                job.target.dockerfile,
                machine.counters.repairs
            ),
        ),
        (Notice::NeedsHuman, State::NeedsHuman { reason }) => (notify::Event::NeedsHuman, first_line(reason)),
        (Notice::NeedsHuman, _) => (notify::Event::NeedsHuman, "handed to a person".into()),
        (Notice::Failed, State::Failed { reason }) => (notify::Event::Failed, first_line(reason)),
        (Notice::Failed, _) => (notify::Event::Failed, "the remediation failed".into()),
    };
    Notification {
        event,
        repository: repo.to_string(),
        pr_url,
        cves: publish::finding_ids(&job.findings),
        summary,
    }
}

fn first_line(text: &str) -> String {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").chars().take(300).collect()
}

fn event_name(event: &Event) -> String {
    match event {
        Event::Job => "job".into(),
        Event::Resolved => "resolved".into(),
        Event::RunRequested { run_id } => format!("run_requested:{run_id}"),
        Event::RunEnded(RunEnd::Patch) => "run_ended:patch".into(),
        Event::RunEnded(RunEnd::NoChange { .. }) => "run_ended:no_change".into(),
        Event::RunEnded(RunEnd::AgentFailed { .. }) => "run_ended:agent_failed".into(),
        Event::RunEnded(RunEnd::Infrastructure { .. }) => "run_ended:infrastructure".into(),
        Event::VetAccepted => "vet_accepted".into(),
        Event::VetRefused { .. } => "vet_refused".into(),
        Event::Published { head_sha } => format!("published:{}", &head_sha[..head_sha.len().min(12)]),
        Event::ChecksPassed => "checks_passed".into(),
        Event::ChecksFailed(checks) => {
            let infra = checks.iter().filter(|c| c.infrastructure.is_some()).count();
            format!("checks_failed:{}:infra={infra}", checks.len())
        }
        Event::Abandon { .. } => "abandon".into(),
        Event::StepFailed { .. } => "step_failed".into(),
    }
}

fn action_name(action: &Action) -> &'static str {
    match action {
        Action::RequestRun { .. } => "request_run",
        Action::Vet { .. } => "vet",
        Action::Publish { .. } => "publish",
        Action::WatchChecks { .. } => "watch_checks",
        Action::Rerun { .. } => "rerun",
        Action::Comment { .. } => "comment",
        Action::LabelNeedsHuman => "label_needs_human",
        Action::Notify(_) => "notify",
        Action::ClosePr { .. } => "close_pr",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(outcome: RunOutcome, patch: Option<&str>) -> SandboxResult {
        let mut r = SandboxResult::without_artifacts("r", "rem", outcome, "why");
        r.patch_object = patch.map(str::to_owned);
        r
    }

    #[test]
    fn results_map_to_run_ends() {
        assert_eq!(run_end(&result(RunOutcome::Completed, Some("runs/r/patch"))), RunEnd::Patch);
        assert!(matches!(run_end(&result(RunOutcome::Completed, None)), RunEnd::NoChange { .. }));
        assert!(matches!(run_end(&result(RunOutcome::TimedOut, None)), RunEnd::AgentFailed { .. }));
        assert!(matches!(run_end(&result(RunOutcome::InfraError, None)), RunEnd::Infrastructure { .. }));
    }

    #[test]
    fn ci_polls_back_off_to_a_minute() {
        assert_eq!(ci_backoff(2, 0.0), Duration::from_secs(2));
        assert_eq!(ci_backoff(2, 40.0), Duration::from_secs(10));
        assert_eq!(ci_backoff(2, 3600.0), Duration::from_secs(60));
        assert_eq!(ci_backoff(120, 10.0), Duration::from_secs(120));
    }
}
