//! Scripts: closures that read what the client sent, exhaustion, panics,
//! unusable requests, concurrent calls, and the double's lifetime.

use std::net::SocketAddr;
use std::time::Duration;

use patchpilot_provider_double::{Conversation, Message, ProviderDouble, Scripted, Turn, Violation, Wire};
use serde_json::json;

use crate::support::*;

/// What a compromised model would do: read a file, then repeat what the
/// tool returned.
fn echo_the_tool_result(conversation: &Conversation, call_index: usize) -> Turn {
    if call_index == 0 {
        return Turn::tool_call("read_file", json!({"path": "/run/secrets/token"}));
    }
    let called = conversation.messages.iter().find_map(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls.first().map(|c| (c.id.clone(), c.args.clone())),
        _ => None,
    });
    match (conversation.tool_results().last(), called) {
        (Some((id, content, is_error)), Some((called_id, args))) => Turn::text(format!(
            "{} {id} {} {content}",
            id == called_id && args["path"] == "/run/secrets/token",
            if is_error { "failed:" } else { "said:" },
        )),
        _ => Turn::text("no tool result"),
    }
}

#[tokio::test]
async fn a_closure_script_sees_the_tool_results_the_client_sent() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let double = ProviderDouble::start(echo_the_tool_result).await.expect("start");
        let first = body_for(wire);
        let sent = post_wire(&double, wire, &first).await;
        let mut second = first.clone();
        let history = second["messages"].as_array_mut().expect("messages");
        let id = match wire {
            Wire::OpenAi => {
                let message = sent.body["choices"][0]["message"].clone();
                let id = message["tool_calls"][0]["id"].clone();
                history.push(message);
                history.push(json!({"role": "tool", "tool_call_id": id, "content": "hunter2"}));
                id
            }
            Wire::Anthropic => {
                let id = sent.body["content"][0]["id"].clone();
                history.push(json!({"role": "assistant", "content": sent.body["content"]}));
                history.push(json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": id, "content": "hunter2"}
                ]}));
                id
            }
        };
        let sent = post_wire(&double, wire, &second).await;
        let text = match wire {
            Wire::OpenAi => sent.body["choices"][0]["message"]["content"].clone(),
            Wire::Anthropic => sent.body["content"][0]["text"].clone(),
        };
        let id = id.as_str().expect("an id");
        assert_eq!(text, json!(format!("true {id} said: hunter2")), "{wire}");
        assert!(double.violations().is_empty(), "{:#?}", double.violations());
    }
}

#[tokio::test]
async fn an_exhausted_script_answers_and_records_a_violation() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let double = ProviderDouble::start(Scripted::new(vec![Turn::text("only")])).await.expect("start");
        let body = body_for(wire);
        post_wire(&double, wire, &body).await;
        assert!(double.violations().is_empty());
        let sent = post_wire(&double, wire, &body).await;
        assert_eq!(sent.status, 200);
        let text = match wire {
            Wire::OpenAi => sent.body["choices"][0]["message"]["content"].clone(),
            Wire::Anthropic => sent.body["content"][0]["text"].clone(),
        };
        assert_eq!(text, "script exhausted");
        assert_eq!(
            double.violations(),
            vec![Violation { wire, request: 1, path: "script".into(), message: "script exhausted".into() }]
        );
    }
}

#[tokio::test]
async fn a_panicking_script_answers_500_and_says_why() {
    let double =
        ProviderDouble::start(|_: &Conversation, _: usize| -> Turn { panic!("boom") }).await.expect("start");
    let sent = post_wire(&double, Wire::OpenAi, &openai_body()).await;
    assert_eq!(sent.status, 500);
    assert_violation(&double.violations(), "script", "the script panicked: boom");
    // The double still serves.
    assert_eq!(post_wire(&double, Wire::Anthropic, &anthropic_body()).await.status, 500);
    assert_eq!(double.calls(), 2);
}

async fn raw(
    double: &ProviderDouble,
    method: reqwest::Method,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> Sent {
    let mut req = client().request(method, format!("{}{path}", double.base_url())).body(body.to_owned());
    for (name, value) in headers {
        req = req.header(*name, value);
    }
    let resp = req.send().await.expect("answered");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    Sent { status, headers, body: resp.json().await.expect("a JSON error body") }
}

#[tokio::test]
async fn unusable_requests_get_the_wires_error_and_do_not_use_the_script() {
    let double = ProviderDouble::start(Scripted::new(vec![Turn::text("first")])).await.expect("start");
    let mut json_headers = openai_headers();
    json_headers.push(("content-type", "application/json".into()));

    let sent =
        raw(&double, reqwest::Method::POST, "/v1/chat/completions", &json_headers, "{\"model\": ").await;
    assert_eq!(sent.status, 400);
    assert_eq!(sent.body["error"]["type"], "invalid_request_error");

    let sent = raw(&double, reqwest::Method::POST, "/v1/chat/completion", &json_headers, "{}").await;
    assert_eq!(sent.status, 404);
    assert_eq!(sent.body["error"]["message"], "Invalid URL (POST /v1/chat/completion)");

    let mut anthropic = anthropic_headers();
    anthropic.push(("content-type", "application/json".into()));
    let sent = raw(&double, reqwest::Method::GET, "/v1/messages", &anthropic, "").await;
    assert_eq!(sent.status, 404);
    assert_eq!(sent.body["type"], "error");
    assert_eq!(sent.body["error"]["type"], "not_found_error");

    let sent = raw(&double, reqwest::Method::POST, "/v1/complete", &anthropic, "{}").await;
    assert_eq!(sent.status, 404, "an unknown path with Anthropic's headers");
    assert_eq!(sent.body["error"]["type"], "not_found_error");

    let sent = raw(&double, reqwest::Method::POST, "/v1/messages", &anthropic, "[1, 2]").await;
    assert_eq!(sent.status, 400);
    assert_eq!(sent.body["error"]["type"], "invalid_request_error");

    let found = double.violations();
    assert_violation(&found, "$", "the body is not JSON");
    assert_violation(
        &found,
        "request",
        "POST /v1/chat/completion: the openai wire is served at POST /v1/chat/completions",
    );
    assert_violation(
        &found,
        "request",
        "GET /v1/messages: the anthropic wire is served at POST /v1/messages",
    );
    assert_violation(&found, "$", "the body is a JSON array, not an object");
    assert_eq!(double.calls(), 5);
    let requests = double.requests();
    assert!(requests.iter().all(|r| r.conversation.is_none()));
    assert_eq!(requests[0].body, "{\"model\": ");
    assert_eq!(requests[0].json, None);
    assert_eq!(requests.iter().map(|r| r.status).collect::<Vec<_>>(), vec![400, 404, 404, 404, 400]);

    // None of them used a turn: the first usable request gets the first.
    let sent = post_wire(&double, Wire::OpenAi, &openai_body()).await;
    assert_eq!(sent.body["choices"][0]["message"]["content"], "first");
}

#[tokio::test]
async fn concurrent_calls_are_numbered_and_recorded_once_each() {
    let double =
        ProviderDouble::start(|_: &Conversation, i: usize| Turn::text(i.to_string())).await.expect("start");
    let url = url(&double, Wire::OpenAi);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { post(&url, &openai_headers(), &openai_body()).await })
        })
        .collect();
    let mut answered = Vec::new();
    for task in tasks {
        let sent = task.await.expect("a request task");
        answered.push(
            sent.body["choices"][0]["message"]["content"]
                .as_str()
                .expect("text")
                .parse::<usize>()
                .expect("n"),
        );
    }
    answered.sort_unstable();
    assert_eq!(answered, (0..8).collect::<Vec<_>>());
    let requests = double.requests();
    assert_eq!(requests.iter().map(|r| r.index).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    assert!(double.violations().is_empty());
}

#[tokio::test]
async fn start_on_binds_where_it_is_told_and_drop_stops_serving() {
    let asked: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    let double = ProviderDouble::start_on(asked, Scripted::new(vec![])).await.expect("start");
    let addr = double.addr();
    assert_ne!(addr.port(), 0);
    assert_eq!(double.base_url(), format!("http://{addr}"));
    let sent = post_wire(&double, Wire::OpenAi, &openai_body()).await;
    assert_eq!(sent.body["choices"][0]["message"]["content"], "script exhausted");
    drop(double);
    // The accept loop ends once the runtime gets to the aborted task.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(tokio::time::Instant::now() < deadline, "{addr} still accepts after the double was dropped");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let everywhere: SocketAddr = "0.0.0.0:0".parse().expect("an address");
    let double =
        ProviderDouble::start_on(everywhere, Scripted::new(vec![Turn::text("here")])).await.expect("start");
    assert!(double.addr().ip().is_unspecified());
    assert_eq!(
        double.base_url(),
        format!("http://127.0.0.1:{}", double.addr().port()),
        "a URL a client can use"
    );
    let sent = post_wire(&double, Wire::Anthropic, &anthropic_body()).await;
    assert_eq!(sent.body["content"][0]["text"], "here");
}

#[tokio::test]
async fn a_script_sees_the_neutral_view_of_either_wire() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Conversation>::new()));
    let record = std::sync::Arc::clone(&seen);
    let double = ProviderDouble::start(move |c: &Conversation, _: usize| {
        record.lock().expect("lock").push(c.clone());
        Turn::text("ok")
    })
    .await
    .expect("start");
    post_wire(&double, Wire::OpenAi, &openai_body()).await;
    post_wire(&double, Wire::Anthropic, &anthropic_body()).await;
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2);
    let (openai, anthropic) = (&seen[0], &seen[1]);
    assert_eq!((openai.wire, anthropic.wire), (Wire::OpenAi, Wire::Anthropic));
    assert_eq!(openai.system, anthropic.system);
    assert_eq!(openai.messages, anthropic.messages);
    assert_eq!(openai.tools, anthropic.tools);
}

/// A keyless endpoint (a model served without keys) takes requests with no
/// credential header, and flags one that carries any, on both wires.
#[tokio::test]
async fn a_keyless_double_refuses_any_credential_and_needs_none() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let double = ProviderDouble::start_keyless(|_: &Conversation, _: usize| Turn::text("ok"))
            .await
            .expect("start");
        let version = vec![("anthropic-version", "2023-06-01".to_owned())];
        let bare = if wire == Wire::Anthropic { version.clone() } else { Vec::new() };
        let sent = post(&url(&double, wire), &bare, &body_for(wire)).await;
        assert_eq!(sent.status, 200);
        assert!(double.violations().is_empty(), "{wire:?}: {:#?}", double.violations());
        let mut keyed = headers_for(wire);
        keyed.push(("x-api-key", "sk-should-not-be-here".to_owned()));
        post(&url(&double, wire), &keyed, &body_for(wire)).await;
        let found = double.violations();
        assert_violation(&found, "header x-api-key", "this endpoint takes no credential");
        assert!(found.iter().all(|v| v.request == 1), "{found:#?}");
    }
}
