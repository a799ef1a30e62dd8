//! What the tests share: a client, well-formed requests, and assertions.

use std::collections::BTreeSet;

use patchpilot_provider_double::{Conversation, ProviderDouble, Turn, Violation, Wire};
use serde_json::{Value, json};

/// The authorization a client under test would send: a per-run
/// capability, which the double records and does not judge.
pub const CAPABILITY: &str = "run-capability-0123";

/// An answer as the client saw it.
#[derive(Debug)]
pub struct Sent {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Sent {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub fn client() -> reqwest::Client {
    // No proxy from the environment: the double is on loopback.
    // In a workspace build reqwest's `rustls-no-provider` (the agent's) is
    // on too, and then a client needs a provider installed first, even for
    // plain HTTP; one already installed is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().expect("a reqwest client")
}

pub fn openai_headers() -> Vec<(&'static str, String)> {
    vec![("authorization", format!("Bearer {CAPABILITY}"))]
}

pub fn anthropic_headers() -> Vec<(&'static str, String)> {
    vec![("x-api-key", CAPABILITY.to_owned()), ("anthropic-version", "2023-06-01".to_owned())]
}

pub fn headers_for(wire: Wire) -> Vec<(&'static str, String)> {
    match wire {
        Wire::OpenAi => openai_headers(),
        Wire::Anthropic => anthropic_headers(),
    }
}

pub fn url(double: &ProviderDouble, wire: Wire) -> String {
    format!("{}{}", double.base_url(), wire.path())
}

/// POSTs `body` as JSON (`content-type: application/json`).
pub async fn post(url: &str, headers: &[(&str, String)], body: &Value) -> Sent {
    let mut req = client().post(url).json(body);
    for (name, value) in headers {
        req = req.header(*name, value);
    }
    let resp = req.send().await.expect("the double answers");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.json().await.expect("a JSON body");
    Sent { status, headers, body }
}

pub async fn post_wire(double: &ProviderDouble, wire: Wire, body: &Value) -> Sent {
    post(&url(double, wire), &headers_for(wire), body).await
}

pub fn read_file_openai() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Reads a file of the repository.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    })
}

pub fn read_file_anthropic() -> Value {
    json!({
        "name": "read_file",
        "description": "Reads a file of the repository.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    })
}

/// A well-formed first request.
pub fn openai_body() -> Value {
    json!({
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You fix CVEs in container images."},
            {"role": "user", "content": "Fix CVE-2024-0001 in this image."},
        ],
        "tools": [read_file_openai()],
        "tool_choice": "auto",
        "max_completion_tokens": 512,
    })
}

/// A well-formed first request.
pub fn anthropic_body() -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 512,
        "system": [{"type": "text", "text": "You fix CVEs in container images."}],
        "messages": [{"role": "user", "content": "Fix CVE-2024-0001 in this image."}],
        "tools": [read_file_anthropic()],
        "tool_choice": {"type": "auto"},
    })
}

pub fn body_for(wire: Wire) -> Value {
    match wire {
        Wire::OpenAi => openai_body(),
        Wire::Anthropic => anthropic_body(),
    }
}

/// The violations a double answering "ok" finds in one request; the
/// request must still get its scripted 200.
pub async fn violations_of(wire: Wire, headers: &[(&str, String)], body: &Value) -> Vec<Violation> {
    let double = ProviderDouble::start(|_: &Conversation, _: usize| Turn::text("ok")).await.expect("start");
    let sent = post(&url(&double, wire), headers, body).await;
    assert_eq!(sent.status, 200, "a request with violations still gets its reply: {:?}", sent.body);
    let found = double.violations();
    assert!(found.iter().all(|v| v.wire == wire && v.request == 0), "{found:#?}");
    found
}

/// Asserts some violation is at `path` and says `fragment`.
#[track_caller]
pub fn assert_violation(found: &[Violation], path: &str, fragment: &str) {
    assert!(
        found.iter().any(|v| v.path == path && v.message.contains(fragment)),
        "no violation at {path} saying {fragment:?} among:\n{}",
        found.iter().map(|v| format!("  {v}\n")).collect::<String>()
    );
}

/// An object's keys.
#[track_caller]
pub fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().cloned().collect()
}

pub fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// An id of `prefix` and more, as the providers shape them.
#[track_caller]
pub fn assert_id(v: &Value, prefix: &str) -> String {
    let id = v.as_str().unwrap_or_else(|| panic!("id is not a string: {v}"));
    assert!(id.starts_with(prefix) && id.len() > prefix.len(), "{id:?} is not a {prefix}… id");
    id.to_owned()
}
