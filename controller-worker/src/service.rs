//! The `patchpilot-controller` service: two intakes and the executor.
//!
//! - `REMEDIATIONS` → [`JobIntake`]: each RemediationJob revision is stored
//!   (a redelivery or an older revision changes nothing) with its trace
//!   context, and the executor picks it up.
//! - `SANDBOX_RESULTS` → [`ResultIntake`]: each result is stored with its
//!   run and wakes the remediation waiting for it.
//! - the [`Executor`] drives the lifecycle from the stored state.
//! - with the local forge, optionally the local CI runner, whose checks
//!   run in `patchpilot-local-ci` processes under a uid of their own (see
//!   `patchpilot_forge_local`).
//!
//! Messages that do not decode, or name nothing valid, go to the dead
//! letters with the reason; nothing else is dropped.

use std::sync::Arc;

use patchpilot_fleet::artifacts;
use patchpilot_fleet::bus::{
    self, BatchHandler, ConsumeOptions, ConsumerSpec, Delivery, HandlerError, topics, trace,
};
use patchpilot_fleet::error_chain;
use patchpilot_fleet::service::{FleetContext, ServiceSpec};
use patchpilot_model::{RemediationJob, SandboxResult};
use tracing::Instrument as _;

use crate::config::{Config, ForgeKind};
use crate::digest::DigestIntake;
use crate::events::StateEvents;
use crate::executor::Executor;
use crate::metrics::ControllerMetrics;
use crate::notify::Notifier;
use crate::store::Store;
use patchpilot_forge::Forge;
use patchpilot_forge::github::GitHub;
use patchpilot_forge_local::{LocalCi, LocalCiConfig, LocalForge};

/// The controller as the service skeleton runs it.
pub const SERVICE: ServiceSpec = ServiceSpec {
    name: "patchpilot-controller",
    about: "PatchPilot controller: the only writer to forges; turns remediation jobs into vetted, green pull requests.",
    uses_database: true,
};

/// Why the service stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bus failed.
    #[error("the bus failed")]
    Bus(#[from] bus::Error),
    /// The object store failed.
    #[error("the artifact store")]
    Artifacts(#[from] artifacts::Error),
    /// The forge could not be set up.
    #[error("the forge")]
    Forge(#[from] patchpilot_forge::Error),
    /// The local CI runner could not be set up.
    #[error("the local CI runner")]
    LocalCi(#[from] patchpilot_forge_local::SetupError),
    /// A notifier could not be set up.
    #[error("a notifier")]
    Notify(#[from] crate::notify::NotifyError),
    /// The executor's store failed.
    #[error("the executor")]
    Executor(#[from] crate::executor::Error),
    /// The webhook receiver could not listen.
    #[error("controller.webhook.listen")]
    Webhook(#[source] std::io::Error),
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
        // Validated here so a bad job is a dead letter with its reason, not
        // a remediation that fails later.
        let job: RemediationJob = delivery.decode()?;
        patchpilot_forge::Repo::from_url(&job.target.repo_url).map_err(|e| {
            HandlerError::Permanent(format!("invalid RemediationJob {:?}: target.repo_url: {e}", job.job_id))
        })?;
        let id = job.remediation_id.to_string();
        if !self.config.works_on(&job.target.repo_url) {
            tracing::info!(remediation_id = %id, repo = %job.target.repo_url, "not a repository this controller works on (controller.repositories); left alone");
            return Ok(());
        }
        let traceparent = trace::traceparent(&delivery.trace_context());
        let outcome = self
            .store
            .record_job(&id, job.revision, &delivery.payload, traceparent.as_deref())
            .await
            .map_err(|e| HandlerError::retryable(&e))?;
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
        let result: SandboxResult = delivery.decode()?;
        let known = self.store.record_run_result(&result).await.map_err(|e| HandlerError::retryable(&e))?;
        if !known {
            // Another deployment's run, or one whose row was lost: nothing
            // to wake, and keeping it would block the work queue.
            tracing::warn!(run_id = %result.run_id, "result for a run this controller did not request; dropped");
        } else {
            tracing::info!(run_id = %result.run_id, outcome = %result.outcome, "sandbox result recorded");
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

/// Runs the controller until shutdown: the two intakes, the retro digests'
/// intake ([`crate::digest`]), the executor, and optionally the webhook
/// receiver and the local CI runner.
pub async fn run(config: Config, fleet: FleetContext) -> Result<(), Error> {
    let pool = fleet.pool().clone();
    let bus = fleet.bus().clone();
    let shutdown = fleet.shutdown().clone();
    let artifacts = fleet.artifacts().await?;
    let store = Store::new(pool.clone());
    let c = &config.service;

    let mut local_ci = None;
    let forge: Arc<dyn Forge> = match c.forge {
        ForgeKind::Local => {
            let forge = LocalForge::new(&c.local.root, pool.clone());
            if c.local.run_ci {
                let ci = LocalCi::new(LocalCiConfig {
                    timeout: std::time::Duration::from_secs(c.local.ci_timeout_secs),
                    work_dir: Some(c.work_dir.join("ci")),
                    runner: c.local.ci_runner.clone(),
                    check_user: c.local.check_user(),
                    ..LocalCiConfig::default()
                })?;
                local_ci = Some((ci, forge.clone()));
            }
            Arc::new(forge)
        }
        ForgeKind::Github => Arc::new(GitHub::new(&c.github)?),
    };
    let notifiers: Vec<Notifier> = c.notifiers.iter().map(|n| n.build()).collect::<Result<_, _>>()?;
    // The retro aggregator's digests go through the same notifiers (built
    // again: the executor owns its set).
    let digests = DigestIntake::new(c.notifiers.iter().map(|n| n.build()).collect::<Result<_, _>>()?);

    let webhook = match &c.webhook {
        Some(hook) => {
            let listener = tokio::net::TcpListener::bind(hook.listen).await.map_err(Error::Webhook)?;
            tracing::info!(listen = %hook.listen, "CI webhook receiver on /webhooks/github");
            Some(tokio::spawn(crate::webhook::serve(
                listener,
                store.clone(),
                patchpilot_forge::Secret::new(hook.secret.clone()),
                shutdown.clone(),
            )))
        }
        None => None,
    };
    let owner = owner_name();
    tracing::info!(owner, forge = forge.kind(), "controller starting");
    let executor =
        Executor::new(store.clone(), forge.clone(), bus.clone(), artifacts, notifiers, c.clone(), owner);
    let metrics = fleet.metrics().register(ControllerMetrics::register);
    let state_events = StateEvents::new(store.clone(), bus.clone(), metrics);
    let jobs = JobIntake::new(store.clone(), c.clone());
    let results = ResultIntake::new(store.clone());
    let job_spec = ConsumerSpec {
        stream: topics::REMEDIATIONS.stream(),
        durable: c.consumer.clone(),
        filter_subject: None,
    };
    let result_spec = ConsumerSpec {
        stream: topics::SANDBOX_RESULTS.stream(),
        durable: c.consumer.clone(),
        filter_subject: None,
    };
    let digest_spec = ConsumerSpec {
        stream: topics::RETRO_DIGESTS.stream(),
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
    let (a, b, d, e, (), ()) = tokio::join!(
        async {
            let r = fleet.consume(&job_spec, ConsumeOptions::default(), &jobs).await;
            shutdown.cancel();
            r
        },
        async {
            let r = fleet.consume(&result_spec, ConsumeOptions::default(), &results).await;
            shutdown.cancel();
            r
        },
        async {
            let r = fleet.consume(&digest_spec, ConsumeOptions::default(), &digests).await;
            shutdown.cancel();
            r
        },
        async {
            let r = executor.run(shutdown.clone()).await;
            shutdown.cancel();
            r
        },
        ci,
        state_events.run(shutdown.clone()),
    );
    if let Some(hook) = webhook {
        let _ = hook.await;
    }
    for r in [a, b, d] {
        if let Err(e) = r {
            tracing::error!(error = %error_chain(&e), "consumer failed");
            return Err(e.into());
        }
    }
    e?;
    Ok(())
}
