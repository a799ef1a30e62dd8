//! The broker's mutual-TLS listener and its two faces.
//!
//! A connection is served only after the handshake proved the client holds
//! the terminator's certificate ([`identity::TERMINATOR`]) from the
//! configured CA; anything else is closed without a byte of HTTP
//! ([`mtls::serve`], the gateway's loop too).
//!
//! - **Guest calls**, `ANY /v1/c/<connection>/<path>`: they must carry the
//!   run header the terminator stamps ([`RUN_HEADER`]); [`Relay::call`]
//!   does the rest.
//! - **Admin**, for the sandbox worker: `POST /admin/v1/capabilities`
//!   (mint, [`MintRequest`]), `DELETE /admin/v1/capabilities/<run>`
//!   (revoke), `POST /admin/v1/sweep` ([`SweepRequest`]). A request that
//!   carries a run header is guest traffic and never reaches these, even if
//!   a terminator let one through.
//!
//! One more client may connect: the retro aggregator
//! ([`identity::RETRO`]), for its digest's optional summary. It uses both
//! faces for itself alone, told apart by the role its certificate proved
//! ([`mtls::PeerRole`]): it mints, calls with, revokes and sweeps only run
//! ids under [`identity::RETRO_RUN_PREFIX`] and the worker
//! [`identity::RETRO_WORKER`], for the connections
//! `broker.retro_connections` lists; a terminator may touch none of those.

use std::sync::Arc;

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, post};
use http::{HeaderMap, Method, StatusCode, Uri};
use patchpilot_fleet::mtls;
use patchpilot_model::broker::{BrokerRefusal, Grant, MintRequest, MintResponse, SweepRequest, identity};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::BrokerConfig;
use crate::metrics::BrokerMetrics;
use crate::relay::{GuestCall, Relay, refusal_response};
use crate::store::Store;
use crate::{Error, RUN_HEADER};

/// A broker: the relay and its TLS configuration.
#[derive(Debug, Clone)]
pub struct Broker {
    relay: Arc<Relay>,
    tls: Arc<rustls::ServerConfig>,
}

impl Broker {
    /// A broker for `config` over `store`.
    pub fn new(config: BrokerConfig, store: Store, metrics: BrokerMetrics) -> Result<Broker, Error> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let tls = mtls::server_config(&config.tls).map_err(Error::Tls)?;
        Ok(Broker { relay: Arc::new(Relay::new(config, store, metrics)?), tls })
    }

    /// The configuration.
    pub fn config(&self) -> &BrokerConfig {
        self.relay.config()
    }

    fn router(&self) -> Router {
        Router::new()
            .route("/v1/c/{connection}", any(guest_call_root))
            .route("/v1/c/{connection}/{*path}", any(guest_call))
            .route("/admin/v1/capabilities", post(mint))
            .route("/admin/v1/capabilities/{run_id}", delete(revoke))
            .route("/admin/v1/sweep", post(sweep))
            .fallback(|| async { guest_response(refusal_response(BrokerRefusal::RouteDenied, None)) })
            .layer(DefaultBodyLimit::max(self.relay.config().max_body_bytes))
            .with_state(self.relay.clone())
    }

    /// Serves on `listener` until `shutdown`, to terminators and the retro
    /// aggregator only ([`mtls::serve`]); requests in flight finish first.
    pub async fn serve(&self, listener: TcpListener, shutdown: CancellationToken) {
        const CLIENTS: &[&str] = &[identity::TERMINATOR, identity::RETRO];
        mtls::serve(listener, self.tls.clone(), CLIENTS, self.router(), shutdown).await;
    }
}

fn guest_response(response: crate::relay::GuestResponse) -> Response {
    response.map(axum::body::Body::from)
}

/// Run ids as the sandbox mints them: 1–128 characters of `[A-Za-z0-9._-]`.
fn valid_run_id(run: &str) -> bool {
    !run.is_empty()
        && run.len() <= 128
        && run.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Whether a client of `role` may act for `run_id` (minted by `worker`):
/// the retro aggregator only for its own runs, a terminator never for
/// those. `None` when it may, else why not.
fn outside_zone(role: mtls::PeerRole, run_id: Option<&str>, worker: Option<&str>) -> Option<String> {
    let retro_run = run_id.map(|r| r.starts_with(identity::RETRO_RUN_PREFIX));
    let retro_worker = worker.map(|w| w == identity::RETRO_WORKER);
    let retro = role.0 == identity::RETRO;
    if retro_run.is_some_and(|r| r != retro) {
        return Some(format!(
            "run ids under {:?} are the retro aggregator's{}",
            identity::RETRO_RUN_PREFIX,
            if retro { ", and it has no other" } else { "" }
        ));
    }
    if retro_worker.is_some_and(|w| w != retro) {
        return Some(format!(
            "the worker {:?} is the retro aggregator's{}",
            identity::RETRO_WORKER,
            if retro { ", and it has no other" } else { "" }
        ));
    }
    None
}

fn run_header(headers: &HeaderMap) -> Option<String> {
    let run = headers.get(RUN_HEADER)?.to_str().ok()?;
    valid_run_id(run).then(|| run.to_owned())
}

async fn guest_call_root(
    state: State<Arc<Relay>>,
    role: Extension<mtls::PeerRole>,
    Path(connection): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    relay_call(state, role, connection, "/".to_owned(), method, uri, headers, body).await
}

async fn guest_call(
    state: State<Arc<Relay>>,
    role: Extension<mtls::PeerRole>,
    Path((connection, _)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // The raw path, not axum's decoded capture: encoded tricks must be
    // seen to be refused.
    let raw = uri.path();
    let prefix_len = crate::CALL_PREFIX.len() + connection.len();
    let path = raw.get(prefix_len..).filter(|p| p.starts_with('/')).unwrap_or("").to_owned();
    relay_call(state, role, connection, path, method, uri, headers, body).await
}

#[allow(clippy::too_many_arguments)]
async fn relay_call(
    State(relay): State<Arc<Relay>>,
    Extension(role): Extension<mtls::PeerRole>,
    connection: String,
    path: String,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(run_id) = run_header(&headers) else {
        return guest_response(refusal_response(BrokerRefusal::CapabilityInvalid, None));
    };
    if let Some(why) = outside_zone(role, Some(&run_id), None) {
        tracing::warn!(%run_id, client = role.0, why, "call refused");
        return guest_response(refusal_response(BrokerRefusal::CapabilityInvalid, None));
    }
    let call =
        GuestCall { run_id, method, connection, path, query: uri.query().map(str::to_owned), headers, body };
    guest_response(relay.call(call).await)
}

fn admin_refused(status: StatusCode, message: String) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

async fn mint(
    State(relay): State<Arc<Relay>>,
    Extension(role): Extension<mtls::PeerRole>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if headers.contains_key(RUN_HEADER) {
        return guest_response(refusal_response(BrokerRefusal::RouteDenied, None));
    }
    let request: MintRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return admin_refused(StatusCode::BAD_REQUEST, format!("the mint request does not parse: {e}"));
        }
    };
    if let Err(reason) = patchpilot_model::sandbox::check_run_id(&request.run_id) {
        return admin_refused(StatusCode::BAD_REQUEST, format!("run_id: {reason}"));
    }
    if let Some(why) = outside_zone(role, Some(&request.run_id), Some(&request.worker)) {
        return admin_refused(StatusCode::FORBIDDEN, why);
    }
    let config = relay.config();
    if role.0 == identity::RETRO
        && let Some(name) = request.connections.iter().find(|n| !config.retro_connections.contains(n))
    {
        return admin_refused(
            StatusCode::FORBIDDEN,
            format!("connections: {name:?} is not in broker.retro_connections"),
        );
    }
    let mut connections = Vec::new();
    for name in &request.connections {
        match config.connections.get(name) {
            Some(c) => connections.push(c.granted(name)),
            None => {
                return admin_refused(
                    StatusCode::BAD_REQUEST,
                    format!("connections: {name:?} is not a configured connection"),
                );
            }
        }
    }
    let grant = Grant { connections, budget: config.budget };
    relay.forget(&request.run_id);
    match relay.store().mint(&request.run_id, &request.worker, &grant).await {
        Ok(token) => {
            tracing::info!(run_id = %request.run_id, worker = %request.worker, connections = grant.connections.len(), "capability minted");
            axum::Json(MintResponse { capability: token.expose().to_owned(), grant }).into_response()
        }
        Err(e) => admin_refused(StatusCode::SERVICE_UNAVAILABLE, patchpilot_fleet::error_chain(&e)),
    }
}

async fn revoke(
    State(relay): State<Arc<Relay>>,
    Extension(role): Extension<mtls::PeerRole>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if headers.contains_key(RUN_HEADER) {
        return guest_response(refusal_response(BrokerRefusal::RouteDenied, None));
    }
    if let Some(why) = outside_zone(role, Some(&run_id), None) {
        return admin_refused(StatusCode::FORBIDDEN, why);
    }
    relay.forget(&run_id);
    match relay.store().revoke(&run_id).await {
        Ok(was_live) => {
            tracing::info!(%run_id, was_live, "capability revoked");
            axum::Json(serde_json::json!({ "revoked": was_live })).into_response()
        }
        Err(e) => admin_refused(StatusCode::SERVICE_UNAVAILABLE, patchpilot_fleet::error_chain(&e)),
    }
}

async fn sweep(
    State(relay): State<Arc<Relay>>,
    Extension(role): Extension<mtls::PeerRole>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if headers.contains_key(RUN_HEADER) {
        return guest_response(refusal_response(BrokerRefusal::RouteDenied, None));
    }
    let request: SweepRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return admin_refused(StatusCode::BAD_REQUEST, format!("the sweep request does not parse: {e}"));
        }
    };
    if let Some(why) = outside_zone(role, None, Some(&request.worker)) {
        return admin_refused(StatusCode::FORBIDDEN, why);
    }
    match relay.store().sweep(&request.worker).await {
        Ok(runs) => {
            for run in &runs {
                relay.forget(run);
            }
            tracing::info!(worker = %request.worker, revoked = runs.len(), "capabilities swept");
            axum::Json(serde_json::json!({ "revoked": runs })).into_response()
        }
        Err(e) => admin_refused(StatusCode::SERVICE_UNAVAILABLE, patchpilot_fleet::error_chain(&e)),
    }
}
