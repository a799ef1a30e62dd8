//! The `patchpilot-gateway` service as the fleet's skeleton runs it.

use std::net::SocketAddr;
use std::path::Path;

use patchpilot_fleet::config::ServiceConfig;
use patchpilot_fleet::mtls;
use patchpilot_fleet::service::{FleetContext, ServiceSpec};

use crate::seal::{KeyError, SealingKey};
use crate::{Config, Gateway};

/// The gateway as the service skeleton runs it.
pub const SERVICE: ServiceSpec = ServiceSpec {
    name: "patchpilot-gateway",
    about: "PatchPilot credential gateway: holds the long-lived secrets and gives the broker short-lived access tokens.",
    uses_database: true,
};

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key file was refused.
    #[error("the sealing key")]
    Key(#[source] KeyError),
    /// The TLS identity could not be loaded.
    #[error("the gateway's TLS identity")]
    Tls(#[source] mtls::Error),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The upstream HTTP client could not be built.
    #[error("cannot build the upstream HTTP client")]
    Http(#[source] reqwest::Error),
}

/// Loads the key named by `key_file`.
pub fn load_key(path: &Path) -> Result<SealingKey, Error> {
    SealingKey::from_file(path).map_err(Error::Key)
}

/// Runs the gateway until the fleet's shutdown fires.
pub async fn run(config: ServiceConfig<Config>, fleet: FleetContext) -> Result<(), Error> {
    let section = config.service;
    let key = load_key(&section.key_file)?;
    let tls = mtls::server_config(&section.tls).map_err(Error::Tls)?;
    let gateway = Gateway::new(fleet.pool().clone(), key, section.options()).map_err(Error::Http)?;
    let listener = tokio::net::TcpListener::bind(section.listen)
        .await
        .map_err(|source| Error::Bind { addr: section.listen, source })?;
    // The bound address: `listen` may ask for port 0.
    let addr = listener.local_addr().map_err(|source| Error::Bind { addr: section.listen, source })?;
    tracing::info!(addr = %addr, "patchpilot-gateway serving");
    crate::server::serve(listener, tls, gateway, fleet.shutdown().clone()).await;
    Ok(())
}
