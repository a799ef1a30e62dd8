//! The capability broker's contracts: connection names and kinds, the
//! per-run grant the broker freezes at mint time, the fixed errors a guest
//! may see, and the broker ↔ credential-gateway exchange.
//!
//! Three zones, each with its own answer to "what could this leak?":
//!
//! - the guest holds a per-run capability (a random 256-bit token) and one
//!   address; it names a *connection*, never a destination;
//! - the broker (`patchpilot-broker`) checks each call against the grant,
//!   gets a short-lived access token from the gateway, signs the upstream
//!   request and returns only the response;
//! - the gateway (`patchpilot-gateway`) holds the long-lived secrets and
//!   answers only the broker's client certificate.
//!
//! The types here are what crosses those boundaries; the logic lives in the
//! two crates.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The DNS names in the certificates of the trusted zones' mutual TLS: a
/// server checks its client's role by name, not only its CA.
pub mod identity {
    /// The sandbox worker's terminator, the broker's only guest-facing
    /// client.
    pub const TERMINATOR: &str = "patchpilot-terminator";
    /// The broker: the terminator's server and the gateway's only client.
    pub const BROKER: &str = "patchpilot-broker";
    /// The credential gateway.
    pub const GATEWAY: &str = "patchpilot-gateway";
    /// The retro aggregator, the broker's one service client: it may mint
    /// capabilities for itself alone (run ids under [`RETRO_RUN_PREFIX`],
    /// worker [`RETRO_WORKER`]), for the connections `broker.retro_connections`
    /// lists, to write its digest's optional summary.
    pub const RETRO: &str = "patchpilot-retro";
    /// The run-id prefix of the retro aggregator's own capabilities: it
    /// can never mint, revoke or replace a sandbox run's.
    pub const RETRO_RUN_PREFIX: &str = "retro-";
    /// The worker name the retro aggregator mints under and sweeps.
    pub const RETRO_WORKER: &str = "patchpilot-retro";
}

/// The name of a configured connection (`model`, `github`, `registry`):
/// 1–64 characters of `[a-z0-9_-]`, starting with a letter. The name is all
/// the guest ever says about where a call goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ConnectionName(String);

/// A connection name that is not `[a-z][a-z0-9_-]{0,63}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a connection name (1-64 characters of a-z, 0-9, '-' and '_', starting with a letter)")]
pub struct InvalidConnectionName(pub String);

impl ConnectionName {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ConnectionName {
    type Err = InvalidConnectionName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut chars = s.chars();
        let valid = s.len() <= 64
            && chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if valid { Ok(ConnectionName(s.to_owned())) } else { Err(InvalidConnectionName(s.to_owned())) }
    }
}

impl TryFrom<String> for ConnectionName {
    type Error = InvalidConnectionName;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ConnectionName> for String {
    fn from(n: ConnectionName) -> String {
        n.0
    }
}

impl fmt::Display for ConnectionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

crate::named_enum! {
    /// What a connection talks to, which decides how the broker signs the
    /// upstream request and which routes it denies whatever the grant says.
    pub enum ConnectionKind("connection kind") {
        /// An OpenAI-compatible model API (`Authorization: Bearer`).
        Openai = "openai",
        /// Anthropic's Messages API (`x-api-key`).
        Anthropic = "anthropic",
        /// GitHub's REST API with a read-only App installation token.
        GithubRead = "github-read",
        /// Any HTTP API with header auth (a private registry, say).
        Http = "http",
    }
}

/// One connection as a run's grant holds it: what the run may call on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantedConnection {
    /// The connection.
    pub name: ConnectionName,
    /// Its kind, frozen with the grant.
    pub kind: ConnectionKind,
    /// Upper-case HTTP methods the run may use.
    pub methods: Vec<String>,
    /// Route patterns the path must match: `/` separated segments where
    /// `*` matches exactly one segment and a final `**` any rest.
    pub routes: Vec<String>,
    /// What the run may spend on this connection alone, within the run's
    /// budget: so a chatty connection (release notes, say) cannot spend
    /// the model's share. Absent in grants minted before it existed.
    #[serde(default, skip_serializing_if = "ConnectionBudget::is_unlimited")]
    pub budget: ConnectionBudget,
}

/// A connection's own limits inside a run's [`Budget`]; an unset limit
/// leaves only the run's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionBudget {
    /// Calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Request plus response body bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Model tokens (input plus output) as the upstream reported them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_tokens: Option<u64>,
}

impl ConnectionBudget {
    /// Whether it sets no limit of its own.
    pub fn is_unlimited(&self) -> bool {
        *self == ConnectionBudget::default()
    }
}

/// What a run may spend through the broker, over all its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// Calls.
    pub requests: u64,
    /// Request plus response body bytes.
    pub bytes: u64,
    /// Model tokens (input plus output) as the upstream reported them.
    pub model_tokens: u64,
}

/// A run's grant, frozen when its capability is minted: later config
/// changes never widen it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The connections, by name.
    pub connections: Vec<GrantedConnection>,
    /// The run's budget.
    pub budget: Budget,
}

impl Grant {
    /// The granted connection called `name`.
    pub fn connection(&self, name: &str) -> Option<&GrantedConnection> {
        self.connections.iter().find(|c| c.name.as_str() == name)
    }
}

crate::named_enum! {
    /// The only errors a guest ever sees from the broker. Each has one
    /// fixed message: no upstream body, no library text.
    pub enum BrokerRefusal("broker refusal") {
        /// No live capability matches the token for this run.
        CapabilityInvalid = "capability_invalid",
        /// The run's grant does not hold the connection.
        ConnectionNotGranted = "connection_not_granted",
        /// The method or path is not allowed (or mints credentials).
        RouteDenied = "route_denied",
        /// The run's budget is spent.
        BudgetExhausted = "budget_exhausted",
        /// The upstream (or the gateway) failed; only the status class is
        /// told.
        UpstreamFailed = "upstream_failed",
    }
}

impl BrokerRefusal {
    /// The HTTP status the guest gets.
    pub fn status(self) -> u16 {
        match self {
            BrokerRefusal::CapabilityInvalid => 401,
            BrokerRefusal::ConnectionNotGranted | BrokerRefusal::RouteDenied => 403,
            BrokerRefusal::BudgetExhausted => 429,
            BrokerRefusal::UpstreamFailed => 502,
        }
    }

    /// The fixed message.
    pub fn message(self) -> &'static str {
        match self {
            BrokerRefusal::CapabilityInvalid => "capability invalid",
            BrokerRefusal::ConnectionNotGranted => "connection not granted",
            BrokerRefusal::RouteDenied => "route denied",
            BrokerRefusal::BudgetExhausted => "budget exhausted",
            BrokerRefusal::UpstreamFailed => "upstream failed",
        }
    }
}

/// A sandbox worker's request to the broker when a run starts:
/// `POST /admin/v1/capabilities`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MintRequest {
    /// The run.
    pub run_id: String,
    /// The worker (its start-up sweep revokes what it minted).
    pub worker: String,
    /// The connections the run may use; the broker freezes each one's
    /// methods and routes from its own config.
    pub connections: Vec<ConnectionName>,
}

/// The broker's answer: the capability, once, and the grant it froze.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MintResponse {
    /// The token the run presents; stored only as its digest.
    pub capability: String,
    /// What the run may do.
    pub grant: Grant,
}

impl fmt::Debug for MintResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MintResponse").field("capability", &"<withheld>").field("grant", &self.grant).finish()
    }
}

/// A sweep request: `POST /admin/v1/sweep`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepRequest {
    /// The worker whose live capabilities are revoked.
    pub worker: String,
}

/// The broker's request to the gateway: `POST /v1/access-token`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessTokenRequest {
    /// The connection whose secret the gateway turns into a token.
    pub connection: ConnectionName,
}

/// The gateway's answer: a token the broker may attach for a while. A
/// refresh token or an App key never appears here.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessToken {
    /// The token (or, for a static key, the key).
    pub access_token: String,
    /// When the broker must ask again; none for a static key.
    pub expires_at: Option<DateTime<Utc>>,
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessToken")
            .field("access_token", &"<withheld>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

crate::named_enum! {
    /// Why the gateway gave no token (its error body's `error`).
    pub enum GatewayRefusal("gateway refusal") {
        /// No secret is stored for the connection.
        UnknownConnection = "unknown_connection",
        /// Refreshing or minting the token upstream failed.
        RefreshFailed = "refresh_failed",
        /// The request was malformed.
        BadRequest = "bad_request",
    }
}

/// The gateway's error body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayError {
    /// What went wrong.
    pub error: GatewayRefusal,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_names_are_narrow() {
        for good in ["model", "github-read", "reg_1"] {
            assert!(good.parse::<ConnectionName>().is_ok(), "{good}");
        }
        for bad in ["", "Model", "1model", "a/b", "a.b", "../x", &"a".repeat(65)] {
            assert!(bad.parse::<ConnectionName>().is_err(), "{bad}");
        }
    }

    #[test]
    fn an_access_token_is_withheld_from_debug() {
        let t = AccessToken { access_token: "sk-secret".into(), expires_at: None };
        assert!(!format!("{t:?}").contains("sk-secret"));
    }
}
