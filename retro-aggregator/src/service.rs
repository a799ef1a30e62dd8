//! `patchpilot-retro`: a durable consumer on `RETROS` that stores each
//! run's retrospective once, with the facts of its run and its
//! classification.

use patchpilot_fleet::bus::{BatchHandler, ConsumeOptions, ConsumerSpec, Delivery, HandlerError, topics};
use patchpilot_fleet::config::{self, Section, ServiceConfig, Validate, key};
use patchpilot_fleet::service::{FleetContext, ServiceSpec};
use patchpilot_model::Retrospective;
use prometheus_client::metrics::counter::Counter;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::digest::DigestSection;
use crate::record::RetroRecord;
use crate::store;
use crate::summary::SummarySection;

/// The service.
pub const SERVICE: ServiceSpec = ServiceSpec {
    name: "patchpilot-retro",
    about: "Stores every run's retrospective once, classified, for `patchpilot retros`",
    uses_database: true,
};

/// The configuration.
pub type Config = ServiceConfig<RetroSection>;

/// `[retro]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetroSection {
    /// Durable consumer name; aggregators sharing it split the work.
    pub consumer: String,
    /// Most retrospectives stored in one transaction.
    pub batch_size: usize,
    /// The periodic digest for the controller's notifiers (off by default).
    pub digest: DigestSection,
    /// The digest's summary by a model through the broker (off by default).
    pub summary: SummarySection,
}

impl Default for RetroSection {
    fn default() -> Self {
        RetroSection {
            consumer: "retro".into(),
            batch_size: 64,
            digest: DigestSection::default(),
            summary: SummarySection::default(),
        }
    }
}

impl Section for RetroSection {
    const NAME: &'static str = "retro";
}

impl Validate for RetroSection {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        if self.consumer.is_empty()
            || !self.consumer.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(config::Error::invalid(
                key(prefix, "consumer"),
                "must be non-empty letters, digits, '-' or '_'",
            ));
        }
        if !(1..=1024).contains(&self.batch_size) {
            return Err(config::Error::invalid(key(prefix, "batch_size"), "must be 1-1024"));
        }
        self.digest.period().map_err(|reason| config::Error::invalid(key(prefix, "digest.every"), reason))?;
        if !(1..=patchpilot_model::MAX_DIGEST_ROWS).contains(&self.digest.top) {
            return Err(config::Error::invalid(
                key(prefix, "digest.top"),
                format!("must be 1-{}", patchpilot_model::MAX_DIGEST_ROWS),
            ));
        }
        if self.digest.check_secs == 0 {
            return Err(config::Error::invalid(key(prefix, "digest.check_secs"), "must be above 0"));
        }
        self.summary.validate(&key(prefix, "summary"))
    }
}

/// The `RETROS` handler.
#[derive(Debug, Clone)]
pub struct Intake {
    pool: PgPool,
    stored: Counter,
}

impl Intake {
    /// An intake writing to `pool`, counting what it stores in `stored`.
    pub fn new(pool: PgPool, stored: Counter) -> Self {
        Intake { pool, stored }
    }
}

impl BatchHandler for Intake {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        let mut outcomes: Vec<Result<(), HandlerError>> = vec![Ok(()); batch.len()];
        let mut records = Vec::with_capacity(batch.len());
        let mut positions = Vec::with_capacity(batch.len());
        for (position, delivery) in batch.iter().enumerate() {
            let retro: Retrospective = match delivery.decode() {
                Ok(retro) => retro,
                Err(e) => {
                    outcomes[position] = Err(e);
                    continue;
                }
            };
            if retro.run_id.trim().is_empty() {
                outcomes[position] = Err(HandlerError::Permanent("retrospective without a run_id".into()));
                continue;
            }
            records.push(RetroRecord::from_retrospective(&retro));
            positions.push(position);
        }
        // One query to enrich the batch and one statement to store it; a
        // run stored before (a redelivery) is left as it is.
        let stored = match store::enrich(&self.pool, &mut records).await {
            Ok(()) => store::insert(&self.pool, &records, "bus").await.map(|inserted| {
                self.stored.inc_by(inserted);
            }),
            Err(e) => Err(e),
        };
        if let Err(e) = stored {
            let error =
                if e.is_transient() { HandlerError::retryable(&e) } else { HandlerError::permanent(&e) };
            for position in positions {
                outcomes[position] = Err(error.clone());
            }
        }
        outcomes
    }
}

/// Runs the intake until shutdown.
pub async fn run(config: Config, fleet: FleetContext) -> Result<(), patchpilot_fleet::bus::Error> {
    let section = config.service;
    let spec = ConsumerSpec {
        stream: topics::RETROS.stream(),
        durable: section.consumer.clone(),
        filter_subject: None,
    };
    let stored = fleet.metrics().register(|registry| {
        let stored = Counter::default();
        registry.register(
            "pp_retros_stored",
            "Retrospectives stored (a redelivered one is stored once)",
            stored.clone(),
        );
        stored
    });
    // Rows an older build's rules classified are classified again before
    // new ones arrive, so the store speaks one version of the rules. A
    // failure here is logged, not fatal: the intake matters more, and the
    // next start (or `patchpilot retros reclassify`) tries again.
    match store::reclassify(fleet.pool(), store::Scope::Outdated, false).await {
        Ok(done) if done.examined > 0 => tracing::info!(
            examined = done.examined,
            category_changes = done.category_changes(),
            rule_changes = done.rule_changed,
            rules_version = crate::classify::RULES_VERSION,
            "classified stored retrospectives again under the current rules"
        ),
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %patchpilot_model::error_chain(&e), "reclassifying stored retrospectives failed")
        }
    }
    let intake = Intake::new(fleet.pool().clone(), stored);
    tracing::info!(consumer = %section.consumer, "retro aggregator starting");
    // A capability minted for a summary and left live by a crash is
    // revoked before any other is minted.
    if section.summary.connection.is_some() {
        match patchpilot_broker::service::ServiceSession::sweep(&section.summary.broker).await {
            Ok(revoked) if !revoked.is_empty() => {
                tracing::info!(?revoked, "revoked the summary capabilities a previous run left live")
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %patchpilot_model::error_chain(&e), "cannot sweep the summary's capabilities")
            }
        }
    }
    // The digest runs beside the intake and stops with it.
    let digests = crate::digest::run(
        fleet.pool(),
        fleet.bus(),
        &section.digest,
        &section.summary,
        fleet.shutdown().cancelled(),
    );
    let consumed = async {
        let r = fleet
            .consume(&spec, ConsumeOptions { batch_size: section.batch_size, concurrency: 1 }, &intake)
            .await;
        // An intake that stopped (an error, or shutdown) stops the digest.
        fleet.shutdown().cancel();
        r
    };
    let (consumed, ()) = tokio::join!(consumed, digests);
    consumed
}
