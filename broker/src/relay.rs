//! One guest call: checked against the run's frozen grant, signed with a
//! short-lived token, relayed to the connection's configured base, and
//! recorded, whatever the outcome.
//!
//! The order is fixed and every step before the upstream call can only
//! refuse: capability (and budget) → connection in the grant → target
//! shape → credential-minting routes → the grant's methods and routes →
//! one request reserved against the budget. The guest then gets the
//! upstream's response (only allowed headers, body withheld if it carries a
//! credential) or one fixed error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use patchpilot_model::broker::{AccessToken, BrokerRefusal, ConnectionKind, ConnectionName};
use sha2::{Digest as _, Sha256};

use crate::config::{AuthSource, BrokerConfig, ConnectionConfig};
use crate::gateway::GatewayClient;
use crate::metrics::BrokerMetrics;
use crate::route::{self, RequestTarget};
use crate::store::{CallRecord, CapabilityToken, Denied, Reservation, Store};
use crate::{CAPABILITY_HEADER, Error, REFUSAL_HEADER};

/// A call as the terminator delivered it.
#[derive(Debug)]
pub struct GuestCall {
    /// The run, as the terminator stamped it.
    pub run_id: String,
    /// The method.
    pub method: Method,
    /// The connection the guest named.
    pub connection: String,
    /// What follows the connection in the path, with its leading `/`.
    pub path: String,
    /// The raw query.
    pub query: Option<String>,
    /// The guest's headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// Authenticated clients and tokens, per run: dropped when the run's
/// capability is revoked or found dead.
#[derive(Debug)]
struct RunClients {
    http: reqwest::Client,
    tokens: tokio::sync::Mutex<HashMap<ConnectionName, AccessToken>>,
}

/// The relay: config, store, gateway and the per-run caches.
#[derive(Debug)]
pub struct Relay {
    config: BrokerConfig,
    store: Store,
    metrics: BrokerMetrics,
    gateway: GatewayClient,
    runs: Mutex<HashMap<String, Arc<RunClients>>>,
}

/// The response the guest gets.
pub type GuestResponse = http::Response<Bytes>;

/// A fixed error: status, `x-patchpilot-refusal`, and a JSON body with the
/// refusal's type and message (and the status class for upstream
/// failures). Nothing else.
pub fn refusal_response(refusal: BrokerRefusal, status_class: Option<&str>) -> GuestResponse {
    let mut error = serde_json::json!({ "type": refusal.as_str(), "message": refusal.message() });
    if let Some(class) = status_class {
        error["status_class"] = serde_json::Value::from(class);
    }
    let body = serde_json::to_vec(&serde_json::json!({ "error": error })).unwrap_or_default();
    let mut response = http::Response::new(Bytes::from(body));
    *response.status_mut() = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(REFUSAL_HEADER, HeaderValue::from_static(refusal.as_str()));
    response
}

/// Request headers never relayed: hop-by-hop, routing, credentials, and
/// what the broker sets itself.
const DROPPED_REQUEST_HEADERS: &[&str] = &[
    "host",
    "authorization",
    "proxy-authorization",
    "cookie",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "accept-encoding",
    "forwarded",
    "via",
    "x-api-key",
    "x-real-ip",
    "expect",
];

/// Response headers relayed to the guest; everything else is dropped.
const RELAYED_RESPONSE_HEADERS: &[&str] = &["content-type", "retry-after", "etag", "last-modified", "link"];

fn relayed_request_headers(guest: &HeaderMap) -> HeaderMap {
    // Headers the guest's Connection header names are hop-by-hop too.
    let named: Vec<String> = guest
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::new();
    for (name, value) in guest {
        let n = name.as_str();
        let dropped = DROPPED_REQUEST_HEADERS.contains(&n)
            || n.starts_with("proxy-")
            || n.starts_with("x-forwarded-")
            || n.starts_with("x-patchpilot-")
            || named.iter().any(|c| c == n);
        if !dropped {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

fn relayed_response_headers(upstream: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in upstream {
        let n = name.as_str();
        if RELAYED_RESPONSE_HEADERS.contains(&n)
            || n.starts_with("x-ratelimit-")
            || n.starts_with("anthropic-ratelimit-")
        {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// The capability the guest presented, in any of the headers it may use.
fn presented_capability(headers: &HeaderMap) -> Option<CapabilityToken> {
    let candidates = [
        headers.get(CAPABILITY_HEADER).and_then(|v| v.to_str().ok()),
        headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ")),
        headers.get("x-api-key").and_then(|v| v.to_str().ok()),
    ];
    candidates.into_iter().flatten().find_map(|v| CapabilityToken::from_received(v.trim()))
}

/// What a model upstream reported of one call: the tokens in its JSON
/// `usage` (OpenAI's `prompt_tokens`/`completion_tokens`; Anthropic's
/// `input_tokens`/`output_tokens`, with its cache counts as input) and the
/// model that answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ModelUsage {
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    response_model: Option<String>,
}

impl ModelUsage {
    fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// The usage of a model call; `None` for other connections and for a body
/// that is not JSON.
fn model_usage(kind: ConnectionKind, body: &[u8]) -> Option<ModelUsage> {
    if !matches!(kind, ConnectionKind::Openai | ConnectionKind::Anthropic) {
        return None;
    }
    let value = serde_json::from_slice::<serde_json::Value>(body).ok()?;
    let usage = &value["usage"];
    let n = |k: &str| usage[k].as_u64().unwrap_or(0);
    let (input_tokens, output_tokens) = match kind {
        ConnectionKind::Openai => (n("prompt_tokens"), n("completion_tokens")),
        _ => (
            n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens"),
            n("output_tokens"),
        ),
    };
    let response_model = value["model"].as_str().map(str::to_owned);
    Some(ModelUsage { input_tokens, output_tokens, response_model })
}

/// A model name as a span attribute: the guest and the upstream choose it,
/// so it is the fleet's model label (control characters out, at most 128
/// characters), as retrospectives store it.
fn span_label(text: &str) -> String {
    patchpilot_model::retrospective::model_label(text).unwrap_or_default()
}

/// The OpenTelemetry GenAI provider name of a model connection's kind.
fn gen_ai_provider(kind: ConnectionKind) -> Option<&'static str> {
    match kind {
        ConnectionKind::Openai => Some("openai"),
        ConnectionKind::Anthropic => Some("anthropic"),
        _ => None,
    }
}

/// Whether `body` or `headers` carry a credential: a token-shaped string,
/// or the very token this call was signed with.
fn carries_credential(body: &[u8], headers: &HeaderMap, signed_with: Option<&str>) -> Option<&'static str> {
    let text = String::from_utf8_lossy(body);
    if let Some(token) = signed_with.filter(|t| t.len() >= 8)
        && (text.contains(token)
            || headers.values().any(|v| v.as_bytes().windows(token.len()).any(|w| w == token.as_bytes())))
    {
        return Some("the connection's own token");
    }
    patchpilot_model::credential::credential_in(&text).or_else(|| {
        headers.values().filter_map(|v| v.to_str().ok()).find_map(patchpilot_model::credential::credential_in)
    })
}

fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// The record being built for one call.
struct Pending {
    record: CallRecord,
    started: Instant,
    charged: bool,
}

impl Pending {
    fn refuse(
        mut self,
        refusal: BrokerRefusal,
        reason: impl Into<String>,
        class: Option<&str>,
    ) -> (GuestResponse, Self) {
        self.record.refusal = Some(refusal);
        self.record.reason = Some(reason.into());
        self.record.status = refusal.status();
        (refusal_response(refusal, class), self)
    }
}

impl Relay {
    /// A relay over `config`, counting its calls in `metrics`.
    pub fn new(config: BrokerConfig, store: Store, metrics: BrokerMetrics) -> Result<Relay, Error> {
        let gateway = GatewayClient::new(&config.gateway)?;
        Ok(Relay { config, store, metrics, gateway, runs: Mutex::new(HashMap::new()) })
    }

    /// The configuration.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Drops the run's authenticated clients and tokens.
    pub fn forget(&self, run_id: &str) {
        self.runs.lock().unwrap_or_else(|e| e.into_inner()).remove(run_id);
    }

    fn clients(&self, run_id: &str) -> Result<Arc<RunClients>, Error> {
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = runs.get(run_id) {
            return Ok(c.clone());
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(self.config.upstream_timeout())
            .build()
            .map_err(|source| Error::Client { what: format!("run {run_id}"), source })?;
        let clients = Arc::new(RunClients { http, tokens: tokio::sync::Mutex::new(HashMap::new()) });
        runs.insert(run_id.to_owned(), clients.clone());
        Ok(clients)
    }

    /// Serves one call and records it. Never fails: the guest gets a fixed
    /// error for anything that goes wrong, and the reason goes to the log
    /// and the record.
    pub async fn call(&self, call: GuestCall) -> GuestResponse {
        let started = Instant::now();
        let record = CallRecord {
            run_id: call.run_id.clone(),
            connection: call.connection.clone(),
            method: call.method.as_str().to_owned(),
            route: None,
            status: 0,
            refusal: None,
            reason: None,
            upstream_status: None,
            request_sha256: hex::encode(Sha256::digest(&call.body)),
            response_sha256: None,
            request_bytes: call.body.len() as u64,
            response_bytes: 0,
            latency_us: 0,
            model_tokens: 0,
            at: None,
        };
        let span = tracing::info_span!(
            "broker.call",
            run_id = %call.run_id,
            connection = %call.connection,
            method = %call.method,
            route = tracing::field::Empty,
            status = tracing::field::Empty,
            refusal = tracing::field::Empty,
            upstream_status = tracing::field::Empty,
            request_bytes = call.body.len(),
            response_bytes = tracing::field::Empty,
            model_tokens = tracing::field::Empty,
            latency_us = tracing::field::Empty,
            // OpenTelemetry's GenAI semantic conventions, on model calls.
            gen_ai.operation.name = tracing::field::Empty,
            gen_ai.provider.name = tracing::field::Empty,
            gen_ai.request.model = tracing::field::Empty,
            gen_ai.response.model = tracing::field::Empty,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
        );
        let _enter = span.enter();
        let (response, mut pending) = self.serve(call, Pending { record, started, charged: false }).await;
        pending.record.status = response.status().as_u16();
        pending.record.latency_us = u64::try_from(pending.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let r = &pending.record;
        span.record("status", r.status);
        span.record("latency_us", r.latency_us);
        span.record("response_bytes", r.response_bytes);
        span.record("model_tokens", r.model_tokens);
        if let Some(route) = &r.route {
            span.record("route", route.as_str());
        }
        if let Some(refusal) = r.refusal {
            span.record("refusal", refusal.as_str());
        }
        if let Some(s) = r.upstream_status {
            span.record("upstream_status", s);
        }
        self.metrics.call(
            &r.connection,
            r.refusal.map_or("relayed", |refusal| refusal.as_str()),
            pending.started.elapsed(),
        );
        match r.refusal {
            Some(refusal) => tracing::info!(reason = r.reason.as_deref().unwrap_or(""), "refused: {refusal}"),
            None => tracing::info!("relayed"),
        }
        if let Err(e) = self.store.record(&pending.record, pending.charged).await {
            tracing::error!(error = %patchpilot_fleet::error_chain(&e), "the call was not recorded");
        }
        response
    }

    async fn serve(&self, call: GuestCall, mut pending: Pending) -> (GuestResponse, Pending) {
        let Some(token) = presented_capability(&call.headers) else {
            return pending.refuse(BrokerRefusal::CapabilityInvalid, "no capability presented", None);
        };
        let live = match self.store.authorize(&call.run_id, &token).await {
            Ok(Ok(live)) => live,
            Ok(Err(denied)) => {
                if denied == Denied::Invalid {
                    self.forget(&call.run_id);
                }
                return pending.refuse(denied.into(), "capability lookup", None);
            }
            Err(e) => {
                return pending.refuse(
                    BrokerRefusal::UpstreamFailed,
                    patchpilot_fleet::error_chain(&e),
                    None,
                );
            }
        };
        let Some(granted) = live.grant.connection(&call.connection) else {
            return pending.refuse(BrokerRefusal::ConnectionNotGranted, "not in the run's grant", None);
        };
        // The connection must still exist, with the kind the grant froze;
        // a removed connection narrows the run, which is allowed.
        let Some((name, connection)) = self
            .config
            .connections
            .iter()
            .find(|(n, c)| n.as_str() == call.connection && c.kind == granted.kind)
        else {
            return pending.refuse(BrokerRefusal::ConnectionNotGranted, "no longer configured", None);
        };
        let target = match RequestTarget::parse(&call.path, call.query.as_deref()) {
            Ok(t) => t,
            Err(e) => return pending.refuse(BrokerRefusal::RouteDenied, e.to_string(), None),
        };
        if let Some(provider) = gen_ai_provider(connection.kind) {
            let span = tracing::Span::current();
            span.record("gen_ai.operation.name", "chat");
            span.record("gen_ai.provider.name", provider);
            // The model the agent asked for; the body is the agent's, so this
            // is a label for the span and nothing more.
            if let Ok(request) = serde_json::from_slice::<serde_json::Value>(&call.body)
                && let Some(model) = request["model"].as_str()
            {
                span.record("gen_ai.request.model", span_label(model).as_str());
            }
        }
        if route::minting_route(connection.kind, connection.base_url.path(), &target) {
            return pending.refuse(BrokerRefusal::RouteDenied, "a credential-minting route", None);
        }
        let Some(route) = route::granted_route(granted, call.method.as_str(), &target) else {
            return pending.refuse(BrokerRefusal::RouteDenied, "no granted method and route", None);
        };
        pending.record.route = Some(route.to_owned());
        match self.store.reserve(&call.run_id, &token, granted).await {
            Ok(Reservation::Reserved) => pending.charged = true,
            Ok(Reservation::RunSpent(what)) => {
                return pending.refuse(
                    BrokerRefusal::BudgetExhausted,
                    format!("the run's {what} budget is spent (by a concurrent call)"),
                    None,
                );
            }
            Ok(Reservation::ConnectionSpent(what)) => {
                return pending.refuse(
                    BrokerRefusal::BudgetExhausted,
                    format!("the connection's own {what} budget is spent"),
                    None,
                );
            }
            Ok(Reservation::Revoked) => {
                self.forget(&call.run_id);
                return pending.refuse(BrokerRefusal::CapabilityInvalid, "revoked during the call", None);
            }
            Err(e) => {
                return pending.refuse(
                    BrokerRefusal::UpstreamFailed,
                    patchpilot_fleet::error_chain(&e),
                    None,
                );
            }
        }
        self.upstream(name, connection, &target, call, pending).await
    }

    async fn upstream(
        &self,
        name: &ConnectionName,
        connection: &ConnectionConfig,
        target: &RequestTarget,
        call: GuestCall,
        pending: Pending,
    ) -> (GuestResponse, Pending) {
        let Some(url) = upstream_url(connection, target) else {
            return pending.refuse(BrokerRefusal::RouteDenied, "the URL left the connection's base", None);
        };
        let clients = match self.clients(&call.run_id) {
            Ok(c) => c,
            Err(e) => {
                return pending.refuse(
                    BrokerRefusal::UpstreamFailed,
                    patchpilot_fleet::error_chain(&e),
                    None,
                );
            }
        };
        let token = match connection.auth {
            AuthSource::None => None,
            AuthSource::Gateway => match self.token(&clients, name, connection).await {
                Ok(t) => Some(t),
                Err(e) => {
                    return pending.refuse(
                        BrokerRefusal::UpstreamFailed,
                        format!("gateway: {}", patchpilot_fleet::error_chain(&e)),
                        None,
                    );
                }
            },
        };
        let mut headers = relayed_request_headers(&call.headers);
        if let Some(token) = &token {
            match sign(connection, token) {
                Some((header, value)) => {
                    headers.insert(header, value);
                }
                None => {
                    return pending.refuse(
                        BrokerRefusal::UpstreamFailed,
                        "the token is not a header value",
                        None,
                    );
                }
            }
        }
        if connection.kind == ConnectionKind::GithubRead {
            headers
                .entry(http::header::ACCEPT)
                .or_insert(HeaderValue::from_static("application/vnd.github+json"));
        }
        headers.entry(http::header::USER_AGENT).or_insert(HeaderValue::from_static("patchpilot-broker"));
        let sent =
            clients.http.request(call.method.clone(), url).headers(headers).body(call.body).send().await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                let why = if e.is_timeout() {
                    "the upstream timed out"
                } else {
                    "the upstream could not be reached"
                };
                return pending.refuse(BrokerRefusal::UpstreamFailed, why, None);
            }
        };
        let status = response.status().as_u16();
        let upstream_headers = response.headers().clone();
        let body = match read_capped(response, self.config.max_body_bytes).await {
            Ok(b) => b,
            Err(why) => {
                return pending.refuse(BrokerRefusal::UpstreamFailed, why, Some(status_class(status)));
            }
        };
        let mut pending = pending;
        pending.record.upstream_status = Some(status);
        pending.record.response_sha256 = Some(hex::encode(Sha256::digest(&body)));
        pending.record.response_bytes = body.len() as u64;
        if let Some(usage) = model_usage(connection.kind, &body) {
            pending.record.model_tokens = usage.total();
            self.metrics.model_tokens(&pending.record.connection, &usage);
            let span = tracing::Span::current();
            span.record("gen_ai.usage.input_tokens", usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            if let Some(model) = &usage.response_model {
                span.record("gen_ai.response.model", span_label(model).as_str());
            }
        }
        if status == 401 || status == 403 {
            // A token the upstream no longer takes: the next call asks the
            // gateway again. The body never reaches the guest.
            clients.tokens.lock().await.remove(name);
            return pending.refuse(
                BrokerRefusal::UpstreamFailed,
                "the upstream refused the credential",
                Some("4xx"),
            );
        }
        if status >= 500 {
            return pending.refuse(BrokerRefusal::UpstreamFailed, "the upstream failed", Some("5xx"));
        }
        let relayed = relayed_response_headers(&upstream_headers);
        if let Some(what) =
            carries_credential(&body, &relayed, token.as_ref().map(|t| t.access_token.as_str()))
        {
            return pending.refuse(
                BrokerRefusal::RouteDenied,
                format!("the response carried {what}; withheld"),
                None,
            );
        }
        let mut out = http::Response::new(body);
        *out.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
        *out.headers_mut() = relayed;
        (out, pending)
    }

    async fn token(
        &self,
        clients: &RunClients,
        name: &ConnectionName,
        connection: &ConnectionConfig,
    ) -> Result<AccessToken, crate::gateway::TokenError> {
        let mut tokens = clients.tokens.lock().await;
        let fresh = |t: &AccessToken| {
            t.expires_at.is_none_or(|at| at - chrono::Duration::seconds(30) > chrono::Utc::now())
        };
        if let Some(t) = tokens.get(name).filter(|t| fresh(t)) {
            return Ok(t.clone());
        }
        let token = self.gateway.access_token(connection.secret_name(name)).await?;
        tokens.insert(name.clone(), token.clone());
        Ok(token)
    }
}

/// The upstream URL: the connection's base path, then the checked path and
/// query. `None` if the result is not under the base (it always is for a
/// checked target; this is the second lock).
fn upstream_url(connection: &ConnectionConfig, target: &RequestTarget) -> Option<url::Url> {
    let base = &connection.base_url;
    let mut url = base.clone();
    let path = format!("{}{}", base.path().trim_end_matches('/'), target.path);
    url.set_path(&path);
    url.set_query(target.query.as_deref());
    let same_origin = url.scheme() == base.scheme() && url.host() == base.host() && url.port() == base.port();
    (same_origin && url.path().starts_with(base.path().trim_end_matches('/'))).then_some(url)
}

/// The header a connection's token goes in.
fn sign(connection: &ConnectionConfig, token: &AccessToken) -> Option<(HeaderName, HeaderValue)> {
    let bearer = || HeaderValue::from_str(&format!("Bearer {}", token.access_token)).ok();
    let (name, value) = match connection.kind {
        ConnectionKind::Openai | ConnectionKind::GithubRead => (http::header::AUTHORIZATION, bearer()?),
        ConnectionKind::Anthropic => {
            (HeaderName::from_static("x-api-key"), HeaderValue::from_str(&token.access_token).ok()?)
        }
        ConnectionKind::Http => {
            let name = HeaderName::from_bytes(connection.header.as_deref()?.as_bytes()).ok()?;
            if name == http::header::AUTHORIZATION {
                (name, bearer()?)
            } else {
                (name, HeaderValue::from_str(&token.access_token).ok()?)
            }
        }
    };
    let mut value = value;
    value.set_sensitive(true);
    Some((name, value))
}

async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<Bytes, &'static str> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > cap {
                    return Err("the response is larger than max_body_bytes");
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(Bytes::from(body)),
            Err(_) => return Err("the upstream's response was cut short"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_and_credential_headers_from_the_guest_are_dropped() {
        let mut guest = HeaderMap::new();
        for (n, v) in [
            ("host", "evil.test"),
            ("authorization", "Bearer x"),
            ("x-api-key", "k"),
            ("cookie", "a=b"),
            ("proxy-authorization", "p"),
            ("x-forwarded-host", "evil.test"),
            ("x-forwarded-for", "1.2.3.4"),
            ("x-patchpilot-run", "other"),
            ("connection", "keep-alive, x-secret-hop"),
            ("x-secret-hop", "1"),
            ("content-type", "application/json"),
            ("anthropic-version", "2023-06-01"),
        ] {
            guest.append(HeaderName::from_static(n), HeaderValue::from_static(v));
        }
        let out = relayed_request_headers(&guest);
        let names: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "anthropic-version"]);
    }

    #[test]
    fn the_capability_may_come_in_any_of_the_wires_headers() {
        let token = CapabilityToken::generate().expect("token");
        for (name, value) in [
            (CAPABILITY_HEADER, token.expose().to_owned()),
            ("authorization", format!("Bearer {}", token.expose())),
            ("x-api-key", token.expose().to_owned()),
        ] {
            let mut h = HeaderMap::new();
            h.insert(HeaderName::from_static(name), HeaderValue::from_str(&value).expect("value"));
            assert_eq!(presented_capability(&h).as_ref(), Some(&token), "{name}");
        }
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer sk-not-a-capability"));
        assert!(presented_capability(&h).is_none());
    }

    #[test]
    fn model_names_are_cut_and_stripped_before_they_become_span_attributes() {
        assert_eq!(span_label("gpt-x"), "gpt-x");
        assert_eq!(span_label("a\nb\u{1b}[31m"), "ab[31m");
        assert_eq!(span_label(&"m".repeat(1000)).len(), 128);
    }

    #[test]
    fn model_tokens_are_read_from_either_wires_usage() {
        let openai =
            br#"{"model":"gpt-x","usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#;
        let usage = model_usage(ConnectionKind::Openai, openai).expect("usage");
        assert_eq!((usage.input_tokens, usage.output_tokens, usage.total()), (10, 5, 15));
        assert_eq!(usage.response_model.as_deref(), Some("gpt-x"));
        let anthropic = br#"{"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":2}}"#;
        let usage = model_usage(ConnectionKind::Anthropic, anthropic).expect("usage");
        assert_eq!((usage.input_tokens, usage.output_tokens, usage.total()), (9, 3, 12));
        assert_eq!(model_usage(ConnectionKind::Http, openai), None);
        assert_eq!(model_usage(ConnectionKind::Openai, b"not json"), None);
    }

    #[test]
    fn a_response_carrying_a_credential_is_recognised() {
        let none = HeaderMap::new();
        assert!(carries_credential(br#"{"token":"ghs_0123456789abcdefghijABCDEF"}"#, &none, None).is_some());
        assert!(
            carries_credential(b"echo: local-upstream-key-123", &none, Some("local-upstream-key-123"))
                .is_some()
        );
        assert!(carries_credential(br#"{"ok":true}"#, &none, Some("local-upstream-key-123")).is_none());
    }

    #[test]
    fn the_upstream_url_stays_under_the_base() {
        let connection: ConnectionConfig =
            toml::from_str("kind = \"openai\"\nbase_url = \"https://api.example.test/v1/\"").expect("config");
        let target = RequestTarget::parse("/chat/completions", Some("a=1")).expect("target");
        let url = upstream_url(&connection, &target).expect("url");
        assert_eq!(url.as_str(), "https://api.example.test/v1/chat/completions?a=1");
    }

    #[test]
    fn a_refusal_is_fixed_text_only() {
        let r = refusal_response(BrokerRefusal::UpstreamFailed, Some("5xx"));
        assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
        let body: serde_json::Value = serde_json::from_slice(r.body()).expect("json");
        assert_eq!(
            body,
            serde_json::json!({"error": {"type": "upstream_failed", "message": "upstream failed", "status_class": "5xx"}})
        );
    }
}
