//! Violations, and the checks both wires share.
//!
//! This module owns how a violation is named (wire, request, path,
//! message) and the rules that read the same on both wires: tool names,
//! object schemas, JSON content types. It must never decide what a wire
//! requires: each wire module says which rule applies where.

use std::fmt;

use http::HeaderMap;
use serde_json::Value;

use crate::conversation::{Conversation, Wire};

/// One way a request departed from its wire's documented shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub wire: Wire,
    /// The request's index in [`requests`](crate::ProviderDouble::requests).
    pub request: usize,
    /// Where: a JSON path into the body (`$.messages[2].tool_calls[0].id`),
    /// `header NAME`, or `request` for the method and path.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} request {} at {}: {}", self.wire, self.request, self.path, self.message)
    }
}

/// The violations of one request, as they are found.
#[derive(Debug)]
pub(crate) struct Findings {
    wire: Wire,
    request: usize,
    pub(crate) list: Vec<Violation>,
}

impl Findings {
    pub(crate) fn new(wire: Wire, request: usize) -> Self {
        Findings { wire, request, list: Vec::new() }
    }

    pub(crate) fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.list.push(Violation {
            wire: self.wire,
            request: self.request,
            path: path.into(),
            message: message.into(),
        });
    }
}

/// Why a request could not be answered from the script at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unusable {
    /// Not the wire's method and path: 404, as the providers answer.
    NotFound,
    /// The body is not a JSON object, or could not be read: 400.
    BadBody,
}

/// A request after its checks.
#[derive(Debug)]
pub(crate) struct Checked {
    /// `None` when the request is [`Unusable`].
    pub(crate) conversation: Option<Conversation>,
    pub(crate) violations: Vec<Violation>,
    pub(crate) unusable: Option<Unusable>,
}

/// What the wire modules check a request from.
#[derive(Debug)]
pub(crate) struct RequestParts<'a> {
    pub(crate) index: usize,
    /// Whether the endpoint takes a credential.
    pub(crate) credentials: crate::Credentials,
    pub(crate) method: &'a http::Method,
    pub(crate) path: &'a str,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) body: &'a [u8],
}

impl RequestParts<'_> {
    /// Checks the credential headers of `names` for an endpoint that takes
    /// none: any of them present is a violation (a key where none belongs).
    /// Returns whether the endpoint takes none, so the wire's own check of
    /// their presence is skipped.
    pub(crate) fn keyless(&self, names: &[&str], found: &mut Findings) -> bool {
        if self.credentials != crate::Credentials::None {
            return false;
        }
        for name in names {
            if self.header(name).is_some() {
                found.add(format!("header {name}"), "present; this endpoint takes no credential");
            }
        }
        true
    }

    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    }
}

/// The checks every request gets before its body is read: method and
/// path, then a JSON body. Returns the body object, or why the request is
/// unusable (the violation already recorded).
pub(crate) fn request_line_and_body<'b>(
    req: &RequestParts<'_>,
    wire: Wire,
    body: &'b Option<Value>,
    found: &mut Findings,
) -> Result<&'b serde_json::Map<String, Value>, Unusable> {
    if req.method != http::Method::POST || req.path != wire.path() {
        found.add(
            "request",
            format!("{} {}: the {wire} wire is served at POST {}", req.method, req.path, wire.path()),
        );
        return Err(Unusable::NotFound);
    }
    match req.header("content-type") {
        None => found.add("header content-type", "missing; the body is JSON: application/json"),
        Some(v) if !is_json_media_type(&v) => {
            found.add("header content-type", format!("{v:?} is not application/json"))
        }
        Some(_) => {}
    }
    match body {
        Some(Value::Object(map)) => Ok(map),
        Some(other) => {
            found.add("$", format!("the body is a JSON {}, not an object", kind(other)));
            Err(Unusable::BadBody)
        }
        None => {
            let e = serde_json::from_slice::<Value>(req.body).err();
            let why = e.map_or_else(|| "not JSON".to_owned(), |e| e.to_string());
            found.add("$", format!("the body is not JSON: {why}"));
            Err(Unusable::BadBody)
        }
    }
}

/// `application/json`, with or without parameters such as a charset.
fn is_json_media_type(value: &str) -> bool {
    value.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

/// `^[a-zA-Z0-9_-]{1,64}$`, the name rule both providers document for tools.
pub(crate) fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A JSON Schema for an object, as both wires require of a tool's
/// parameters: an object with `type: "object"`, `properties` (if any) an
/// object and `required` (if any) an array of strings.
pub(crate) fn check_object_schema(schema: &Value, path: &str, found: &mut Findings) {
    let Some(map) = schema.as_object() else {
        found.add(path, format!("must be a JSON Schema object, not a JSON {}", kind(schema)));
        return;
    };
    match map.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => found.add(format!("{path}.type"), format!("must be \"object\", not {other}")),
        None => found.add(format!("{path}.type"), "missing; the schema must have type \"object\""),
    }
    if let Some(p) = map.get("properties")
        && !p.is_object()
    {
        found.add(format!("{path}.properties"), format!("must be an object, not a JSON {}", kind(p)));
    }
    if let Some(r) = map.get("required")
        && !r.as_array().is_some_and(|a| a.iter().all(Value::is_string))
    {
        found.add(format!("{path}.required"), "must be an array of strings");
    }
}

/// A non-empty string field, or a violation.
pub(crate) fn required_string<'v>(
    map: &'v serde_json::Map<String, Value>,
    key: &str,
    path: &str,
    found: &mut Findings,
) -> Option<&'v str> {
    match map.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        Some(Value::String(_)) => {
            found.add(format!("{path}.{key}"), "must not be empty");
            None
        }
        Some(other) => {
            found.add(format!("{path}.{key}"), format!("must be a string, not a JSON {}", kind(other)));
            None
        }
        None => {
            found.add(format!("{path}.{key}"), "missing");
            None
        }
    }
}

/// A positive integer field, if present.
pub(crate) fn positive_integer(map: &serde_json::Map<String, Value>, key: &str, found: &mut Findings) {
    if let Some(v) = map.get(key)
        && v.as_u64().is_none_or(|n| n == 0)
    {
        found.add(format!("$.{key}"), format!("must be a positive integer, not {v}"));
    }
}

/// Top-level fields outside the documented set.
pub(crate) fn unknown_fields(map: &serde_json::Map<String, Value>, known: &[&str], found: &mut Findings) {
    for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
        found.add(format!("$.{key}"), "not a documented request field");
    }
}

/// `stream: true` asks for server-sent events, which the double does not
/// serve: it answers one JSON body whatever `stream` says.
pub(crate) fn no_streaming(map: &serde_json::Map<String, Value>, found: &mut Findings) {
    match map.get("stream") {
        None | Some(Value::Bool(false)) | Some(Value::Null) => {}
        Some(Value::Bool(true)) => {
            found.add("$.stream", "true asks for server-sent events; the double does not stream")
        }
        Some(other) => found.add("$.stream", format!("must be a boolean, not {other}")),
    }
}

/// What kind of JSON value this is, for messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_follow_the_documented_pattern() {
        assert!(valid_tool_name("read_file"));
        assert!(valid_tool_name("a-B_9"));
        assert!(valid_tool_name(&"x".repeat(64)));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name(&"x".repeat(65)));
        assert!(!valid_tool_name("read file"));
        assert!(!valid_tool_name("read.file"));
        assert!(!valid_tool_name("lire_fichier_é"));
    }

    #[test]
    fn json_media_types_may_carry_parameters() {
        assert!(is_json_media_type("application/json"));
        assert!(is_json_media_type("Application/JSON; charset=utf-8"));
        assert!(!is_json_media_type("text/plain"));
        assert!(!is_json_media_type("application/jsonl"));
    }
}
