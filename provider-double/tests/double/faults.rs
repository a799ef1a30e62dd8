//! Every fault and deviation, on both wires: the documented status,
//! headers and body.

use std::time::Duration;

use patchpilot_provider_double::{Deviation, Fault, ProviderDouble, Scripted, Turn, Usage, Wire};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::*;

const WIRES: [Wire; 2] = [Wire::OpenAi, Wire::Anthropic];

/// A double that answers `turn`, and what one well-formed request got.
async fn one(wire: Wire, turn: Turn) -> (Sent, ProviderDouble) {
    let double = ProviderDouble::start(Scripted::new(vec![turn])).await.expect("start");
    let sent = post_wire(&double, wire, &body_for(wire)).await;
    assert!(double.violations().is_empty(), "{:#?}", double.violations());
    (sent, double)
}

/// `{"error": {"message", "type", "param", "code"}}`.
#[track_caller]
fn assert_openai_error(body: &Value, kind: &str, param: Option<&str>, code: Option<&str>) -> String {
    assert_eq!(keys(body), set(&["error"]), "{body}");
    let error = &body["error"];
    assert_eq!(keys(error), set(&["message", "type", "param", "code"]), "{body}");
    assert_eq!(error["type"], kind, "{body}");
    assert_eq!(error["param"], json!(param), "{body}");
    assert_eq!(error["code"], json!(code), "{body}");
    let message = error["message"].as_str().expect("a message").to_owned();
    assert!(!message.is_empty());
    message
}

/// `{"type": "error", "error": {"type", "message"}, "request_id"}`, the id
/// also in `request-id`.
#[track_caller]
fn assert_anthropic_error(sent: &Sent, kind: &str) -> String {
    let body = &sent.body;
    assert_eq!(keys(body), set(&["type", "error", "request_id"]), "{body}");
    assert_eq!(body["type"], "error");
    assert_eq!(keys(&body["error"]), set(&["type", "message"]), "{body}");
    assert_eq!(body["error"]["type"], kind, "{body}");
    let id = assert_id(&body["request_id"], "req_");
    assert_eq!(sent.header("request-id"), Some(id.as_str()));
    body["error"]["message"].as_str().expect("a message").to_owned()
}

#[tokio::test]
async fn rate_limited_is_429_with_retry_after() {
    for wire in WIRES {
        let (sent, double) = one(wire, Turn::Fault(Fault::RateLimited { retry_after_secs: 7 })).await;
        assert_eq!(sent.status, 429, "{wire}");
        assert_eq!(sent.header("retry-after"), Some("7"), "{wire}");
        match wire {
            Wire::OpenAi => {
                assert_openai_error(&sent.body, "requests", None, Some("rate_limit_exceeded"));
            }
            Wire::Anthropic => {
                assert_anthropic_error(&sent, "rate_limit_error");
            }
        }
        assert_eq!(double.usage(), Usage::default(), "an error reports no usage");
        assert_eq!(double.requests()[0].status, 429);
    }
}

#[tokio::test]
async fn server_errors_and_overload() {
    for wire in WIRES {
        let (sent, _double) = one(wire, Turn::Fault(Fault::ServerError)).await;
        assert_eq!(sent.status, 500, "{wire}");
        match wire {
            Wire::OpenAi => drop(assert_openai_error(&sent.body, "server_error", None, None)),
            Wire::Anthropic => drop(assert_anthropic_error(&sent, "api_error")),
        }
        let (sent, _double) = one(wire, Turn::Fault(Fault::Overloaded)).await;
        match wire {
            Wire::OpenAi => {
                assert_eq!(sent.status, 503);
                assert_openai_error(&sent.body, "server_error", None, None);
            }
            Wire::Anthropic => {
                assert_eq!(sent.status, 529);
                assert_eq!(assert_anthropic_error(&sent, "overloaded_error"), "Overloaded");
            }
        }
    }
}

#[tokio::test]
async fn context_length_has_the_documented_code_and_message() {
    let (sent, _double) = one(Wire::OpenAi, Turn::Fault(Fault::ContextLength)).await;
    assert_eq!(sent.status, 400);
    let message = assert_openai_error(
        &sent.body,
        "invalid_request_error",
        Some("messages"),
        Some("context_length_exceeded"),
    );
    assert!(message.starts_with("This model's maximum context length is 128000 tokens."), "{message}");

    let (sent, _double) = one(Wire::Anthropic, Turn::Fault(Fault::ContextLength)).await;
    assert_eq!(sent.status, 400);
    let message = assert_anthropic_error(&sent, "invalid_request_error");
    let tokens: u64 = message
        .strip_prefix("prompt is too long: ")
        .and_then(|rest| rest.strip_suffix(" tokens > 200000 maximum"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not the documented message: {message:?}"));
    assert!(tokens > 200_000);
}

#[tokio::test]
async fn a_truncated_body_fails_on_the_client() {
    for wire in WIRES {
        let double = ProviderDouble::start(Scripted::new(vec![Turn::Fault(Fault::TruncatedBody)]))
            .await
            .expect("start");
        let mut req = client().post(url(&double, wire)).json(&body_for(wire));
        for (name, value) in headers_for(wire) {
            req = req.header(name, value);
        }
        let resp = req.send().await.expect("the head arrives whole");
        assert_eq!(resp.status(), 200, "{wire}");
        assert!(resp.content_length().is_some_and(|n| n > 0));
        assert!(resp.json::<Value>().await.is_err(), "{wire}: a truncated body must not parse");
        assert_eq!(double.calls(), 1);
        assert_eq!(double.usage(), Usage::default(), "a body that never arrived whole reports no usage");
    }
}

#[tokio::test]
async fn a_truncated_body_sends_half_then_closes() {
    // On the raw socket: the bytes that do arrive are a prefix of JSON,
    // shorter than the declared length, and then the connection ends.
    let double =
        ProviderDouble::start(Scripted::new(vec![Turn::Fault(Fault::TruncatedBody)])).await.expect("start");
    let body = openai_body().to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         authorization: Bearer {CAPABILITY}\r\ncontent-length: {}\r\n\r\n{body}",
        double.addr(),
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(double.addr()).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut got))
        .await
        .expect("the double closes the connection")
        .expect("read");
    let text = String::from_utf8(got).expect("UTF-8");
    let (head, part) = text.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let declared: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned))
        .and_then(|n| n.trim().parse().ok())
        .expect("a content-length");
    assert!(!part.is_empty() && part.len() < declared, "{} of {declared} bytes", part.len());
    assert!(part.starts_with("{\""), "{part}");
    assert!(serde_json::from_str::<Value>(part).is_err(), "{part}");
}

#[tokio::test]
async fn malformed_tool_arguments() {
    let turn = Turn::Fault(Fault::MalformedToolArguments { name: "read_file".into() });
    let (sent, _double) = one(Wire::OpenAi, turn.clone()).await;
    assert_eq!(sent.status, 200);
    let choice = &sent.body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    let call = &choice["message"]["tool_calls"][0];
    assert_id(&call["id"], "call_");
    assert_eq!(call["function"]["name"], "read_file");
    let arguments = call["function"]["arguments"].as_str().expect("a string");
    assert_eq!(arguments, "{\"path\": ");
    assert!(serde_json::from_str::<Value>(arguments).is_err());

    let (sent, _double) = one(Wire::Anthropic, turn).await;
    assert_eq!(sent.status, 200);
    assert_eq!(sent.body["stop_reason"], "tool_use");
    let block = &sent.body["content"][0];
    assert_id(&block["id"], "toolu_");
    assert_eq!(block["name"], "read_file");
    assert_eq!(block["input"], json!("{\"path\": "), "input is a string, not an object");
}

#[tokio::test]
async fn max_tokens_ends_the_reply_at_the_limit() {
    let turn = Turn::Fault(Fault::MaxTokens { text: "The fix is to".into() });
    let (sent, double) = one(Wire::OpenAi, turn.clone()).await;
    assert_eq!(sent.body["choices"][0]["finish_reason"], "length");
    assert_eq!(sent.body["choices"][0]["message"]["content"], "The fix is to");
    assert!(double.usage().output_tokens > 0, "a cut reply still reports usage");
    let (sent, _double) = one(Wire::Anthropic, turn).await;
    assert_eq!(sent.body["stop_reason"], "max_tokens");
    assert_eq!(sent.body["content"], json!([{"type": "text", "text": "The fix is to"}]));
}

#[tokio::test]
async fn a_missing_call_id() {
    let turn = Turn::tool_call("read_file", json!({"path": "a"})).deviant(Deviation::MissingCallId);
    let (sent, _double) = one(Wire::OpenAi, turn.clone()).await;
    let call = &sent.body["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(keys(call), set(&["type", "function"]), "{call}");
    let (sent, _double) = one(Wire::Anthropic, turn).await;
    assert_eq!(keys(&sent.body["content"][0]), set(&["type", "name", "input"]));
}

#[tokio::test]
async fn arguments_in_the_other_wires_encoding() {
    let turn = Turn::tool_call("read_file", json!({"path": "a"})).deviant(Deviation::ArgumentsAsObject);
    let (sent, _double) = one(Wire::OpenAi, turn.clone()).await;
    let call = &sent.body["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(
        call["function"]["arguments"],
        json!({"path": "a"}),
        "an object, as llama.cpp and Ollama send it"
    );
    assert_id(&call["id"], "call_");
    let (sent, _double) = one(Wire::Anthropic, turn).await;
    let input = sent.body["content"][0]["input"].as_str().expect("input as a JSON string");
    assert_eq!(serde_json::from_str::<Value>(input).expect("JSON"), json!({"path": "a"}));
}

#[tokio::test]
async fn deviations_compose() {
    let turn = Turn::Reply {
        text: Some("Two.".into()),
        tool_calls: vec![("a".into(), json!({})), ("b".into(), json!({"x": 1}))],
        usage: None,
    }
    .deviant(Deviation::MissingCallId)
    .deviant(Deviation::ArgumentsAsObject);
    let (sent, _double) = one(Wire::OpenAi, turn).await;
    let message = &sent.body["choices"][0]["message"];
    assert_eq!(message["content"], "Two.");
    assert_eq!(
        message["tool_calls"],
        json!([
            {"type": "function", "function": {"name": "a", "arguments": {}}},
            {"type": "function", "function": {"name": "b", "arguments": {"x": 1}}},
        ])
    );
}
