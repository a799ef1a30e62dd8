//! The egress decision logic: pure, no I/O.
//!
//! Owns the rules that turn a DNS name or a destination address into an
//! allow or deny [`Decision`], and the run's fake-IP table: allowed names
//! are answered with synthetic addresses from 198.18.0.0/15, each mapped
//! back to the name and the real addresses the host resolved. A connection
//! to a synthetic address therefore goes to what the *host* resolved for an
//! allowed name, so the guest can neither rebind a name nor alias one.
//!
//! Must never allow an address the guest picked unless a CIDR of the policy
//! names it; never let a broad CIDR (say `0.0.0.0/0`) unlock loopback,
//! private, link-local or metadata ranges: those need a CIDR inside them.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Mutex;

use super::audit::{Decision, rules};
use super::cidr::Cidr;
use super::policy::EgressPolicy;

/// Where synthetic answers come from (RFC 2544 benchmarking range: never
/// routed on the internet, so it cannot collide with a real destination).
pub const SYNTHETIC_BASE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 0);
/// Prefix length of the synthetic range.
pub const SYNTHETIC_PREFIX: u8 = 15;
const SYNTHETIC_SIZE: u32 = 1 << (32 - SYNTHETIC_PREFIX as u32);

/// Whether `ip` is in the synthetic range.
pub fn is_synthetic(ip: Ipv4Addr) -> bool {
    u32::from(ip) >> (32 - u32::from(SYNTHETIC_PREFIX))
        == u32::from(SYNTHETIC_BASE) >> (32 - u32::from(SYNTHETIC_PREFIX))
}

/// Special ranges, most specific first: an address gets the first rule
/// that contains it, so the metadata endpoints (inside link-local and
/// CGNAT) are reported as metadata.
const SPECIAL: &[(&str, &str)] = &[
    // Cloud instance metadata: AWS/GCP/Azure/OpenStack, AWS ECS task
    // metadata, Alibaba, AWS IMDS over IPv6.
    ("169.254.169.254/32", rules::METADATA),
    ("169.254.170.2/32", rules::METADATA),
    ("100.100.100.200/32", rules::METADATA),
    ("fd00:ec2::254/128", rules::METADATA),
    ("127.0.0.0/8", rules::LOOPBACK),
    // "This network": Linux connects 0.0.0.0 to the local host.
    ("0.0.0.0/8", rules::LOOPBACK),
    ("::1/128", rules::LOOPBACK),
    ("::/128", rules::LOOPBACK),
    ("10.0.0.0/8", rules::PRIVATE),
    ("172.16.0.0/12", rules::PRIVATE),
    ("192.168.0.0/16", rules::PRIVATE),
    ("100.64.0.0/10", rules::PRIVATE),
    ("fc00::/7", rules::PRIVATE),
    ("169.254.0.0/16", rules::LINK_LOCAL),
    ("fe80::/10", rules::LINK_LOCAL),
];

/// The special range containing `ip` and its deny rule.
pub fn classify(ip: IpAddr) -> Option<(Cidr, &'static str)> {
    SPECIAL.iter().find_map(|(net, rule)| {
        let net: Cidr = net.parse().ok()?;
        net.contains(ip).then_some((net, *rule))
    })
}

/// `::ffff:a.b.c.d` is the IPv4 address for every purpose here; without
/// this, `::ffff:127.0.0.1` would slip past the loopback rule.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

#[derive(Debug, Default)]
struct FakeIps {
    by_name: HashMap<String, Ipv4Addr>,
    by_ip: HashMap<Ipv4Addr, (String, Vec<Ipv4Addr>)>,
    /// Offset of the next candidate inside the synthetic range.
    next: u32,
}

/// One run's gate: its policy and fake-IP table.
#[derive(Debug)]
pub struct Gate {
    policy: EgressPolicy,
    fake: Mutex<FakeIps>,
}

impl Gate {
    pub fn new(policy: EgressPolicy) -> Gate {
        Gate { policy, fake: Mutex::new(FakeIps { next: 1, ..FakeIps::default() }) }
    }

    pub fn policy(&self) -> &EgressPolicy {
        &self.policy
    }

    fn fake(&self) -> std::sync::MutexGuard<'_, FakeIps> {
        // The table stays consistent under panics (each update is a pair
        // of inserts), so a poisoned lock is still usable.
        match self.fake.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Whether a lookup of `name` (lower case, no trailing dot) may be
    /// answered. Allowed: the first matching host rule, whatever its port
    /// (ports are checked on connect).
    pub fn decide_dns(&self, name: &str) -> Decision {
        match self.policy.rules_for(name).next() {
            Some(rule) => Decision::allow(rule.audit_name()).with_name(name),
            None => Decision::deny(rules::HOST_NOT_ALLOWED).with_name(name),
        }
    }

    /// Binds `name` to a synthetic address (stable for the run) and
    /// records `real` as what the host resolved for it, replacing earlier
    /// answers. `None` when the synthetic range is used up.
    pub fn bind_name(&self, name: &str, real: Vec<Ipv4Addr>) -> Option<Ipv4Addr> {
        let mut fake = self.fake();
        if let Some(ip) = fake.by_name.get(name).copied() {
            fake.by_ip.insert(ip, (name.to_string(), real));
            return Some(ip);
        }
        let ip = loop {
            if fake.next >= SYNTHETIC_SIZE {
                return None;
            }
            let candidate = Ipv4Addr::from(u32::from(SYNTHETIC_BASE) + fake.next);
            fake.next += 1;
            // Skip .0 and .255: some stacks treat them as network or
            // broadcast addresses regardless of the real prefix.
            let last = candidate.octets()[3];
            if last != 0 && last != 255 {
                break candidate;
            }
        };
        fake.by_name.insert(name.to_string(), ip);
        fake.by_ip.insert(ip, (name.to_string(), real));
        Some(ip)
    }

    /// The name and host-resolved addresses behind a synthetic address.
    pub fn lookup_synthetic(&self, ip: Ipv4Addr) -> Option<(String, Vec<Ipv4Addr>)> {
        self.fake().by_ip.get(&ip).cloned()
    }

    /// Whether the guest may connect to `ip:port`. An allowed decision
    /// carries the addresses to dial.
    pub fn decide_connect(&self, ip: IpAddr, port: u16) -> Decision {
        let ip = canonical(ip);
        if let IpAddr::V4(v4) = ip
            && is_synthetic(v4)
        {
            return self.decide_synthetic(v4, port);
        }
        let special = classify(ip);
        let cidr = self.policy.cidrs.iter().find(|net| {
            net.contains(ip)
                && match &special {
                    Some((range, _)) => net.is_within(range),
                    None => true,
                }
        });
        match (cidr, special) {
            (Some(net), _) => {
                if self.policy.ports.contains(&port) {
                    let mut d = Decision::allow(format!("cidr:{net}"));
                    d.targets = vec![SocketAddr::new(ip, port)];
                    d
                } else {
                    Decision::deny(rules::PORT_NOT_ALLOWED)
                }
            }
            (None, Some((_, rule))) => Decision::deny(rule),
            (None, None) => Decision::deny(rules::IP_NOT_RESOLVED),
        }
    }

    fn decide_synthetic(&self, ip: Ipv4Addr, port: u16) -> Decision {
        let Some((name, real)) = self.lookup_synthetic(ip) else {
            // Never handed out in this run: the guest made it up, or it
            // belongs to another run.
            return Decision::deny(rules::IP_NOT_RESOLVED);
        };
        let mut matched = false;
        let mut allowed_by = None;
        for rule in self.policy.rules_for(&name) {
            matched = true;
            if self.policy.rule_allows_port(rule, port) {
                allowed_by = Some(rule.audit_name());
                break;
            }
        }
        if let Some(rule) = allowed_by {
            let mut d = Decision::allow(rule).with_name(name);
            d.targets = real.iter().map(|ip| SocketAddr::new(IpAddr::V4(*ip), port)).collect();
            d
        } else if matched {
            Decision::deny(rules::PORT_NOT_ALLOWED).with_name(name)
        } else {
            Decision::deny(rules::HOST_NOT_ALLOWED).with_name(name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::audit::Verdict;

    fn gate(hosts: &[&str], cidrs: &[&str], ports: &[u16]) -> Gate {
        let p = EgressPolicy::from_request(&patchpilot_model::EgressPolicy {
            presets: vec![],
            allow_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            allow_cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
            allow_ports: ports.to_vec(),
        })
        .expect("valid policy");
        Gate::new(p)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    fn denied(d: &Decision) -> &str {
        assert_eq!(d.verdict, Verdict::Deny, "{d:?}");
        assert!(d.targets.is_empty());
        &d.rule
    }

    #[test]
    fn dns_rules() {
        let g = gate(&["registry.test:5000", "*.example.test"], &[], &[]);
        let d = g.decide_dns("registry.test");
        assert!(d.is_allow());
        assert_eq!(d.rule, "host:registry.test:5000");
        assert_eq!(g.decide_dns("a.b.example.test").rule, "host:*.example.test");
        assert_eq!(denied(&g.decide_dns("example.test")), rules::HOST_NOT_ALLOWED);
        assert_eq!(denied(&g.decide_dns("evil.test")), rules::HOST_NOT_ALLOWED);
        assert_eq!(denied(&g.decide_dns("")), rules::HOST_NOT_ALLOWED);
    }

    #[test]
    fn synthetic_addresses_are_stable_and_distinct() {
        let g = gate(&["a.test", "b.test"], &[], &[]);
        let a = g.bind_name("a.test", vec![Ipv4Addr::LOCALHOST]).expect("free");
        let b = g.bind_name("b.test", vec![Ipv4Addr::LOCALHOST]).expect("free");
        assert_ne!(a, b);
        assert!(is_synthetic(a) && is_synthetic(b));
        assert_eq!(a, Ipv4Addr::new(198, 18, 0, 1));
        let again = g.bind_name("a.test", vec![Ipv4Addr::new(127, 0, 0, 5)]).expect("same");
        assert_eq!(a, again);
        assert_eq!(g.lookup_synthetic(a), Some(("a.test".into(), vec![Ipv4Addr::new(127, 0, 0, 5)])));
        assert!(!is_synthetic(Ipv4Addr::new(198, 20, 0, 1)));
        assert!(is_synthetic(Ipv4Addr::new(198, 19, 255, 254)));
    }

    #[test]
    fn synthetic_range_exhaustion() {
        let g = gate(&["*.test"], &[], &[]);
        let mut count = 0u32;
        while g.bind_name(&format!("h{count}.test"), vec![]).is_some() {
            count += 1;
        }
        // 2^17 minus the .0/.255 addresses minus the very first (offset 0).
        assert_eq!(count, (1 << 17) - 2 * 512 + 1 - 1);
    }

    #[test]
    fn connect_to_synthetic_uses_host_resolution_and_ports() {
        let g = gate(&["registry.test:5000", "*.example.test", "web.test"], &[], &[]);
        let reg = g.bind_name("registry.test", vec![Ipv4Addr::LOCALHOST]).expect("free");
        let d = g.decide_connect(IpAddr::V4(reg), 5000);
        assert!(d.is_allow(), "{d:?}");
        assert_eq!(d.rule, "host:registry.test:5000");
        assert_eq!(d.name.as_deref(), Some("registry.test"));
        assert_eq!(d.targets, vec!["127.0.0.1:5000".parse::<SocketAddr>().expect("addr")]);
        // A port rule allows only that port.
        assert_eq!(denied(&g.decide_connect(IpAddr::V4(reg), 443)), rules::PORT_NOT_ALLOWED);
        // Rules without a port use the policy ports (80, 443).
        let web = g.bind_name("web.test", vec![Ipv4Addr::new(127, 0, 0, 7)]).expect("free");
        assert!(g.decide_connect(IpAddr::V4(web), 443).is_allow());
        assert!(g.decide_connect(IpAddr::V4(web), 80).is_allow());
        assert_eq!(denied(&g.decide_connect(IpAddr::V4(web), 22)), rules::PORT_NOT_ALLOWED);
        let wild = g.bind_name("cdn.example.test", vec![Ipv4Addr::LOCALHOST]).expect("free");
        assert_eq!(g.decide_connect(IpAddr::V4(wild), 443).rule, "host:*.example.test");
        // A synthetic address never handed out.
        assert_eq!(denied(&g.decide_connect(ip("198.18.7.7"), 443)), rules::IP_NOT_RESOLVED);
        // The same address as a v4-mapped v6 address.
        let mapped = IpAddr::V6(reg.to_ipv6_mapped());
        assert!(g.decide_connect(mapped, 5000).is_allow());
    }

    #[test]
    fn direct_ip_rules() {
        let g = gate(&["registry.test"], &[], &[]);
        assert_eq!(denied(&g.decide_connect(ip("10.1.2.3"), 80)), rules::PRIVATE);
        assert_eq!(denied(&g.decide_connect(ip("172.16.5.4"), 80)), rules::PRIVATE);
        assert_eq!(denied(&g.decide_connect(ip("172.32.0.1"), 80)), rules::IP_NOT_RESOLVED);
        assert_eq!(denied(&g.decide_connect(ip("192.168.1.1"), 443)), rules::PRIVATE);
        assert_eq!(denied(&g.decide_connect(ip("100.64.0.1"), 443)), rules::PRIVATE);
        assert_eq!(denied(&g.decide_connect(ip("fd12::1"), 443)), rules::PRIVATE);
        assert_eq!(denied(&g.decide_connect(ip("169.254.169.254"), 80)), rules::METADATA);
        assert_eq!(denied(&g.decide_connect(ip("169.254.170.2"), 80)), rules::METADATA);
        assert_eq!(denied(&g.decide_connect(ip("100.100.100.200"), 80)), rules::METADATA);
        assert_eq!(denied(&g.decide_connect(ip("fd00:ec2::254"), 80)), rules::METADATA);
        assert_eq!(denied(&g.decide_connect(ip("169.254.1.1"), 80)), rules::LINK_LOCAL);
        assert_eq!(denied(&g.decide_connect(ip("fe80::1"), 80)), rules::LINK_LOCAL);
        assert_eq!(denied(&g.decide_connect(ip("127.0.0.2"), 5000)), rules::LOOPBACK);
        assert_eq!(denied(&g.decide_connect(ip("::1"), 443)), rules::LOOPBACK);
        assert_eq!(denied(&g.decide_connect(ip("::ffff:127.0.0.1"), 443)), rules::LOOPBACK);
        assert_eq!(denied(&g.decide_connect(ip("0.0.0.0"), 443)), rules::LOOPBACK);
        assert_eq!(denied(&g.decide_connect(ip("203.0.113.7"), 443)), rules::IP_NOT_RESOLVED);
        assert_eq!(denied(&g.decide_connect(ip("2001:db8::1"), 443)), rules::IP_NOT_RESOLVED);
    }

    #[test]
    fn cidrs_allow_only_what_they_name() {
        let g = gate(&[], &["203.0.113.0/24", "10.9.0.0/16", "169.254.169.254/32"], &[443]);
        let d = g.decide_connect(ip("203.0.113.7"), 443);
        assert!(d.is_allow());
        assert_eq!(d.rule, "cidr:203.0.113.0/24");
        assert_eq!(d.targets, vec!["203.0.113.7:443".parse::<SocketAddr>().expect("addr")]);
        assert_eq!(denied(&g.decide_connect(ip("203.0.113.7"), 80)), rules::PORT_NOT_ALLOWED);
        // A named private range is allowed, its neighbours are not.
        assert!(g.decide_connect(ip("10.9.1.1"), 443).is_allow());
        assert_eq!(denied(&g.decide_connect(ip("10.8.1.1"), 443)), rules::PRIVATE);
        // Naming the metadata address exactly unlocks it.
        assert!(g.decide_connect(ip("169.254.169.254"), 443).is_allow());

        // A broad CIDR does not unlock special ranges.
        let g = gate(&[], &["0.0.0.0/0", "169.254.0.0/16"], &[]);
        assert!(g.decide_connect(ip("203.0.113.7"), 443).is_allow());
        assert_eq!(denied(&g.decide_connect(ip("10.1.2.3"), 80)), rules::PRIVATE);
        assert_eq!(denied(&g.decide_connect(ip("127.0.0.1"), 80)), rules::LOOPBACK);
        assert_eq!(denied(&g.decide_connect(ip("169.254.169.254"), 80)), rules::METADATA);
        assert!(g.decide_connect(ip("169.254.1.1"), 80).is_allow());
        // An unallocated synthetic address stays denied even under 0/0.
        assert_eq!(denied(&g.decide_connect(ip("198.18.0.9"), 443)), rules::IP_NOT_RESOLVED);
    }
}
