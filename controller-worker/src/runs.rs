//! Sandbox run requests: the `SandboxRun` the controller publishes for a
//! remediation or a repair, with the egress the repository's ecosystems
//! need and nothing more.
//!
//! The run's environment carries no credential: the sandbox worker refuses
//! runs whose environment looks like one, and the controller never builds
//! one. Egress is derived from the findings' ecosystems and the registries
//! the Dockerfile pulls from, so a Go repository gets the Go proxy and a
//! Java one Maven Central, not the whole internet.

use std::collections::BTreeSet;

use patchpilot_model::{EgressPolicy, Finding, RunLimits, RunPurpose, SandboxRun};

/// The egress presets a finding's ecosystem needs (OSV ecosystem names).
pub fn presets_for_ecosystem(ecosystem: &str) -> &'static [&'static str] {
    let family = ecosystem.split(':').next().unwrap_or(ecosystem).to_ascii_lowercase();
    match family.as_str() {
        "alpine" | "wolfi" | "chainguard" => &["alpine"],
        "debian" | "ubuntu" => &["debian"],
        "go" => &["go-proxy"],
        "crates.io" => &["crates-io"],
        "pypi" => &["pypi"],
        "npm" => &["npm"],
        "maven" => &["maven-central"],
        _ => &[],
    }
}

/// The egress policy of a run: presets for every ecosystem among the
/// findings, plus the registries the build pulls its bases from.
pub fn egress_policy(findings: &[Finding], registry_hosts: &[String]) -> EgressPolicy {
    let presets: BTreeSet<&str> =
        findings.iter().flat_map(|f| presets_for_ecosystem(&f.package.ecosystem).iter().copied()).collect();
    let hosts: BTreeSet<String> =
        registry_hosts.iter().map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty()).collect();
    EgressPolicy {
        presets: presets.into_iter().map(String::from).collect(),
        allow_hosts: hosts.into_iter().collect(),
        allow_cidrs: Vec::new(),
        allow_ports: Vec::new(),
    }
}

/// Registry hosts named by `FROM` lines (`registry.example.com[:port]/…`);
/// images without a registry part come from Docker Hub.
pub fn registry_hosts(dockerfile: &str) -> Vec<String> {
    let mut hosts = BTreeSet::new();
    for line in dockerfile.lines() {
        let mut words = line.split_whitespace();
        if !words.next().is_some_and(|w| w.eq_ignore_ascii_case("FROM")) {
            continue;
        }
        let Some(image) = words.find(|w| !w.starts_with("--")) else { continue };
        if image.contains('$') || image.eq_ignore_ascii_case("scratch") {
            continue;
        }
        let first = image.split('/').next().unwrap_or("");
        if image.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost") {
            hosts.insert(first.to_ascii_lowercase());
        } else {
            hosts.insert("registry-1.docker.io".to_owned());
            hosts.insert("auth.docker.io".to_owned());
            hosts.insert("production.cloudflare.docker.com".to_owned());
        }
    }
    hosts.into_iter().collect()
}

/// Everything a run request needs besides the workspace.
#[derive(Debug, Clone)]
pub struct RunRequestSpec {
    /// Deterministic run id (also the message id).
    pub run_id: String,
    /// The remediation.
    pub remediation_id: String,
    /// Remediate or repair.
    pub purpose: RunPurpose,
    /// Which repair attempt (0 for a remediation).
    pub attempt: u32,
    /// Object-store key of the packed workspace.
    pub workspace_object: String,
    /// Object-store key of the fenced CI logs, for repairs.
    pub ci_logs_object: Option<String>,
    /// The agent command.
    pub agent_command: Vec<String>,
    /// Egress.
    pub egress: EgressPolicy,
    /// Limits; unset ones take the worker's defaults.
    pub limits: RunLimits,
    /// Whether the VM starts its Docker daemon (the built-in agent builds
    /// and rescans with it).
    pub docker: bool,
    /// Broker connections the run is granted.
    pub connections: Vec<patchpilot_model::broker::ConnectionName>,
}

/// The run request.
pub fn sandbox_run(spec: &RunRequestSpec) -> SandboxRun {
    SandboxRun {
        run_id: spec.run_id.clone(),
        remediation_id: spec.remediation_id.clone(),
        purpose: spec.purpose,
        workspace_object: spec.workspace_object.clone(),
        agent_command: spec.agent_command.clone(),
        // The controller never gives a credential, nor a capability: the
        // worker mints the run's from `connections` when the run starts.
        env: Default::default(),
        egress: spec.egress.clone(),
        limits: spec.limits,
        docker: spec.docker,
        attempt: spec.attempt,
        ci_logs_object: spec.ci_logs_object.clone(),
        connections: spec.connections.clone(),
        requested_at: Some(chrono::Utc::now()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use patchpilot_model::{Package, Severity};

    fn finding(ecosystem: &str) -> Finding {
        Finding::new("CVE-1", Package::new("p", "1", ecosystem), Severity::High)
    }

    #[test]
    fn egress_follows_the_ecosystems_and_the_base_registries() {
        let dockerfile = "FROM --platform=$BUILDPLATFORM golang:1.22.1-alpine3.19 AS build\nFROM registry.example.com:5000/team/base:1\nFROM scratch\n";
        let policy = egress_policy(
            &[finding("Alpine:v3.19"), finding("Go"), finding("Go")],
            &registry_hosts(dockerfile),
        );
        assert_eq!(policy.presets, vec!["alpine", "go-proxy"]);
        assert!(policy.allow_hosts.contains(&"registry.example.com:5000".to_string()));
        assert!(policy.allow_hosts.contains(&"registry-1.docker.io".to_string()));
        assert!(policy.allow_cidrs.is_empty(), "no networks by default");
        let java = egress_policy(&[finding("Maven")], &[]);
        assert_eq!(java.presets, vec!["maven-central"]);
    }

    #[test]
    fn a_run_request_carries_no_environment_and_names_its_kind() {
        let run = sandbox_run(&RunRequestSpec {
            run_id: "rem-1-r1-2".into(),
            remediation_id: "rem-1".into(),
            purpose: RunPurpose::Repair,
            attempt: 1,
            workspace_object: "workspaces/rem-1-r1-2.tar.gz".into(),
            ci_logs_object: Some("ci/rem-1-r1-2.md".into()),
            agent_command: vec!["patchpilot-agent".into()],
            egress: EgressPolicy::default(),
            limits: RunLimits::default(),
            docker: true,
            connections: vec!["model".parse().expect("name")],
        });
        assert_eq!(run.connections.len(), 1);
        assert_eq!(run.purpose, RunPurpose::Repair);
        assert!(run.env.is_empty());
        assert_eq!(run.ci_logs_object.as_deref(), Some("ci/rem-1-r1-2.md"));
    }
}
