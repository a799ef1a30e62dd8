//! Scanning images for the remediators: the current base, candidate bases,
//! and the rebuilt image, with the scanner library against the run's
//! advisory DB. Results are kept per reference for the run, and the time
//! spent on the registry and on scanning is counted (the benchmark reports
//! the registry's share).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use patchpilot_model::Assessment;
use patchpilot_registry::Registry;
use patchpilot_registry::oci::PlatformChoice;
use patchpilot_scanner::db::AdvisoryDb;
use patchpilot_scanner::image;
use patchpilot_scanner::package::Package;
use patchpilot_scanner::scan::Scanner;
use patchpilot_scanner::scan::scan_image;

/// Why an image could not be scanned.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The registry failed.
    #[error("registry")]
    Registry(#[source] patchpilot_registry::Error),
    /// The image could not be read.
    #[error("image {reference}")]
    Image {
        /// The reference.
        reference: String,
        /// What went wrong.
        #[source]
        source: patchpilot_scanner::image::source::Error,
    },
    /// Cataloging or matching failed.
    #[error("scanning {reference}: {reason}")]
    Scan {
        /// The reference.
        reference: String,
        /// What went wrong.
        reason: String,
    },
}

/// One scanned image.
#[derive(Debug, Clone)]
pub struct ScannedImage {
    /// The reference scanned.
    pub reference: String,
    /// The platform manifest's digest.
    pub digest: String,
    /// Its findings.
    pub assessment: Assessment,
    /// Its packages.
    pub packages: Vec<Package>,
    /// Digests of its layers, bottom first.
    pub layers: Vec<String>,
    /// Its config's labels (the publisher's text: untrusted).
    pub labels: std::collections::BTreeMap<String, String>,
    /// Its config's creation time.
    pub created: Option<String>,
    /// `os/architecture[/variant]` from its config.
    pub platform: Option<String>,
}

/// Time spent, for the benchmark and the result.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Stats {
    /// Images scanned (registry images, not counting cache hits).
    pub images_scanned: usize,
    /// Time in registry requests (manifests, tags, blobs).
    #[serde(serialize_with = "ms")]
    pub registry: Duration,
    /// Time cataloging and matching.
    #[serde(serialize_with = "ms")]
    pub scanning: Duration,
}

fn ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// Scans registry images for one run.
#[derive(Debug)]
pub struct Scans {
    registry: Registry,
    scanner: Arc<Scanner>,
    db_dir: PathBuf,
    cache_dir: PathBuf,
    platform: PlatformChoice,
    done: Mutex<HashMap<String, Arc<ScannedImage>>>,
    stats: Mutex<Stats>,
}

impl Scans {
    /// A scanner over `registry` with the DB in `db_dir`; blobs go to
    /// `cache_dir`.
    pub fn new(registry: Registry, db_dir: PathBuf, cache_dir: PathBuf, platform: PlatformChoice) -> Scans {
        Scans {
            registry,
            scanner: Arc::new(Scanner::default()),
            db_dir,
            cache_dir,
            platform,
            done: Mutex::new(HashMap::new()),
            stats: Mutex::new(Stats::default()),
        }
    }

    /// The advisory DB folder.
    pub fn db_dir(&self) -> &std::path::Path {
        &self.db_dir
    }

    /// Time spent so far.
    pub fn stats(&self) -> Stats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }

    fn add(&self, registry: Duration, scanning: Duration, scanned: bool) {
        if let Ok(mut s) = self.stats.lock() {
            s.registry += registry;
            s.scanning += scanning;
            s.images_scanned += usize::from(scanned);
        }
    }

    /// Every tag of `repository`.
    pub async fn tags(&self, repository: &str) -> Result<Vec<String>, Error> {
        let started = Instant::now();
        let tags = self.registry.tags(repository).await.map_err(Error::Registry);
        self.add(started.elapsed(), Duration::ZERO, false);
        tags
    }

    /// The digest `reference` points at (an index's, for multi-platform tags).
    pub async fn tag_digest(&self, reference: &str) -> Result<String, Error> {
        let started = Instant::now();
        let result = self.registry.manifest(reference).await.map(|(_, d)| d).map_err(Error::Registry);
        self.add(started.elapsed(), Duration::ZERO, false);
        result
    }

    /// Scans `reference` (once per run).
    pub async fn scan(&self, reference: &str) -> Result<Arc<ScannedImage>, Error> {
        if let Some(hit) = self.done.lock().ok().and_then(|d| d.get(reference).cloned()) {
            return Ok(hit);
        }
        let started = Instant::now();
        std::fs::create_dir_all(&self.cache_dir)
            .map_err(|e| Error::Scan { reference: reference.into(), reason: e.to_string() })?;
        let image = image::fetch_registry(&self.registry, reference, &self.platform, &self.cache_dir)
            .await
            .map_err(|source| Error::Image { reference: reference.to_owned(), source })?;
        let fetched = started.elapsed();
        let scanned = self.scan_local(image).await?;
        self.add(fetched, started.elapsed() - fetched, true);
        let scanned = Arc::new(scanned);
        if let Ok(mut d) = self.done.lock() {
            d.insert(reference.to_owned(), scanned.clone());
        }
        Ok(scanned)
    }

    /// Scans an image already on disk (the rebuilt one).
    pub async fn scan_local(&self, image: image::Image) -> Result<ScannedImage, Error> {
        let (scanner, dir) = (self.scanner.clone(), self.db_dir.clone());
        let reference = image.reference.clone();
        let layers = image.layers.iter().map(|l| l.digest.clone()).collect();
        let digest = image.digest.clone();
        let (labels, created) = (image.labels.clone(), image.created.clone());
        let platform = image.platform.as_ref().map(|p| {
            let mut text = format!("{}/{}", p.os, p.architecture);
            if let Some(variant) = p.variant.as_deref().filter(|v| !v.is_empty()) {
                text.push('/');
                text.push_str(variant);
            }
            text
        });
        let (assessment, catalog, _) = tokio::task::spawn_blocking(move || {
            let db = AdvisoryDb::open(&dir).map_err(|e| patchpilot_model::error_chain(&e))?;
            scan_image(&scanner, &db, &image)
        })
        .await
        .map_err(|e| Error::Scan { reference: reference.clone(), reason: e.to_string() })?
        .map_err(|reason| Error::Scan { reference: reference.clone(), reason })?;
        Ok(ScannedImage {
            reference,
            digest,
            assessment,
            packages: catalog.packages,
            layers,
            labels,
            created,
            platform,
        })
    }
}
