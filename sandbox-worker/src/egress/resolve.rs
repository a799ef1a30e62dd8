//! Host-side name resolution for allowed names.
//!
//! Owns the [`Resolve`] trait, the system resolver, and operator aliases
//! (`registry.test=127.0.0.1`) that are consulted first.
//!
//! Must never be asked about a name the policy does not allow (the
//! forwarder checks first, so a guest cannot use the host's resolver as an
//! oracle or a DNS tunnel), and never returns addresses other than IPv4:
//! the guest side speaks IPv4 only.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

/// Resolves a host name to IPv4 addresses.
#[async_trait]
pub trait Resolve: Send + Sync + fmt::Debug {
    async fn resolve(&self, name: &str) -> io::Result<Vec<Ipv4Addr>>;
}

/// The host's resolver (getaddrinfo via tokio), with a deadline because a
/// stuck lookup would otherwise hold the guest's query forever.
#[derive(Debug, Clone, Copy)]
pub struct SystemResolver {
    pub timeout: Duration,
}

impl Default for SystemResolver {
    fn default() -> Self {
        SystemResolver { timeout: Duration::from_secs(5) }
    }
}

#[async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, name: &str) -> io::Result<Vec<Ipv4Addr>> {
        let lookup = tokio::net::lookup_host((name, 0));
        let addrs = tokio::time::timeout(self.timeout, lookup)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("resolving {name} timed out")))??;
        let mut out = Vec::new();
        for addr in addrs {
            if let IpAddr::V4(v4) = addr.ip()
                && !out.contains(&v4)
            {
                out.push(v4);
            }
        }
        if out.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("{name} has no IPv4 address")));
        }
        Ok(out)
    }
}

/// Fixed name → addresses mappings. On its own it resolves only those
/// names; see [`AliasResolver`] to put it in front of another resolver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostAliases(pub HashMap<String, Vec<Ipv4Addr>>);

/// A bad `name=ip[,ip]` alias.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("host alias {spec:?}: {reason}")]
pub struct AliasError {
    pub spec: String,
    pub reason: String,
}

impl HostAliases {
    /// Parses `name=ip[,ip…]` entries (the operator's and tests' syntax).
    pub fn parse<'a>(specs: impl IntoIterator<Item = &'a str>) -> Result<HostAliases, AliasError> {
        let mut map = HashMap::new();
        for spec in specs {
            let err = |reason: &str| AliasError { spec: spec.to_string(), reason: reason.to_string() };
            let (name, ips) = spec.split_once('=').ok_or_else(|| err("expected name=ip[,ip]"))?;
            let name = normalize(name);
            if name.is_empty() {
                return Err(err("empty name"));
            }
            let ips = ips
                .split(',')
                .map(|ip| ip.trim().parse::<Ipv4Addr>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| err("expected IPv4 addresses"))?;
            map.insert(name, ips);
        }
        Ok(HostAliases(map))
    }

    /// `aliases` (e.g. the worker's `host_aliases` config) in front of
    /// `inner`: the usual way to build a run's resolver. Named `new`
    /// because callers read it as "host aliases over the system resolver";
    /// it returns the layered resolver, not the bare table.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(
        aliases: impl IntoIterator<Item = (String, Vec<Ipv4Addr>)>,
        inner: Arc<dyn Resolve>,
    ) -> AliasResolver {
        AliasResolver::new(aliases.into_iter().collect(), inner)
    }

    /// Adds or replaces one alias.
    pub fn insert(&mut self, name: &str, ips: Vec<Ipv4Addr>) {
        self.0.insert(normalize(name), ips);
    }

    fn get(&self, name: &str) -> Option<&Vec<Ipv4Addr>> {
        self.0.get(&normalize(name))
    }
}

impl FromIterator<(String, Vec<Ipv4Addr>)> for HostAliases {
    fn from_iter<I: IntoIterator<Item = (String, Vec<Ipv4Addr>)>>(iter: I) -> HostAliases {
        HostAliases(iter.into_iter().map(|(name, ips)| (normalize(&name), ips)).collect())
    }
}

fn normalize(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

#[async_trait]
impl Resolve for HostAliases {
    async fn resolve(&self, name: &str) -> io::Result<Vec<Ipv4Addr>> {
        match self.get(name) {
            Some(ips) if !ips.is_empty() => Ok(ips.clone()),
            _ => Err(io::Error::new(io::ErrorKind::NotFound, format!("{name} is not an alias"))),
        }
    }
}

/// Aliases first, then another resolver.
#[derive(Debug, Clone)]
pub struct AliasResolver {
    pub aliases: HostAliases,
    pub inner: Arc<dyn Resolve>,
}

impl AliasResolver {
    pub fn new(aliases: HostAliases, inner: Arc<dyn Resolve>) -> AliasResolver {
        AliasResolver { aliases, inner }
    }
}

#[async_trait]
impl Resolve for AliasResolver {
    async fn resolve(&self, name: &str) -> io::Result<Vec<Ipv4Addr>> {
        match self.aliases.get(name) {
            Some(ips) if !ips.is_empty() => Ok(ips.clone()),
            _ => self.inner.resolve(name).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn aliases_come_first() {
        let aliases =
            HostAliases::parse(["Registry.Test.=127.0.0.1", "two.test=127.0.0.2,127.0.0.3"]).expect("valid");
        let inner = HostAliases::parse(["registry.test=127.0.0.9", "other.test=127.0.0.4"]).expect("valid");
        let r = AliasResolver::new(aliases, Arc::new(inner));
        assert_eq!(r.resolve("registry.test").await.expect("alias"), vec![Ipv4Addr::LOCALHOST]);
        assert_eq!(r.resolve("two.test").await.expect("alias").len(), 2);
        assert_eq!(r.resolve("other.test").await.expect("inner"), vec![Ipv4Addr::new(127, 0, 0, 4)]);
        assert!(r.resolve("missing.test").await.is_err());

        let config = std::collections::BTreeMap::from([("Reg.Test".to_string(), vec![Ipv4Addr::LOCALHOST])]);
        let r = HostAliases::new(config, Arc::new(HostAliases::default()));
        assert_eq!(r.resolve("reg.test").await.expect("alias"), vec![Ipv4Addr::LOCALHOST]);
    }

    #[test]
    fn alias_errors() {
        let e = HostAliases::parse(["registry.test"]).expect_err("no =");
        assert_eq!(e.to_string(), r#"host alias "registry.test": expected name=ip[,ip]"#);
        assert!(HostAliases::parse(["a.test=::1"]).is_err());
        assert!(HostAliases::parse(["=127.0.0.1"]).is_err());
    }

    #[tokio::test]
    async fn system_resolver_resolves_localhost() {
        // "localhost" is answered from /etc/hosts; no packet leaves.
        let ips = SystemResolver::default().resolve("localhost").await.expect("localhost resolves");
        assert!(ips.iter().all(|ip| ip.is_loopback()), "{ips:?}");
    }
}
