//! The `patchpilot-scanner` service: consumes `SCAN_REQUESTS`, scans, and
//! publishes assessments to `ASSESSMENTS`; optionally runs registry
//! discovery and asks itself to scan new or changed digests.
//!
//! Results are cached in a JetStream key-value bucket keyed by image digest
//! and advisory DB version: an unchanged image under an unchanged DB is not
//! scanned twice (a cache hit republishes the cached findings under the
//! requested reference). Discovery remembers, per reference, the digest it
//! last asked to scan, in another bucket, so only new or changed digests
//! cause scans. Long scans report progress as `pp.event.scan.progress`
//! events, and the bus keeps them alive with in-progress acks.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use async_nats::jetstream::kv;
use chrono::Utc;
use patchpilot_fleet::bus::{
    self, BatchHandler, ConsumeOptions, ConsumerSpec, Delivery, HandlerError, topics,
};
use patchpilot_fleet::service::{FleetContext, ServiceSpec};
use patchpilot_fleet::{Bus, error_chain};
use patchpilot_model::{Event, ScanRequest, SubmittedAssessment, Wire as _};
use patchpilot_registry::Registry;
use patchpilot_registry::oci::PlatformChoice;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use sha2::Digest as _;

use crate::config::Config;
use crate::db::AdvisoryDb;
use crate::discovery;
use crate::image;
use crate::scan::{Scanner, scan_image};

/// How often the service reads the advisory DB's age for its gauge.
const DB_AGE_EVERY: Duration = Duration::from_secs(60);

/// Scan-result cache bucket.
pub const SCAN_CACHE_BUCKET: &str = "PP_SCAN_CACHE";
/// Discovery state bucket.
pub const DISCOVERY_BUCKET: &str = "PP_DISCOVERY";

/// The scanner as the service skeleton runs it.
pub const SERVICE: ServiceSpec = ServiceSpec {
    name: "patchpilot-scanner",
    about: "PatchPilot scanner: scan requests in, assessments out.",
    // Accepted so that one fleet-wide environment serves every service;
    // the scanner keeps its state in the bus.
    uses_database: false,
};

/// Why the service could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The advisory DB could not be opened.
    #[error("advisory DB")]
    Db(#[source] crate::db::Error),
    /// The DB is older than allowed and `strict` is set.
    #[error(
        "the advisory DB is {age_hours} hours old (limit {limit_hours}); import fresh data or unset scanner.strict"
    )]
    StaleDb {
        /// Its age.
        age_hours: i64,
        /// The limit.
        limit_hours: u64,
    },
    /// Registry access could not be set up.
    #[error("registry access")]
    Registry(#[source] patchpilot_registry::Error),
    /// NATS failed.
    #[error("the bus failed")]
    Bus(#[from] bus::Error),
    /// A key-value bucket could not be created.
    #[error("cannot create key-value bucket {bucket}")]
    Bucket {
        /// The bucket.
        bucket: &'static str,
        /// The server's answer.
        #[source]
        source: async_nats::jetstream::context::CreateKeyValueError,
    },
}

/// Checks the DB's age against the configured maximum: `Ok(Some(warning))`
/// when stale and not strict, `Err` when stale and strict.
pub fn check_db_age(db: &AdvisoryDb, max_hours: u64, strict: bool) -> Result<Option<String>, Error> {
    let status = db.status().map_err(Error::Db)?;
    let age_hours = status.age.map(|a| a.num_hours());
    match age_hours {
        Some(h) if h as u64 <= max_hours => Ok(None),
        Some(h) if strict => Err(Error::StaleDb { age_hours: h, limit_hours: max_hours }),
        Some(h) => Ok(Some(format!(
            "the advisory DB is {h} hours old (limit {max_hours}); results may miss recent advisories"
        ))),
        None if strict => Err(Error::StaleDb { age_hours: i64::MAX, limit_hours: max_hours }),
        None => Ok(Some("the advisory DB is empty; import OSV data with `patchpilot db import`".into())),
    }
}

struct ScanHandler {
    bus: Bus,
    registry: Arc<Registry>,
    scanner: Arc<Scanner>,
    db_dir: PathBuf,
    cache_dir: PathBuf,
    platform: PlatformChoice,
    cache: kv::Store,
    scans: Counter,
    cache_hits: Counter,
}

fn cache_key(digest: &str, db_version: &str) -> String {
    // KV keys are restricted to [-/_=.a-zA-Z0-9]; digests contain ':'.
    let short: String = db_version.chars().filter(|c| c.is_ascii_alphanumeric()).take(24).collect();
    format!("{}.{short}", digest.replace(':', "_"))
}

impl ScanHandler {
    async fn progress(&self, request: &ScanRequest, state: &str, message: String) {
        let mut event = Event::new("scan.progress", "scanner");
        event.state = state.into();
        event.message = message;
        event.attributes.insert("image_ref".into(), request.image_ref.clone());
        event.attributes.insert("request_id".into(), request.request_id.clone());
        // Progress is informational: a lost event must not fail the scan.
        if let Err(e) =
            self.bus.publish(&topics::EVENTS, Some(&event.kind), &event.event_id.clone(), &event).await
        {
            tracing::debug!(error = %e, "progress event not published");
        }
    }

    async fn handle_one(&self, delivery: &Delivery) -> Result<(), HandlerError> {
        let request: ScanRequest = delivery.decode()?;
        let platform = request
            .platform
            .as_ref()
            .map(|p| PlatformChoice {
                os: p.os.clone(),
                architecture: p.architecture.clone(),
                variant: (!p.variant.is_empty()).then(|| p.variant.clone()),
            })
            .unwrap_or_else(|| self.platform.clone());
        let db_version = {
            let dir = self.db_dir.clone();
            tokio::task::spawn_blocking(move || AdvisoryDb::open(&dir).and_then(|db| db.version()))
                .await
                .map_err(|e| HandlerError::Retryable(e.to_string()))?
                .map_err(|e| HandlerError::retryable(&e))?
        };
        self.progress(&request, "fetching", format!("resolving {}", request.image_ref)).await;
        let image = image::fetch_registry(&self.registry, &request.image_ref, &platform, &self.cache_dir)
            .await
            .map_err(|e| match &e {
                image::source::Error::Invalid { .. } => HandlerError::permanent(&e),
                image::source::Error::Registry(registry) if !registry.is_transient() => {
                    HandlerError::permanent(&e)
                }
                _ => HandlerError::retryable(&e),
            })?;
        let key = cache_key(&image.digest, &db_version);
        let cached = self.cache.get(&key).await.ok().flatten();
        let assessment = match cached.and_then(|bytes| SubmittedAssessment::decode(bytes.as_ref()).ok()) {
            Some(hit) => {
                self.cache_hits.inc();
                let mut a = hit.assessment;
                a.image = request.image_ref.clone();
                self.progress(&request, "cached", format!("{} unchanged since its last scan", image.digest))
                    .await;
                a
            }
            None => {
                self.progress(
                    &request,
                    "scanning",
                    format!("{} layer(s) of {}", image.layers.len(), image.digest),
                )
                .await;
                let (scanner, dir, img) = (self.scanner.clone(), self.db_dir.clone(), image.clone());
                let (assessment, catalog, _) = tokio::task::spawn_blocking(move || {
                    let db = AdvisoryDb::open(&dir).map_err(|e| error_chain(&e))?;
                    scan_image(&scanner, &db, &img)
                })
                .await
                .map_err(|e| HandlerError::Retryable(e.to_string()))?
                .map_err(|reason| {
                    if reason.contains("refused hostile entry") || reason.contains("decompression bomb") {
                        HandlerError::Permanent(reason)
                    } else {
                        HandlerError::Retryable(reason)
                    }
                })?;
                self.scans.inc();
                let encoded = SubmittedAssessment::now(assessment.clone()).encode();
                if let Err(e) = self.cache.put(&key, encoded.into()).await {
                    tracing::warn!(error = %e, "scan result not cached");
                }
                self.progress(
                    &request,
                    "scanned",
                    format!(
                        "{} package(s), {} finding(s)",
                        catalog.packages.len(),
                        assessment.findings.len()
                    ),
                )
                .await;
                assessment
            }
        };
        let message = SubmittedAssessment::now(assessment);
        self.bus
            .publish(&topics::ASSESSMENTS, Some("scanner"), &message.id, &message)
            .await
            .map_err(|e| HandlerError::retryable(&e))?;
        Ok(())
    }
}

impl BatchHandler for ScanHandler {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        let mut out = Vec::with_capacity(batch.len());
        for d in batch {
            let span = d.span.clone();
            out.push(tracing::Instrument::instrument(self.handle_one(d), span).await);
        }
        out
    }
}

/// Publishes a scan request for `reference`@`digest`.
pub async fn request_scan(bus: &Bus, reference: &str, digest: &str, reason: &str) -> Result<(), bus::Error> {
    let id = format!(
        "scan-{}",
        &hex::encode(sha2::Sha256::digest(format!("{reference}@{digest}").as_bytes()))[..32]
    );
    let request = ScanRequest {
        request_id: id.clone(),
        image_ref: reference.to_owned(),
        image_digest: digest.parse().ok(),
        platform: None,
        reason: reason.to_owned(),
        requested_at: Some(Utc::now()),
    };
    bus.publish(&topics::SCAN_REQUESTS, None, &id, &request).await?;
    Ok(())
}

/// One discovery pass: asks for scans of references whose digest is new or
/// changed since the last pass. Returns how many were requested.
pub async fn discovery_pass(
    bus: &Bus,
    registry: &Registry,
    state: &kv::Store,
    targets: &[crate::discovery::DiscoveryTarget],
    platform: &PlatformChoice,
) -> Result<usize, String> {
    let found = discovery::discover(registry, targets, platform).await.map_err(|e| error_chain(&e))?;
    let mut requested = 0;
    for d in found {
        let key = hex::encode(sha2::Sha256::digest(d.reference.as_bytes()));
        let seen = state.get(&key).await.ok().flatten();
        if seen.as_deref() == Some(d.digest.as_bytes()) {
            continue;
        }
        request_scan(
            bus,
            &d.reference,
            &d.digest,
            if seen.is_some() { "changed-digest" } else { "new-digest" },
        )
        .await
        .map_err(|e| error_chain(&e))?;
        // Remembered only after the request is stored: a crash in between
        // asks again, which the scan cache makes cheap.
        state.put(&key, d.digest.clone().into_bytes().into()).await.map_err(|e| e.to_string())?;
        requested += 1;
    }
    Ok(requested)
}

async fn bucket(bus: &Bus, name: &'static str, description: &str) -> Result<kv::Store, Error> {
    bus.jetstream()
        .create_or_update_key_value(kv::Config {
            bucket: name.into(),
            description: description.into(),
            history: 1,
            storage: async_nats::jetstream::stream::StorageType::File,
            num_replicas: bus.settings().replicas,
            ..Default::default()
        })
        .await
        .map_err(|source| Error::Bucket { bucket: name, source })
}

/// Runs the scanner service until shutdown: checks the DB, then consumes
/// `SCAN_REQUESTS` (and runs discovery when it is on).
pub async fn run(config: Config, fleet: FleetContext) -> Result<(), Error> {
    let section = &config.service;
    let db_dir = crate::db::resolve_dir(None, section.db.as_deref()).map_err(Error::Db)?;
    {
        let db = AdvisoryDb::open(&db_dir).map_err(Error::Db)?;
        if let Some(warning) = check_db_age(&db, section.max_db_age_hours, section.strict)? {
            tracing::warn!("{warning}");
        }
    }
    let registry = Arc::new(Registry::new(&section.registry).map_err(Error::Registry)?);
    let bus = fleet.bus().clone();
    let cache =
        bucket(&bus, SCAN_CACHE_BUCKET, "scan results by image digest and advisory DB version").await?;
    let state = bucket(&bus, DISCOVERY_BUCKET, "digest last requested per image reference").await?;

    let (scans, cache_hits) = fleet.metrics().register(|metrics| {
        let scans = Counter::default();
        let cache_hits = Counter::default();
        metrics.register("pp_scanner_scans", "Images scanned", scans.clone());
        metrics.register(
            "pp_scanner_cache_hits",
            "Scan requests answered from the cache",
            cache_hits.clone(),
        );
        (scans, cache_hits)
    });
    let db_age = fleet.metrics().register(|metrics| {
        let age = Gauge::<f64, AtomicU64>::default();
        let limit = Gauge::<f64, AtomicU64>::default();
        metrics.register(
            "pp_scanner_advisory_db_age_seconds",
            "Time since the advisory DB was last imported (absent while it is empty)",
            age.clone(),
        );
        metrics.register(
            "pp_scanner_advisory_db_max_age_seconds",
            "The age scanner.max_db_age_hours allows",
            limit.clone(),
        );
        limit.set(section.max_db_age_hours as f64 * 3600.0);
        age
    });
    let platform = section.platform();
    let shutdown = fleet.shutdown().clone();
    let db_age_task = tokio::spawn({
        let (db_dir, shutdown) = (db_dir.clone(), shutdown.clone());
        async move {
            loop {
                // Another process imports; this one only reads its age.
                match AdvisoryDb::open(&db_dir).and_then(|db| db.status()) {
                    Ok(status) => {
                        if let Some(age) = status.age {
                            db_age.set(age.num_milliseconds() as f64 / 1000.0);
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "advisory DB age not read"),
                }
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(DB_AGE_EVERY) => {}
                }
            }
        }
    });
    let discovery_task = section.discovery.enabled.then(|| {
        let (bus, registry, targets, platform, shutdown) = (
            bus.clone(),
            registry.clone(),
            section.discovery.targets.clone(),
            platform.clone(),
            shutdown.clone(),
        );
        let every = Duration::from_secs(section.discovery.interval_secs);
        tokio::spawn(async move {
            loop {
                match discovery_pass(&bus, &registry, &state, &targets, &platform).await {
                    Ok(n) => tracing::info!(requested = n, "discovery pass"),
                    Err(e) => tracing::warn!(error = %e, "discovery pass failed"),
                }
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(every) => {}
                }
            }
        })
    });
    let handler = ScanHandler {
        bus: bus.clone(),
        registry,
        scanner: Arc::new(Scanner::new(section.limits.limits())),
        db_dir,
        cache_dir: section.cache_dir(),
        platform,
        cache,
        scans,
        cache_hits,
    };
    let spec = ConsumerSpec {
        stream: topics::SCAN_REQUESTS.stream(),
        durable: section.consumer.clone(),
        filter_subject: None,
    };
    let result = fleet
        .consume(&spec, ConsumeOptions { batch_size: 1, concurrency: section.concurrency }, &handler)
        .await;
    shutdown.cancel();
    if let Some(task) = discovery_task {
        let _ = task.await;
    }
    let _ = db_age_task.await;
    result.map_err(Error::from)
}
