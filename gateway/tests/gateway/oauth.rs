//! OAuth refresh with single-use refresh tokens: two gateways asked at
//! once refresh exactly once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use patchpilot_gateway::secrets::{self, OauthRefresh, Secret};
use patchpilot_gateway::{Error, Gateway};
use patchpilot_model::ErrorKind;
use patchpilot_model::broker::GatewayRefusal;
use serde_json::json;
use tokio::sync::Barrier;

use crate::support::{TestDb, key, name, serve_double};

/// A provider whose refresh tokens are single-use: presenting one that was
/// already used revokes the whole grant, as real providers do.
#[derive(Debug, Default)]
struct Provider {
    /// The one refresh token that works now; none once revoked.
    current: Option<String>,
    /// Successful refreshes.
    refreshes: u32,
    /// Whether a reused token revoked the grant.
    revoked: bool,
}

type Shared = Arc<Mutex<Provider>>;

/// `a=b&c=d` (the test's values need no percent-decoding).
fn form(body: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

async fn token(State(provider): State<Shared>, body: Bytes) -> Response {
    let form = form(&body);
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    if field("grant_type").as_deref() != Some("refresh_token") || field("client_id").as_deref() != Some("cli")
    {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({"error": "invalid_request"}))).into_response();
    }
    // Upstream latency, so two refreshers would overlap.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut p = provider.lock().expect("lock");
    let presented = field("refresh_token");
    if p.current.is_none() || presented != p.current {
        // A reused (or unknown) refresh token: the grant is revoked.
        p.current = None;
        p.revoked = true;
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant", "error_description": "UPSTREAM-BODY-DETAIL"})),
        )
            .into_response();
    }
    p.refreshes += 1;
    let n = p.refreshes;
    p.current = Some(format!("refresh-{n}"));
    axum::Json(json!({
        "access_token": format!("access-{n}"),
        "token_type": "Bearer",
        "expires_in": 3600,
        "refresh_token": format!("refresh-{n}"),
    }))
    .into_response()
}

async fn provider() -> (Shared, String) {
    let shared: Shared =
        Arc::new(Mutex::new(Provider { current: Some("refresh-0".into()), ..Provider::default() }));
    let app = axum::Router::new().route("/token", axum::routing::post(token)).with_state(shared.clone());
    let base = serve_double(app).await;
    (shared, format!("{base}/token"))
}

fn grant(token_url: &str) -> Secret {
    Secret::OauthRefresh(OauthRefresh {
        token_url: token_url.to_owned(),
        client_id: "cli".into(),
        client_secret: None,
        refresh_token: "refresh-0".into(),
        scope: None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gateways_asked_at_once_refresh_once_and_the_grant_survives() {
    let db = TestDb::create().await;
    let (provider, url) = provider().await;
    let connection = name("crm");
    secrets::put(&db.pool, &key(), &connection, &grant(&url)).await.expect("put");

    // Two gateways, each with its own pool, as two processes would be.
    let first = crate::support::gateway(&db.pool, "gateway-a");
    let second = crate::support::gateway(&db.second_pool().await, "gateway-b");
    let barrier = Arc::new(Barrier::new(2));
    let ask = |gateway: Gateway| {
        let barrier = barrier.clone();
        let connection = connection.clone();
        tokio::spawn(async move {
            barrier.wait().await;
            gateway.issue(&connection).await
        })
    };
    let (a, b) = (ask(first.clone()), ask(second.clone()));
    let (a, _, a_outcome) = a.await.expect("task").expect("first gateway");
    let (b, _, b_outcome) = b.await.expect("task").expect("second gateway");

    assert_eq!(a, b, "both callers get the same token");
    assert_eq!(a.access_token, "access-1");
    assert!(a.expires_at.is_some());
    {
        let p = provider.lock().expect("lock");
        assert_eq!(p.refreshes, 1, "exactly one refresh");
        assert!(!p.revoked, "no refresh token was used twice");
    }
    let mut outcomes = [a_outcome.as_str(), b_outcome.as_str()];
    outcomes.sort_unstable();
    assert_eq!(outcomes[1], "minted", "one of them minted: {outcomes:?}");

    // Cached now: no further refresh.
    assert_eq!(second.access_token(&connection).await.expect("cached").access_token, "access-1");
    assert_eq!(provider.lock().expect("lock").refreshes, 1);

    // Expire the cache: the rotated refresh token (refresh-1) was stored,
    // so the next refresh works and the grant survives.
    secrets::forget_access_token(&db.pool, &connection).await.expect("forget");
    let later = first.access_token(&connection).await.expect("a later refresh");
    assert_eq!(later.access_token, "access-2");
    let p = provider.lock().expect("lock");
    assert_eq!(p.refreshes, 2);
    assert!(!p.revoked);
    assert_eq!(p.current.as_deref(), Some("refresh-2"));
}

#[tokio::test]
async fn a_refused_refresh_is_a_fixed_refusal_without_the_upstream_body() {
    let db = TestDb::create().await;
    let (provider, url) = provider().await;
    // The provider revokes the grant (someone else used refresh-0).
    provider.lock().expect("lock").current = Some("refresh-elsewhere".into());
    let connection = name("crm");
    secrets::put(&db.pool, &key(), &connection, &grant(&url)).await.expect("put");
    let gateway = crate::support::gateway(&db.pool, "gateway-a");
    let e = gateway.access_token(&connection).await.expect_err("revoked grant");
    assert_eq!(e.refusal(), GatewayRefusal::RefreshFailed);
    assert_eq!(e.kind(), ErrorKind::Permanent);
    assert!(matches!(e, Error::Upstream { status: 400, code: Some("invalid_grant"), .. }), "{e:?}");
    let text = format!("{e} {e:?}");
    assert!(!text.contains("UPSTREAM-BODY-DETAIL") && !text.contains("refresh-0"), "{text}");
    // The lease was released: the next request tries again at once
    // (and fails the same way) instead of waiting it out.
    let started = std::time::Instant::now();
    assert!(gateway.access_token(&connection).await.is_err());
    assert!(started.elapsed() < Duration::from_secs(5));
}
