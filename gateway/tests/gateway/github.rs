//! GitHub App installation tokens: a local double of
//! `POST /app/installations/{id}/access_tokens` checks the RS256 JWT with
//! the App's public key and that only read permissions are asked for.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{TimeDelta, Utc};
use patchpilot_gateway::secrets::{self, GithubApp, Secret};
use patchpilot_model::broker::{AccessToken, GatewayRefusal};
use ring::signature::{self, KeyPair as _, RsaKeyPair};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject as _;
use serde_json::{Value, json};

use crate::support::{Pki, Server, TestDb, broker_client, key, name, serve_double};

const APP_ID: u64 = 4242;
const INSTALLATION: u64 = 77;

/// A throwaway RSA key made at test time (openssl as a fixture generator
/// only), PKCS#1 PEM as GitHub hands App keys out.
fn test_key() -> String {
    let out = std::process::Command::new("openssl")
        .args(["genrsa", "-traditional", "2048"])
        .stderr(std::process::Stdio::null())
        .output()
        .expect("openssl (the test key generator) is installed");
    assert!(out.status.success(), "openssl genrsa failed");
    String::from_utf8(out.stdout).expect("PEM")
}

#[derive(Debug)]
struct Double {
    public_key: Vec<u8>,
    mints: u32,
}

type Shared = Arc<Mutex<Double>>;

fn refuse(why: &str) -> Response {
    (StatusCode::UNAUTHORIZED, format!("DOUBLE-REFUSED: {why}")).into_response()
}

async fn access_tokens(
    State(double): State<Shared>,
    Path(installation): Path<u64>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if installation != INSTALLATION {
        return (StatusCode::NOT_FOUND, "SECRET-UPSTREAM-BODY").into_response();
    }
    if headers.get("user-agent").is_none() {
        return refuse("GitHub requires a User-Agent");
    }
    let Some(jwt) =
        headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
    else {
        return refuse("no bearer JWT");
    };
    let parts: Vec<&str> = jwt.split('.').collect();
    let [header, claims, sig] = parts[..] else { return refuse("not a JWT") };
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).ok();
    let (Some(header_json), Some(claims_json), Some(sig)) = (decode(header), decode(claims), decode(sig))
    else {
        return refuse("not base64url");
    };
    let public_key = double.lock().expect("lock").public_key.clone();
    let verified = signature::UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, &public_key)
        .verify(format!("{header}.{claims}").as_bytes(), &sig);
    if verified.is_err() {
        return refuse("bad signature");
    }
    let header: Value = serde_json::from_slice(&header_json).unwrap_or_default();
    let claims: Value = serde_json::from_slice(&claims_json).unwrap_or_default();
    if header["alg"] != "RS256" {
        return refuse("not RS256");
    }
    let now = Utc::now().timestamp();
    let (iat, exp) = (claims["iat"].as_i64().unwrap_or(i64::MAX), claims["exp"].as_i64().unwrap_or(0));
    let iss = APP_ID.to_string();
    if claims["iss"].as_str() != Some(iss.as_str()) || iat > now || exp <= now || exp - iat > 600 {
        return refuse("bad claims");
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or_default();
    let Some(permissions) = body["permissions"].as_object() else { return refuse("no permissions") };
    if permissions.is_empty() || permissions.values().any(|v| v != "read") {
        return (StatusCode::UNPROCESSABLE_ENTITY, "write permissions asked for").into_response();
    }
    let mut d = double.lock().expect("lock");
    d.mints += 1;
    let expires_at = (Utc::now() + TimeDelta::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "token": format!("ghs_installation_{}", d.mints),
            "expires_at": expires_at,
            "permissions": permissions,
            "repository_selection": "selected",
        })),
    )
        .into_response()
}

async fn double(pem: &str) -> (Shared, String) {
    let der = match PrivateKeyDer::from_pem_slice(pem.as_bytes()).expect("PEM") {
        PrivateKeyDer::Pkcs1(der) => RsaKeyPair::from_der(der.secret_pkcs1_der()).expect("RSA key"),
        other => panic!("expected PKCS#1, got {other:?}"),
    };
    let shared = Arc::new(Mutex::new(Double { public_key: der.public_key().as_ref().to_vec(), mints: 0 }));
    let app = axum::Router::new()
        .route("/app/installations/{id}/access_tokens", axum::routing::post(access_tokens))
        .with_state(shared.clone());
    (shared, serve_double(app).await)
}

fn app(pem: &str, api_url: &str, installation_id: u64) -> Secret {
    Secret::GithubApp(GithubApp {
        app_id: APP_ID,
        installation_id,
        private_key_pem: pem.to_owned(),
        api_url: api_url.to_owned(),
    })
}

#[tokio::test]
async fn the_broker_gets_a_read_only_installation_token_and_it_is_cached() {
    let db = TestDb::create().await;
    let pem = test_key();
    let (double, api) = double(&pem).await;
    secrets::put(&db.pool, &key(), &name("github"), &app(&pem, &api, INSTALLATION)).await.expect("put");
    let pki = Pki::create();
    let server = Server::start(&pki, crate::support::gateway(&db.pool, "gateway")).await;
    let broker = broker_client(&pki);

    for _ in 0..2 {
        let response =
            broker.post(server.url()).json(&json!({"connection": "github"})).send().await.expect("request");
        assert_eq!(response.status(), 200);
        let token: AccessToken = response.json().await.expect("token");
        assert_eq!(token.access_token, "ghs_installation_1");
        let expires_at = token.expires_at.expect("an expiry");
        assert!(expires_at > Utc::now() + TimeDelta::minutes(55));
        let text = serde_json::to_string(&token).expect("json");
        assert!(!text.contains("PRIVATE KEY"));
    }
    assert_eq!(double.lock().expect("lock").mints, 1, "the second request was served from the cache");
}

#[tokio::test]
async fn an_upstream_refusal_is_not_relayed() {
    let db = TestDb::create().await;
    let pem = test_key();
    let (_double, api) = double(&pem).await;
    secrets::put(&db.pool, &key(), &name("github"), &app(&pem, &api, 999)).await.expect("put");
    let pki = Pki::create();
    let server = Server::start(&pki, crate::support::gateway(&db.pool, "gateway")).await;
    let response = broker_client(&pki)
        .post(server.url())
        .json(&json!({"connection": "github"}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 502);
    let body = response.text().await.expect("body");
    assert!(!body.contains("SECRET-UPSTREAM-BODY"), "{body}");
    let error: patchpilot_model::broker::GatewayError = serde_json::from_str(&body).expect("a gateway error");
    assert_eq!(error.error, GatewayRefusal::RefreshFailed);
}
