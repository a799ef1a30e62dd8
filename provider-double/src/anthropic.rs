//! Anthropic Messages, `POST /v1/messages`: the checks on a request, its
//! neutral view, and the replies and errors in Anthropic's shape.
//!
//! This module owns everything the double knows of the Anthropic wire, and
//! nothing of OpenAI's. It must never accept a request quietly: every
//! departure from the documented shape becomes a violation. Where the API
//! is lenient the double is strict on purpose: the Messages reference says
//! consecutive turns of one role "will be combined into a single turn",
//! but a client that sends two in a row has lost track of its own
//! conversation, so the double flags it.
//!
//! Documented shape relied on: the Messages API reference
//! (<https://docs.anthropic.com/en/api/messages>), as generated into the
//! official SDK's types (`anthropics/anthropic-sdk-python`,
//! `src/anthropic/types/`: `message_create_params.py` for the request
//! fields, `max_tokens` required and "there is no `system` role";
//! `message.py` for the response; `tool_param.py`, whose `input_schema`
//! must have `type: "object"`; `tool_result_block_param.py`), the versioning
//! page (<https://docs.anthropic.com/en/api/versioning>: `anthropic-version:
//! 2023-06-01`), the tool-use guide
//! (<https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use>:
//! `tool_result` blocks in the user message right after the `tool_use`, before
//! any text) and the errors page (<https://docs.anthropic.com/en/api/errors>:
//! the error body with its `request_id`, 429 `rate_limit_error` with
//! `retry-after`, 500 `api_error`, 529 `overloaded_error`). The prompt-too-long
//! message is the one the API sends (`prompt is too long: N tokens > M
//! maximum`), as users have reported it, for example in
//! `anthropics/claude-code` issue 12186.

use std::collections::HashSet;

use http::{HeaderName, HeaderValue, StatusCode};
use serde_json::{Map, Value, json};

use crate::answer::{self, ANTHROPIC_CONTEXT_TOKENS, Answer, PlannedArgs, ProviderError, Resolved, Stop};
use crate::check::{
    Checked, Findings, RequestParts, Unusable, check_object_schema, kind, no_streaming,
    request_line_and_body, required_string, unknown_fields, valid_tool_name,
};
use crate::conversation::{Conversation, Message, ToolCall, ToolSpec, Wire};

/// The API version the double speaks.
pub(crate) const VERSION: &str = "2023-06-01";

/// The documented top-level request fields; anything else is a violation
/// (the API itself refuses extra inputs).
pub(crate) const REQUEST_FIELDS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "cache_control",
    "container",
    "inference_geo",
    "metadata",
    "output_config",
    "service_tier",
    "stop_sequences",
    "stream",
    "system",
    "temperature",
    "thinking",
    "tool_choice",
    "tools",
    "top_k",
    "top_p",
];

/// Blocks a user message may hold besides `tool_result` and `text`.
const USER_MEDIA: &[&str] = &["image", "document", "search_result"];
/// Blocks a `tool_result`'s content may hold besides `text`.
const RESULT_MEDIA: &[&str] = &["image", "document", "search_result"];
/// Blocks an assistant message may hold besides `text` and `tool_use`.
const ASSISTANT_OTHER: &[&str] = &["thinking", "redacted_thinking"];

/// Checks a request and builds its neutral view.
pub(crate) fn check(req: &RequestParts<'_>) -> Checked {
    let mut found = Findings::new(Wire::Anthropic, req.index);
    let json: Option<Value> = serde_json::from_slice(req.body).ok();
    let map = match request_line_and_body(req, Wire::Anthropic, &json, &mut found) {
        Ok(map) => map,
        Err(unusable) => {
            return Checked { conversation: None, violations: found.list, unusable: Some(unusable) };
        }
    };
    match req.header("anthropic-version") {
        None => found.add("header anthropic-version", format!("missing; required ({VERSION})")),
        Some(v) if v != VERSION => found.add(
            "header anthropic-version",
            format!("{v:?} is not the version the double speaks ({VERSION})"),
        ),
        Some(_) => {}
    }
    let key = |name: &str| req.header(name).is_some_and(|v| !v.trim().is_empty());
    if !req.keyless(&["x-api-key", "authorization"], &mut found) && !key("x-api-key") && !key("authorization")
    {
        found.add("header x-api-key", "missing, and no authorization header either");
    }
    unknown_fields(map, REQUEST_FIELDS, &mut found);
    no_streaming(map, &mut found);
    match map.get("max_tokens") {
        None => found.add("$.max_tokens", "missing; required"),
        Some(v) if v.as_u64().is_none_or(|n| n == 0) => {
            found.add("$.max_tokens", format!("must be a positive integer, not {v}"))
        }
        Some(_) => {}
    }
    let model = required_string(map, "model", "$", &mut found).unwrap_or_default().to_owned();
    let system = check_system(map.get("system"), &mut found);
    let tools = check_tools(map.get("tools"), &mut found);
    check_tool_choice(map.get("tool_choice"), &tools, &mut found);
    let messages = check_messages(map.get("messages"), &mut found);
    Checked {
        conversation: Some(Conversation { wire: Wire::Anthropic, model, system, messages, tools }),
        violations: found.list,
        unusable: None,
    }
}

fn check_system(system: Option<&Value>, found: &mut Findings) -> Option<String> {
    match system {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            for (j, b) in blocks.iter().enumerate() {
                match (b.get("type").and_then(Value::as_str), b.get("text")) {
                    (Some("text"), Some(Value::String(t))) => texts.push(t.clone()),
                    _ => found.add(
                        format!("$.system[{j}]"),
                        "must be a text block {\"type\": \"text\", \"text\": …}",
                    ),
                }
            }
            Some(texts.join("\n"))
        }
        Some(other) => {
            found.add(
                "$.system",
                format!("must be a string or an array of text blocks, not a JSON {}", kind(other)),
            );
            None
        }
    }
}

/// A message's content as blocks: a string is one text block.
fn blocks(obj: &Map<String, Value>, path: &str, last_assistant: bool, found: &mut Findings) -> Vec<Value> {
    let out = match obj.get("content") {
        Some(Value::String(s)) => {
            if s.is_empty() {
                vec![]
            } else {
                vec![json!({"type": "text", "text": s})]
            }
        }
        Some(Value::Array(list)) => list.clone(),
        Some(other) => {
            found.add(
                format!("{path}.content"),
                format!("must be a string or an array of content blocks, not a JSON {}", kind(other)),
            );
            return Vec::new();
        }
        None => {
            found.add(format!("{path}.content"), "missing");
            return Vec::new();
        }
    };
    // Documented: only a final assistant message (a prefill) may be empty.
    if out.is_empty() && !last_assistant {
        found.add(format!("{path}.content"), "must not be empty");
    }
    out
}

fn check_messages(messages: Option<&Value>, found: &mut Findings) -> Vec<Message> {
    let list = match messages {
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(Value::Array(_)) => {
            found.add("$.messages", "must not be empty");
            return Vec::new();
        }
        Some(other) => {
            found.add("$.messages", format!("must be an array, not a JSON {}", kind(other)));
            return Vec::new();
        }
        None => {
            found.add("$.messages", "missing");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    let mut previous: Option<(usize, &str)> = None;
    // The previous assistant message's tool_use ids, which this message
    // must answer.
    let mut expected: Option<(usize, Vec<String>)> = None;
    let mut use_ids = HashSet::new();
    for (i, m) in list.iter().enumerate() {
        let path = format!("$.messages[{i}]");
        let Some(obj) = m.as_object() else {
            found.add(&path, format!("must be an object, not a JSON {}", kind(m)));
            continue;
        };
        let role = match obj.get("role").and_then(Value::as_str) {
            Some(r @ ("user" | "assistant")) => r,
            Some("system") => {
                found.add(
                    format!("{path}.role"),
                    "there is no \"system\" role in messages: the system prompt is the top-level `system`",
                );
                continue;
            }
            Some(r) => {
                found.add(format!("{path}.role"), format!("{r:?} is not \"user\" or \"assistant\""));
                continue;
            }
            None => {
                found.add(format!("{path}.role"), "missing, or not a string");
                continue;
            }
        };
        match previous {
            None if role != "user" => found.add(format!("{path}.role"), "the first message must be \"user\""),
            Some((j, r)) if r == role => found.add(
                format!("{path}.role"),
                format!("roles must alternate, and messages[{j}] is {role:?} too"),
            ),
            _ => {}
        }
        previous = Some((i, role));
        let content = blocks(obj, &path, role == "assistant" && i + 1 == list.len(), found);
        let pending = expected.take();
        if role == "user" {
            user_message(&content, &path, pending.as_ref(), i, found, &mut out);
        } else {
            if let Some((a, ids)) = &pending {
                for id in ids {
                    found.add(
                        format!("$.messages[{a}].content"),
                        format!("tool_use {id:?} has no tool_result: the next message is not a user message"),
                    );
                }
            }
            let calls = assistant_message(&content, &path, &mut use_ids, found, &mut out);
            if !calls.is_empty() {
                expected = Some((i, calls));
            }
        }
    }
    if let Some((a, ids)) = expected {
        for id in ids {
            found.add(
                format!("$.messages[{a}].content"),
                format!("tool_use {id:?} has no tool_result: the conversation ends with it"),
            );
        }
    }
    out
}

fn user_message(
    content: &[Value],
    path: &str,
    pending: Option<&(usize, Vec<String>)>,
    i: usize,
    found: &mut Findings,
    out: &mut Vec<Message>,
) {
    let mut answered = HashSet::new();
    let mut after_other = false;
    let mut texts = Vec::new();
    for (j, block) in content.iter().enumerate() {
        let p = format!("{path}.content[{j}]");
        let Some(b) = block.as_object() else {
            found.add(&p, format!("must be a content block object, not a JSON {}", kind(block)));
            continue;
        };
        match b.get("type").and_then(Value::as_str) {
            Some("tool_result") => {
                if after_other {
                    found
                        .add(&p, "tool_result blocks must come first in the message, before any other block");
                }
                let id = required_string(b, "tool_use_id", &p, found).unwrap_or_default().to_owned();
                if !id.is_empty() {
                    match pending {
                        Some((_, ids)) if ids.contains(&id) => {
                            if !answered.insert(id.clone()) {
                                found.add(
                                    format!("{p}.tool_use_id"),
                                    format!("tool_use {id:?} is answered twice"),
                                );
                            }
                        }
                        _ => found.add(
                            format!("{p}.tool_use_id"),
                            format!("{id:?} has no matching tool_use in the previous assistant message"),
                        ),
                    }
                }
                let content = result_content(b.get("content"), &p, found);
                let is_error = match b.get("is_error") {
                    None => false,
                    Some(Value::Bool(e)) => *e,
                    Some(other) => {
                        found.add(format!("{p}.is_error"), format!("must be a boolean, not {other}"));
                        false
                    }
                };
                out.push(Message::ToolResult { id, content, is_error });
            }
            Some("text") => {
                after_other = true;
                match b.get("text") {
                    Some(Value::String(t)) => texts.push(t.clone()),
                    _ => found.add(format!("{p}.text"), "a text block needs a string `text`"),
                }
            }
            Some(t) if USER_MEDIA.contains(&t) => after_other = true,
            Some("tool_use") => {
                found.add(format!("{p}.type"), "tool_use blocks belong in assistant messages")
            }
            Some(t) => {
                found.add(format!("{p}.type"), format!("{t:?} is not a block a user message may hold"))
            }
            None => found.add(format!("{p}.type"), "missing"),
        }
    }
    if let Some((a, ids)) = pending {
        for id in ids.iter().filter(|id| !answered.contains(*id)) {
            found.add(
                format!("$.messages[{a}].content"),
                format!("tool_use {id:?} has no tool_result in the next message (messages[{i}])"),
            );
        }
    }
    if !texts.is_empty() {
        out.push(Message::User(texts.join("\n")));
    }
}

/// A `tool_result`'s content: a string, or blocks whose text is joined.
fn result_content(content: Option<&Value>, path: &str, found: &mut Findings) -> String {
    match content {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(list)) => {
            let mut texts = Vec::new();
            for (k, b) in list.iter().enumerate() {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => match b.get("text") {
                        Some(Value::String(t)) => texts.push(t.clone()),
                        _ => found
                            .add(format!("{path}.content[{k}].text"), "a text block needs a string `text`"),
                    },
                    Some(t) if RESULT_MEDIA.contains(&t) => {}
                    Some(t) => found.add(
                        format!("{path}.content[{k}].type"),
                        format!("{t:?} is not a block a tool_result may hold"),
                    ),
                    None => found.add(format!("{path}.content[{k}].type"), "missing"),
                }
            }
            texts.join("\n")
        }
        Some(other) => {
            found.add(
                format!("{path}.content"),
                format!("must be a string or an array of content blocks, not a JSON {}", kind(other)),
            );
            String::new()
        }
    }
}

/// Checks an assistant message; returns its tool_use ids.
fn assistant_message(
    content: &[Value],
    path: &str,
    use_ids: &mut HashSet<String>,
    found: &mut Findings,
    out: &mut Vec<Message>,
) -> Vec<String> {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for (j, block) in content.iter().enumerate() {
        let p = format!("{path}.content[{j}]");
        let Some(b) = block.as_object() else {
            found.add(&p, format!("must be a content block object, not a JSON {}", kind(block)));
            continue;
        };
        match b.get("type").and_then(Value::as_str) {
            Some("text") => match b.get("text") {
                Some(Value::String(t)) => texts.push(t.clone()),
                _ => found.add(format!("{p}.text"), "a text block needs a string `text`"),
            },
            Some("tool_use") => {
                let id = required_string(b, "id", &p, found).unwrap_or_default().to_owned();
                if !id.is_empty() && !use_ids.insert(id.clone()) {
                    found.add(format!("{p}.id"), format!("{id:?} is the id of an earlier tool_use too"));
                }
                let name = required_string(b, "name", &p, found).unwrap_or_default().to_owned();
                let args = match b.get("input") {
                    Some(v @ Value::Object(_)) => v.clone(),
                    Some(other) => {
                        found.add(
                            format!("{p}.input"),
                            format!("must be an object, not a JSON {}", kind(other)),
                        );
                        other.clone()
                    }
                    None => {
                        found.add(format!("{p}.input"), "missing");
                        Value::Null
                    }
                };
                calls.push(ToolCall { id, name, args });
            }
            Some(t) if ASSISTANT_OTHER.contains(&t) => {}
            Some("tool_result") => {
                found.add(format!("{p}.type"), "tool_result blocks belong in user messages")
            }
            Some(t) => {
                found.add(format!("{p}.type"), format!("{t:?} is not a block an assistant message may hold"))
            }
            None => found.add(format!("{p}.type"), "missing"),
        }
    }
    let ids = calls.iter().filter(|c| !c.id.is_empty()).map(|c| c.id.clone()).collect();
    let text = if texts.is_empty() { None } else { Some(texts.join("\n")) };
    out.push(Message::Assistant { text, tool_calls: calls });
    ids
}

fn check_tools(tools: Option<&Value>, found: &mut Findings) -> Vec<ToolSpec> {
    let list = match tools {
        None => return Vec::new(),
        Some(Value::Array(list)) => list,
        Some(other) => {
            found.add("$.tools", format!("must be an array, not a JSON {}", kind(other)));
            return Vec::new();
        }
    };
    let mut out: Vec<ToolSpec> = Vec::new();
    for (k, tool) in list.iter().enumerate() {
        let p = format!("$.tools[{k}]");
        let Some(obj) = tool.as_object() else {
            found.add(&p, format!("must be an object, not a JSON {}", kind(tool)));
            continue;
        };
        match obj.get("type") {
            None | Some(Value::Null) => {}
            Some(Value::String(t)) if t == "custom" => {}
            Some(other) => {
                found.add(
                    format!("{p}.type"),
                    format!("{other} is a server tool, which the double does not emulate"),
                );
                continue;
            }
        }
        let name = required_string(obj, "name", &p, found).unwrap_or_default().to_owned();
        if !name.is_empty() && !valid_tool_name(&name) {
            found.add(format!("{p}.name"), format!("{name:?} does not match ^[a-zA-Z0-9_-]{{1,64}}$"));
        }
        if !name.is_empty() && out.iter().any(|t| t.name == name) {
            found.add(format!("{p}.name"), format!("{name:?} names an earlier tool too"));
        }
        let description = match obj.get("description") {
            None => None,
            Some(Value::String(d)) => Some(d.clone()),
            Some(other) => {
                found
                    .add(format!("{p}.description"), format!("must be a string, not a JSON {}", kind(other)));
                None
            }
        };
        let schema = match obj.get("input_schema") {
            Some(schema) => {
                check_object_schema(schema, &format!("{p}.input_schema"), found);
                schema.clone()
            }
            None => {
                found.add(format!("{p}.input_schema"), "missing; required");
                Value::Null
            }
        };
        out.push(ToolSpec { name, description, schema });
    }
    out
}

fn check_tool_choice(choice: Option<&Value>, tools: &[ToolSpec], found: &mut Findings) {
    let Some(choice) = choice else { return };
    let Some(obj) = choice.as_object() else {
        found.add("$.tool_choice", format!("must be an object, not a JSON {}", kind(choice)));
        return;
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("auto" | "none") => {}
        Some("any") if tools.is_empty() => found.add("$.tool_choice", "\"any\" needs tools"),
        Some("any") => {}
        Some("tool") => match obj.get("name").and_then(Value::as_str) {
            Some(name) if tools.iter().any(|t| t.name == name) => {}
            Some(name) => found.add("$.tool_choice.name", format!("{name:?} is not a declared tool")),
            None => found.add("$.tool_choice.name", "missing"),
        },
        _ => found.add("$.tool_choice.type", "must be \"auto\", \"any\", \"tool\" or \"none\""),
    }
}

/// The answer to a usable request.
pub(crate) fn render(resolved: &Resolved, conversation: &Conversation, request_body_len: usize) -> Answer {
    match resolved {
        Resolved::Reply(plan) | Resolved::Truncated(plan) => {
            let usage = plan.usage.unwrap_or_else(|| answer::estimate(request_body_len, plan));
            let mut content = Vec::new();
            if let Some(text) = &plan.text {
                content.push(json!({"type": "text", "text": text}));
            }
            for c in &plan.calls {
                let input = match &c.args {
                    PlannedArgs::Json(v) if c.other_encoding => Value::String(v.to_string()),
                    PlannedArgs::Json(v) => v.clone(),
                    PlannedArgs::Malformed(s) => Value::String((*s).to_owned()),
                };
                let mut block = json!({"type": "tool_use", "name": c.name, "input": input});
                if !c.missing_id {
                    block["id"] = Value::String(answer::id("toolu_"));
                }
                content.push(block);
            }
            let stop_reason = match plan.stop {
                Stop::Natural => "end_turn",
                Stop::ToolUse => "tool_use",
                Stop::MaxTokens => "max_tokens",
            };
            let model = if conversation.model.is_empty() { "provider-double" } else { &conversation.model };
            let body = json!({
                "id": answer::id("msg_"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": null,
                "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
            });
            let mut out = with_request_id(Answer::json(StatusCode::OK, &body), &answer::id("req_"));
            if matches!(resolved, Resolved::Truncated(_)) {
                out.truncated = true;
            } else {
                out.usage = Some(usage);
            }
            out
        }
        Resolved::Error(ProviderError::RateLimited { retry_after_secs }) => error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "This request would exceed the rate limit for your organization. Please try again later.",
        )
        .with_header(HeaderName::from_static("retry-after"), HeaderValue::from(*retry_after_secs)),
        Resolved::Error(ProviderError::Server) => {
            error(StatusCode::INTERNAL_SERVER_ERROR, "api_error", "Internal server error")
        }
        Resolved::Error(ProviderError::Overloaded) => error(overloaded(), "overloaded_error", "Overloaded"),
        Resolved::Error(ProviderError::ContextLength) => {
            let tokens = ANTHROPIC_CONTEXT_TOKENS + answer::estimate_input(request_body_len);
            error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("prompt is too long: {tokens} tokens > {ANTHROPIC_CONTEXT_TOKENS} maximum"),
            )
        }
    }
}

/// 529, Anthropic's own status for an overloaded API.
fn overloaded() -> StatusCode {
    StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
}

/// The answer to a request the script never saw.
pub(crate) fn unusable(kind: Unusable) -> Answer {
    match kind {
        Unusable::NotFound => error(StatusCode::NOT_FOUND, "not_found_error", "Not Found"),
        Unusable::BadBody => error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "The request body is not a valid JSON object.",
        ),
    }
}

/// `{"type": "error", "error": {"type", "message"}, "request_id"}`, with
/// the same id in the `request-id` header.
fn error(status: StatusCode, kind: &str, message: &str) -> Answer {
    let request_id = answer::id("req_");
    let body =
        json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id});
    with_request_id(Answer::json(status, &body), &request_id)
}

fn with_request_id(a: Answer, request_id: &str) -> Answer {
    match HeaderValue::from_str(request_id) {
        Ok(v) => a.with_header(HeaderName::from_static("request-id"), v),
        Err(_) => a,
    }
}
