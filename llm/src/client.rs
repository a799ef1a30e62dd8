//! The HTTP client: one endpoint, one wire, one credential, and the retry
//! policy both providers document (back off on 429, honouring
//! `retry-after`, and on 5xx; a body cut short is retried too, since the
//! call had no effect the loop saw).

use std::time::{Duration, Instant};

use patchpilot_model::ProviderWire;
use sha2::{Digest, Sha256};

use crate::error::ModelError;
use crate::message::{ModelRequest, ModelResponse};
use crate::{anthropic, openai};

/// The route after the base URL for `wire`.
pub fn route(wire: ProviderWire) -> &'static str {
    match wire {
        ProviderWire::OpenAi => openai::PATH,
        ProviderWire::Anthropic => anthropic::PATH,
    }
}

/// When to try a failed call again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Calls in all, the first included.
    pub attempts: u32,
    /// The first wait; it doubles with each retry.
    pub base_delay: Duration,
    /// No wait is longer, `retry-after` included.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts: 4, base_delay: Duration::from_secs(1), max_delay: Duration::from_secs(60) }
    }
}

/// Where and how to reach a model. Its `Debug` shows whether there is a
/// credential, never the credential.
#[derive(Clone)]
pub struct ClientConfig {
    /// The wire format.
    pub wire: ProviderWire,
    /// The provider's base URL, without the `/v1/...` route (a trailing
    /// `/v1` is accepted and dropped).
    pub base_url: String,
    /// The model's name.
    pub model: String,
    /// Sent as the bearer token (OpenAI) or `x-api-key` (Anthropic): in a
    /// sandbox the run's capability, never an API key.
    pub credential: Option<String>,
    /// Per-attempt timeout.
    pub timeout: Duration,
    /// Retries.
    pub retry: RetryPolicy,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("wire", &self.wire)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("credential", &self.credential.as_ref().map(|_| "<withheld>"))
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .finish()
    }
}

/// One model call as it happened, for the transcript.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The answer.
    pub response: ModelResponse,
    /// Attempts it took.
    pub attempts: u32,
    /// Why earlier attempts failed.
    pub retried: Vec<String>,
    /// Time from the first attempt to the answer, waits included.
    pub latency: Duration,
    /// sha256 of the request body, hex.
    pub request_sha256: String,
    /// Bytes of the request body.
    pub request_bytes: usize,
    /// sha256 of the answer's body, hex.
    pub response_sha256: String,
    /// Bytes of the answer's body.
    pub response_bytes: usize,
}

/// Something that answers model requests: the HTTP client, or an
/// in-process stand-in for benchmarks of the loop itself.
pub trait Model: Send + Sync {
    /// The wire and model name, for the transcript.
    fn describe(&self) -> (ProviderWire, &str);
    /// Answers one request.
    fn complete(&self, request: &ModelRequest) -> impl Future<Output = Result<Exchange, ModelError>> + Send;
}

/// A model behind an HTTP endpoint.
#[derive(Debug, Clone)]
pub struct ModelClient {
    config: ClientConfig,
    endpoint: String,
    http: reqwest::Client,
}

impl ModelClient {
    /// A client for `config`.
    pub fn new(config: ClientConfig) -> Result<ModelClient, ModelError> {
        ModelClient::build(config, None)
    }

    /// A client for `config` that sends with `http`: a caller's own
    /// transport, such as a host service's mutual TLS to the broker. It
    /// must not follow redirects.
    pub fn with_http(config: ClientConfig, http: reqwest::Client) -> Result<ModelClient, ModelError> {
        ModelClient::build(config, Some(http))
    }

    fn build(config: ClientConfig, http: Option<reqwest::Client>) -> Result<ModelClient, ModelError> {
        let base = config.base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ModelError::Config {
                field: "base_url",
                reason: format!("{base:?} is not an http(s) URL"),
            });
        }
        if config.model.trim().is_empty() {
            return Err(ModelError::Config { field: "model", reason: "is empty".into() });
        }
        if config.retry.attempts == 0 {
            return Err(ModelError::Config { field: "retry.attempts", reason: "must be at least 1".into() });
        }
        let endpoint = format!("{base}{}", route(config.wire));
        // reqwest without a bundled provider needs one installed before a
        // client is built; ring is the workspace's, and one already
        // installed (the caller's) is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = match http {
            Some(http) => http,
            None => reqwest::Client::builder()
                .timeout(config.timeout)
                // The provider, the broker, or a loopback double: never a
                // redirect elsewhere.
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|source| ModelError::Transport { url: endpoint.clone(), source })?,
        };
        Ok(ModelClient { config, endpoint, http })
    }

    /// The full URL calls go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn attempt(&self, body: &[u8]) -> Result<(ModelResponse, Vec<u8>), ModelError> {
        let transport = |source| ModelError::Transport { url: self.endpoint.clone(), source };
        let mut call = self.http.post(&self.endpoint).header("content-type", "application/json");
        call = match self.config.wire {
            ProviderWire::OpenAi => match &self.config.credential {
                Some(c) => call.bearer_auth(c),
                None => call,
            },
            ProviderWire::Anthropic => {
                let call = call.header("anthropic-version", anthropic::VERSION);
                match &self.config.credential {
                    Some(c) => call.header("x-api-key", c),
                    None => call,
                }
            }
        };
        let answer = call.body(body.to_vec()).send().await.map_err(transport)?;
        let status = answer.status().as_u16();
        let retry_after =
            answer.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let bytes = match answer.bytes().await {
            Ok(b) => b.to_vec(),
            // A body cut short: read as what arrived, so the parser says so.
            Err(e) if (200..300).contains(&status) => {
                return Err(ModelError::Truncated { bytes: 0, detail: patchpilot_model::error_chain(&e) });
            }
            Err(e) => return Err(transport(e)),
        };
        if !(200..300).contains(&status) {
            return Err(match self.config.wire {
                ProviderWire::OpenAi => openai::parse_error(status, retry_after.as_deref(), &bytes),
                ProviderWire::Anthropic => anthropic::parse_error(status, retry_after.as_deref(), &bytes),
            });
        }
        let response = match self.config.wire {
            ProviderWire::OpenAi => openai::parse_response(&bytes)?,
            ProviderWire::Anthropic => anthropic::parse_response(&bytes)?,
        };
        Ok((response, bytes))
    }
}

impl Model for ModelClient {
    fn describe(&self) -> (ProviderWire, &str) {
        (self.config.wire, &self.config.model)
    }

    async fn complete(&self, request: &ModelRequest) -> Result<Exchange, ModelError> {
        let body = match self.config.wire {
            ProviderWire::OpenAi => openai::request_body(request, &self.config.model),
            ProviderWire::Anthropic => anthropic::request_body(request, &self.config.model),
        };
        let body = body.to_string().into_bytes();
        let request_sha256 = sha256_hex(&body);
        let started = Instant::now();
        let mut retried = Vec::new();
        let mut attempt = 1;
        loop {
            match self.attempt(&body).await {
                Ok((response, bytes)) => {
                    return Ok(Exchange {
                        response,
                        attempts: attempt,
                        retried,
                        latency: started.elapsed(),
                        request_sha256,
                        request_bytes: body.len(),
                        response_sha256: sha256_hex(&bytes),
                        response_bytes: bytes.len(),
                    });
                }
                Err(e)
                    if e.kind() == patchpilot_model::ErrorKind::Transient
                        && attempt < self.config.retry.attempts =>
                {
                    let backoff = self.config.retry.base_delay.saturating_mul(1 << (attempt - 1).min(16));
                    let wait = e.retry_after().unwrap_or(backoff).min(self.config.retry.max_delay);
                    tracing::info!(error = %e, attempt, wait_ms = wait.as_millis() as u64, "model call failed; retrying");
                    retried.push(patchpilot_model::error_chain(&e));
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The start of a body that is not the documented error shape, for a
/// message.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let t: String = text.chars().take(200).collect();
    if t.is_empty() { "(empty body)".into() } else { t }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_prints_without_its_credential() {
        let config = ClientConfig {
            wire: ProviderWire::Anthropic,
            base_url: "https://api.anthropic.com".into(),
            model: "m".into(),
            credential: Some("sk-ant-secret".into()),
            timeout: Duration::from_secs(1),
            retry: RetryPolicy::default(),
        };
        let client = ModelClient::new(config.clone()).expect("client");
        for printed in [format!("{config:?}"), format!("{client:?}")] {
            assert!(!printed.contains("sk-ant-secret") && printed.contains("<withheld>"), "{printed}");
        }
    }
}
