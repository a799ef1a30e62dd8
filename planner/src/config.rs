//! The planner's configuration: the shared sections plus `[planner]`.

use std::path::PathBuf;

use patchpilot_fleet::config::{self, Section, ServiceConfig, Validate, key};
use patchpilot_model::Severity;
use patchpilot_registry::{Credential, RegistryConfig};
use serde::{Deserialize, Serialize};

use crate::mapping::{ImagePattern, LabelDefaults, MappingRule};

/// Everything `patchpilot-planner` reads at start: the shared sections and
/// `[planner]`.
pub type Config = ServiceConfig<PlannerSection>;

impl Section for PlannerSection {
    const NAME: &'static str = "planner";
}

/// `[planner]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlannerSection {
    /// Most assessments written in one database transaction.
    pub batch_size: usize,
    /// Batches handled at once by this planner (each in its own
    /// transaction). Two overlaps decoding with database writes.
    pub concurrency: usize,
    /// Durable consumer name; planners sharing it split the work.
    pub consumer: String,
    /// How often unpublished jobs left by a crash are looked for, in seconds.
    pub outbox_sweep_secs: u64,
    /// Image → repository rules, tried in order before labels.
    pub mappings: Vec<MappingRule>,
    /// Dockerfile, context and branch for images mapped by their
    /// `org.opencontainers.image.source` label.
    pub label_defaults: LabelDefaults,
    /// Registry access for label lookups.
    pub registry: RegistrySection,
    /// Which findings become remediation work.
    pub policy: PolicySection,
}

impl Default for PlannerSection {
    fn default() -> Self {
        Self {
            batch_size: 256,
            concurrency: 2,
            consumer: "planner".into(),
            outbox_sweep_secs: 10,
            mappings: Vec::new(),
            label_defaults: LabelDefaults::default(),
            registry: RegistrySection::default(),
            policy: PolicySection::default(),
        }
    }
}

impl Validate for PlannerSection {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        if !(1..=4096).contains(&self.batch_size) {
            return Err(config::Error::invalid(key(prefix, "batch_size"), "must be 1-4096"));
        }
        if !(1..=16).contains(&self.concurrency) {
            return Err(config::Error::invalid(key(prefix, "concurrency"), "must be 1-16"));
        }
        if self.consumer.is_empty()
            || !self.consumer.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(config::Error::invalid(
                key(prefix, "consumer"),
                "must be non-empty letters, digits, '-' or '_'",
            ));
        }
        if self.outbox_sweep_secs == 0 {
            return Err(config::Error::invalid(key(prefix, "outbox_sweep_secs"), "must be at least 1"));
        }
        for (i, rule) in self.mappings.iter().enumerate() {
            rule.validate(&format!("{}[{i}]", key(prefix, "mappings")))?;
        }
        self.registry.validate(&key(prefix, "registry"))?;
        self.policy.validate(&key(prefix, "policy"))
    }
}

/// `[planner.registry]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistrySection {
    /// Look up OCI config labels in the registry when an assessment has none.
    pub lookup_labels: bool,
    /// Registries (`host:port`) spoken to over plain HTTP.
    pub insecure: Vec<String>,
    /// A Docker `config.json` to take credentials from (`auths` entries;
    /// credential helpers are not run).
    pub docker_config: Option<PathBuf>,
    /// Explicit credentials, checked before `docker_config`; each password
    /// lives in a file.
    pub credentials: Vec<Credential>,
    /// Per-request timeout, in seconds.
    pub timeout_secs: u64,
}

impl Default for RegistrySection {
    fn default() -> Self {
        Self {
            lookup_labels: true,
            insecure: Vec::new(),
            docker_config: None,
            credentials: Vec::new(),
            timeout_secs: 10,
        }
    }
}

impl RegistrySection {
    /// The registry client settings.
    pub fn access(&self) -> RegistryConfig {
        RegistryConfig {
            insecure: self.insecure.clone(),
            docker_config: self.docker_config.clone(),
            credentials: self.credentials.clone(),
            timeout_secs: self.timeout_secs,
        }
    }
}

impl Validate for RegistrySection {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        self.access().validate(prefix).map_err(|(key, reason)| config::Error::invalid(key, reason))
    }
}

/// `[planner.policy]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicySection {
    /// Findings below this severity are not remediated. `unknown` admits
    /// everything, including findings without a severity.
    pub min_severity: Severity,
    /// Only remediate findings with a published fix.
    pub fixable_only: bool,
    /// Accepted risks, each until its expiry date.
    pub ignore: Vec<IgnoreRule>,
    /// OpenVEX documents (files, or folders of `*.json`). `not_affected`
    /// and `fixed` statements suppress matching findings.
    pub vex: Vec<PathBuf>,
}

impl Default for PolicySection {
    fn default() -> Self {
        Self { min_severity: Severity::Low, fixable_only: true, ignore: Vec::new(), vex: Vec::new() }
    }
}

impl Validate for PolicySection {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        for (i, rule) in self.ignore.iter().enumerate() {
            let k = format!("{}[{i}]", key(prefix, "ignore"));
            if rule.id.trim().is_empty() {
                return Err(config::Error::invalid(key(&k, "id"), "must not be empty"));
            }
            if rule.reason.trim().is_empty() {
                return Err(config::Error::invalid(key(&k, "reason"), "must say why the risk is accepted"));
            }
            if let Some(image) = &rule.image {
                ImagePattern::parse(image).map_err(|e| config::Error::invalid(key(&k, "image"), e))?;
            }
        }
        for (i, path) in self.vex.iter().enumerate() {
            if !path.exists() {
                return Err(config::Error::invalid(
                    format!("{}[{i}]", key(prefix, "vex")),
                    format!("{} does not exist", path.display()),
                ));
            }
        }
        Ok(())
    }
}

/// One accepted risk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IgnoreRule {
    /// Vulnerability id or alias.
    pub id: String,
    /// Only in this package; any package when unset.
    #[serde(default)]
    pub package: Option<String>,
    /// Only in images matching this pattern; any image when unset.
    #[serde(default)]
    pub image: Option<String>,
    /// Last day (UTC) the rule applies.
    pub expires: chrono::NaiveDate,
    /// Why the risk is accepted.
    pub reason: String,
}
