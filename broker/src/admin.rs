//! The sandbox worker's client of the broker's admin face: mint a run's
//! capability when it starts, revoke it when it ends, sweep a worker's
//! capabilities at start-up. Over the same mutual TLS as the terminator.

use std::time::Duration;

use patchpilot_fleet::mtls;
use patchpilot_model::broker::{ConnectionName, MintRequest, MintResponse, SweepRequest};
use url::Url;

use crate::Error;
use crate::terminator::BrokerEndpoint;

/// The client.
#[derive(Debug, Clone)]
pub struct AdminClient {
    base: Url,
    http: reqwest::Client,
}

/// An HTTP client for `what` that presents `endpoint`'s identity to the
/// broker and trusts only its CA: never a redirect, never a proxy.
pub(crate) fn client(
    endpoint: &BrokerEndpoint,
    builder: reqwest::ClientBuilder,
    what: &str,
) -> Result<reqwest::Client, Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tls = mtls::client_config(&endpoint.tls).map_err(Error::Tls)?;
    builder
        .use_preconfigured_tls((*tls).clone())
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .map_err(|source| Error::Client { what: what.into(), source })
}

fn transport(what: &'static str) -> impl FnOnce(reqwest::Error) -> Error {
    move |e| Error::AdminTransport { what, source: std::io::Error::other(e) }
}

impl AdminClient {
    /// A client for `endpoint`; `None` when it has no URL.
    pub fn new(endpoint: &BrokerEndpoint) -> Result<Option<AdminClient>, Error> {
        let Some(base) = &endpoint.url else { return Ok(None) };
        let builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
        let http = client(endpoint, builder, "the broker's admin face")?;
        Ok(Some(AdminClient { base: base.clone(), http }))
    }

    fn url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        url.set_path(path);
        url
    }

    async fn check(what: &'static str, response: reqwest::Response) -> Result<reqwest::Response, Error> {
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        let detail = body["error"].as_str().map_or_else(|| format!("status {status}"), str::to_owned);
        Err(Error::Admin { what, detail })
    }

    /// Mints `run_id`'s capability for `connections`.
    pub async fn mint(
        &self,
        run_id: &str,
        worker: &str,
        connections: &[ConnectionName],
    ) -> Result<MintResponse, Error> {
        const WHAT: &str = "mint a capability";
        let request = MintRequest {
            run_id: run_id.to_owned(),
            worker: worker.to_owned(),
            connections: connections.to_vec(),
        };
        let response = self
            .http
            .post(self.url("/admin/v1/capabilities"))
            .json(&request)
            .send()
            .await
            .map_err(transport(WHAT))?;
        Self::check(WHAT, response).await?.json().await.map_err(transport(WHAT))
    }

    /// Revokes `run_id`'s capability; whether it was live.
    pub async fn revoke(&self, run_id: &str) -> Result<bool, Error> {
        const WHAT: &str = "revoke a capability";
        let url = self.url(&format!("/admin/v1/capabilities/{run_id}"));
        let response = self.http.delete(url).send().await.map_err(transport(WHAT))?;
        let body: serde_json::Value =
            Self::check(WHAT, response).await?.json().await.map_err(transport(WHAT))?;
        Ok(body["revoked"].as_bool().unwrap_or(false))
    }

    /// Revokes every live capability `worker` minted; the runs.
    pub async fn sweep(&self, worker: &str) -> Result<Vec<String>, Error> {
        const WHAT: &str = "sweep capabilities";
        let request = SweepRequest { worker: worker.to_owned() };
        let response = self
            .http
            .post(self.url("/admin/v1/sweep"))
            .json(&request)
            .send()
            .await
            .map_err(transport(WHAT))?;
        let body: serde_json::Value =
            Self::check(WHAT, response).await?.json().await.map_err(transport(WHAT))?;
        Ok(body["revoked"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default())
    }
}
