//! Notifications against a local HTTP server (plain tokio TCP) standing in
//! for Slack and a JSON receiver: the payloads, the signature, retries on
//! 5xx and none on 4xx, and no secret URL path in any error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use patchpilot_controller::notify::{
    Event, JsonWebhook, Notification, Notifier, NotifierConfig, NotifyError, Retry, SlackWebhook,
    StdoutNotifier,
};
use patchpilot_e2e::ClosedPort;
use patchpilot_forge::Secret;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request the server received.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

/// A server answering each request with the next `(status, body)` of its
/// script (the last one repeating), recording what it got.
struct Server {
    base: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Server {
    async fn start(script: Vec<(u16, &'static str)>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        tokio::spawn(async move {
            let mut n = 0;
            while let Ok((mut stream, _)) = listener.accept().await {
                let Some(request) = read_request(&mut stream).await else { continue };
                log.lock().expect("lock").push(request);
                let (status, body) = script[n.min(script.len() - 1)];
                n += 1;
                let response = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            }
        });
        Server { base, received }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }
}

async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<Received> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let header_end = loop {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&data[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, path) = (request_line.next()?.to_owned(), request_line.next()?.to_owned());
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = data[header_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&buf[..n]);
    }
    Some(Received { method, path, headers, body })
}

fn fast() -> Retry {
    Retry {
        attempts: 3,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        timeout: Duration::from_secs(5),
    }
}

fn notification(event: Event) -> Notification {
    Notification {
        event,
        repository: "acme/api".into(),
        pr_url: "https://github.com/acme/api/pull/42".into(),
        cves: vec!["CVE-2024-45337".into(), "CVE-2023-44487".into()],
        summary: "Bumped golang.org/x/crypto to v0.31.0 and golang.org/x/net to v0.23.0.".into(),
    }
}

/// The Slack webhook path stands in for the real secret one.
const SECRET_PATH: &str = "/services/T0000/B0000/XXXXsecretXXXX";

#[tokio::test]
async fn slack_gets_text_and_a_section_per_field() {
    let server = Server::start(vec![(200, "ok")]).await;
    let slack = SlackWebhook::with_retry(&format!("{}{SECRET_PATH}", server.base), fast()).expect("slack");
    assert!(!format!("{slack:?}").contains("XXXXsecretXXXX"));
    slack.send(&notification(Event::Green)).await.expect("send");

    let got = server.received();
    assert_eq!(got.len(), 1);
    let request = &got[0];
    assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", SECRET_PATH));
    assert_eq!(request.headers.get("content-type").map(String::as_str), Some("application/json"));
    let body: serde_json::Value = serde_json::from_slice(&request.body).expect("JSON body");
    let text = body["text"].as_str().expect("text");
    assert!(text.contains("acme/api") && text.contains("green") && text.contains("/pull/42"), "{text}");
    let blocks = body["blocks"].as_array().expect("blocks");
    assert_eq!(blocks[0]["type"], "header");
    assert_eq!(blocks[0]["text"]["type"], "plain_text");
    let sections: Vec<&str> = blocks[1..]
        .iter()
        .map(|b| {
            assert_eq!(b["type"], "section");
            assert_eq!(b["text"]["type"], "mrkdwn");
            b["text"]["text"].as_str().expect("section text")
        })
        .collect();
    assert_eq!(sections.len(), 4, "{sections:?}");
    assert_eq!(sections[0], "*Repository*\nacme/api");
    assert_eq!(
        sections[1],
        "*Pull request*\n<https://github.com/acme/api/pull/42|https://github.com/acme/api/pull/42>"
    );
    assert_eq!(sections[2], "*CVEs*\nCVE-2024-45337, CVE-2023-44487");
    assert!(sections[3].starts_with("*Summary*\nBumped golang.org/x/crypto"), "{}", sections[3]);
}

#[tokio::test]
async fn json_webhook_is_signed_and_retried_after_a_500() {
    let server = Server::start(vec![(500, "boom"), (200, "")]).await;
    let secret = "s3cr3t-key";
    let hook = JsonWebhook::with_retry(
        &format!("{}/hooks/patchpilot", server.base),
        Some(Secret::new(secret)),
        fast(),
    )
    .expect("hook");
    assert!(!format!("{hook:?}").contains(secret));
    hook.send(&notification(Event::NeedsHuman)).await.expect("delivered on the second try");

    let got = server.received();
    assert_eq!(got.len(), 2, "one retry after the 500");
    assert_eq!(got[0].body, got[1].body, "a retry resends the same body");
    for request in &got {
        let header = request.headers.get("x-patchpilot-signature").expect("signature header");
        let hex = header.strip_prefix("sha256=").expect("sha256= prefix");
        let tag: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect();
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        ring::hmac::verify(&key, &request.body, &tag).expect("the signature verifies over the body");
    }
    let body: serde_json::Value = serde_json::from_slice(&got[1].body).expect("JSON");
    assert_eq!(body["event"], "needs_human");
    assert_eq!(body["repository"], "acme/api");
    assert_eq!(body["pr_url"], "https://github.com/acme/api/pull/42");
    assert_eq!(body["cves"], serde_json::json!(["CVE-2024-45337", "CVE-2023-44487"]));
    assert!(body["summary"].as_str().expect("summary").starts_with("Bumped"));
    let sent_at = body["sent_at"].as_str().expect("sent_at");
    assert!(chrono::DateTime::parse_from_rfc3339(sent_at).is_ok(), "{sent_at}");
    assert_eq!(body.as_object().map(|o| o.len()), Some(6), "{body}");
}

#[tokio::test]
async fn unsigned_json_webhook_has_no_signature() {
    let server = Server::start(vec![(204, "")]).await;
    let hook = JsonWebhook::with_retry(&format!("{}/h", server.base), None, fast()).expect("hook");
    hook.send(&notification(Event::Failed)).await.expect("send");
    let got = server.received();
    assert!(!got[0].headers.contains_key("x-patchpilot-signature"));
    let body: serde_json::Value = serde_json::from_slice(&got[0].body).expect("JSON");
    assert_eq!(body["event"], "failed");
}

#[tokio::test]
async fn a_400_is_not_retried_and_the_error_names_only_the_host() {
    let server = Server::start(vec![(400, "invalid_payload"), (200, "ok")]).await;
    let slack = SlackWebhook::with_retry(&format!("{}{SECRET_PATH}", server.base), fast()).expect("slack");
    let err = slack.send(&notification(Event::Failed)).await.expect_err("a 400 is permanent");
    assert_eq!(server.received().len(), 1, "not retried");
    assert!(matches!(err, NotifyError::Rejected { status: 400, .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("127.0.0.1") && text.contains("invalid_payload"), "{text}");
    assert!(!text.contains("/services") && !text.contains("XXXXsecretXXXX"), "the URL path leaked: {text}");
    assert!(!format!("{err:?}").contains("XXXXsecretXXXX"));
}

#[tokio::test]
async fn persistent_5xx_and_unreachable_hosts_give_up_after_three_tries_without_the_path() {
    let server = Server::start(vec![(503, "down")]).await;
    let hook = JsonWebhook::with_retry(&format!("{}{SECRET_PATH}", server.base), None, fast()).expect("hook");
    let err = hook.send(&notification(Event::Green)).await.expect_err("never succeeds");
    assert_eq!(server.received().len(), 3);
    assert!(matches!(err, NotifyError::Unavailable { attempts: 3, .. }), "{err:?}");
    assert!(!err.to_string().contains("XXXXsecretXXXX"), "{err}");

    // A port held but never listened on: every connection is refused.
    let closed = ClosedPort::reserve().expect("reserve a port");
    let hook =
        SlackWebhook::with_retry(&format!("http://{}{SECRET_PATH}", closed.addr), fast()).expect("hook");
    let err = hook.send(&notification(Event::Green)).await.expect_err("refused");
    assert!(matches!(err, NotifyError::Unavailable { attempts: 3, .. }), "{err:?}");
    let text = err.to_string();
    eprintln!("unreachable: {text}");
    assert!(!text.contains("XXXXsecretXXXX") && !text.contains("/services"), "the URL leaked: {text}");
}

#[tokio::test]
async fn configured_notifiers_and_the_stdout_line() {
    let server = Server::start(vec![(200, "ok")]).await;
    let config: NotifierConfig = serde_json::from_value(serde_json::json!({
        "kind": "json", "url": format!("{}/x", server.base), "secret": "k"
    }))
    .expect("config");
    assert!(!format!("{config:?}").contains(&server.base));
    let notifier = config.build().expect("build");
    assert_eq!(notifier.kind(), "json");
    notifier.send(&notification(Event::Green)).await.expect("send");
    assert_eq!(server.received().len(), 1);

    let line =
        StdoutNotifier::line(&Notification { summary: "two\nlines".into(), ..notification(Event::Green) });
    assert_eq!(
        line,
        "patchpilot: green acme/api https://github.com/acme/api/pull/42 (CVE-2024-45337, CVE-2023-44487): two lines"
    );
    let stdout: NotifierConfig =
        serde_json::from_value(serde_json::json!({"kind": "stdout"})).expect("config");
    let stdout = stdout.build().expect("build");
    assert!(matches!(stdout, Notifier::Stdout(_)));
    stdout.send(&notification(Event::Green)).await.expect("print");
}

/// The weekly digest end to end on real NATS and Postgres: the retro
/// aggregator's `send_if_due` builds it from stored retrospectives and
/// publishes it on `RETRO_DIGESTS`; the controller's digest intake passes
/// it to Slack (this double) and, signed, to a JSON webhook. A second check
/// in the same period (what a restart does) sends nothing; the next period
/// sends the next digest.
#[tokio::test]
async fn a_retro_digest_goes_from_the_aggregator_through_the_controllers_notifiers() -> anyhow::Result<()> {
    use chrono::{Duration as Days, Utc};
    use patchpilot_controller::digest::DigestIntake;
    use patchpilot_fleet::bus::{self, ConsumeOptions, ConsumerMetrics, ConsumerSpec, topics};
    use patchpilot_retro::RetroRecord;

    let stack = patchpilot_e2e::Stack::start().await?;
    let now = Utc::now();
    let record = |run: &str, hours_ago: i64, wrong: &str, tool: Option<&str>| RetroRecord {
        run_id: run.into(),
        repository: "https://github.com/acme/api".into(),
        outcome: "agent_failed".into(),
        model: "gpt-4.1-mini".into(),
        created_at: now - Days::hours(hours_ago),
        went_wrong: vec![wrong.into()],
        missing_tools: tool.map(|t| vec![t.to_owned()]).unwrap_or_default(),
        ..RetroRecord::default()
    };
    let records = vec![
        record(
            "g1",
            30,
            "`go get golang.org/x/net@v0.33.0` could not reach proxy.golang.org: TLS handshake timeout",
            None,
        ),
        record(
            "g2",
            20,
            "Module proxy stopped answering: `go mod tidy` hung, then proxy.golang.org i/o timeout",
            None,
        ),
        record(
            "g3",
            10,
            "go: golang.org/x/crypto@v0.31.0: Get \"https://proxy.golang.org/x\": dial tcp: i/o timeout",
            None,
        ),
        record("m1", 12, "the repository's build needs make <!channel>", Some("make: command not found")),
        record("m2", 8, "the repository's build needs make <!channel>", Some("`make` is not installed")),
        // Before the period: counted for the trend only.
        record("old", 24 * 20, "docker: toomanyrequests: You have reached your pull rate limit", None),
    ];
    assert_eq!(patchpilot_retro::store::insert(&stack.pool, &records, "test").await?, 6);

    let slack = Server::start(vec![(200, "ok")]).await;
    let json = Server::start(vec![(200, "")]).await;
    let notifiers = vec![
        Notifier::Slack(SlackWebhook::with_retry(&format!("{}{SECRET_PATH}", slack.base), fast())?),
        Notifier::Json(JsonWebhook::with_retry(
            &format!("{}/hooks/pp", json.base),
            Some(Secret::new("k")),
            fast(),
        )?),
    ];
    let intake = DigestIntake::new(notifiers);
    let spec = ConsumerSpec {
        stream: topics::RETRO_DIGESTS.stream(),
        durable: "controller".into(),
        filter_subject: None,
    };
    let metrics = ConsumerMetrics::register(&mut prometheus_client::registry::Registry::default());
    let stop = tokio_util::sync::CancellationToken::new();
    let consumer = {
        let (bus, stop) = (stack.bus.clone(), stop.clone());
        tokio::spawn(async move {
            bus::run_consumer(&bus, &spec, ConsumeOptions::default(), &intake, &metrics, stop).await
        })
    };

    let every = Days::days(7);
    let off = patchpilot_retro::summary::SummarySection::default();
    let sent = patchpilot_retro::digest::send_if_due(&stack.pool, &stack.bus, every, 10, now, &off).await?;
    let sent = sent.expect("the first digest is due at once");
    assert_eq!((sent.runs, sent.troubled_runs), (5, 5));
    let again =
        patchpilot_retro::digest::send_if_due(&stack.pool, &stack.bus, every, 10, now + Days::hours(1), &off)
            .await?;
    assert_eq!(again, None, "sent this period already");

    patchpilot_e2e::wait_for("the digest at both webhooks", std::time::Duration::from_secs(30), || async {
        Ok((slack.received().len() == 1 && json.received().len() == 1).then_some(()))
    })
    .await?;
    let body: serde_json::Value = serde_json::from_slice(&slack.received()[0].body)?;
    let sections: Vec<&str> =
        body["blocks"].as_array().into_iter().flatten().filter_map(|b| b["text"]["text"].as_str()).collect();
    let problems = sections.iter().find(|s| s.starts_with("*Top problems*")).expect("top problems");
    assert!(
        problems.contains("3× in 3 runs, new (infrastructure.network) [go module proxy unreachable]"),
        "{problems}"
    );
    assert!(!body.to_string().contains("<!channel>"), "guest text cannot mention: {body}");
    let tools = sections.iter().find(|s| s.starts_with("*Tools to consider")).expect("tools");
    assert!(tools.contains("make: 2 runs"), "{tools}");
    let signed = &json.received()[0];
    assert_eq!(
        signed.headers.get(patchpilot_controller::notify::SIGNATURE_HEADER),
        Some(&patchpilot_controller::notify::signature(b"k", &signed.body))
    );
    let payload: serde_json::Value = serde_json::from_slice(&signed.body)?;
    assert_eq!(
        (payload["event"].as_str(), payload["digest"]["digest_id"].as_str()),
        (Some("retro_digest"), Some(sent.digest_id.as_str()))
    );

    // The next period: due again, another digest.
    let next =
        patchpilot_retro::digest::send_if_due(&stack.pool, &stack.bus, every, 10, now + every, &off).await?;
    let next = next.expect("due in the next period");
    assert_ne!(next.digest_id, sent.digest_id);
    patchpilot_e2e::wait_for("the second digest", std::time::Duration::from_secs(30), || async {
        Ok((slack.received().len() == 2).then_some(()))
    })
    .await?;
    stop.cancel();
    consumer.await??;
    assert_eq!(slack.received().len(), 2, "each period once");
    Ok(())
}
