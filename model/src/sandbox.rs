//! Sandbox runs: what the controller asks a sandbox worker to run in a
//! fresh microVM ([`SandboxRun`]), and what comes back ([`SandboxResult`]).
//!
//! Decoding from the wire checks the structure every consumer relies on
//! (identifiers, object keys, the command) and names the field that is
//! wrong; the worker then applies its own limits and its credential scan.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use patchpilot_proto::v1;

use crate::ValidationError;
use crate::time::{from_timestamp, timestamp};

/// Longest accepted run id (it names folders and subjects).
pub const MAX_RUN_ID: usize = 128;

crate::named_enum! {
    /// What a run is for.
    pub enum RunPurpose("run purpose") {
        /// Make the change that fixes the assessed findings.
        Remediate = "remediate",
        /// Make forward fixes for a CI failure the patch caused.
        Repair = "repair",
    }
}

impl From<RunPurpose> for v1::RunKind {
    fn from(p: RunPurpose) -> v1::RunKind {
        match p {
            RunPurpose::Remediate => v1::RunKind::Remediate,
            RunPurpose::Repair => v1::RunKind::Repair,
        }
    }
}

impl TryFrom<v1::RunKind> for RunPurpose {
    type Error = ValidationError;
    fn try_from(k: v1::RunKind) -> Result<RunPurpose, ValidationError> {
        match k {
            v1::RunKind::Remediate => Ok(RunPurpose::Remediate),
            v1::RunKind::Repair => Ok(RunPurpose::Repair),
            v1::RunKind::Unspecified => Err(ValidationError::new("kind", "is not REMEDIATE or REPAIR")),
        }
    }
}

/// The egress a run asks for, as the controller wrote it; the worker
/// parses and enforces it (unknown presets, bad hosts and CIDRs are
/// refused there, naming the entry).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EgressPolicy {
    /// Named presets: `debian`, `alpine`, `docker-hub`, `go-proxy`…
    pub presets: Vec<String>,
    /// Extra destinations, `host` or `host:port`; `*.` matches subdomains.
    pub allow_hosts: Vec<String>,
    /// Extra networks in CIDR notation.
    pub allow_cidrs: Vec<String>,
    /// Allowed ports; empty means 80 and 443.
    pub allow_ports: Vec<u16>,
}

impl From<&EgressPolicy> for v1::EgressPolicy {
    fn from(p: &EgressPolicy) -> v1::EgressPolicy {
        v1::EgressPolicy {
            presets: p.presets.clone(),
            allow_hosts: p.allow_hosts.clone(),
            allow_cidrs: p.allow_cidrs.clone(),
            allow_ports: p.allow_ports.iter().map(|&p| u32::from(p)).collect(),
        }
    }
}

impl TryFrom<v1::EgressPolicy> for EgressPolicy {
    type Error = ValidationError;
    fn try_from(p: v1::EgressPolicy) -> Result<EgressPolicy, ValidationError> {
        let allow_ports = p
            .allow_ports
            .iter()
            .enumerate()
            .map(|(i, &port)| match u16::try_from(port) {
                Ok(port) if port != 0 => Ok(port),
                _ => Err(ValidationError::new(
                    format!("allow_ports[{i}]"),
                    format!("{port} is not a TCP port"),
                )),
            })
            .collect::<Result<_, _>>()?;
        Ok(EgressPolicy {
            presets: p.presets,
            allow_hosts: p.allow_hosts,
            allow_cidrs: p.allow_cidrs,
            allow_ports,
        })
    }
}

/// Resource limits a run asks for; `None` takes the worker's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// Wall-clock limit for the whole run, in seconds.
    pub wall_time_secs: Option<u32>,
    /// Virtual CPUs.
    pub vcpus: Option<u32>,
    /// Guest memory in MiB.
    pub memory_mib: Option<u32>,
    /// Scratch disc in MiB.
    pub disk_mib: Option<u32>,
    /// Cap on combined output, in bytes.
    pub output_bytes: Option<u64>,
}

fn nonzero<T: Default + PartialEq>(v: T) -> Option<T> {
    (v != T::default()).then_some(v)
}

impl From<RunLimits> for v1::RunLimits {
    fn from(l: RunLimits) -> v1::RunLimits {
        v1::RunLimits {
            wall_time_secs: l.wall_time_secs.unwrap_or_default(),
            vcpus: l.vcpus.unwrap_or_default(),
            memory_mib: l.memory_mib.unwrap_or_default(),
            disk_mib: l.disk_mib.unwrap_or_default(),
            output_bytes: l.output_bytes.unwrap_or_default(),
        }
    }
}

impl From<v1::RunLimits> for RunLimits {
    fn from(l: v1::RunLimits) -> RunLimits {
        RunLimits {
            wall_time_secs: nonzero(l.wall_time_secs),
            vcpus: nonzero(l.vcpus),
            memory_mib: nonzero(l.memory_mib),
            disk_mib: nonzero(l.disk_mib),
            output_bytes: nonzero(l.output_bytes),
        }
    }
}

/// A request to run the agent on a workspace in a fresh microVM.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxRun {
    /// Letters, digits, `-` and `_`; the message id and the result subject.
    pub run_id: String,
    /// The remediation the run works for.
    pub remediation_id: String,
    /// Remediate or repair.
    pub purpose: RunPurpose,
    /// Object-store key of the packed workspace.
    pub workspace_object: String,
    /// The agent command and its arguments, run in the workspace.
    pub agent_command: Vec<String>,
    /// Per-run capabilities and endpoints only, never a long-lived
    /// credential (the worker refuses anything that looks like one).
    pub env: BTreeMap<String, String>,
    /// Egress the guest may use.
    pub egress: EgressPolicy,
    /// Limits; unset ones take the worker's defaults.
    pub limits: RunLimits,
    /// Start a Docker daemon in the guest before the agent runs.
    pub docker: bool,
    /// Which repair attempt this is (0 for a remediation).
    pub attempt: u32,
    /// Object-store key of the trimmed CI logs (repairs).
    pub ci_logs_object: Option<String>,
    /// When the controller asked for it.
    pub requested_at: Option<DateTime<Utc>>,
    /// Capability-broker connections the run may use.
    pub connections: Vec<crate::broker::ConnectionName>,
}

/// Whether `run_id` is a valid run id.
pub fn check_run_id(run_id: &str) -> Result<(), String> {
    if run_id.is_empty() {
        return Err("is empty".into());
    }
    if run_id.len() > MAX_RUN_ID {
        return Err(format!("is longer than {MAX_RUN_ID} characters"));
    }
    if !run_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(format!("{run_id:?} may hold only letters, digits, '-' and '_'"));
    }
    Ok(())
}

/// Whether `key` is a valid object-store key (the artifact store's rule:
/// letters, digits and `-/_=.`, not starting or ending with a dot).
pub fn check_object_key(key: &str) -> Result<(), String> {
    let valid = !key.is_empty()
        && !key.starts_with('.')
        && !key.ends_with('.')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '/' | '_' | '=' | '.'));
    if valid { Ok(()) } else { Err(format!("{key:?} is not a valid object-store key")) }
}

impl From<&SandboxRun> for v1::SandboxRun {
    fn from(r: &SandboxRun) -> v1::SandboxRun {
        v1::SandboxRun {
            run_id: r.run_id.clone(),
            remediation_id: r.remediation_id.clone(),
            kind: v1::RunKind::from(r.purpose) as i32,
            workspace_object: r.workspace_object.clone(),
            agent_command: r.agent_command.clone(),
            env: r.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            egress: Some(v1::EgressPolicy::from(&r.egress)),
            limits: Some(v1::RunLimits::from(r.limits)),
            docker: r.docker,
            attempt: r.attempt,
            ci_logs_object: r.ci_logs_object.clone().unwrap_or_default(),
            requested_at: r.requested_at.map(timestamp),
            connections: r.connections.iter().map(|c| c.as_str().to_owned()).collect(),
        }
    }
}

impl TryFrom<v1::SandboxRun> for SandboxRun {
    type Error = ValidationError;

    /// Checks the structure; field paths are relative to the message
    /// (`run_id`, `agent_command[2]`, `egress.allow_ports[0]`).
    fn try_from(m: v1::SandboxRun) -> Result<SandboxRun, ValidationError> {
        check_run_id(&m.run_id).map_err(|reason| ValidationError::new("run_id", reason))?;
        let purpose = v1::RunKind::try_from(m.kind)
            .map_err(|_| ValidationError::new("kind", format!("{} is not REMEDIATE or REPAIR", m.kind)))
            .and_then(RunPurpose::try_from)?;
        if m.workspace_object.is_empty() {
            return Err(ValidationError::new("workspace_object", "is empty"));
        }
        check_object_key(&m.workspace_object).map_err(|r| ValidationError::new("workspace_object", r))?;
        let ci_logs_object = match m.ci_logs_object.as_str() {
            "" => None,
            key => {
                check_object_key(key).map_err(|r| ValidationError::new("ci_logs_object", r))?;
                Some(m.ci_logs_object.clone())
            }
        };
        match m.agent_command.first() {
            None => return Err(ValidationError::new("agent_command", "is empty")),
            Some(program) if program.is_empty() => {
                return Err(ValidationError::new("agent_command[0]", "is empty"));
            }
            Some(_) => {}
        }
        if let Some(i) = m.agent_command.iter().position(|a| a.contains('\0')) {
            return Err(ValidationError::new(format!("agent_command[{i}]"), "contains a NUL byte"));
        }
        let egress = EgressPolicy::try_from(m.egress.unwrap_or_default()).map_err(|e| e.within("egress"))?;
        let connections = m
            .connections
            .iter()
            .enumerate()
            .map(|(i, c)| c.parse().map_err(|e: crate::broker::InvalidConnectionName| ValidationError::new(format!("connections[{i}]"), e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SandboxRun {
            run_id: m.run_id,
            remediation_id: m.remediation_id,
            purpose,
            workspace_object: m.workspace_object,
            agent_command: m.agent_command,
            env: m.env.into_iter().collect(),
            egress,
            limits: m.limits.map(RunLimits::from).unwrap_or_default(),
            docker: m.docker,
            attempt: m.attempt,
            ci_logs_object,
            requested_at: m.requested_at.and_then(from_timestamp),
            connections,
        })
    }
}

crate::named_enum! {
    /// How a run ended.
    pub enum RunOutcome("run outcome") {
        /// The agent finished; a patch may or may not be present.
        Completed = "completed",
        /// The agent exited with an error.
        AgentFailed = "agent_failed",
        /// The wall-time limit was reached and the VM killed.
        TimedOut = "timed_out",
        /// Another limit (memory, disc, output) was reached and the VM killed.
        LimitExceeded = "limit_exceeded",
        /// The VM or the host failed; the run may be retried.
        InfraError = "infra_error",
    }
}

impl RunOutcome {
    /// Whether the failure lies outside the agent's work (a retry on a
    /// fresh VM may succeed).
    pub fn is_infrastructure(self) -> bool {
        self == RunOutcome::InfraError
    }
}

impl From<RunOutcome> for v1::RunOutcome {
    fn from(o: RunOutcome) -> v1::RunOutcome {
        match o {
            RunOutcome::Completed => v1::RunOutcome::Completed,
            RunOutcome::AgentFailed => v1::RunOutcome::AgentFailed,
            RunOutcome::TimedOut => v1::RunOutcome::TimedOut,
            RunOutcome::LimitExceeded => v1::RunOutcome::LimitExceeded,
            RunOutcome::InfraError => v1::RunOutcome::InfraError,
        }
    }
}

impl From<v1::RunOutcome> for RunOutcome {
    /// An unset outcome is an infrastructure error: something on the
    /// worker's side failed to say what happened.
    fn from(o: v1::RunOutcome) -> RunOutcome {
        match o {
            v1::RunOutcome::Completed => RunOutcome::Completed,
            v1::RunOutcome::AgentFailed => RunOutcome::AgentFailed,
            v1::RunOutcome::TimedOut => RunOutcome::TimedOut,
            v1::RunOutcome::LimitExceeded => RunOutcome::LimitExceeded,
            v1::RunOutcome::InfraError | v1::RunOutcome::Unspecified => RunOutcome::InfraError,
        }
    }
}

/// What a sandbox run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxResult {
    /// The run.
    pub run_id: String,
    /// The remediation it worked for.
    pub remediation_id: String,
    /// How it ended.
    pub outcome: RunOutcome,
    /// Why, for people: "wall time 900 s exceeded".
    pub reason: String,
    /// The agent command's exit status, when it exited.
    pub exit_code: Option<i32>,
    /// Object key of the patch against the starting commit; `None` when the
    /// run changed nothing.
    pub patch_object: Option<String>,
    /// Object key of the transcript: the agent command's output.
    pub transcript_object: Option<String>,
    /// Object key of `.patchpilot/result.json`.
    pub result_object: Option<String>,
    /// Object key of the model session's transcript
    /// (`.patchpilot/transcript.jsonl`); `None` when the agent wrote none.
    pub session_object: Option<String>,
    /// Egress decisions that were denials.
    pub egress_denied: u32,
    /// When the VM started.
    pub started_at: Option<DateTime<Utc>>,
    /// When the run ended.
    pub finished_at: Option<DateTime<Utc>>,
}

impl SandboxResult {
    /// A result with only an outcome and a reason (the run never got as
    /// far as producing anything).
    pub fn without_artifacts(
        run_id: impl Into<String>,
        remediation_id: impl Into<String>,
        outcome: RunOutcome,
        reason: impl Into<String>,
    ) -> SandboxResult {
        SandboxResult {
            run_id: run_id.into(),
            remediation_id: remediation_id.into(),
            outcome,
            reason: reason.into(),
            exit_code: None,
            patch_object: None,
            transcript_object: None,
            result_object: None,
            session_object: None,
            egress_denied: 0,
            started_at: None,
            finished_at: None,
        }
    }
}

fn some_key(field: &str, key: String) -> Result<Option<String>, ValidationError> {
    if key.is_empty() {
        return Ok(None);
    }
    check_object_key(&key).map_err(|r| ValidationError::new(field, r))?;
    Ok(Some(key))
}

impl From<&SandboxResult> for v1::SandboxResult {
    fn from(r: &SandboxResult) -> v1::SandboxResult {
        v1::SandboxResult {
            run_id: r.run_id.clone(),
            remediation_id: r.remediation_id.clone(),
            outcome: v1::RunOutcome::from(r.outcome) as i32,
            reason: r.reason.clone(),
            exit_code: r.exit_code.unwrap_or(-1),
            patch_object: r.patch_object.clone().unwrap_or_default(),
            transcript_object: r.transcript_object.clone().unwrap_or_default(),
            result_object: r.result_object.clone().unwrap_or_default(),
            session_object: r.session_object.clone().unwrap_or_default(),
            egress_denied: r.egress_denied,
            started_at: r.started_at.map(timestamp),
            finished_at: r.finished_at.map(timestamp),
        }
    }
}

impl TryFrom<v1::SandboxResult> for SandboxResult {
    type Error = ValidationError;
    fn try_from(m: v1::SandboxResult) -> Result<SandboxResult, ValidationError> {
        check_run_id(&m.run_id).map_err(|reason| ValidationError::new("run_id", reason))?;
        let outcome = v1::RunOutcome::try_from(m.outcome)
            .map(RunOutcome::from)
            .map_err(|_| ValidationError::new("outcome", format!("{} is not a RunOutcome", m.outcome)))?;
        Ok(SandboxResult {
            run_id: m.run_id,
            remediation_id: m.remediation_id,
            outcome,
            reason: m.reason,
            exit_code: (m.exit_code >= 0).then_some(m.exit_code),
            patch_object: some_key("patch_object", m.patch_object)?,
            transcript_object: some_key("transcript_object", m.transcript_object)?,
            result_object: some_key("result_object", m.result_object)?,
            session_object: some_key("session_object", m.session_object)?,
            egress_denied: m.egress_denied,
            started_at: m.started_at.and_then(from_timestamp),
            finished_at: m.finished_at.and_then(from_timestamp),
        })
    }
}

crate::wire::wire_by_conversions!(SandboxRun, v1::SandboxRun, "patchpilot.v1.SandboxRun");
crate::wire::wire_by_conversions!(SandboxResult, v1::SandboxResult, "patchpilot.v1.SandboxResult");

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> SandboxRun {
        SandboxRun {
            run_id: "rem-1-r1-1".into(),
            remediation_id: "rem-1".into(),
            purpose: RunPurpose::Repair,
            workspace_object: "workspaces/rem-1-r1-1.tar.gz".into(),
            agent_command: vec!["patchpilot-agent".into(), "--mode".into(), "repair".into()],
            env: BTreeMap::from([("PP_BROKER_URL".into(), "http://broker".into())]),
            egress: EgressPolicy {
                presets: vec!["alpine".into()],
                allow_hosts: vec!["registry.test:5000".into()],
                allow_cidrs: vec![],
                allow_ports: vec![443, 5000],
            },
            limits: RunLimits { wall_time_secs: Some(600), ..RunLimits::default() },
            docker: true,
            attempt: 2,
            ci_logs_object: Some("ci/rem-1.md".into()),
            connections: vec!["model".parse().expect("name")],
            requested_at: DateTime::from_timestamp(1_700_000_000, 0),
        }
    }

    #[test]
    fn a_run_survives_the_wire() {
        let r = run();
        assert_eq!(SandboxRun::try_from(v1::SandboxRun::from(&r)), Ok(r));
    }

    #[test]
    fn bad_runs_name_the_field() {
        let field = |edit: fn(&mut v1::SandboxRun)| {
            let mut m = v1::SandboxRun::from(&run());
            edit(&mut m);
            SandboxRun::try_from(m).expect_err("refused").path
        };
        assert_eq!(field(|m| m.run_id = "a/b".into()), "run_id");
        assert_eq!(field(|m| m.kind = 0), "kind");
        assert_eq!(field(|m| m.kind = 9), "kind");
        assert_eq!(field(|m| m.workspace_object.clear()), "workspace_object");
        assert_eq!(field(|m| m.ci_logs_object = "../x".into()), "ci_logs_object");
        assert_eq!(field(|m| m.agent_command.clear()), "agent_command");
        assert_eq!(field(|m| m.agent_command[2] = "a\0b".into()), "agent_command[2]");
        assert_eq!(
            field(|m| m.egress.as_mut().expect("egress").allow_ports.push(70_000)),
            "egress.allow_ports[2]"
        );
    }

    #[test]
    fn results_survive_the_wire_and_absent_keys_are_none() {
        let mut r = SandboxResult::without_artifacts("run-1", "rem-1", RunOutcome::Completed, "done");
        r.exit_code = Some(0);
        r.patch_object = Some("runs/run-1/patch".into());
        r.session_object = Some("runs/run-1/session".into());
        r.egress_denied = 3;
        assert_eq!(SandboxResult::try_from(v1::SandboxResult::from(&r)), Ok(r.clone()));
        let bare = SandboxResult::without_artifacts("run-2", "", RunOutcome::InfraError, "vm died");
        let back = SandboxResult::try_from(v1::SandboxResult::from(&bare)).expect("decodes");
        assert_eq!(back.patch_object, None);
        assert_eq!(back.session_object, None);
        assert_eq!(back.exit_code, None);
    }

    #[test]
    fn a_bad_session_key_is_named() {
        let mut m = v1::SandboxResult::from(&SandboxResult::without_artifacts(
            "run-1",
            "rem-1",
            RunOutcome::Completed,
            "done",
        ));
        m.session_object = "../escape".into();
        assert_eq!(SandboxResult::try_from(m).expect_err("refused").path, "session_object");
    }

    #[test]
    fn outcomes_and_purposes_have_stable_names() {
        assert_eq!(RunOutcome::Completed.as_str(), "completed");
        assert_eq!("limit_exceeded".parse::<RunOutcome>(), Ok(RunOutcome::LimitExceeded));
        assert_eq!(RunOutcome::from(v1::RunOutcome::Unspecified), RunOutcome::InfraError);
        assert_eq!(RunPurpose::Repair.to_string(), "repair");
        assert!("fix".parse::<RunPurpose>().is_err());
        assert_eq!(serde_json::to_string(&RunOutcome::TimedOut).expect("json"), "\"timed_out\"");
    }
}
