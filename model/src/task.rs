//! The task a run works on: `.patchpilot/task.json`, written by the
//! controller (or built by `patchpilot remediate` from its arguments). It
//! names what to fix and what the run may use; it has no field that could
//! hold a credential, and an unknown field is refused by name.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Finding, RunPurpose, Severity, ValidationError};

/// Limits on what a fix may bring in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskPolicy {
    /// A candidate that brings a new finding at or above this severity is
    /// refused.
    pub block_at: Severity,
}

impl Default for TaskPolicy {
    fn default() -> Self {
        TaskPolicy { block_at: Severity::High }
    }
}

/// How the agent reaches registries. Credentials are not the agent's: a
/// private registry is reached through the sandbox's broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskRegistry {
    /// Registries (`host:port`) spoken to over plain HTTP.
    pub insecure: Vec<String>,
    /// Per-request timeout, in seconds.
    pub timeout_secs: u64,
}

impl Default for TaskRegistry {
    fn default() -> Self {
        TaskRegistry { insecure: Vec::new(), timeout_secs: 30 }
    }
}

/// Releases of the binaries an image downloads during its build
/// (`.patchpilot/releases.json`, or part of the task).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseIndex {
    /// The binaries.
    pub binaries: Vec<Binary>,
}

/// One downloaded binary and its releases.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binary {
    /// Its name, as it appears in download URLs: `helm`.
    pub name: String,
    /// Image path of the installed binary, e.g. `usr/local/bin/helm`.
    pub path: String,
    /// Its releases, in any order.
    pub releases: Vec<Release>,
}

/// One release of a binary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// The release version, with or without a leading `v`.
    pub version: String,
    /// Module path → version in this release, e.g. `{"stdlib": "v1.22.1"}`.
    #[serde(default)]
    pub modules: BTreeMap<String, String>,
}

fn dot() -> String {
    ".".into()
}

fn remediate() -> RunPurpose {
    RunPurpose::Remediate
}

/// What to remediate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The sandbox run, for the retrospective.
    #[serde(default)]
    pub run_id: String,
    /// The remediation the run works for.
    #[serde(default)]
    pub remediation_id: String,
    /// Remediate, or repair a CI failure the fix caused.
    #[serde(default = "remediate")]
    pub purpose: RunPurpose,
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
    /// Registry access.
    #[serde(default)]
    pub registry: TaskRegistry,
    /// Advisory DB folder inside the sandbox.
    #[serde(default)]
    pub db: Option<PathBuf>,
    /// Platform to build and scan, `os/arch[/variant]`.
    #[serde(default)]
    pub platform: Option<String>,
    /// The model the agent may call when the rules do not suffice; none:
    /// rules only.
    #[serde(default)]
    pub model: Option<crate::TaskModel>,
    /// Repairs: the failing CI checks whose command the forge knows, for
    /// the agent to run again before it finishes (the `failing_check`
    /// gate). Empty when the forge does not say (GitHub's checks are jobs
    /// of workflows, not commands).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing_checks: Vec<FailingCheck>,
}

/// A failing CI check and the command the forge runs for it. The command
/// is the operator's configuration of the forge, not the repository's
/// text; it runs inside the VM only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailingCheck {
    /// The check's name on the forge.
    pub name: String,
    /// Its argv.
    pub command: Vec<String>,
}

/// Why a task file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
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
        /// Path of the bad field, e.g. `findings[0].package.version`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

impl Task {
    /// A task for `findings` in `dockerfile`, everything else defaulted.
    pub fn new(dockerfile: impl Into<String>, findings: Vec<Finding>) -> Task {
        Task {
            run_id: String::new(),
            remediation_id: String::new(),
            purpose: RunPurpose::Remediate,
            dockerfile: dockerfile.into(),
            context: dot(),
            image: None,
            findings,
            policy: TaskPolicy::default(),
            package_indexes: BTreeMap::new(),
            releases: ReleaseIndex::default(),
            registry: TaskRegistry::default(),
            db: None,
            platform: None,
            model: None,
            failing_checks: Vec::new(),
        }
    }

    /// Reads and checks `.patchpilot/task.json` of `workspace`.
    pub fn load(workspace: &Path) -> Result<Task, TaskError> {
        let path = workspace.join(crate::context::CONTEXT_DIR).join(crate::context::TASK);
        let bytes = std::fs::read(&path).map_err(|source| TaskError::Read { path: path.clone(), source })?;
        Task::parse(&bytes).map_err(|e| TaskError::Invalid { path, field: e.path, reason: e.reason })
    }

    /// Parses and checks a task; the error names the field.
    pub fn parse(bytes: &[u8]) -> Result<Task, ValidationError> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let task: Task = serde_path_to_error::deserialize(&mut de)
            .map_err(|e| ValidationError::new(e.path().to_string(), e.inner().to_string()))?;
        task.validate()?;
        Ok(task)
    }

    /// Checks what types alone cannot: relative paths, at least one valid
    /// finding.
    pub fn validate(&self) -> Result<(), ValidationError> {
        for (field, value) in [("dockerfile", &self.dockerfile), ("context", &self.context)] {
            let p = Path::new(value);
            if value.is_empty()
                || p.is_absolute()
                || p.components().any(|c| matches!(c, Component::ParentDir))
            {
                return Err(ValidationError::new(field, "must be a relative path inside the workspace"));
            }
        }
        if let Some(model) = &self.model {
            model.validate()?;
        }
        if self.findings.is_empty() {
            return Err(ValidationError::new("findings", "names no finding to fix"));
        }
        for (i, f) in self.findings.iter().enumerate() {
            f.validate().map_err(|e| e.within(&format!("findings[{i}]")))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Package;

    fn finding() -> Finding {
        Finding::new("CVE-2024-1", Package::new("openssl", "3.1.4-r5", "Alpine:v3.19"), Severity::High)
    }

    #[test]
    fn a_task_survives_json() {
        let mut task = Task::new("Dockerfile", vec![finding()]);
        task.registry.insecure.push("registry.test:5000".into());
        task.purpose = RunPurpose::Repair;
        let json = serde_json::to_vec(&task).expect("json");
        assert_eq!(Task::parse(&json).expect("parses"), task);
    }

    #[test]
    fn a_credential_field_is_refused_by_name() {
        let json = serde_json::json!({
            "dockerfile": "Dockerfile",
            "findings": [finding()],
            "registry": { "credentials": [{ "registry": "ghcr.io", "password_file": "/p" }] },
        });
        let err = Task::parse(json.to_string().as_bytes()).expect_err("refused");
        assert!(err.reason.contains("credentials"), "{err}");
    }

    #[test]
    fn paths_and_findings_are_checked() {
        let mut task = Task::new("../Dockerfile", vec![finding()]);
        assert_eq!(task.validate().expect_err("refused").path, "dockerfile");
        task.dockerfile = "Dockerfile".into();
        task.findings[0].package.version.clear();
        assert_eq!(task.validate().expect_err("refused").path, "findings[0].package.version");
        task.findings.clear();
        assert_eq!(task.validate().expect_err("refused").path, "findings");
    }
}
