//! `[scanner]` configuration, shared by the `patchpilot-scanner` service and
//! the `patchpilot scan` / `patchpilot db` commands.

use std::path::PathBuf;

use patchpilot_fleet::config::{self, Section, ServiceConfig, Validate, key};
use patchpilot_registry::RegistryConfig;
use patchpilot_registry::oci::PlatformChoice;
use serde::{Deserialize, Serialize};

use crate::discovery::DiscoveryTarget;
use crate::image::Limits;

/// Everything `patchpilot-scanner` reads at start: the shared sections and
/// `[scanner]`.
pub type Config = ServiceConfig<ScannerSection>;

impl Section for ScannerSection {
    const NAME: &'static str = "scanner";
}

/// `[scanner]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScannerSection {
    /// Advisory DB folder; `--db` and `PATCHPILOT_DB` take precedence, the
    /// user's data folder is the default.
    pub db: Option<PathBuf>,
    /// Scans warn when the DB's last import is older than this, in hours.
    pub max_db_age_hours: u64,
    /// Refuse to scan with a DB older than `max_db_age_hours`.
    pub strict: bool,
    /// Where registry blobs are kept between scans (the only folder the
    /// scanner writes); the user's cache folder by default.
    pub cache_dir: Option<PathBuf>,
    /// Platform to scan from multi-platform images, `os/arch[/variant]`;
    /// the host's by default.
    pub platform: Option<String>,
    /// Resource limits for reading images.
    pub limits: LimitsSection,
    /// Registry access.
    pub registry: RegistryConfig,
    /// Durable consumer name on `SCAN_REQUESTS`.
    pub consumer: String,
    /// Images scanned at once by one service.
    pub concurrency: usize,
    /// Registry discovery.
    pub discovery: DiscoverySection,
}

impl Default for ScannerSection {
    fn default() -> Self {
        ScannerSection {
            db: None,
            max_db_age_hours: 72,
            strict: false,
            cache_dir: None,
            platform: None,
            limits: LimitsSection::default(),
            registry: RegistryConfig::default(),
            consumer: "scanner".into(),
            concurrency: 1,
            discovery: DiscoverySection::default(),
        }
    }
}

impl ScannerSection {
    /// The platform to scan.
    pub fn platform(&self) -> PlatformChoice {
        self.platform.as_deref().and_then(|p| p.parse().ok()).unwrap_or_default()
    }

    /// The blob cache folder.
    pub fn cache_dir(&self) -> PathBuf {
        if let Some(dir) = &self.cache_dir {
            return dir.clone();
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("patchpilot").join("scanner")
    }
}

impl Validate for ScannerSection {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        if let Some(p) = &self.platform {
            p.parse::<PlatformChoice>().map_err(|e| config::Error::invalid(key(prefix, "platform"), e))?;
        }
        if !(1..=64).contains(&self.concurrency) {
            return Err(config::Error::invalid(key(prefix, "concurrency"), "must be 1-64"));
        }
        if self.consumer.is_empty() {
            return Err(config::Error::invalid(key(prefix, "consumer"), "must not be empty"));
        }
        self.limits.validate(&key(prefix, "limits"))?;
        self.registry.validate(&key(prefix, "registry")).map_err(|(k, r)| config::Error::invalid(k, r))?;
        self.discovery.validate(&key(prefix, "discovery"))
    }
}

/// `[scanner.limits]`, in MiB and ratios.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSection {
    /// Largest compressed layer.
    pub max_layer_compressed_mib: u64,
    /// Largest decompressed layer.
    pub max_layer_uncompressed_mib: u64,
    /// Largest decompressed image.
    pub max_total_uncompressed_mib: u64,
    /// Largest decompression ratio (after the first 64 MiB of a layer).
    pub max_ratio: u64,
    /// Largest single file kept for a cataloger.
    pub max_file_mib: u64,
    /// Most bytes kept in memory for one image.
    pub max_kept_mib: u64,
}

impl Default for LimitsSection {
    fn default() -> Self {
        let l = Limits::default();
        LimitsSection {
            max_layer_compressed_mib: l.max_layer_compressed >> 20,
            max_layer_uncompressed_mib: l.max_layer_uncompressed >> 20,
            max_total_uncompressed_mib: l.max_total_uncompressed >> 20,
            max_ratio: l.max_ratio,
            max_file_mib: l.max_file >> 20,
            max_kept_mib: l.max_kept >> 20,
        }
    }
}

impl LimitsSection {
    /// The limits in bytes.
    pub fn limits(&self) -> Limits {
        Limits {
            max_layer_compressed: self.max_layer_compressed_mib << 20,
            max_layer_uncompressed: self.max_layer_uncompressed_mib << 20,
            max_total_uncompressed: self.max_total_uncompressed_mib << 20,
            max_ratio: self.max_ratio,
            ratio_grace: Limits::default().ratio_grace,
            max_file: self.max_file_mib << 20,
            max_kept: self.max_kept_mib << 20,
        }
    }

    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        for (name, v) in [
            ("max_layer_compressed_mib", self.max_layer_compressed_mib),
            ("max_layer_uncompressed_mib", self.max_layer_uncompressed_mib),
            ("max_total_uncompressed_mib", self.max_total_uncompressed_mib),
            ("max_ratio", self.max_ratio),
            ("max_file_mib", self.max_file_mib),
            ("max_kept_mib", self.max_kept_mib),
        ] {
            if v == 0 {
                return Err(config::Error::invalid(key(prefix, name), "must be at least 1"));
            }
        }
        Ok(())
    }
}

/// `[scanner.discovery]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiscoverySection {
    /// Run the discovery loop.
    pub enabled: bool,
    /// Seconds between passes.
    pub interval_secs: u64,
    /// Registries to watch.
    pub targets: Vec<DiscoveryTarget>,
}

impl Default for DiscoverySection {
    fn default() -> Self {
        DiscoverySection { enabled: false, interval_secs: 300, targets: Vec::new() }
    }
}

impl DiscoverySection {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        if self.interval_secs == 0 {
            return Err(config::Error::invalid(key(prefix, "interval_secs"), "must be at least 1"));
        }
        for (i, t) in self.targets.iter().enumerate() {
            if t.registry.is_empty() || t.registry.contains('/') {
                return Err(config::Error::invalid(
                    format!("{}[{i}].registry", key(prefix, "targets")),
                    "must be a registry host[:port]",
                ));
            }
        }
        Ok(())
    }
}
