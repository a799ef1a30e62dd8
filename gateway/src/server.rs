//! The mutual-TLS server: `POST /v1/access-token` for the broker only.
//!
//! The TLS layer ([`patchpilot_fleet::mtls::server_config`]) completes a
//! handshake only with a client certificate the fleet CA issued; after it,
//! a client whose certificate does not name
//! [`identity::BROKER`](patchpilot_model::broker::identity::BROKER) (a
//! terminator, say, from the same CA) has its connection closed before any
//! HTTP is read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use patchpilot_fleet::mtls;
use patchpilot_model::broker::{AccessTokenRequest, GatewayError, GatewayRefusal, identity};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::Gateway;

/// The access-token route.
pub const ACCESS_TOKEN_PATH: &str = "/v1/access-token";

/// How long a client has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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
/// `shutdown` fires, then lets requests in flight finish.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    gateway: Gateway,
    shutdown: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(tls);
    let app = router(gateway);
    // Every connection task, so shutdown waits for them.
    let tasks = TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            // Shutdown stops accepting; connections drain below.
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, usually: back off a little
                    // instead of spinning.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        tasks.spawn(connection(acceptor.clone(), stream, peer, app.clone(), shutdown.clone()));
    }
    tasks.close();
    tasks.wait().await;
}

async fn connection(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    app: axum::Router,
    shutdown: CancellationToken,
) {
    let mut tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::info!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::info!(%peer, "TLS handshake timed out");
            return;
        }
    };
    if !mtls::peer_is(tls.get_ref().1.peer_certificates(), identity::BROKER) {
        tracing::warn!(%peer, "closed a connection from a client that is not the broker");
        let _ = tls.shutdown().await;
        return;
    }
    let service = hyper_util::service::TowerToHyperService::new(app);
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        served = conn.as_mut() => {
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }
        // Finish the request in flight, then close.
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}
