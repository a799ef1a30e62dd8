//! `[broker]` configuration: where the broker listens, its mutual-TLS
//! identity, the gateway it asks for tokens, and the connections it knows.
//!
//! A connection's `base_url` and the client settings built from it come
//! from here only; nothing a guest sends reaches them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use patchpilot_fleet::config::{self, Section, ServiceConfig, Validate, key};
use patchpilot_fleet::mtls::TlsFiles;
use patchpilot_model::broker::{Budget, ConnectionBudget, ConnectionKind, ConnectionName, GrantedConnection};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::route::RoutePattern;

/// Everything `patchpilot-broker` reads at start.
pub type Config = ServiceConfig<BrokerConfig>;

impl Section for BrokerConfig {
    const NAME: &'static str = "broker";
}

/// `[broker]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrokerConfig {
    /// The mutual-TLS listener the terminators connect to.
    pub listen: SocketAddr,
    /// The broker's identity and the CA its clients' certificates chain to.
    pub tls: TlsFiles,
    /// The credential gateway.
    pub gateway: GatewayClientConfig,
    /// The connections, by name.
    pub connections: BTreeMap<ConnectionName, ConnectionConfig>,
    /// A run's budget over all its connections, frozen into its grant.
    pub budget: Budget,
    /// Seconds an upstream call may take, end to end.
    pub upstream_timeout_secs: u64,
    /// The largest request or response body relayed, in bytes.
    pub max_body_bytes: usize,
    /// The connections the retro aggregator may mint capabilities for, for
    /// its digest's summary; empty (the default): its identity may mint
    /// nothing.
    pub retro_connections: Vec<ConnectionName>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 14480)),
            tls: TlsFiles::default(),
            gateway: GatewayClientConfig::default(),
            connections: BTreeMap::new(),
            budget: Budget { requests: 500, bytes: 64 << 20, model_tokens: 2_000_000 },
            upstream_timeout_secs: 300,
            max_body_bytes: 8 << 20,
            retro_connections: Vec::new(),
        }
    }
}

impl BrokerConfig {
    /// The upstream timeout.
    pub fn upstream_timeout(&self) -> Duration {
        Duration::from_secs(self.upstream_timeout_secs)
    }
}

/// `[broker.gateway]`: how the broker reaches the credential gateway.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayClientConfig {
    /// `https://host:port` of the gateway; unset: no connection needs one
    /// (every connection then has `auth = "none"`).
    pub url: Option<Url>,
    /// The broker's client identity towards the gateway.
    pub tls: TlsFiles,
}

/// How the broker authenticates a connection's upstream calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthSource {
    /// An access token from the gateway, for the connection's `secret`.
    Gateway,
    /// No credential: an upstream on the fleet's own network (a local
    /// model server, say).
    None,
}

/// `[broker.connections.NAME]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionConfig {
    /// What it talks to.
    pub kind: ConnectionKind,
    /// The upstream base every call's path is appended to, e.g.
    /// `https://api.openai.com` (the model client adds `/v1/…` itself).
    pub base_url: Url,
    /// Where the credential comes from.
    #[serde(default = "default_auth")]
    pub auth: AuthSource,
    /// The gateway's name for the secret; the connection's own name when
    /// unset.
    #[serde(default)]
    pub secret: Option<ConnectionName>,
    /// For `http`: the request header the token goes in, e.g.
    /// `authorization` (sent as `Bearer <token>`) or `x-registry-key`.
    #[serde(default)]
    pub header: Option<String>,
    /// Methods a run may use; the kind's defaults when unset.
    #[serde(default)]
    pub methods: Option<Vec<String>>,
    /// Route patterns a run may call; the kind's defaults when unset.
    #[serde(default)]
    pub routes: Option<Vec<String>>,
    /// What one run may spend on this connection, inside `[broker.budget]`.
    #[serde(default)]
    pub budget: ConnectionBudget,
}

fn default_auth() -> AuthSource {
    AuthSource::Gateway
}

impl ConnectionConfig {
    /// The methods, upper-case.
    pub fn methods(&self) -> Vec<String> {
        match &self.methods {
            Some(m) => m.iter().map(|m| m.to_ascii_uppercase()).collect(),
            None => match self.kind {
                ConnectionKind::Openai | ConnectionKind::Anthropic => vec!["POST".into()],
                ConnectionKind::GithubRead | ConnectionKind::Http => vec!["GET".into(), "HEAD".into()],
            },
        }
    }

    /// The route patterns.
    pub fn routes(&self) -> Vec<String> {
        match &self.routes {
            Some(r) => r.clone(),
            None => match self.kind {
                // The agent's model client appends the wire's own path to
                // its base (`llm::client::route`), so a model connection's
                // base is the provider's origin, as `model.base_url` is.
                ConnectionKind::Openai => vec!["/v1/chat/completions".into()],
                ConnectionKind::Anthropic => vec!["/v1/messages".into()],
                ConnectionKind::GithubRead => vec![
                    "/repos/*/*/releases/**".into(),
                    "/repos/*/*/tags".into(),
                    "/repos/*/*/contents/**".into(),
                    "/repos/*/*/compare/*".into(),
                ],
                ConnectionKind::Http => vec!["/**".into()],
            },
        }
    }

    /// The gateway's name for the secret.
    pub fn secret_name<'a>(&'a self, name: &'a ConnectionName) -> &'a ConnectionName {
        self.secret.as_ref().unwrap_or(name)
    }

    /// The connection as a grant freezes it.
    pub fn granted(&self, name: &ConnectionName) -> GrantedConnection {
        GrantedConnection {
            name: name.clone(),
            kind: self.kind,
            methods: self.methods(),
            routes: self.routes(),
            budget: self.budget,
        }
    }
}

const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];

impl Validate for BrokerConfig {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        if !self.tls.is_set() {
            return Err(config::Error::invalid(
                key(prefix, "tls"),
                "ca, cert and key must all be set (patchpilot broker init writes them)",
            ));
        }
        if self.upstream_timeout_secs == 0 {
            return Err(config::Error::invalid(key(prefix, "upstream_timeout_secs"), "must be above 0"));
        }
        if self.max_body_bytes < 1024 {
            return Err(config::Error::invalid(key(prefix, "max_body_bytes"), "must be at least 1024"));
        }
        let needs_gateway = self.connections.values().any(|c| c.auth == AuthSource::Gateway);
        if needs_gateway {
            let gateway = key(prefix, "gateway");
            match &self.gateway.url {
                None => {
                    return Err(config::Error::invalid(
                        key(&gateway, "url"),
                        "must be set: a connection takes its credential from the gateway",
                    ));
                }
                Some(url) if url.scheme() != "https" => {
                    return Err(config::Error::invalid(key(&gateway, "url"), "must be an https URL"));
                }
                Some(_) => {}
            }
            if !self.gateway.tls.is_set() {
                return Err(config::Error::invalid(key(&gateway, "tls"), "ca, cert and key must all be set"));
            }
        }
        for (name, connection) in &self.connections {
            let at = key(&key(prefix, "connections"), name.as_str());
            connection.validate(&at)?;
        }
        if let Some(name) = self.retro_connections.iter().find(|n| !self.connections.contains_key(*n)) {
            return Err(config::Error::invalid(
                key(prefix, "retro_connections"),
                format!("{:?} is not a configured connection", name.as_str()),
            ));
        }
        Ok(())
    }
}

impl Validate for ConnectionConfig {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        let base = &self.base_url;
        if !matches!(base.scheme(), "https" | "http") || base.host_str().is_none() {
            return Err(config::Error::invalid(
                key(prefix, "base_url"),
                "must be an http(s) URL with a host",
            ));
        }
        // A base that could carry a credential or move the path is refused;
        // the URL is not repeated, as it may hold one.
        if !base.username().is_empty()
            || base.password().is_some()
            || base.query().is_some()
            || base.fragment().is_some()
        {
            return Err(config::Error::invalid(
                key(prefix, "base_url"),
                "must not hold user information, a query or a fragment",
            ));
        }
        match (self.kind, &self.header) {
            (ConnectionKind::Http, None) if self.auth == AuthSource::Gateway => {
                return Err(config::Error::invalid(
                    key(prefix, "header"),
                    "must name the header the token goes in for an http connection",
                ));
            }
            (ConnectionKind::Http, Some(h)) if http::HeaderName::from_bytes(h.as_bytes()).is_err() => {
                return Err(config::Error::invalid(key(prefix, "header"), "is not a header name"));
            }
            (kind, Some(_)) if kind != ConnectionKind::Http => {
                return Err(config::Error::invalid(
                    key(prefix, "header"),
                    "is only for http connections; the other kinds sign as their API documents",
                ));
            }
            _ => {}
        }
        for (field, limit) in [
            ("requests", self.budget.requests),
            ("bytes", self.budget.bytes),
            ("model_tokens", self.budget.model_tokens),
        ] {
            if limit == Some(0) {
                return Err(config::Error::invalid(
                    key(&key(prefix, "budget"), field),
                    "must be above 0 (leave it out to grant the connection nothing: remove it from the grants)",
                ));
            }
        }
        for method in self.methods() {
            if !METHODS.contains(&method.as_str()) {
                return Err(config::Error::invalid(
                    key(prefix, "methods"),
                    format!("{method:?} is not one of {}", METHODS.join(", ")),
                ));
            }
            if self.kind == ConnectionKind::GithubRead && !matches!(method.as_str(), "GET" | "HEAD") {
                return Err(config::Error::invalid(
                    key(prefix, "methods"),
                    "a github-read connection is read-only: GET and HEAD",
                ));
            }
        }
        for route in self.routes() {
            if let Err(why) = RoutePattern::parse(&route) {
                return Err(config::Error::invalid(key(prefix, "routes"), format!("{route:?}: {why}")));
            }
        }
        Ok(())
    }
}
