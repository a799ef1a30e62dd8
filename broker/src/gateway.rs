//! The broker's client of the credential gateway: `POST /v1/access-token`
//! over mutual TLS, answered with a short-lived token (or a static key).
//! The gateway's own errors never travel further than the broker's log.

use std::time::Duration;

use patchpilot_fleet::mtls;
use patchpilot_model::broker::{AccessToken, AccessTokenRequest, ConnectionName, GatewayError};
use url::Url;

use crate::Error;
use crate::config::GatewayClientConfig;

/// Why no token came back. Shown to operators, never to a guest.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// No gateway is configured.
    #[error("no gateway is configured")]
    NotConfigured,
    /// The gateway could not be reached or did not answer in time.
    #[error("the gateway did not answer")]
    Unreachable(#[source] reqwest::Error),
    /// The gateway refused.
    #[error("the gateway refused: {0:?}")]
    Refused(patchpilot_model::broker::GatewayRefusal),
    /// The gateway answered with something else.
    #[error("the gateway answered status {0} without a known error")]
    Unexpected(u16),
}

/// The client.
#[derive(Debug, Clone)]
pub struct GatewayClient {
    endpoint: Option<Url>,
    http: reqwest::Client,
}

impl GatewayClient {
    /// A client for `config`; without a URL every request fails with
    /// [`TokenError::NotConfigured`].
    pub fn new(config: &GatewayClientConfig) -> Result<GatewayClient, Error> {
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(3));
        let http = if config.url.is_some() {
            let tls = mtls::client_config(&config.tls).map_err(Error::Tls)?;
            builder.use_preconfigured_tls((*tls).clone())
        } else {
            builder
        }
        .build()
        .map_err(|source| Error::Client { what: "the gateway".into(), source })?;
        let endpoint = config.url.as_ref().map(|u| {
            let mut u = u.clone();
            u.set_path("/v1/access-token");
            u
        });
        Ok(GatewayClient { endpoint, http })
    }

    /// A token for the secret `secret`.
    pub async fn access_token(&self, secret: &ConnectionName) -> Result<AccessToken, TokenError> {
        let endpoint = self.endpoint.as_ref().ok_or(TokenError::NotConfigured)?;
        let response = self
            .http
            .post(endpoint.clone())
            .json(&AccessTokenRequest { connection: secret.clone() })
            .send()
            .await
            .map_err(TokenError::Unreachable)?;
        let status = response.status();
        let body = response.bytes().await.map_err(TokenError::Unreachable)?;
        if status.is_success() {
            return serde_json::from_slice(&body).map_err(|_| TokenError::Unexpected(status.as_u16()));
        }
        match serde_json::from_slice::<GatewayError>(&body) {
            Ok(e) => Err(TokenError::Refused(e.error)),
            Err(_) => Err(TokenError::Unexpected(status.as_u16())),
        }
    }
}
