//! A trusted host service's own calls through the broker: today the retro
//! aggregator's, for its digest's optional summary.
//!
//! The service never holds a provider's key either. It mints a capability
//! for a run of its own ([`identity::RETRO_RUN_PREFIX`]), calls the
//! connection with it exactly as a guest would (the broker checks, signs
//! with the gateway's short-lived token, budgets and records the call), and
//! revokes it when done. The broker lets its identity do nothing else.

use std::time::Duration;

use patchpilot_model::broker::{ConnectionName, identity};
use reqwest::header::{HeaderMap, HeaderValue};
use url::Url;

use crate::admin::AdminClient;
use crate::terminator::BrokerEndpoint;
use crate::{CALL_PREFIX, Error, RUN_HEADER};

/// A live capability of the retro aggregator's: the client to call with,
/// the capability, and the connection's URL on the broker. Its `Debug`
/// withholds the capability.
pub struct ServiceSession {
    admin: AdminClient,
    base: Url,
    run_id: String,
    capability: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for ServiceSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceSession")
            .field("base", &self.base.as_str())
            .field("run_id", &self.run_id)
            .field("capability", &"<withheld>")
            .finish()
    }
}

impl ServiceSession {
    /// Mints the capability of `run_id` (under
    /// [`identity::RETRO_RUN_PREFIX`]) for `connections`, with a client
    /// whose calls time out after `timeout`. `None` when `endpoint` has no
    /// URL.
    pub async fn open(
        endpoint: &BrokerEndpoint,
        run_id: &str,
        connections: &[ConnectionName],
        timeout: Duration,
    ) -> Result<Option<ServiceSession>, Error> {
        let (Some(admin), Some(base)) = (AdminClient::new(endpoint)?, endpoint.url.clone()) else {
            return Ok(None);
        };
        let minted = admin.mint(run_id, identity::RETRO_WORKER, connections).await?;
        // The run header the terminator would stamp for a VM: here the
        // service's own run, which its identity alone may use.
        let mut headers = HeaderMap::new();
        let run = HeaderValue::from_str(run_id).map_err(|_| Error::Admin {
            what: "mint a capability",
            detail: format!("{run_id:?} is not a header value"),
        })?;
        headers.insert(RUN_HEADER, run);
        let builder = reqwest::Client::builder().timeout(timeout).default_headers(headers);
        let http = crate::admin::client(endpoint, builder, "the broker's connections")?;
        Ok(Some(ServiceSession {
            admin,
            base,
            run_id: run_id.to_owned(),
            capability: minted.capability,
            http,
        }))
    }

    /// Where calls to `connection` go: the broker's `/v1/c/<connection>`.
    pub fn connection_url(&self, connection: &ConnectionName) -> String {
        let mut url = self.base.clone();
        url.set_path(&format!("{CALL_PREFIX}{}", connection.as_str()));
        url.to_string()
    }

    /// The client to call with: the service's identity, its run header.
    pub fn http(&self) -> reqwest::Client {
        self.http.clone()
    }

    /// The capability, to send as the connection's credential.
    pub fn capability(&self) -> &str {
        &self.capability
    }

    /// Revokes the capability; whether it was still live.
    pub async fn close(self) -> Result<bool, Error> {
        self.admin.revoke(&self.run_id).await
    }

    /// Revokes every capability the service left live (a crash between
    /// mint and revoke), at its start.
    pub async fn sweep(endpoint: &BrokerEndpoint) -> Result<Vec<String>, Error> {
        match AdminClient::new(endpoint)? {
            Some(admin) => admin.sweep(identity::RETRO_WORKER).await,
            None => Ok(Vec::new()),
        }
    }
}
