//! A run's egress policy as the gate uses it, built from what the run asked for.
//!
//! Owns validation of the egress a run asks for (`patchpilot_model::EgressPolicy`): presets, host
//! rules (exact or `*.suffix`, optionally with a port), CIDRs and ports.
//! Errors name the field, index and value so an operator can fix the run
//! spec without reading code.
//!
//! Must never widen what was written: an invalid entry is an error, not
//! skipped; an IP address is not accepted as a host name (it would bypass
//! the host's own resolution); a CIDR with host bits set is rejected.

use std::fmt;

use patchpilot_model::EgressPolicy as RequestedPolicy;

use super::cidr::Cidr;
use super::presets;

/// Ports allowed when the policy lists none.
pub const DEFAULT_PORTS: &[u16] = &[80, 443];

/// A host-name pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// Exactly this name (lower case, no trailing dot).
    Exact(String),
    /// Any name strictly below this suffix: `*.example.test` matches
    /// `a.example.test` and `a.b.example.test`, not `example.test`.
    Wildcard(String),
}

impl HostPattern {
    /// Whether `name` (lower case, no trailing dot) matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            HostPattern::Exact(h) => name == h,
            HostPattern::Wildcard(suffix) => name
                .strip_suffix(suffix.as_str())
                .and_then(|head| head.strip_suffix('.'))
                .is_some_and(|head| !head.is_empty()),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Exact(h) => f.write_str(h),
            HostPattern::Wildcard(s) => write!(f, "*.{s}"),
        }
    }
}

/// Where a host rule came from, for the audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RuleSource {
    Preset(&'static str),
    /// The run's own `allow_hosts`.
    Run,
}

/// An allowed host pattern, optionally limited to one port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostRule {
    pub pattern: HostPattern,
    /// `None`: the policy's ports apply.
    pub port: Option<u16>,
    pub source: RuleSource,
}

impl HostRule {
    /// The rule as it appears in audit records: `host:<pattern>[:<port>]`
    /// or `preset:<name>:<pattern>[:<port>]`. The part before the first `:`
    /// is the metric label, so it stays a small fixed set.
    pub fn audit_name(&self) -> String {
        let mut s = match &self.source {
            RuleSource::Preset(p) => format!("preset:{p}:{}", self.pattern),
            RuleSource::Run => format!("host:{}", self.pattern),
        };
        if let Some(port) = self.port {
            s.push_str(&format!(":{port}"));
        }
        s
    }
}

/// A run's egress policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EgressPolicy {
    pub hosts: Vec<HostRule>,
    pub cidrs: Vec<Cidr>,
    /// Ports for host rules without their own port and for CIDRs.
    pub ports: Vec<u16>,
}

/// An invalid policy entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {value:?} {reason}")]
pub struct PolicyError {
    /// e.g. `egress.allow_hosts[2]`.
    pub field: String,
    pub value: String,
    pub reason: String,
}

impl PolicyError {
    fn new(field: String, value: impl Into<String>, reason: impl Into<String>) -> PolicyError {
        PolicyError { field, value: value.into(), reason: reason.into() }
    }
}

impl EgressPolicy {
    /// Builds and validates the policy a run asked for.
    pub fn from_request(p: &RequestedPolicy) -> Result<EgressPolicy, PolicyError> {
        let mut policy = EgressPolicy::default();
        for (i, name) in p.presets.iter().enumerate() {
            let field = format!("egress.presets[{i}]");
            let preset = presets::find(name).ok_or_else(|| {
                PolicyError::new(
                    field.clone(),
                    name.as_str(),
                    format!("is not a known preset (known: {})", presets::names().join(", ")),
                )
            })?;
            for host in preset.hosts {
                let pattern =
                    parse_pattern(host).map_err(|reason| PolicyError::new(field.clone(), *host, reason))?;
                for port in preset.ports {
                    policy.hosts.push(HostRule {
                        pattern: pattern.clone(),
                        port: Some(*port),
                        source: RuleSource::Preset(preset.name),
                    });
                }
            }
        }
        for (i, spec) in p.allow_hosts.iter().enumerate() {
            let field = format!("egress.allow_hosts[{i}]");
            let rule =
                parse_host_rule(spec).map_err(|reason| PolicyError::new(field, spec.as_str(), reason))?;
            policy.hosts.push(rule);
        }
        for (i, spec) in p.allow_cidrs.iter().enumerate() {
            let field = format!("egress.allow_cidrs[{i}]");
            let cidr: Cidr = spec
                .trim()
                .parse()
                .map_err(|e| PolicyError::new(field, spec.as_str(), format!("is not a CIDR: it {e}")))?;
            policy.cidrs.push(cidr);
        }
        for (i, port) in p.allow_ports.iter().enumerate() {
            let field = format!("egress.allow_ports[{i}]");
            let port = Some(*port)
                .filter(|p| *p != 0)
                .ok_or_else(|| PolicyError::new(field, port.to_string(), "is not a port (1-65535)"))?;
            if !policy.ports.contains(&port) {
                policy.ports.push(port);
            }
        }
        if policy.ports.is_empty() {
            policy.ports = DEFAULT_PORTS.to_vec();
        }
        Ok(policy)
    }

    /// The host rules that match `name`, in policy order.
    pub fn rules_for<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a HostRule> + 'a {
        self.hosts.iter().filter(move |r| r.pattern.matches(name))
    }

    /// Whether `rule` lets connections through on `port`.
    pub fn rule_allows_port(&self, rule: &HostRule, port: u16) -> bool {
        match rule.port {
            Some(p) => p == port,
            None => self.ports.contains(&port),
        }
    }
}

/// Parses `host`, `*.suffix`, `host:port` or `*.suffix:port`.
pub fn parse_host_rule(spec: &str) -> Result<HostRule, String> {
    let spec = spec.trim();
    const IP_HOST: &str = "is an IP address; name it in allow_cidrs instead";
    if spec.parse::<std::net::IpAddr>().is_ok() || spec.starts_with('[') {
        return Err(IP_HOST.to_string());
    }
    let (host, port) = match spec.rsplit_once(':') {
        Some((h, p)) => {
            let port = if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
                p.parse::<u16>().ok().filter(|p| *p != 0)
            } else {
                None
            };
            match port {
                Some(port) => (h, Some(port)),
                None => return Err(format!("has an invalid port {p:?} (1-65535)")),
            }
        }
        None => (spec, None),
    };
    Ok(HostRule { pattern: parse_pattern(host)?, port, source: RuleSource::Run })
}

fn parse_pattern(host: &str) -> Result<HostPattern, String> {
    let lower = host.trim_end_matches('.').to_ascii_lowercase();
    if lower.parse::<std::net::IpAddr>().is_ok() {
        return Err("is an IP address; name it in allow_cidrs instead".to_string());
    }
    if let Some(suffix) = lower.strip_prefix("*.") {
        check_name(suffix)?;
        return Ok(HostPattern::Wildcard(suffix.to_string()));
    }
    check_name(&lower)?;
    Ok(HostPattern::Exact(lower))
}

fn check_name(name: &str) -> Result<(), String> {
    const NOT_A_HOST: &str = "is not a host name";
    if name.is_empty() || name.len() > 253 {
        return Err(NOT_A_HOST.to_string());
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(NOT_A_HOST.to_string());
        }
    }
    // All-numeric final label: a dotted quad in disguise (e.g. "10.1.2").
    if name.rsplit('.').next().is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit())) {
        return Err(NOT_A_HOST.to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(presets: &[&str], hosts: &[&str], cidrs: &[&str], ports: &[u16]) -> RequestedPolicy {
        RequestedPolicy {
            presets: presets.iter().map(|s| s.to_string()).collect(),
            allow_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            allow_cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
            allow_ports: ports.to_vec(),
        }
    }

    fn err(p: RequestedPolicy) -> String {
        match EgressPolicy::from_request(&p) {
            Ok(_) => panic!("policy should be rejected: {p:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn builds_from_proto() {
        let p = EgressPolicy::from_request(&proto(
            &["npm"],
            &["Registry.Test:5000", "*.example.test", "plain.test."],
            &["10.9.0.0/16"],
            &[],
        ))
        .expect("valid");
        assert_eq!(p.ports, vec![80, 443]);
        assert_eq!(p.cidrs.len(), 1);
        assert_eq!(p.hosts[0].audit_name(), "preset:npm:registry.npmjs.org:443");
        assert_eq!(p.hosts[1].pattern, HostPattern::Exact("registry.test".into()));
        assert_eq!(p.hosts[1].port, Some(5000));
        assert_eq!(p.hosts[1].audit_name(), "host:registry.test:5000");
        assert_eq!(p.hosts[2].pattern, HostPattern::Wildcard("example.test".into()));
        assert_eq!(p.hosts[3].pattern, HostPattern::Exact("plain.test".into()));

        let p = EgressPolicy::from_request(&proto(&[], &[], &[], &[8080, 8080, 443])).expect("valid");
        assert_eq!(p.ports, vec![8080, 443]);
    }

    #[test]
    fn every_preset_parses() {
        for preset in presets::PRESETS {
            let p = EgressPolicy::from_request(&proto(&[preset.name], &[], &[], &[])).expect("valid preset");
            assert_eq!(p.hosts.len(), preset.hosts.len() * preset.ports.len());
        }
        let p = EgressPolicy::from_request(&proto(&["debian"], &[], &[], &[])).expect("valid");
        let ports: Vec<_> = p.rules_for("deb.debian.org").filter_map(|r| r.port).collect();
        assert!(ports.contains(&80) && ports.contains(&443));
        assert!(p.rules_for("mirror.debian.org").next().is_some());
    }

    #[test]
    fn errors_name_field_and_value() {
        assert_eq!(
            err(proto(&[], &["ok.test", "x.test", "a b"], &[], &[])),
            r#"egress.allow_hosts[2]: "a b" is not a host name"#
        );
        assert_eq!(
            err(proto(&["debain"], &[], &[], &[])),
            r#"egress.presets[0]: "debain" is not a known preset (known: debian, alpine, docker-hub, go-proxy, crates-io, pypi, npm, maven-central)"#
        );
        assert_eq!(
            err(proto(&[], &["h.test:http"], &[], &[])),
            r#"egress.allow_hosts[0]: "h.test:http" has an invalid port "http" (1-65535)"#
        );
        assert_eq!(
            err(proto(&[], &["h.test:0"], &[], &[])),
            r#"egress.allow_hosts[0]: "h.test:0" has an invalid port "0" (1-65535)"#
        );
        assert_eq!(
            err(proto(&[], &["10.0.0.1"], &[], &[])),
            r#"egress.allow_hosts[0]: "10.0.0.1" is an IP address; name it in allow_cidrs instead"#
        );
        assert_eq!(
            err(proto(&[], &["::1"], &[], &[])),
            r#"egress.allow_hosts[0]: "::1" is an IP address; name it in allow_cidrs instead"#
        );
        assert_eq!(err(proto(&[], &["*"], &[], &[])), r#"egress.allow_hosts[0]: "*" is not a host name"#);
        assert_eq!(
            err(proto(&[], &["a.*.test"], &[], &[])),
            r#"egress.allow_hosts[0]: "a.*.test" is not a host name"#
        );
        assert_eq!(
            err(proto(&[], &["-a.test"], &[], &[])),
            r#"egress.allow_hosts[0]: "-a.test" is not a host name"#
        );
        assert_eq!(
            err(proto(&[], &[], &["10.0.0.1/8"], &[])),
            r#"egress.allow_cidrs[0]: "10.0.0.1/8" is not a CIDR: it has host bits set (did you mean 10.0.0.0/8?)"#
        );
        assert_eq!(
            err(proto(&[], &[], &["nope"], &[])),
            r#"egress.allow_cidrs[0]: "nope" is not a CIDR: it has an invalid address"#
        );
        // Ports above 65535 never get this far: decoding the run refuses
        // them (`patchpilot_model::sandbox`).
        assert_eq!(err(proto(&[], &[], &[], &[0])), r#"egress.allow_ports[0]: "0" is not a port (1-65535)"#);
    }

    #[test]
    fn wildcard_matching() {
        let w = HostPattern::Wildcard("example.test".into());
        assert!(w.matches("a.example.test"));
        assert!(w.matches("a.b.example.test"));
        assert!(!w.matches("example.test"));
        assert!(!w.matches("badexample.test"));
        assert!(!w.matches("a.example.test.evil"));
        let e = HostPattern::Exact("example.test".into());
        assert!(e.matches("example.test"));
        assert!(!e.matches("a.example.test"));
    }
}
