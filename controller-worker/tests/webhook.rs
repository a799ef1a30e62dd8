//! The CI webhook receiver on a real socket and a real database: a signed
//! `check_run` delivery wakes the remediation watching that head commit at
//! once; an unsigned or wrongly signed one is refused and wakes nothing.

use std::time::Duration;

use patchpilot_controller::store::Store;
use patchpilot_controller::webhook;
use patchpilot_e2e::TestDatabase;
use patchpilot_forge::Secret;
use tokio_util::sync::CancellationToken;

const SHA: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";

fn sign(secret: &str, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    format!("sha256={}", hex::encode(ring::hmac::sign(&key, body).as_ref()))
}

async fn asleep(pool: &sqlx::PgPool) -> bool {
    let (asleep,): (bool,) = sqlx::query_as(
        "SELECT wake_at IS NOT NULL FROM controller_remediations WHERE remediation_id = 'rem-hook'",
    )
    .fetch_one(pool)
    .await
    .expect("row");
    asleep
}

#[tokio::test]
async fn signed_ci_events_wake_the_remediation_on_that_head_and_others_are_refused() -> anyhow::Result<()> {
    patchpilot_fleet::telemetry::install_crypto_provider();
    let db = TestDatabase::create().await?;
    let pool = db.migrated_pool().await?;
    let store = Store::new(pool.clone());
    store.record_job("rem-hook", 1, b"job", None).await.expect("job");
    let machine = serde_json::json!({
        "remediation_id": "rem-hook", "revision": 1,
        "state": {"state": "ci_pending", "head_sha": SHA},
        "counters": {"repairs": 0, "infra_retries": 0, "run_retries": 0, "runs": 1},
        "has_pr": true, "outbox": []
    });
    sqlx::query("UPDATE controller_remediations SET machine = $1::json, state = 'ci_pending', wake_at = now() + interval '1 hour' WHERE remediation_id = 'rem-hook'")
        .bind(machine.to_string())
        .execute(&pool)
        .await
        .expect("ci_pending");

    let secret = "a-webhook-secret-of-some-length";
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/webhooks/github", listener.local_addr().expect("addr"));
    let stop = CancellationToken::new();
    let server = tokio::spawn(webhook::serve(listener, store, Secret::new(secret), stop.clone()));
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
    let post = |event: &'static str, body: Vec<u8>, signature: Option<String>| {
        let mut req =
            client.post(&url).header("x-github-event", event).header("content-type", "application/json");
        if let Some(sig) = signature {
            req = req.header("x-hub-signature-256", sig);
        }
        req.body(body).send()
    };

    // The shape of GitHub's documented `check_run` event, trimmed.
    let body = serde_json::to_vec(&serde_json::json!({
        "action": "completed",
        "check_run": {"id": 4, "head_sha": SHA, "status": "completed", "conclusion": "failure", "name": "lint"},
        "repository": {"full_name": "acme/api"}
    }))
    .expect("json");

    let unsigned = post("check_run", body.clone(), None).await.expect("send");
    assert_eq!(unsigned.status(), 401);
    let forged =
        post("check_run", body.clone(), Some(sign("not-the-secret-at-all", &body))).await.expect("send");
    assert_eq!(forged.status(), 401);
    assert!(asleep(&pool).await, "a refused delivery wakes nothing");

    let ping = post("ping", b"{}".to_vec(), Some(sign(secret, b"{}"))).await.expect("send");
    assert_eq!(ping.status(), 200);
    let junk = post("check_run", b"not json".to_vec(), Some(sign(secret, b"not json"))).await.expect("send");
    assert_eq!(junk.status(), 400);

    let good = post("check_run", body.clone(), Some(sign(secret, &body))).await.expect("send");
    assert_eq!(good.status(), 202);
    assert_eq!(good.text().await.expect("text").trim(), "woke 1");
    assert!(!asleep(&pool).await, "woken");

    stop.cancel();
    server.await.expect("join").expect("serve");
    Ok(())
}
