//! PatchPilot's capability broker: the agent in a VM gets a capability,
//! never a credential.
//!
//! # The path of a call
//!
//! ```text
//! guest (untrusted)          host, sandbox worker         broker (trusted)        gateway
//! PATCHPILOT_BROKER_URL ─vsock─▶ terminator ──mTLS──▶ check capability+grant ──mTLS──▶ long-lived
//!  + capability token          stamps the run id     sign with a short-lived    secrets
//!                              from the VM's socket  token, call the upstream
//! ```
//!
//! - The guest names a **connection** and gives a path and a query; the
//!   broker builds the URL from the connection's configured base. Agent
//!   input never reaches client configuration.
//! - The **terminator** ([`terminator`]) listens on one vsock port per VM
//!   on the host. It stamps the run's identity from the VM the socket
//!   belongs to, never from anything the guest says, and forwards over
//!   mutual TLS. The TLS identity lives on the host: a guest that finds the
//!   broker's port cannot complete the handshake.
//! - A **capability** is a random 256-bit token minted when the run starts,
//!   stored hashed with a grant frozen at that moment ([`store`]). It is
//!   revoked when the run ends and by the worker's start-up sweep.
//! - **Routes that mint credentials** are denied whatever the grant says,
//!   and a response carrying a token-shaped string is withheld ([`route`],
//!   [`relay`]).
//! - The guest sees only **fixed errors**
//!   ([`patchpilot_model::broker::BrokerRefusal`]).
//! - Every call is **recorded** in Postgres (`broker_calls`) and as a
//!   tracing span.
//!
//! # Layout
//!
//! - [`config`]: the `[broker]` section.
//! - [`route`]: request targets, route patterns, denied routes.
//! - [`store`]: capabilities and call records.
//! - [`gateway`]: the client of the credential gateway.
//! - [`relay`]: one guest call, checked, signed, relayed and recorded.
//! - [`server`]: the mutual-TLS listener and its two faces (the guest's
//!   calls through a terminator, the worker's mint and revoke).
//! - [`terminator`]: the host end of a VM's broker port.
//! - [`admin`]: the sandbox worker's client for minting and revoking.
//! - [`service`]: the retro aggregator's own calls, under a capability of
//!   its own.
//!
//! # Must never
//!
//! - hand a guest anything but the upstream's response or a fixed error;
//! - let a guest-supplied header, host or URL choose where a call goes or
//!   which credential signs it;
//! - widen a running run's grant.

pub mod admin;
pub mod config;
pub mod gateway;
pub mod metrics;
pub mod relay;
pub mod route;
pub mod server;
pub mod service;
pub mod store;
pub mod terminator;

pub use patchpilot_model::ErrorKind;

/// The header the terminator stamps the run's identity in. Any copy the
/// guest sends is dropped by the terminator first.
pub const RUN_HEADER: &str = "x-patchpilot-run";
/// A header the guest may carry its capability in (it may also use the
/// model wires' own: `authorization: Bearer` or `x-api-key`).
pub const CAPABILITY_HEADER: &str = "x-patchpilot-capability";
/// The header a refusal names itself in, beside the fixed JSON body.
pub const REFUSAL_HEADER: &str = "x-patchpilot-refusal";
/// The path prefix of guest calls: `/v1/c/<connection>/<path>`.
pub const CALL_PREFIX: &str = "/v1/c/";

/// The service's name.
pub const SERVICE: patchpilot_fleet::service::ServiceSpec = patchpilot_fleet::service::ServiceSpec {
    name: "patchpilot-broker",
    about: "The capability broker: checks each guest call against its run's frozen grant and signs it upstream",
    uses_database: true,
};

/// What went wrong in the broker itself (never shown to a guest).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Postgres statement failed.
    #[error("cannot {what}")]
    Database {
        /// What was being done.
        what: &'static str,
        /// Why.
        #[source]
        source: sqlx::Error,
    },
    /// The system's random source failed.
    #[error("the system random source failed")]
    Random,
    /// A grant could not be encoded.
    #[error("cannot encode a grant")]
    Encode(#[source] serde_json::Error),
    /// A stored grant could not be decoded.
    #[error("a stored grant does not decode")]
    Decode(#[source] serde_json::Error),
    /// TLS could not be set up.
    #[error("cannot set up TLS")]
    Tls(#[source] patchpilot_fleet::mtls::Error),
    /// An HTTP client could not be built.
    #[error("cannot build the HTTP client for {what}")]
    Client {
        /// For what.
        what: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// The listener could not be bound.
    #[error("cannot listen on {addr}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A mint or revoke request was refused or failed.
    #[error("the broker refused to {what}: {detail}")]
    Admin {
        /// What was asked.
        what: &'static str,
        /// The broker's answer.
        detail: String,
    },
    /// The broker could not be reached for a mint or revoke.
    #[error("cannot reach the broker to {what}")]
    AdminTransport {
        /// What was asked.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Whether trying again may help.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Database { .. } | Error::Random | Error::AdminTransport { .. } => ErrorKind::Transient,
            Error::Encode(_)
            | Error::Decode(_)
            | Error::Tls(_)
            | Error::Client { .. }
            | Error::Listen { .. }
            | Error::Admin { .. } => ErrorKind::Permanent,
        }
    }
}

/// Runs the broker service until shutdown (the binary's body).
pub async fn run(
    config: config::Config,
    fleet: patchpilot_fleet::service::FleetContext,
) -> Result<(), Error> {
    let metrics = fleet.metrics().register(metrics::BrokerMetrics::register);
    let broker = server::Broker::new(config.service, store::Store::new(fleet.pool().clone()), metrics)?;
    let listener = tokio::net::TcpListener::bind(broker.config().listen)
        .await
        .map_err(|source| Error::Listen { addr: broker.config().listen, source })?;
    let addr =
        listener.local_addr().map_err(|source| Error::Listen { addr: broker.config().listen, source })?;
    tracing::info!(addr = %addr, "broker listening");
    broker.serve(listener, fleet.shutdown().clone()).await;
    Ok(())
}
