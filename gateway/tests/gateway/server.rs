//! The mutual-TLS server answers the broker's certificate and nobody
//! else's.

use patchpilot_fleet::mtls::TlsFiles;
use patchpilot_gateway::secrets::{self, Secret};
use patchpilot_model::broker::{AccessToken, GatewayError, GatewayRefusal, identity};
use serde_json::json;

use crate::support::{Pki, Server, TestDb, broker_client, client_with, gateway, key, name};

async fn started() -> (TestDb, Pki, Server) {
    let db = TestDb::create().await;
    secrets::put(&db.pool, &key(), &name("registry"), &Secret::Static { value: "registry-api-key".into() })
        .await
        .expect("put");
    let pki = Pki::create();
    let server = Server::start(&pki, gateway(&db.pool, "server")).await;
    (db, pki, server)
}

async fn ask(
    client: &reqwest::Client,
    server: &Server,
    body: serde_json::Value,
) -> reqwest::Result<reqwest::Response> {
    client.post(server.url()).json(&body).send().await
}

#[tokio::test]
async fn the_broker_gets_a_token_and_fixed_refusals() {
    let (_db, pki, server) = started().await;
    let broker = broker_client(&pki);

    let response = ask(&broker, &server, json!({"connection": "registry"})).await.expect("request");
    assert_eq!(response.status(), 200);
    let token: AccessToken = response.json().await.expect("token");
    assert_eq!(token, AccessToken { access_token: "registry-api-key".into(), expires_at: None });

    let response = ask(&broker, &server, json!({"connection": "nothing-here"})).await.expect("request");
    assert_eq!(response.status(), 404);
    let body: GatewayError = response.json().await.expect("error body");
    assert_eq!(body.error, GatewayRefusal::UnknownConnection);

    for bad in [
        json!({"connection": "Not/A/Name"}),
        json!({"connection": "registry", "extra": 1}),
        json!("registry"),
    ] {
        let response = ask(&broker, &server, bad.clone()).await.expect("request");
        assert_eq!(response.status(), 400, "{bad}");
        let body: GatewayError = response.json().await.expect("error body");
        assert_eq!(body.error, GatewayRefusal::BadRequest);
    }
}

#[tokio::test]
async fn a_terminator_certificate_from_the_same_ca_is_refused() {
    let (_db, pki, server) = started().await;
    let terminator = client_with(&pki.files(identity::TERMINATOR).ca, Some(&pki.files(identity::TERMINATOR)));
    // The handshake completes (same CA); the connection is closed before
    // any HTTP is answered.
    let result = ask(&terminator, &server, json!({"connection": "registry"})).await;
    assert!(result.is_err(), "the terminator got an answer: {result:?}");
    // The broker still does.
    let response =
        ask(&broker_client(&pki), &server, json!({"connection": "registry"})).await.expect("request");
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn a_client_without_a_certificate_cannot_complete_the_handshake() {
    let (_db, pki, server) = started().await;
    let anonymous = client_with(&pki.files(identity::BROKER).ca, None);
    let result = ask(&anonymous, &server, json!({"connection": "registry"})).await;
    assert!(result.is_err(), "a client without a certificate got an answer: {result:?}");
}

#[tokio::test]
async fn a_broker_certificate_from_another_ca_is_refused() {
    let (_db, pki, server) = started().await;
    // Trusts the gateway's CA, so only the gateway can be the one refusing.
    let foreign = TlsFiles::in_dir(pki.other.path(), identity::BROKER);
    let impostor = client_with(&pki.files(identity::BROKER).ca, Some(&foreign));
    let result = ask(&impostor, &server, json!({"connection": "registry"})).await;
    assert!(result.is_err(), "a certificate from another CA got an answer: {result:?}");
}
