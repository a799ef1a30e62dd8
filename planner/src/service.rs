//! The planner service: consumes `ASSESSMENTS`, writes findings and
//! remediations, publishes `RemediationJob`s.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt as _;
use patchpilot_fleet::bus::{
    self, BatchHandler, ConsumeOptions, ConsumerSpec, Delivery, HandlerError, Outgoing, topics, trace,
};
use patchpilot_fleet::service::{FleetContext, ServiceSpec};
use patchpilot_fleet::{Bus, error_chain};
use patchpilot_model::SubmittedAssessment;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use sqlx::PgPool;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::config::Config;
use crate::mapping::{LabelSource, Mapper, Mapping};
use crate::policy::{self, Policy};
use crate::registry::LabelReader;
use crate::states::{self, StateSync};
use crate::store::{self, Incoming, PendingJob};

/// The planner as the service skeleton runs it.
pub const SERVICE: ServiceSpec = ServiceSpec {
    name: "patchpilot-planner",
    about: "PatchPilot planner: assessments in, remediation jobs out.",
    uses_database: true,
};

/// Why the planner could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bus failed.
    #[error("the bus failed")]
    Bus(#[from] bus::Error),
    /// The policy (VEX documents, patterns) is invalid.
    #[error("invalid policy")]
    Policy(#[source] policy::Error),
    /// Registry credentials could not be loaded.
    #[error("cannot set up registry access")]
    Registry(#[source] patchpilot_registry::Error),
    /// Mapping rules are invalid.
    #[error("invalid mapping rule: {0}")]
    Mapping(String),
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: String,
}

/// The planner's Prometheus metrics.
#[derive(Debug, Clone)]
pub struct Metrics {
    assessments: Family<ResultLabel, Counter>,
    findings_written: Counter,
    jobs_published: Counter,
    unmapped: Counter,
    label_lookups: Family<ResultLabel, Counter>,
}

impl Metrics {
    /// Registers the metrics under `pp_planner_*`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Metrics {
            assessments: Family::default(),
            findings_written: Counter::default(),
            jobs_published: Counter::default(),
            unmapped: Counter::default(),
            label_lookups: Family::default(),
        };
        registry.register(
            "pp_planner_assessments",
            "Assessments handled, by result (new, duplicate, invalid)",
            m.assessments.clone(),
        );
        registry.register(
            "pp_planner_findings_written",
            "Finding rows inserted or changed",
            m.findings_written.clone(),
        );
        registry.register(
            "pp_planner_jobs_published",
            "RemediationJobs acknowledged by JetStream",
            m.jobs_published.clone(),
        );
        registry.register(
            "pp_planner_unmapped_images",
            "Image references recorded as unmapped",
            m.unmapped.clone(),
        );
        registry.register(
            "pp_planner_label_lookups",
            "Registry label lookups, by result (ok, error)",
            m.label_lookups.clone(),
        );
        m
    }

    fn assessment(&self, result: &str, n: u64) {
        self.assessments.get_or_create(&ResultLabel { result: result.to_owned() }).inc_by(n);
    }
}

/// The planner's message handler and outbox publisher.
#[derive(Debug)]
pub struct Planner {
    pool: PgPool,
    bus: Bus,
    mapper: Mapper,
    policy: Policy,
    labels: Option<LabelReader>,
    metrics: Metrics,
}

impl Planner {
    /// Assembles a planner from its parts.
    pub fn new(
        pool: PgPool,
        bus: Bus,
        mapper: Mapper,
        policy: Policy,
        labels: Option<LabelReader>,
        metrics: Metrics,
    ) -> Planner {
        Planner { pool, bus, mapper, policy, labels, metrics }
    }

    /// Decodes and validates one delivery.
    fn decode(&self, delivery: &Delivery) -> Result<Incoming, HandlerError> {
        let SubmittedAssessment { id: assessment_id, assessment, submitted_at } = delivery.decode()?;
        let cx = delivery.trace_context();
        Ok(Incoming {
            assessment_id,
            assessment,
            trace_id: trace::trace_id(&cx),
            traceparent: trace::traceparent(&cx),
            submitted_at,
            mapping: Mapping::Unmapped { reason: String::new() },
            fetched_labels: None,
        })
    }

    /// Maps every incoming image: rules, then labels carried by the
    /// assessment, then labels remembered from earlier registry reads, then
    /// a registry read.
    async fn map_all(&self, incoming: &mut [Incoming]) -> Result<(), sqlx::Error> {
        let mut needs_registry = Vec::new();
        for (idx, i) in incoming.iter_mut().enumerate() {
            match self.mapper.by_rule(&i.assessment.image) {
                Some(Ok(mapping)) => i.mapping = mapping,
                Some(Err(reason)) => i.mapping = Mapping::Unmapped { reason },
                None if !i.assessment.labels.is_empty() => {
                    i.mapping = match self.mapper.by_labels(&i.assessment.labels, LabelSource::Assessment) {
                        Ok(m) => m,
                        Err(why) => {
                            Mapping::Unmapped { reason: format!("no mapping rule matched and {why}") }
                        }
                    };
                }
                None => needs_registry.push(idx),
            }
        }
        if needs_registry.is_empty() {
            return Ok(());
        }
        let digests: Vec<String> =
            needs_registry.iter().map(|&i| incoming[i].assessment.digest.to_string()).collect();
        let cached: HashMap<String, serde_json::Value> = sqlx::query_as::<_, (String, serde_json::Value)>(
            "SELECT digest, labels FROM images WHERE digest = ANY($1) AND labels_fetched_at IS NOT NULL",
        )
        .bind(&digests)
        .fetch_all(&self.pool)
        .await?
        .into_iter()
        .collect();
        let mut to_fetch = Vec::new();
        for idx in needs_registry {
            let i = &mut incoming[idx];
            if let Some(labels) = cached.get(i.assessment.digest.as_str()) {
                let labels: BTreeMap<String, String> =
                    serde_json::from_value(labels.clone()).unwrap_or_default();
                i.mapping = match self.mapper.by_labels(&labels, LabelSource::Registry) {
                    Ok(m) => m,
                    Err(why) => {
                        Mapping::Unmapped { reason: format!("no mapping rule matched and {why} (registry)") }
                    }
                };
            } else {
                to_fetch.push(idx);
            }
        }
        let Some(reader) = &self.labels else {
            for idx in to_fetch {
                incoming[idx].mapping = Mapping::Unmapped {
                    reason: "no mapping rule matched, the assessment carries no labels, and registry label lookup is disabled".into(),
                };
            }
            return Ok(());
        };
        type Lookup = (usize, Result<BTreeMap<String, String>, patchpilot_registry::Error>);
        let lookups: Vec<Lookup> = futures::stream::iter(to_fetch.into_iter().map(|idx| {
            let image = incoming[idx].assessment.image.clone();
            let digest = incoming[idx].assessment.digest.clone();
            let platform = incoming[idx].assessment.platform.clone();
            async move { (idx, reader.labels(&image, &digest, platform.as_ref()).await) }
        }))
        .buffer_unordered(8)
        .collect()
        .await;
        for (idx, looked_up) in lookups {
            let i = &mut incoming[idx];
            match looked_up {
                Ok(labels) => {
                    self.metrics.label_lookups.get_or_create(&ResultLabel { result: "ok".into() }).inc();
                    i.mapping = match self.mapper.by_labels(&labels, LabelSource::Registry) {
                        Ok(m) => m,
                        Err(why) => Mapping::Unmapped {
                            reason: format!("no mapping rule matched and {why} (registry)"),
                        },
                    };
                    i.fetched_labels = Some(labels);
                }
                Err(e) => {
                    self.metrics.label_lookups.get_or_create(&ResultLabel { result: "error".into() }).inc();
                    let chain = error_chain(&e);
                    tracing::warn!(image = %i.assessment.image, error = %chain, "registry label lookup failed");
                    i.mapping = Mapping::Unmapped {
                        reason: format!(
                            "no mapping rule matched and the registry label lookup failed: {chain}"
                        ),
                    };
                }
            }
        }
        Ok(())
    }

    /// Publishes jobs (continuing each one's trace), waits for JetStream's
    /// acks, and marks the acknowledged ones published. Returns how many
    /// were acknowledged; the rest stay in the outbox for the sweeper.
    pub async fn publish_jobs(&self, jobs: &[PendingJob]) -> usize {
        let outgoing = jobs
            .iter()
            .map(|p| {
                let span = tracing::info_span!(
                    "planner.publish_job",
                    otel.kind = "producer",
                    job_id = %p.job.job_id,
                    remediation_id = %p.job.remediation_id,
                    revision = p.job.revision,
                    repo = %p.job.target.repo_url,
                );
                if let Some(tp) = &p.traceparent {
                    let _ = span.set_parent(trace::from_traceparent(tp));
                }
                Outgoing::new(&topics::REMEDIATIONS, None, &p.job.job_id, &p.job, &span.context())
            })
            .collect::<Vec<_>>();
        let ids: Vec<String> = outgoing.iter().map(|o| o.msg_id().to_owned()).collect();
        let mut acked = Vec::with_capacity(ids.len());
        for (job_id, result) in ids.into_iter().zip(self.bus.publish_many(outgoing).await) {
            match result {
                Ok(_) => acked.push(job_id),
                Err(e) => {
                    let e = error_chain(&e);
                    tracing::warn!(%job_id, error = %e, "job publish not acknowledged; the outbox sweeper will retry")
                }
            }
        }
        if let Err(e) = store::mark_published(&self.pool, &acked).await {
            tracing::warn!(error = %e, "cannot mark jobs published; they will be published again (deduplicated by id)");
        }
        self.metrics.jobs_published.inc_by(acked.len() as u64);
        acked.len()
    }

    /// Publishes outbox rows at least `min_age_secs` old that were never
    /// confirmed. Returns how many were published.
    pub async fn sweep_outbox(&self, min_age_secs: i64) -> Result<usize, sqlx::Error> {
        let jobs = store::unpublished_jobs(&self.pool, min_age_secs).await?;
        if jobs.is_empty() {
            return Ok(0);
        }
        tracing::info!(count = jobs.len(), "publishing jobs left in the outbox");
        Ok(self.publish_jobs(&jobs).await)
    }

    async fn ingest(&self, incoming: &[Incoming]) -> Result<store::BatchResult, sqlx::Error> {
        store::ingest_batch(&self.pool, incoming, &self.policy, Utc::now().date_naive()).await
    }

    fn record(&self, result: &store::BatchResult, total: usize) {
        self.metrics.assessment("new", result.new_assessments as u64);
        self.metrics.assessment("duplicate", (total - result.new_assessments) as u64);
        self.metrics.findings_written.inc_by(result.findings_written);
        self.metrics.unmapped.inc_by(result.unmapped as u64);
    }
}

impl BatchHandler for Planner {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        let mut outcomes: Vec<Result<(), HandlerError>> = vec![Ok(()); batch.len()];
        let mut positions = Vec::with_capacity(batch.len());
        let mut incoming = Vec::with_capacity(batch.len());
        for (pos, delivery) in batch.iter().enumerate() {
            let _entered = delivery.span.enter();
            match self.decode(delivery) {
                Ok(i) => {
                    tracing::debug!(image = %i.assessment.image, findings = i.assessment.findings.len(), "assessment received");
                    positions.push(pos);
                    incoming.push(i);
                }
                Err(e) => {
                    self.metrics.assessment("invalid", 1);
                    outcomes[pos] = Err(e);
                }
            }
        }
        if incoming.is_empty() {
            return outcomes;
        }
        if let Err(e) = self.map_all(&mut incoming).await {
            let err = HandlerError::retryable(&e);
            for &pos in &positions {
                outcomes[pos] = Err(err.clone());
            }
            return outcomes;
        }
        match self.ingest(&incoming).await {
            Ok(result) => {
                self.record(&result, incoming.len());
                tracing::debug!(new = result.new_assessments, jobs = result.jobs.len(), "batch written");
                self.publish_jobs(&result.jobs).await;
            }
            Err(e) if incoming.len() == 1 => outcomes[positions[0]] = Err(classify(&e)),
            Err(e) => {
                // One bad assessment must not hold up the others: retry each
                // on its own so only the culprit fails.
                tracing::warn!(error = %e, size = incoming.len(), "batch write failed; retrying one by one");
                for (one, &pos) in incoming.chunks(1).zip(&positions) {
                    match self.ingest(one).await {
                        Ok(result) => {
                            self.record(&result, 1);
                            self.publish_jobs(&result.jobs).await;
                        }
                        Err(e) => outcomes[pos] = Err(classify(&e)),
                    }
                }
            }
        }
        outcomes
    }
}

/// Data errors (SQLSTATE class 22: bad encoding, value out of range) never
/// go away on retry; anything else (connection loss, deadlock, serialisation
/// failure) might.
fn classify(e: &sqlx::Error) -> HandlerError {
    match e {
        sqlx::Error::Database(db) if db.code().is_some_and(|c| c.starts_with("22")) => {
            HandlerError::permanent(e)
        }
        _ => HandlerError::retryable(e),
    }
}

/// Runs the planner until shutdown: publishes whatever a crash left in the
/// outbox, then consumes `ASSESSMENTS`.
pub async fn run(config: Config, fleet: FleetContext) -> Result<(), Error> {
    let section = &config.service;
    let policy = Policy::load(&section.policy).map_err(Error::Policy)?;
    let today = Utc::now().date_naive();
    for expired in policy.expired_ignores(today) {
        tracing::warn!(id = %expired.id, expired = %expired.expires, "ignore rule has expired and no longer applies");
    }
    let mapper = Mapper::new(&section.mappings, section.label_defaults.clone()).map_err(Error::Mapping)?;
    let labels = if section.registry.lookup_labels {
        Some(LabelReader::new(&section.registry.access()).map_err(Error::Registry)?)
    } else {
        None
    };
    let metrics = fleet.metrics().register(Metrics::register);
    let planner =
        Arc::new(Planner::new(fleet.pool().clone(), fleet.bus().clone(), mapper, policy, labels, metrics));
    tracing::info!(
        rules = section.mappings.len(),
        vex_documents = planner.policy.vex_documents(),
        batch_size = section.batch_size,
        concurrency = section.concurrency,
        "planner starting"
    );
    match planner.sweep_outbox(0).await {
        Ok(n) if n > 0 => tracing::info!(published = n, "recovered unpublished jobs"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "outbox sweep failed at start"),
    }
    let shutdown = fleet.shutdown().clone();
    let sweeper = {
        let planner = planner.clone();
        let shutdown = shutdown.clone();
        let every = Duration::from_secs(section.outbox_sweep_secs);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tick.tick() => {
                        if let Err(e) = planner.sweep_outbox(every.as_secs() as i64).await {
                            tracing::warn!(error = %e, "outbox sweep failed");
                        }
                    }
                }
            }
        })
    };
    let spec = ConsumerSpec {
        stream: topics::ASSESSMENTS.stream(),
        durable: section.consumer.clone(),
        filter_subject: None,
    };
    let options = ConsumeOptions { batch_size: section.batch_size, concurrency: section.concurrency };
    // The controller's state changes, so that every view of a remediation
    // reads one state (see `states`). Planners share the durable consumer.
    let states_spec = ConsumerSpec {
        stream: topics::EVENTS.stream(),
        durable: format!("{}-states", section.consumer),
        filter_subject: Some(states::FILTER.to_owned()),
    };
    let state_sync = StateSync::new(fleet.pool().clone());
    // Whichever consumer stops first stops the planner.
    let (consumed, synced) = tokio::join!(
        async {
            let r = fleet.consume(&spec, options, planner.as_ref()).await;
            shutdown.cancel();
            r
        },
        async {
            let r = fleet.consume(&states_spec, ConsumeOptions::default(), &state_sync).await;
            shutdown.cancel();
            r
        },
    );
    let _ = sweeper.await;
    consumed.map_err(Error::from)?;
    synced.map_err(Error::from)
}
