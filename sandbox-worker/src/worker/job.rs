//! A `SandboxRun` from the bus, validated: the structure (checked by
//! `patchpilot-model` at decoding), then the worker's own rules: limits
//! against the configured maxima (refused, never clamped), an environment
//! with no long-lived credential in it (by name and by shape, the value
//! never echoed), and an egress policy that parses.

use std::collections::BTreeMap;
use std::time::Duration;

use patchpilot_model::{RunPurpose, SandboxRun, Wire as _};

use crate::config::LimitsConfig;
use crate::egress::policy::EgressPolicy;
use crate::run::Limits;

/// A request that must not run. Names the field, e.g.
/// `sandbox_run.env["GITHUB_TOKEN"]: …`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct JobError {
    /// The offending field.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl JobError {
    pub(super) fn new(field: impl Into<String>, reason: impl Into<String>) -> JobError {
        JobError { field: field.into(), reason: reason.into() }
    }
}

/// A validated sandbox run: the structure checked at the bus edge
/// ([`SandboxRun`]), then the worker's own rules (limits, the credential
/// scan, the egress policy).
#[derive(Debug, Clone)]
pub struct RunJob {
    /// Letters, digits, `-` and `_`.
    pub run_id: String,
    /// The remediation it works for (opaque here).
    pub remediation_id: String,
    /// Remediate or repair.
    pub purpose: RunPurpose,
    /// Object-store key of the workspace tar (plain or gzip).
    pub workspace_object: String,
    /// The agent command and its arguments.
    pub command: Vec<String>,
    /// Per-run capabilities and endpoints.
    pub env: BTreeMap<String, String>,
    /// Validated egress policy.
    pub policy: EgressPolicy,
    /// Limits with defaults applied.
    pub limits: Limits,
    /// Start dockerd in the guest.
    pub docker: bool,
    /// Repair attempt (0 for remediate runs).
    pub attempt: u32,
    /// Object-store key of CI logs, for repair runs.
    pub ci_logs_object: Option<String>,
    /// Broker connections the run is granted.
    pub connections: Vec<patchpilot_model::broker::ConnectionName>,
}

impl RunJob {
    /// Decodes a `SANDBOX_RUNS` payload and validates it against the
    /// worker's limits: every problem is an error naming the field
    /// (`sandbox_run.…`), nothing is silently dropped or clamped.
    pub fn from_wire(payload: &[u8], limits: &LimitsConfig) -> Result<RunJob, JobError> {
        let run = SandboxRun::decode(payload).map_err(|e| {
            let field =
                if e.path.is_empty() { "sandbox_run".to_owned() } else { format!("sandbox_run.{}", e.path) };
            JobError::new(field, e.reason)
        })?;
        RunJob::new(run, limits)
    }

    /// Applies the worker's rules to a decoded run.
    pub fn new(run: SandboxRun, limits: &LimitsConfig) -> Result<RunJob, JobError> {
        for (key, value) in &run.env {
            check_env(key, value)?;
        }
        let policy = EgressPolicy::from_request(&run.egress).map_err(|e| {
            JobError::new(format!("sandbox_run.{}", e.field), format!("{:?} {}", e.value, e.reason))
        })?;
        let asked = run.limits;
        let limits = Limits {
            wall_time: Duration::from_secs(u64::from(limit(
                "wall_time_secs",
                asked.wall_time_secs,
                limits.wall_time_secs,
                1,
                limits.max_wall_time_secs,
            )?)),
            vcpus: limit("vcpus", asked.vcpus, limits.vcpus, 1, limits.max_vcpus)?,
            memory_mib: limit("memory_mib", asked.memory_mib, limits.memory_mib, 256, limits.max_memory_mib)?,
            disk_mib: limit("disk_mib", asked.disk_mib, limits.disk_mib, 256, limits.max_disk_mib)?,
            output_bytes: limit(
                "output_bytes",
                asked.output_bytes,
                limits.output_bytes,
                1,
                limits.max_output_bytes,
            )?,
        };
        Ok(RunJob {
            run_id: run.run_id,
            remediation_id: run.remediation_id,
            purpose: run.purpose,
            workspace_object: run.workspace_object,
            command: run.agent_command,
            env: run.env,
            policy,
            limits,
            docker: run.docker,
            attempt: run.attempt,
            ci_logs_object: run.ci_logs_object,
            connections: run.connections,
        })
    }
}

/// Unset means the configured default; otherwise `min..=max`.
fn limit<T>(name: &str, asked: Option<T>, default: T, min: T, max: T) -> Result<T, JobError>
where
    T: Copy + PartialOrd + std::fmt::Display,
{
    let Some(asked) = asked else { return Ok(default) };
    if asked < min || asked > max {
        return Err(JobError::new(
            format!("sandbox_run.limits.{name}"),
            format!("{asked} is outside {min}..={max} (0 takes the default, {default})"),
        ));
    }
    Ok(asked)
}

/// Names that always denote a long-lived credential.
const SECRET_NAMES: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITLAB_TOKEN",
    "CI_JOB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "NPM_TOKEN",
    "DOCKER_AUTH_CONFIG",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_SECRET",
    "VAULT_TOKEN",
    "SSH_AUTH_SOCK",
];
/// Name endings and parts that denote a secret.
const SECRET_SUFFIXES: &[&str] = &["_TOKEN", "_PASSWD", "_PASS", "_KEY", "_CREDENTIALS", "_PAT"];
const SECRET_PARTS: &[&str] = &["PASSWORD", "SECRET", "PRIVATE_KEY", "API_KEY", "ACCESS_KEY"];

/// A valid, credential-free environment entry. The value is never quoted in
/// the error.
fn check_env(key: &str, value: &str) -> Result<(), JobError> {
    let field = format!("sandbox_run.env[{key:?}]");
    let mut chars = key.chars();
    let valid_name = key.len() <= 128
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_name {
        return Err(JobError::new(field, "is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)"));
    }
    if value.contains('\0') {
        return Err(JobError::new(field, "the value contains a NUL byte"));
    }
    let upper = key.to_ascii_uppercase();
    let capability = upper.starts_with("PP_CAP_") || (upper.starts_with("PP_") && upper.ends_with("_URL"));
    let secret_name = SECRET_NAMES.contains(&upper.as_str())
        || SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || SECRET_PARTS.iter().any(|p| upper.contains(p));
    if secret_name && !capability {
        return Err(JobError::new(
            field,
            "names a long-lived credential; runs get per-run capabilities (PP_CAP_*) and endpoints (PP_*_URL) only",
        ));
    }
    if let Some(what) = patchpilot_model::credential::credential_in(value) {
        return Err(JobError::new(
            field,
            format!("the value looks like {what}; runs get per-run capabilities, never credentials"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use patchpilot_proto::{Message as _, v1};

    use super::*;

    fn valid() -> v1::SandboxRun {
        v1::SandboxRun {
            run_id: "run-1_a".into(),
            remediation_id: "rem-1".into(),
            kind: v1::RunKind::Remediate as i32,
            workspace_object: "workspaces/run-1_a.tar".into(),
            agent_command: vec!["sh".into(), "-c".into(), "true".into()],
            env: [
                ("PP_CAP_MODEL".to_owned(), "cap-123".to_owned()),
                ("PP_BROKER_URL".to_owned(), "http://10.0.2.2:7000".to_owned()),
                ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ]
            .into_iter()
            .collect(),
            egress: Some(v1::EgressPolicy {
                allow_hosts: vec!["registry.test:5000".into()],
                ..Default::default()
            }),
            limits: Some(v1::RunLimits { wall_time_secs: 60, ..Default::default() }),
            ..Default::default()
        }
    }

    fn job(run: &v1::SandboxRun) -> Result<RunJob, JobError> {
        RunJob::from_wire(&run.encode_to_vec(), &LimitsConfig::default())
    }

    fn refused(run: v1::SandboxRun) -> String {
        job(&run).expect_err("must be refused").to_string()
    }

    #[test]
    fn a_valid_run_gets_defaults_for_unset_limits() {
        let job = job(&valid()).expect("valid");
        let d = LimitsConfig::default();
        assert_eq!(job.limits.wall_time, Duration::from_secs(60));
        assert_eq!(job.limits.vcpus, d.vcpus);
        assert_eq!(job.limits.memory_mib, d.memory_mib);
        assert_eq!(job.limits.disk_mib, d.disk_mib);
        assert_eq!(job.limits.output_bytes, d.output_bytes);
        assert_eq!(job.env.len(), 3);
        assert_eq!(job.purpose, RunPurpose::Remediate);
    }

    #[test]
    fn identifiers_and_command_are_checked() {
        let mut r = valid();
        r.run_id = "../etc".into();
        assert!(refused(r).starts_with("sandbox_run.run_id: "));
        let mut r = valid();
        r.run_id = String::new();
        assert_eq!(refused(r), "sandbox_run.run_id: is empty");
        let mut r = valid();
        r.agent_command.clear();
        assert_eq!(refused(r), "sandbox_run.agent_command: is empty");
        let mut r = valid();
        r.workspace_object = String::new();
        assert_eq!(refused(r), "sandbox_run.workspace_object: is empty");
        let mut r = valid();
        r.workspace_object = "has space".into();
        assert!(refused(r).starts_with("sandbox_run.workspace_object: "));
        let mut r = valid();
        r.kind = 0;
        assert!(refused(r).starts_with("sandbox_run.kind: "));
    }

    #[test]
    fn limits_above_the_maximum_are_refused_not_clamped() {
        let mut r = valid();
        r.limits = Some(v1::RunLimits { vcpus: 99, ..Default::default() });
        let e = refused(r);
        assert!(e.starts_with("sandbox_run.limits.vcpus: 99 is outside 1..=8"), "{e}");
        let mut r = valid();
        r.limits = Some(v1::RunLimits { memory_mib: 100, ..Default::default() });
        assert!(refused(r).starts_with("sandbox_run.limits.memory_mib: "));
    }

    #[test]
    fn credentials_in_the_environment_are_refused_without_echoing_them() {
        for key in [
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "MY_API_KEY",
            "NPM_TOKEN",
            "client_secret",
        ] {
            let mut r = valid();
            r.env.insert(key.into(), "hunter2".into());
            let e = refused(r);
            assert!(
                e.starts_with(&format!("sandbox_run.env[{key:?}]: names a long-lived credential")),
                "{e}"
            );
            assert!(!e.contains("hunter2"), "{e}");
        }
        // Token shapes are assembled at run time so that no secret-looking
        // literal sits in the source for scanners to flag.
        let values = [
            format!("{}_{}", "ghp", "0123456789abcdefghijABCDEFGHIJ012345"),
            format!("Bearer {}_{}", "github_pat", "11ABCDEFG0123456789_abcdefghijklmnop"),
            format!("{}{}", "AKIA", "IOSFODNN7EXAMPLE"),
            "https://user:s3cret@git.example.test/repo.git".to_string(),
            format!("-----BEGIN OPENSSH {}-----\nabc", "PRIVATE KEY"),
        ];
        for value in &values {
            let value = value.as_str();
            let mut r = valid();
            r.env.insert("PP_CAP_THING".into(), value.into());
            let e = refused(r);
            assert!(e.starts_with("sandbox_run.env[\"PP_CAP_THING\"]: the value looks like"), "{e}");
            assert!(!e.contains(value), "{e}");
        }
        // Capabilities and endpoints, and innocent mentions, pass.
        for (k, v) in [
            ("PP_CAP_GITHUB_TOKEN", "cap-abc"),
            ("PP_TOKEN_BROKER_URL", "http://broker.test/"),
            ("NOTES", "see ghp_ prefixes in the docs"),
            ("PP_REGISTRY_URL", "https://registry.test:5000/v2/"),
        ] {
            let mut r = valid();
            r.env.insert(k.into(), v.into());
            job(&r).unwrap_or_else(|e| panic!("{k}: {e}"));
        }
        let mut r = valid();
        r.env.insert("1BAD".into(), "x".into());
        assert!(refused(r).starts_with("sandbox_run.env[\"1BAD\"]: is not a valid variable name"));
    }

    #[test]
    fn egress_errors_name_the_field() {
        let mut r = valid();
        r.egress = Some(v1::EgressPolicy { presets: vec!["nope".into()], ..Default::default() });
        let e = refused(r);
        assert!(e.starts_with("sandbox_run.egress.presets[0]: \"nope\""), "{e}");
    }
}
