//! The task a run works on: `.patchpilot/task.json` in the workspace,
//! written by the controller (or built by `patchpilot remediate` from its
//! arguments). It names what to fix and what the run may use; it holds no
//! credential.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use patchpilot_model::{Finding, Severity};
use patchpilot_scanner::registry::RegistryConfig;
use serde::{Deserialize, Serialize};

use crate::remediate::downloads::ReleaseIndex;

/// The context folder inside the workspace.
pub const CONTEXT_DIR: &str = ".patchpilot";

/// Why a task could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid task.
    #[error("{path}: {field}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// JSON path of the bad field.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

/// `[policy]` of a task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskPolicy {
    /// A candidate base image that brings a new finding at or above this
    /// severity is refused.
    pub block_at: Severity,
}

impl Default for TaskPolicy {
    fn default() -> Self {
        TaskPolicy { block_at: Severity::High }
    }
}

/// What to remediate.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The sandbox run, for the retrospective.
    #[serde(default)]
    pub run_id: String,
    /// The remediation the run works for.
    #[serde(default)]
    pub remediation_id: String,
    /// Dockerfile path, relative to the workspace.
    pub dockerfile: String,
    /// Build context, relative to the workspace.
    #[serde(default = "dot")]
    pub context: String,
    /// The assessed image, for reports.
    #[serde(default)]
    pub image: Option<String>,
    /// The findings to fix.
    pub findings: Vec<Finding>,
    /// Limits on what a fix may bring in.
    #[serde(default)]
    pub policy: TaskPolicy,
    /// Package index URLs per OSV ecosystem (`APKINDEX.tar.gz` or Debian
    /// `Packages[.gz]`), reached through the sandbox's egress.
    #[serde(default)]
    pub package_indexes: BTreeMap<String, Vec<String>>,
    /// Releases of downloaded binaries.
    #[serde(default)]
    pub releases: ReleaseIndex,
    /// Registry access (no credentials: the broker serves those).
    #[serde(default)]
    pub registry: RegistryConfig,
    /// Advisory DB folder inside the sandbox.
    #[serde(default)]
    pub db: Option<PathBuf>,
    /// Platform to build and scan, `os/arch[/variant]`.
    #[serde(default)]
    pub platform: Option<String>,
}

fn dot() -> String {
    ".".into()
}

impl Task {
    /// Reads `.patchpilot/task.json` of `workspace`.
    pub fn load(workspace: &Path) -> Result<Task, Error> {
        let path = workspace.join(CONTEXT_DIR).join("task.json");
        let bytes = std::fs::read(&path).map_err(|source| Error::Read { path: path.clone(), source })?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let task: Task = serde_path_to_error::deserialize(&mut de).map_err(|e| Error::Invalid {
            path: path.clone(),
            field: e.path().to_string(),
            reason: e.inner().to_string(),
        })?;
        task.validate(&path)?;
        Ok(task)
    }

    fn validate(&self, path: &Path) -> Result<(), Error> {
        let invalid = |field: &str, reason: &str| Error::Invalid {
            path: path.to_owned(),
            field: field.into(),
            reason: reason.into(),
        };
        for (field, value) in [("dockerfile", &self.dockerfile), ("context", &self.context)] {
            let p = Path::new(value);
            if value.is_empty()
                || p.is_absolute()
                || p.components().any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(invalid(field, "must be a relative path inside the workspace"));
            }
        }
        // The agent gets capabilities, never credentials: registry access
        // in a VM goes through the host's broker.
        if !self.registry.credentials.is_empty() {
            return Err(invalid(
                "registry.credentials",
                "a task carries no credentials; the sandbox's registry broker holds them",
            ));
        }
        if self.registry.docker_config.is_some() {
            return Err(invalid(
                "registry.docker_config",
                "a task carries no credentials; the sandbox's registry broker holds them",
            ));
        }
        if self.findings.is_empty() {
            return Err(invalid("findings", "names no finding to fix"));
        }
        for (i, f) in self.findings.iter().enumerate() {
            f.validate().map_err(|e| invalid(&format!("findings[{i}].{}", e.path), &e.reason))?;
        }
        Ok(())
    }
}
