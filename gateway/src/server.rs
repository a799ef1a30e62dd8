//! The mutual-TLS server: `POST /v1/access-token` for the broker only.
//!
//! The TLS layer ([`patchpilot_fleet::mtls::server_config`]) completes a
//! handshake only with a client certificate the fleet CA issued; after it,
//! a client whose certificate does not name
//! [`identity::BROKER`](patchpilot_model::broker::identity::BROKER) (a
//! terminator, say, from the same CA) has its connection closed before any
//! HTTP is read.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use patchpilot_fleet::mtls;
use patchpilot_model::broker::{AccessTokenRequest, GatewayError, GatewayRefusal, identity};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::Gateway;

/// The access-token route.
pub const ACCESS_TOKEN_PATH: &str = "/v1/access-token";

/// The HTTP routes, without TLS (the caller checks the peer first).
pub fn router(gateway: Gateway) -> axum::Router {
    axum::Router::new().route(ACCESS_TOKEN_PATH, axum::routing::post(access_token)).with_state(gateway)
}

/// The status the broker gets with each refusal.
pub fn status(refusal: GatewayRefusal) -> StatusCode {
    match refusal {
        GatewayRefusal::UnknownConnection => StatusCode::NOT_FOUND,
        GatewayRefusal::RefreshFailed => StatusCode::BAD_GATEWAY,
        GatewayRefusal::BadRequest => StatusCode::BAD_REQUEST,
    }
}

fn refused(error: GatewayRefusal) -> Response {
    (status(error), Json(GatewayError { error })).into_response()
}

async fn access_token(State(gateway): State<Gateway>, body: Bytes) -> Response {
    // The parse error is not echoed: the fixed refusal is all a caller gets.
    let Ok(request) = serde_json::from_slice::<AccessTokenRequest>(&body) else {
        return refused(GatewayRefusal::BadRequest);
    };
    match gateway.access_token(&request.connection).await {
        Ok(token) => Json(token).into_response(),
        Err(e) => refused(e.refusal()),
    }
}

/// Serves `gateway` on `listener` (bound by the caller) with `tls` until
/// `shutdown` fires, then lets requests in flight finish; only the
/// broker's certificate is answered.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    gateway: Gateway,
    shutdown: CancellationToken,
) {
    mtls::serve(listener, tls, &[identity::BROKER], router(gateway), shutdown).await;
}
