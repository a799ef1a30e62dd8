//! The optional CI webhook receiver: GitHub (or the local forge's runner,
//! or anything speaking GitHub's format) posts `check_run`, `check_suite`,
//! `status` and `workflow_run` events, and the remediations whose PR head
//! is that commit are woken at once instead of at their next poll.
//!
//! A webhook only ever wakes: what CI says is read back from the forge by
//! the executor, so a forged or replayed delivery can make the controller
//! look early, never change what it concludes. Deliveries are still
//! checked: `X-Hub-Signature-256` must be the HMAC-SHA256 of the body under
//! the configured secret, compared in constant time, or the delivery is
//! refused with 401 and nothing is read from it.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::store::Store;
use patchpilot_forge::Secret;

/// Largest delivery accepted (GitHub caps payloads at 25 MB; CI events are
/// a few kilobytes).
const MAX_BODY: usize = 1024 * 1024;

/// `[controller.webhook]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Where to listen, e.g. `0.0.0.0:8088`; the path is `/webhooks/github`.
    pub listen: SocketAddr,
    /// The webhook secret (a secret; never logged).
    pub secret: String,
}

#[derive(Clone)]
struct Receiver {
    store: Store,
    secret: Secret,
}

/// Whether `header` (`sha256=<hex>`) is the HMAC-SHA256 of `body` under
/// `secret`; constant-time in the signature.
pub fn verify_signature(secret: &[u8], body: &[u8], header: &str) -> bool {
    let Some(hex_sig) = header.trim().strip_prefix("sha256=") else { return false };
    let Ok(sig) = hex::decode(hex_sig) else { return false };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    ring::hmac::verify(&key, body, &sig).is_ok()
}

/// The head commit a CI event is about, if it is one the controller waits on.
pub fn head_sha(event: &str, payload: &serde_json::Value) -> Option<String> {
    let sha = match event {
        "check_run" => &payload["check_run"]["head_sha"],
        "check_suite" => &payload["check_suite"]["head_sha"],
        "workflow_run" => &payload["workflow_run"]["head_sha"],
        "status" => &payload["sha"],
        _ => return None,
    };
    sha.as_str().filter(|s| s.len() >= 7 && s.chars().all(|c| c.is_ascii_hexdigit())).map(str::to_owned)
}

async fn deliver(State(rx): State<Receiver>, headers: HeaderMap, body: Bytes) -> (StatusCode, String) {
    let signature = headers.get("x-hub-signature-256").and_then(|v| v.to_str().ok()).unwrap_or("");
    if !verify_signature(rx.secret.expose().as_bytes(), &body, signature) {
        tracing::warn!("webhook delivery refused: missing or wrong X-Hub-Signature-256");
        return (StatusCode::UNAUTHORIZED, "signature does not match\n".into());
    }
    let event = headers.get("x-github-event").and_then(|v| v.to_str().ok()).unwrap_or("");
    if event == "ping" {
        return (StatusCode::OK, "pong\n".into());
    }
    let payload: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("body: not JSON: {e}\n")),
    };
    let Some(sha) = head_sha(event, &payload) else {
        return (StatusCode::ACCEPTED, format!("event {event:?}: nothing to wake\n"));
    };
    match rx.store.wake_ci(&sha).await {
        Ok(woken) => {
            tracing::info!(event, sha, woken, "CI webhook");
            (StatusCode::ACCEPTED, format!("woke {woken}\n"))
        }
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("store: {e}\n")),
    }
}

/// The receiver's routes: `POST /webhooks/github`.
pub fn router(store: Store, secret: Secret) -> axum::Router {
    axum::Router::new()
        .route("/webhooks/github", post(deliver))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Receiver { store, secret })
}

/// Serves [`router`] on `listener` until `shutdown` fires.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Store,
    secret: Secret,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(store, secret)).with_graceful_shutdown(shutdown.cancelled_owned()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn githubs_documented_test_vector_verifies() {
        // From GitHub's "Validating webhook deliveries".
        let secret = b"It's a Secret to Everybody";
        let good = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(verify_signature(secret, b"Hello, World!", good));
        assert!(!verify_signature(secret, b"Hello, World?", good));
        assert!(!verify_signature(b"another secret", b"Hello, World!", good));
        assert!(!verify_signature(secret, b"Hello, World!", &good.replace("sha256=", "sha1=")));
        assert!(!verify_signature(secret, b"Hello, World!", "sha256=zz"));
        assert!(!verify_signature(secret, b"Hello, World!", ""));
    }

    #[test]
    fn head_commits_come_from_each_ci_event() {
        let sha = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";
        let run = serde_json::json!({"action": "completed", "check_run": {"head_sha": sha}});
        assert_eq!(head_sha("check_run", &run).as_deref(), Some(sha));
        let status = serde_json::json!({"sha": sha, "state": "failure"});
        assert_eq!(head_sha("status", &status).as_deref(), Some(sha));
        assert_eq!(head_sha("push", &status), None);
        let bad = serde_json::json!({"sha": "'; DROP TABLE x; --"});
        assert_eq!(head_sha("status", &bad), None);
    }
}
