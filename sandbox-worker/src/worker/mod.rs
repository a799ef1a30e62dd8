//! The `patchpilot-sandbox-worker` service: `SANDBOX_RUNS` in, one microVM
//! per run, `SANDBOX_RESULTS` and `RETROS` out.
//!
//! Owns the run's bookkeeping row in `sandbox_runs`, staging the workspace
//! from the object store, uploading what the run produced, and publishing
//! its result and retrospective. The run itself is [`Sandbox::execute`], the
//! same path `patchpilot sandbox run` takes.
//!
//! # Layout
//!
//! - [`job`]: a `SandboxRun` from the bus, validated into a [`RunJob`].
//! - [`report`]: the result and the retrospective a run ends with.
//! - this module: the handler, the bookkeeping, the service's `run`.
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

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use patchpilot_fleet::artifacts::{self, ArtifactStore};
use patchpilot_fleet::bus::{
    self, BatchHandler, ConsumeOptions, ConsumerSpec, Delivery, HandlerError, topics,
};
use patchpilot_fleet::service::{FleetContext, ServiceSpec};
use patchpilot_fleet::{Bus, error_chain};
use patchpilot_model::{Event, Retrospective, RunOutcome, SandboxResult, Wire as _};
use patchpilot_proto::v1;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::config::{Config, LimitsConfig};
use crate::egress::audit::{EgressMetrics, Fanout, PgRecorder, Recorder};
use crate::egress::dial::TcpDialer;
use crate::egress::forwarder::ForwarderConfig;
use crate::egress::resolve::{HostAliases, SystemResolver};
use crate::pool::WarmShape;
use crate::run::{self, EgressSetup, RunObserver, RunRequest, Sandbox, Workspace};
use crate::sweep;

mod job;
mod report;

pub use job::{JobError, RunJob};
use report::Ended;

/// The sandbox worker as the service skeleton runs it.
pub const SERVICE: ServiceSpec = ServiceSpec {
    name: "patchpilot-sandbox-worker",
    about: "PatchPilot sandbox worker: runs agent tasks in microVMs with per-run egress policy.",
    uses_database: true,
};

/// Deadline for the forwarder to reach an upstream.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Concurrent guest connections per run.
const MAX_CONNECTIONS: usize = 256;
/// Most of a retrospective artifact read; it is advisory text.
const MAX_RETRO_BYTES: u64 = 256 << 10;
/// How long shutdown waits for the egress audit writer to drain.
const AUDIT_DRAIN: Duration = Duration::from_secs(10);
/// How often a worker running a run says so in its row (`heartbeat_at`).
const HEARTBEAT: Duration = Duration::from_secs(2);
/// How long a run's holder may stay silent before it is presumed lost and
/// its run may be taken over: five missed beats, so a database restart or
/// a starved runtime does not hand a live run to a second VM.
const HOLDER_SILENT: Duration = Duration::from_secs(10);

/// Why the worker could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The state folder is locked by another worker, or the sweep failed.
    #[error("start-up sweep")]
    Sweep(#[from] sweep::Error),
    /// The VMM or the guest image is not usable.
    #[error("sandbox")]
    Sandbox(#[from] run::Error),
    /// NATS failed.
    #[error("the bus failed")]
    Bus(#[from] bus::Error),
    /// The object store bucket could not be opened.
    #[error("the artifact store")]
    Artifacts(#[from] artifacts::Error),
    /// `[sandbox.broker]` is not usable (its TLS files).
    #[error("[sandbox.broker]")]
    Broker(#[source] patchpilot_broker::Error),
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
    boot_to_agent: Histogram,
    in_flight: Gauge,
    takeovers: Counter,
    hung: Counter,
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
            boot_to_agent: Histogram::new(exponential_buckets(0.05, 2.0, 14)),
            in_flight: Gauge::default(),
            takeovers: Counter::default(),
            hung: Counter::default(),
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
            "pp_sandbox_boot_to_agent_seconds",
            "From the VMM process running to the guest agent answering (the guest's boot)",
            m.boot_to_agent.clone(),
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
            "pp_sandbox_hung_runs",
            "Runs ended because the guest stopped making progress or its kernel reported a fault",
            m.hung.clone(),
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

/// Why a run could not produce an [`Ended`] this time.
#[derive(Debug)]
enum Failure {
    /// Worth another delivery (host trouble, NATS hiccup); on the last
    /// delivery it becomes an INFRA_ERROR result instead.
    Retryable(String),
    /// A final outcome without a VM run (workspace missing or too large).
    Final(RunOutcome, String),
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
    /// Running on `worker`, which beat within [`HOLDER_SILENT`]: JetStream
    /// redelivered it because that worker's in-progress acks were lost,
    /// not the worker.
    LiveElsewhere { worker: String },
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
    /// Run ids in progress in this process, each with how its handling
    /// ended once it has (`Some(succeeded)`): a second delivery of one of
    /// them must not reuse its run folder, and waits for that end instead.
    active: Mutex<HashMap<String, watch::Receiver<Option<bool>>>>,
    shutdown: CancellationToken,
    /// The capability broker, when runs may be granted connections.
    broker: Option<crate::broker::RunBroker>,
    /// Who mints capabilities: `<host>:<state_dir>`, stable across restarts
    /// (the state lock allows one worker per folder), so the start-up sweep
    /// revokes what the previous process left live.
    broker_owner: String,
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
        // At info, with the time since receipt: where a slow run's time
        // went (boot, egress, dockerd, the command, the artifacts).
        tracing::info!(
            phase = %phase.name,
            state = %phase.state,
            detail = %phase.detail,
            since_receipt_ms = self.received.elapsed().as_millis() as u64,
            "run phase"
        );
    }
}

impl Worker {
    async fn handle_one(&self, delivery: &Delivery) -> Result<(), HandlerError> {
        let received = Instant::now();
        let received_at = Utc::now();
        let job = match RunJob::from_wire(delivery.payload.as_ref(), &self.limits) {
            Ok(job) => job,
            Err(e) => {
                self.metrics.invalid.inc();
                return Err(HandlerError::Permanent(format!("invalid SandboxRun: {e}")));
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
        let (ended_tx, running_here) = {
            let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
            match active.get(&job.run_id) {
                Some(running) => (None, Some(running.clone())),
                None => {
                    let (tx, rx) = watch::channel(None);
                    active.insert(job.run_id.clone(), rx);
                    (Some(tx), None)
                }
            }
        };
        if let Some(mut running) = running_here {
            // JetStream redelivered a run this worker is still running: its
            // in-progress acks came late (a starved runtime on a loaded
            // host). Failing this delivery would count it towards the dead
            // letter of a run that is going fine, so it waits for that run
            // (the consumer loop keeps it in progress meanwhile) and ends
            // the way the run did.
            tracing::info!(run_id = %job.run_id, "redelivered while still running here; waiting for that run");
            let ended = running.wait_for(Option::is_some).await.map(|v| *v).unwrap_or(None);
            return match ended {
                Some(true) => Ok(()),
                _ => Err(HandlerError::Retryable(format!(
                    "run {} was redelivered while running here, and that run did not succeed",
                    job.run_id
                ))),
            };
        }
        let result = self.handle_new_job(job, delivered, received, received_at).await;
        if let Some(tx) = ended_tx {
            tx.send_replace(Some(result.is_ok()));
        }
        result
    }

    /// [`Worker::handle_job`] for a run not in progress here.
    async fn handle_new_job(
        &self,
        job: RunJob,
        delivered: i64,
        received: Instant,
        received_at: DateTime<Utc>,
    ) -> Result<(), HandlerError> {
        self.metrics.in_flight.inc();
        let work_dir = self.state_dir.join("work").join(&job.run_id);
        let _guard = ActiveGuard { worker: self, run_id: job.run_id.clone(), work_dir: work_dir.clone() };

        let mut waiting_on = None;
        let attempt = loop {
            match self.claim(&job).await.map_err(|e| HandlerError::retryable(&e))? {
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
                    break attempt;
                }
                Claim::LiveElsewhere { worker } => {
                    // Booting a second VM would double the work and race
                    // the holder to the result. The consumer loop keeps
                    // this delivery in progress while it waits for the
                    // holder to finish (its stored result is then
                    // published again) or to go silent (then it is taken
                    // over).
                    if waiting_on.as_ref() != Some(&worker) {
                        tracing::info!(holder = %worker, "redelivered while live on another worker; waiting for it");
                        waiting_on = Some(worker);
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(HEARTBEAT) => {}
                        _ = self.shutdown.cancelled() => {
                            return Err(HandlerError::Retryable("the worker shut down while waiting for a run live elsewhere".into()));
                        }
                    }
                }
            }
        };
        // Beats until the handler ends, however it ends.
        let _heartbeat = tokio_util::task::AbortOnDropHandle::new(self.beat(&job.run_id, attempt));

        let ended = match self.execute(&job, &work_dir, received).await {
            Ok(ended) => ended,
            Err(Failure::Final(outcome, reason)) => Ended::without_run(outcome, reason, received_at),
            Err(Failure::Retryable(reason)) if delivered >= self.max_deliver => {
                // Tell the controller instead of leaving it to wait on a
                // dead letter: INFRA_ERROR says "may be retried".
                Ended::without_run(
                    RunOutcome::InfraError,
                    format!("the sandbox worker gave up after {delivered} deliveries: {reason}"),
                    received_at,
                )
            }
            Err(Failure::Retryable(reason)) => return Err(HandlerError::Retryable(reason)),
            Err(Failure::Shutdown) => {
                return Err(HandlerError::Retryable("the worker shut down during the run".into()));
            }
        };
        tracing::Span::current().record("outcome", ended.outcome.as_str());
        self.metrics.runs.get_or_create(&OutcomeLabel { outcome: ended.outcome.as_str().into() }).inc();
        self.metrics.run_seconds.observe(received.elapsed().as_secs_f64());

        let result = report::result(&job, &ended);
        let retro = report::retrospective(&job, &ended);
        let (result_bytes, retro_bytes) = (result.encode(), retro.encode());
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
            outcome = %ended.outcome,
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
                return Err(Failure::Final(RunOutcome::InfraError, error_chain(&e)));
            }
            Err(e @ artifacts::Error::TooLarge { .. }) => {
                return Err(Failure::Final(
                    RunOutcome::LimitExceeded,
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
                    RunOutcome::LimitExceeded,
                    format!(
                        "workspace {:?} unpacks to more than the disk limit of {cap} bytes",
                        job.workspace_object
                    ),
                ));
            }
            Err(StageError::Corrupt(e)) => {
                return Err(Failure::Final(
                    RunOutcome::InfraError,
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
        // The run's capability, minted now so the grant is frozen at the
        // run's start; revoked below however the run ends.
        let mut env = job.env.clone();
        let link = match (&self.broker, job.connections.is_empty()) {
            (_, true) => None,
            (None, false) => {
                return Err(Failure::Final(
                    RunOutcome::InfraError,
                    "the run asks for broker connections and this worker has no [sandbox.broker]".into(),
                ));
            }
            (Some(broker), false) => {
                match broker.grant(&job.run_id, &self.broker_owner, &job.connections).await {
                    Ok(granted) => {
                        env.extend(granted.env);
                        Some(granted.link)
                    }
                    Err(e) if e.kind() == patchpilot_model::ErrorKind::Transient => {
                        return Err(Failure::Retryable(format!(
                            "minting the run's capability: {}",
                            error_chain(&e)
                        )));
                    }
                    Err(e) => {
                        return Err(Failure::Final(
                            RunOutcome::InfraError,
                            format!("minting the run's capability: {}", error_chain(&e)),
                        ));
                    }
                }
            }
        };
        let request = RunRequest {
            run_id: job.run_id.clone(),
            workspace: Workspace::Tar(tar),
            command: job.command.clone(),
            context_dir: String::new(),
            env,
            docker: job.docker,
            insecure_registries: self.insecure_registries.clone(),
            limits: job.limits,
            egress: Some(EgressSetup { config: forwarder }),
            broker: link,
            out_dir,
        };
        let mut observer = Observer { received, metrics: self.metrics.clone() };
        let report = tokio::select! {
            report = async {
                let report = self.sandbox.execute(request, &mut observer).await;
                if let (Some(broker), false) = (&self.broker, job.connections.is_empty()) {
                    broker.revoke(&job.run_id).await;
                }
                report
            } => report,
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
        if report.hung {
            self.metrics.hung.inc();
        }
        if !report.timings.boot_to_agent.is_zero() {
            self.metrics.boot_to_agent.observe(report.timings.boot_to_agent.as_secs_f64());
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
                 started_at = now(), heartbeat_at = now() \
               WHERE sandbox_runs.state = 'running' \
                 AND sandbox_runs.heartbeat_at < now() - make_interval(secs => $4) \
             RETURNING attempt, (xmax = 0) AS inserted",
        )
        .bind(&job.run_id)
        .bind(&job.remediation_id)
        .bind(&self.name)
        .bind(HOLDER_SILENT.as_secs_f64())
        .fetch_optional(&self.pool)
        .await?;
        if let Some((attempt, inserted)) = row {
            return Ok(Claim::Run { attempt, takeover: !inserted });
        }
        // The conflict update's WHERE refused: the row is finished (and
        // finished rows never change again), or its holder is alive.
        let (state, worker, result, retrospective): (String, String, Option<Vec<u8>>, Option<Vec<u8>>) =
            sqlx::query_as("SELECT state, worker, result, retrospective FROM sandbox_runs WHERE run_id = $1")
                .bind(&job.run_id)
                .fetch_one(&self.pool)
                .await?;
        if state == "running" {
            return Ok(Claim::LiveElsewhere { worker });
        }
        Ok(Claim::Finished { result: result.unwrap_or_default(), retrospective })
    }

    /// Refreshes the run's `heartbeat_at` every [`HEARTBEAT`] while
    /// `attempt` holds it. A failed beat (the database restarting) is
    /// tried again at the next; [`HOLDER_SILENT`] allows for several.
    fn beat(&self, run_id: &str, attempt: i32) -> tokio::task::JoinHandle<()> {
        let (pool, run_id) = (self.pool.clone(), run_id.to_owned());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(HEARTBEAT);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let beat = sqlx::query(
                    "UPDATE sandbox_runs SET heartbeat_at = now() \
                     WHERE run_id = $1 AND attempt = $2 AND state = 'running'",
                )
                .bind(&run_id)
                .bind(attempt)
                .execute(&pool)
                .await;
                match beat {
                    Ok(done) if done.rows_affected() == 0 => return,
                    Ok(_) => {}
                    Err(e) => tracing::debug!(run_id, error = %e, "heartbeat not stored; trying again"),
                }
            }
        })
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
        .bind(ended.outcome)
        .bind(&ended.reason)
        .bind(ended.started_at)
        .bind(ended.finished_at)
        .bind(result)
        .bind(retro)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Publishes a stored result (and retrospective) with their fixed
    /// message ids, so a repeat inside the duplicate window is dropped.
    async fn publish(&self, run_id: &str, result: &[u8], retro: Option<&[u8]>) -> Result<(), HandlerError> {
        let result = SandboxResult::decode(result).map_err(|e| {
            HandlerError::Permanent(format!("the stored result of run {run_id} does not decode: {e}"))
        })?;
        self.bus
            .publish(&topics::SANDBOX_RESULTS, Some(run_id), &format!("result-{run_id}"), &result)
            .await
            .map_err(|e| HandlerError::retryable(&e))?;
        // The lifecycle event for people and dashboards; the result above is
        // what the controller acts on, so a failure here is only logged.
        let event = run_event(&result);
        if let Err(e) = self.bus.publish(&topics::EVENTS, Some(&event.kind), &event.event_id, &event).await {
            tracing::warn!(error = %error_chain(&e), "run event not published");
        }
        if let Some(retro) = retro {
            match Retrospective::decode(retro) {
                Ok(retro) => {
                    self.bus
                        .publish(&topics::RETROS, None, &format!("retro-{run_id}"), &retro)
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

/// `pp.event.run.<outcome>` for a finished run. Its id is fixed per run,
/// so a republished result announces it once.
fn run_event(result: &SandboxResult) -> Event {
    let mut event = Event::new(format!("run.{}", result.outcome.as_str()), "sandbox-worker");
    event.event_id = format!("run-{}", result.run_id);
    event.run_id = result.run_id.clone();
    event.remediation_id = result.remediation_id.clone();
    event.state = result.outcome.as_str().to_owned();
    event.message = result.reason.clone();
    if let Some(finished) = result.finished_at {
        event.occurred_at = finished;
    }
    if let (Some(started), Some(finished)) = (result.started_at, result.finished_at) {
        event.attributes.insert("duration_ms".into(), (finished - started).num_milliseconds().to_string());
    }
    event.attributes.insert("patch".into(), result.patch_object.is_some().to_string());
    event.attributes.insert("egress_denied".into(), result.egress_denied.to_string());
    event
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

/// `<host>:<pid>`, for the `worker` column and logs.
fn worker_name() -> String {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    format!("{host}:{}", std::process::id())
}

/// Runs the worker until shutdown: locks and sweeps the state folder,
/// prepares the sandbox, then consumes `SANDBOX_RUNS` with one VM slot per
/// concurrent batch.
pub async fn run(config: Config, fleet: FleetContext) -> Result<(), Error> {
    let section = &config.service;
    let state_dir = section.state_dir.clone();
    // The lock before anything touches the folder: a second worker on it
    // must fail before it can sweep away the first one's VMs. Both block
    // (the sweep waits for killed processes), so they run off the runtime.
    let (lock, swept) = {
        let state_dir = state_dir.clone();
        tokio::task::spawn_blocking(move || {
            let lock = sweep::StateLock::acquire(&state_dir)?;
            let swept = sweep::sweep(&lock, &state_dir)?;
            Ok::<_, sweep::Error>((lock, swept))
        })
        .await
        .map_err(|e| {
            sweep::Error::Io(patchpilot_model::IoError::new(
                "the start-up sweep task",
                std::io::Error::other(e),
            ))
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
    let mut sandbox = Sandbox::prepare(section, &mut |m: &str| tracing::info!("{m}")).await?;
    let warm_pool = section.warm_pool.unwrap_or(usize::from(sandbox.accelerated()));
    if warm_pool > 0 {
        let limits = &section.limits;
        sandbox.start_warm_pool(
            warm_pool,
            WarmShape {
                vcpus: limits.vcpus,
                memory_mib: limits.memory_mib,
                disk_mib: limits.disk_mib,
                docker: section.warm_docker,
                insecure_registries: section.insecure_registries.clone(),
            },
        );
    }
    let broker = crate::broker::RunBroker::new(&section.broker).map_err(Error::Broker)?;
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    let broker_owner = format!("{host}:{}", state_dir.display());
    if let Some(broker) = &broker {
        // The previous process's runs are over (the sweep above killed
        // their VMs): so are their capabilities. A broker that cannot be
        // reached now is logged; it refuses those tokens anyway once their
        // runs' VMs are gone, as no terminator stamps their run ids.
        match broker.sweep(&broker_owner).await {
            Ok(revoked) if !revoked.is_empty() => {
                tracing::warn!(
                    revoked = revoked.len(),
                    "revoked the capabilities of runs a previous worker left"
                )
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %error_chain(&e), "the start-up capability sweep failed"),
        }
    }
    tracing::info!(vmm = %sandbox.vmm_name(), image = %sandbox.image().key, warm_pool, "sandbox ready");

    let pool = fleet.pool().clone();
    let artifacts = fleet.artifacts().await?;
    let (metrics, egress_metrics) =
        fleet.metrics().register(|r| (Metrics::register(r), EgressMetrics::register(r)));
    let (pg_recorder, audit_writer) = PgRecorder::spawn(pool.clone());
    let recorder: Arc<dyn Recorder> = Arc::new(Fanout(vec![Arc::new(pg_recorder), Arc::new(egress_metrics)]));

    let worker = Worker {
        sandbox,
        pool,
        bus: fleet.bus().clone(),
        artifacts,
        limits: section.limits.clone(),
        host_aliases: section.host_aliases.clone(),
        insecure_registries: section.insecure_registries.clone(),
        recorder,
        state_dir: state_dir.clone(),
        name: worker_name(),
        max_deliver: i64::from(config.fleet.bus.max_deliver),
        metrics,
        active: Mutex::new(HashMap::new()),
        shutdown: fleet.shutdown().clone(),
        broker,
        broker_owner,
    };
    tracing::info!(worker = %worker.name, slots = section.slots, state_dir = %state_dir.display(), "sandbox worker starting");
    let spec = ConsumerSpec {
        stream: topics::SANDBOX_RUNS.stream(),
        durable: section.consumer.clone(),
        filter_subject: None,
    };
    let consumed =
        fleet.consume(&spec, ConsumeOptions { batch_size: 1, concurrency: section.slots }, &worker).await;
    fleet.shutdown().cancel();
    // The last PgRecorder clone goes with the worker; the writer then drains
    // what is queued and exits.
    drop(worker);
    if tokio::time::timeout(AUDIT_DRAIN, audit_writer).await.is_err() {
        tracing::warn!("the egress audit writer did not drain in time; some decisions may be unstored");
    }
    drop(lock);
    consumed.map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

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
