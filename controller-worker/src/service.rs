//! The `patchpilot-controller` service: two intakes and the executor.
//!
//! - `REMEDIATIONS` → [`JobIntake`]: each RemediationJob revision is stored
//!   (a redelivery or an older revision changes nothing) with its trace
//!   context, and the executor picks it up.
//! - `SANDBOX_RESULTS` → [`ResultIntake`]: each result is stored with its
//!   run and wakes the remediation waiting for it.
//! - the [`Executor`] drives the lifecycle from the stored state.
//! - with the local forge, optionally the local CI runner.
//!
//! Messages that do not decode, or name nothing valid, go to the dead
//! letters with the reason; nothing else is dropped.

use std::sync::Arc;

use patchpilot_fleet::artifacts::{self, ArtifactStore};
use patchpilot_fleet::bus::{
    self, BatchHandler, ConsumeOptions, ConsumerMetrics, ConsumerSpec, Delivery, HandlerError, StreamName,
    trace,
};
use patchpilot_model::RemediationJob;
use patchpilot_fleet::{Bus, error_chain, store as fleet_store, telemetry};
use patchpilot_proto::{Message as _, v1};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::config::{Config, ForgeKind};
use crate::executor::{Executor, outcome_name};
use crate::forge::Forge;
use crate::forge::github::GitHub;
use crate::forge::local::{LocalCi, LocalCiConfig, LocalForge};
use crate::notify::Notifier;
use crate::store::{JobOutcome, RunResult, Store};

/// Why the service stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Postgres could not be reached or migrated.
    #[error(transparent)]
    Database(#[from] fleet_store::Error),
    /// The bus failed.
    #[error(transparent)]
    Bus(#[from] bus::Error),
    /// The object store failed.
    #[error(transparent)]
    Artifacts(#[from] artifacts::Error),
    /// The forge could not be set up.
    #[error(transparent)]
    Forge(#[from] crate::forge::Error),
    /// A notifier could not be set up.
    #[error(transparent)]
    Notify(#[from] crate::notify::NotifyError),
    /// The executor's store failed.
    #[error(transparent)]
    Executor(#[from] crate::executor::Error),
    /// The metrics endpoint failed.
    #[error(transparent)]
    Telemetry(#[from] telemetry::Error),
    /// The webhook receiver could not listen.
    #[error("controller.webhook.listen: {0}")]
    Webhook(std::io::Error),
}

/// Stores RemediationJobs for the repositories this controller works on.
#[derive(Debug)]
pub struct JobIntake {
    store: Store,
    config: crate::config::ControllerConfig,
}

impl JobIntake {
    /// An intake writing to `store` the jobs whose repository `config`
    /// says this controller works on.
    pub fn new(store: Store, config: crate::config::ControllerConfig) -> Self {
        JobIntake { store, config }
    }

    async fn handle_one(&self, delivery: &Delivery) -> Result<(), HandlerError> {
        let pb = v1::RemediationJob::decode(delivery.payload.as_ref()).map_err(|e| {
            HandlerError::Permanent(format!("payload is not a patchpilot.v1.RemediationJob: {e}"))
        })?;
        // Validated here so a bad job is a dead letter with its reason, not
        // a remediation that fails later.
        let job = RemediationJob::from_proto(pb.clone())
            .map_err(|e| HandlerError::Permanent(format!("invalid RemediationJob {:?}: {e}", pb.job_id)))?;
        crate::forge::Repo::from_url(&job.target.repo_url).map_err(|e| {
            HandlerError::Permanent(format!("invalid RemediationJob {:?}: target.repo_url: {e}", pb.job_id))
        })?;
        let id = job.remediation_id.to_string();
        if !self.config.works_on(&job.target.repo_url) {
            tracing::info!(remediation_id = %id, repo = %job.target.repo_url, "not a repository this controller works on (controller.repositories); left alone");
            return Ok(());
        }
        let outcome = self
            .store
            .record_job(&id, job.revision, &delivery.payload)
            .await
            .map_err(|e| HandlerError::retryable(&e))?;
        if outcome != JobOutcome::Ignored
            && let Some(tp) = trace::traceparent(&delivery.trace_context())
        {
            self.store.set_traceparent(&id, &tp).await.map_err(|e| HandlerError::retryable(&e))?;
        }
        tracing::info!(remediation_id = %id, revision = job.revision, ?outcome, "job recorded");
        Ok(())
    }
}

impl BatchHandler for JobIntake {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        one_by_one(batch, |d| self.handle_one(d)).await
    }
}

/// Stores SandboxResults.
#[derive(Debug)]
pub struct ResultIntake {
    store: Store,
}

impl ResultIntake {
    /// An intake writing to `store`.
    pub fn new(store: Store) -> Self {
        ResultIntake { store }
    }

    async fn handle_one(&self, delivery: &Delivery) -> Result<(), HandlerError> {
        let pb = v1::SandboxResult::decode(delivery.payload.as_ref()).map_err(|e| {
            HandlerError::Permanent(format!("payload is not a patchpilot.v1.SandboxResult: {e}"))
        })?;
        if pb.run_id.is_empty() {
            return Err(HandlerError::Permanent("invalid SandboxResult: run_id: must not be empty".into()));
        }
        let outcome = v1::RunOutcome::try_from(pb.outcome).unwrap_or(v1::RunOutcome::Unspecified);
        let result = RunResult {
            run_id: pb.run_id.clone(),
            outcome: outcome_name(outcome).to_owned(),
            reason: pb.reason.clone(),
            exit_code: pb.exit_code,
            patch_object: pb.patch_object.clone(),
            result_object: pb.result_object.clone(),
            transcript_object: pb.transcript_object.clone(),
            egress_denied: pb.egress_denied,
        };
        let known = self.store.record_run_result(&result).await.map_err(|e| HandlerError::retryable(&e))?;
        if !known {
            // Another deployment's run, or one whose row was lost: nothing
            // to wake, and keeping it would block the work queue.
            tracing::warn!(run_id = %pb.run_id, "result for a run this controller did not request; dropped");
        } else {
            tracing::info!(run_id = %pb.run_id, outcome = outcome_name(outcome), "sandbox result recorded");
        }
        Ok(())
    }
}

impl BatchHandler for ResultIntake {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        one_by_one(batch, |d| self.handle_one(d)).await
    }
}

/// Handles a batch in order, each message in its delivery's span (which
/// continues the publisher's trace).
async fn one_by_one<'a, F, Fut>(batch: &'a [Delivery], mut handle: F) -> Vec<Result<(), HandlerError>>
where
    F: FnMut(&'a Delivery) -> Fut,
    Fut: std::future::Future<Output = Result<(), HandlerError>>,
{
    let mut out = Vec::with_capacity(batch.len());
    for delivery in batch {
        out.push(handle(delivery).instrument(delivery.span.clone()).await);
    }
    out
}

/// This process's name in leases: host and pid.
pub fn owner_name() -> String {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    format!("{host}:{}", std::process::id())
}

/// Runs the controller until `shutdown` fires, then drains.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), Error> {
    telemetry::install_crypto_provider();
    let pool = fleet_store::connect(&config.database).await?;
    let bus = Bus::connect(&config.nats, config.bus.clone(), "patchpilot-controller").await?;
    bus.ensure_topology().await?;
    let artifacts = ArtifactStore::open(&bus).await?;
    let store = Store::new(pool.clone());
    let c = &config.controller;

    let mut local_ci = None;
    let forge: Arc<dyn Forge> = match c.forge {
        ForgeKind::Local => {
            let forge = LocalForge::new(&c.local.root, pool.clone());
            if c.local.run_ci {
                let ci = LocalCi::new(LocalCiConfig {
                    timeout: std::time::Duration::from_secs(c.local.ci_timeout_secs),
                    work_dir: Some(c.work_dir.join("ci")),
                    ..LocalCiConfig::default()
                });
                local_ci = Some((ci, forge.clone()));
            }
            Arc::new(forge)
        }
        ForgeKind::Github => Arc::new(GitHub::new(&c.github)?),
    };
    let notifiers: Vec<Notifier> = c.notifiers.iter().map(|n| n.build()).collect::<Result<_, _>>()?;

    let mut registry = Registry::default();
    let consumer_metrics = ConsumerMetrics::register(&mut registry);
    let metrics_server = match config.telemetry.metrics_addr {
        Some(addr) => Some(telemetry::serve_metrics(addr, Arc::new(registry), shutdown.clone()).await?),
        None => None,
    };

    let webhook = match &c.webhook {
        Some(hook) => {
            let listener = tokio::net::TcpListener::bind(hook.listen).await.map_err(Error::Webhook)?;
            tracing::info!(listen = %hook.listen, "CI webhook receiver on /webhooks/github");
            Some(tokio::spawn(crate::webhook::serve(
                listener,
                store.clone(),
                crate::forge::Secret::new(hook.secret.clone()),
                shutdown.clone(),
            )))
        }
        None => None,
    };
    let owner = owner_name();
    tracing::info!(owner, forge = forge.kind(), "controller starting");
    let executor =
        Executor::new(store.clone(), forge.clone(), bus.clone(), artifacts, notifiers, c.clone(), owner);
    let jobs = JobIntake::new(store.clone(), c.clone());
    let results = ResultIntake::new(store.clone());
    let job_spec =
        ConsumerSpec { stream: StreamName::Remediations, durable: c.consumer.clone(), filter_subject: None };
    let result_spec = ConsumerSpec {
        stream: StreamName::SandboxResults,
        durable: c.consumer.clone(),
        filter_subject: None,
    };
    let ci = async {
        if let Some((ci, forge)) = &local_ci {
            ci.run(forge, shutdown.clone()).await;
        }
    };
    // Whatever part stops first stops the service: a controller that
    // cannot hear results must not keep leasing remediations.
    let stop_all = |r| {
        shutdown.cancel();
        r
    };
    let (a, b, e, ()) = tokio::join!(
        async {
            stop_all(
                bus::run_consumer(
                    &bus,
                    &job_spec,
                    ConsumeOptions::default(),
                    &jobs,
                    &consumer_metrics,
                    shutdown.clone(),
                )
                .await,
            )
        },
        async {
            stop_all(
                bus::run_consumer(
                    &bus,
                    &result_spec,
                    ConsumeOptions::default(),
                    &results,
                    &consumer_metrics,
                    shutdown.clone(),
                )
                .await,
            )
        },
        async {
            let r = executor.run(shutdown.clone()).await;
            // Whatever stops the executor stops the service.
            shutdown.cancel();
            r
        },
        ci,
    );
    shutdown.cancel();
    if let Some(hook) = webhook {
        let _ = hook.await;
    }
    if let Some(server) = metrics_server {
        let _ = server.await;
    }
    bus.drain().await;
    pool.close().await;
    tracing::info!("controller stopped");
    for r in [a, b] {
        if let Err(e) = r {
            tracing::error!(error = %error_chain(&e), "consumer failed");
            return Err(e.into());
        }
    }
    e?;
    Ok(())
}
