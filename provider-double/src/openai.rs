//! OpenAI Chat Completions, `POST /v1/chat/completions`: the checks on a
//! request, its neutral view, and the replies and errors in OpenAI's shape.
//!
//! This module owns everything the double knows of the OpenAI wire, and
//! nothing of Anthropic's. It must never accept a request quietly: every
//! departure from the documented shape becomes a violation, even where
//! OpenAI-compatible servers are lenient, because the client under test
//! must work against the strictest of them.
//!
//! Documented shape relied on: the Chat Completions API reference
//! (<https://platform.openai.com/docs/api-reference/chat/create>, and its
//! object, <https://platform.openai.com/docs/api-reference/chat/object>),
//! as generated into the official SDK's types
//! (`openai/openai-python`, `src/openai/types/chat/completion_create_params.py`:
//! the request fields, the tool name rule, "omitting `parameters` defines a
//! function with an empty parameter list"), the function-calling guide
//! (<https://platform.openai.com/docs/guides/function-calling>: every
//! `tool_calls[].id` answered by a `tool` message with that `tool_call_id`)
//! and the error codes guide
//! (<https://platform.openai.com/docs/guides/error-codes>: 429, 500, 503).

use std::collections::HashSet;

use http::{HeaderName, HeaderValue, StatusCode};
use serde_json::{Map, Value, json};

use crate::answer::{self, Answer, OPENAI_CONTEXT_TOKENS, PlannedArgs, ProviderError, Resolved, Stop};
use crate::check::{
    Checked, Findings, RequestParts, Unusable, check_object_schema, kind, no_streaming, positive_integer,
    request_line_and_body, required_string, unknown_fields, valid_tool_name,
};
use crate::conversation::{Conversation, Message, ToolCall, ToolSpec, Wire};

/// The documented top-level request fields; anything else is a violation.
pub(crate) const REQUEST_FIELDS: &[&str] = &[
    "model",
    "messages",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
];

const ROLES: &[&str] = &["system", "developer", "user", "assistant", "tool"];

/// The content part types each role may send.
const USER_PARTS: &[&str] = &["text", "image_url", "input_audio", "file"];
const ASSISTANT_PARTS: &[&str] = &["text", "refusal"];
const TEXT_PARTS: &[&str] = &["text"];

/// Checks a request and builds its neutral view.
pub(crate) fn check(req: &RequestParts<'_>) -> Checked {
    let mut found = Findings::new(Wire::OpenAi, req.index);
    let json: Option<Value> = serde_json::from_slice(req.body).ok();
    let map = match request_line_and_body(req, Wire::OpenAi, &json, &mut found) {
        Ok(map) => map,
        Err(unusable) => {
            return Checked { conversation: None, violations: found.list, unusable: Some(unusable) };
        }
    };
    // The value is a per-run capability, not a provider key: only its
    // presence and form are the wire's business.
    match req.header("authorization") {
        _ if req.keyless(&["authorization", "x-api-key"], &mut found) => {}
        None => found.add("header authorization", "missing; the wire takes `Authorization: Bearer <token>`"),
        Some(v) if v.strip_prefix("Bearer ").is_none_or(|t| t.trim().is_empty()) => {
            found.add("header authorization", "must be `Bearer <token>`")
        }
        Some(_) => {}
    }
    unknown_fields(map, REQUEST_FIELDS, &mut found);
    no_streaming(map, &mut found);
    positive_integer(map, "max_tokens", &mut found);
    positive_integer(map, "max_completion_tokens", &mut found);
    if let Some(n) = map.get("n")
        && n.as_u64() != Some(1)
    {
        found.add("$.n", format!("the double answers one choice; n must be 1, not {n}"));
    }
    let model = required_string(map, "model", "$", &mut found).unwrap_or_default().to_owned();
    let tools = check_tools(map.get("tools"), &mut found);
    check_tool_choice(map.get("tool_choice"), &tools, &mut found);
    let (system, messages) = check_messages(map.get("messages"), &mut found);
    Checked {
        conversation: Some(Conversation { wire: Wire::OpenAi, model, system, messages, tools }),
        violations: found.list,
        unusable: None,
    }
}

/// The assistant message whose tool calls the following `tool` messages
/// answer.
struct Window {
    at: usize,
    ids: Vec<String>,
    answered: HashSet<String>,
}

fn check_messages(messages: Option<&Value>, found: &mut Findings) -> (Option<String>, Vec<Message>) {
    let list = match messages {
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(Value::Array(_)) => {
            found.add("$.messages", "must not be empty");
            return (None, Vec::new());
        }
        Some(other) => {
            found.add("$.messages", format!("must be an array, not a JSON {}", kind(other)));
            return (None, Vec::new());
        }
        None => {
            found.add("$.messages", "missing");
            return (None, Vec::new());
        }
    };
    let mut system = Vec::new();
    let mut out = Vec::new();
    let mut window: Option<Window> = None;
    let mut call_ids = HashSet::new();
    for (i, m) in list.iter().enumerate() {
        let path = format!("$.messages[{i}]");
        let Some(obj) = m.as_object() else {
            found.add(&path, format!("must be an object, not a JSON {}", kind(m)));
            continue;
        };
        let role = match obj.get("role") {
            Some(Value::String(r)) if ROLES.contains(&r.as_str()) => r.as_str(),
            Some(other) => {
                found.add(
                    format!("{path}.role"),
                    format!("{other} is not one of system, developer, user, assistant, tool"),
                );
                continue;
            }
            None => {
                found.add(format!("{path}.role"), "missing");
                continue;
            }
        };
        if role != "tool"
            && let Some(w) = window.take()
        {
            unanswered(&w, &format!("before messages[{i}]"), found);
        }
        match role {
            "system" | "developer" => {
                if let Some(text) = content(obj, &path, TEXT_PARTS, true, found) {
                    system.push(text);
                }
            }
            "user" => {
                out.push(Message::User(content(obj, &path, USER_PARTS, true, found).unwrap_or_default()))
            }
            "assistant" => {
                let text = content(obj, &path, ASSISTANT_PARTS, false, found);
                let tool_calls = check_tool_calls(obj.get("tool_calls"), &path, &mut call_ids, found);
                if text.is_none() && tool_calls.is_empty() && !obj.contains_key("function_call") {
                    found.add(format!("{path}.content"), "required unless the message has tool_calls");
                }
                let ids: Vec<String> =
                    tool_calls.iter().filter(|c| !c.id.is_empty()).map(|c| c.id.clone()).collect();
                if !ids.is_empty() {
                    window = Some(Window { at: i, ids, answered: HashSet::new() });
                }
                out.push(Message::Assistant { text: text.filter(|t| !t.is_empty()), tool_calls });
            }
            _ => {
                let id = required_string(obj, "tool_call_id", &path, found).map(str::to_owned);
                let text = content(obj, &path, TEXT_PARTS, true, found);
                if let Some(id) = &id {
                    let at = format!("{path}.tool_call_id");
                    match &mut window {
                        None => found.add(
                            at,
                            format!("{id:?} answers no tool call: the message before is not an assistant message with tool_calls"),
                        ),
                        Some(w) if !w.ids.contains(id) => found.add(
                            at,
                            format!("{id:?} matches no tool call of the preceding assistant message (messages[{}])", w.at),
                        ),
                        Some(w) => {
                            if !w.answered.insert(id.clone()) {
                                found.add(at, format!("tool call {id:?} is answered twice"));
                            }
                        }
                    }
                }
                out.push(Message::ToolResult {
                    id: id.unwrap_or_default(),
                    content: text.unwrap_or_default(),
                    is_error: false,
                });
            }
        }
    }
    if let Some(w) = window {
        unanswered(&w, "before the conversation ends", found);
    }
    let system = if system.is_empty() { None } else { Some(system.join("\n\n")) };
    (system, out)
}

fn unanswered(w: &Window, when: &str, found: &mut Findings) {
    for id in w.ids.iter().filter(|id| !w.answered.contains(*id)) {
        found.add(
            format!("$.messages[{}].tool_calls", w.at),
            format!("tool call {id:?} is not answered by a tool message {when}"),
        );
    }
}

/// A message's `content`: a string, or an array of parts of the given
/// types, whose text parts are joined by newlines.
fn content(
    obj: &Map<String, Value>,
    path: &str,
    parts: &[&str],
    required: bool,
    found: &mut Findings,
) -> Option<String> {
    match obj.get("content") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(list)) => {
            let mut texts = Vec::new();
            for (j, part) in list.iter().enumerate() {
                let p = format!("{path}.content[{j}]");
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => match part.get("text") {
                        Some(Value::String(t)) => texts.push(t.clone()),
                        _ => found.add(format!("{p}.text"), "a text part needs a string `text`"),
                    },
                    Some(t) if parts.contains(&t) => {}
                    Some(t) => found
                        .add(format!("{p}.type"), format!("{t:?} is not a content part this role may send")),
                    None => found.add(format!("{p}.type"), "missing"),
                }
            }
            Some(texts.join("\n"))
        }
        Some(Value::Null) | None => {
            if required {
                found.add(format!("{path}.content"), "missing");
            }
            None
        }
        Some(other) => {
            found.add(
                format!("{path}.content"),
                format!("must be a string or an array of content parts, not a JSON {}", kind(other)),
            );
            None
        }
    }
}

fn check_tool_calls(
    calls: Option<&Value>,
    path: &str,
    ids: &mut HashSet<String>,
    found: &mut Findings,
) -> Vec<ToolCall> {
    let list = match calls {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(list)) if list.is_empty() => {
            found.add(format!("{path}.tool_calls"), "must not be empty; leave it out instead");
            return Vec::new();
        }
        Some(Value::Array(list)) => list,
        Some(other) => {
            found.add(format!("{path}.tool_calls"), format!("must be an array, not a JSON {}", kind(other)));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (j, call) in list.iter().enumerate() {
        let p = format!("{path}.tool_calls[{j}]");
        let Some(obj) = call.as_object() else {
            found.add(&p, format!("must be an object, not a JSON {}", kind(call)));
            continue;
        };
        let id = required_string(obj, "id", &p, found).map(str::to_owned);
        if let Some(id) = &id
            && !ids.insert(id.clone())
        {
            found.add(format!("{p}.id"), format!("{id:?} is the id of an earlier tool call too"));
        }
        match obj.get("type") {
            Some(Value::String(t)) if t == "function" => {}
            Some(other) => found.add(format!("{p}.type"), format!("must be \"function\", not {other}")),
            None => found.add(format!("{p}.type"), "missing; must be \"function\""),
        }
        let Some(function) = obj.get("function").and_then(Value::as_object) else {
            found.add(format!("{p}.function"), "missing or not an object");
            continue;
        };
        let fp = format!("{p}.function");
        let name = required_string(function, "name", &fp, found).unwrap_or_default().to_owned();
        let args = match function.get("arguments") {
            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|e| {
                found.add(format!("{fp}.arguments"), format!("the string is not JSON: {e}"));
                Value::String(s.clone())
            }),
            Some(other) => {
                found.add(
                    format!("{fp}.arguments"),
                    format!("must be a string holding JSON, not a JSON {}", kind(other)),
                );
                other.clone()
            }
            None => {
                found.add(format!("{fp}.arguments"), "missing");
                Value::Null
            }
        };
        out.push(ToolCall { id: id.unwrap_or_default(), name, args });
    }
    out
}

fn check_tools(tools: Option<&Value>, found: &mut Findings) -> Vec<ToolSpec> {
    let list = match tools {
        None | Some(Value::Null) => return Vec::new(),
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
            Some(Value::String(t)) if t == "function" => {}
            Some(other) => found.add(format!("{p}.type"), format!("must be \"function\", not {other}")),
            None => found.add(format!("{p}.type"), "missing; must be \"function\""),
        }
        let Some(function) = obj.get("function").and_then(Value::as_object) else {
            found.add(format!("{p}.function"), "missing or not an object");
            continue;
        };
        let fp = format!("{p}.function");
        let name = required_string(function, "name", &fp, found).unwrap_or_default().to_owned();
        if !name.is_empty() && !valid_tool_name(&name) {
            found.add(format!("{fp}.name"), format!("{name:?} does not match ^[a-zA-Z0-9_-]{{1,64}}$"));
        }
        if !name.is_empty() && out.iter().any(|t| t.name == name) {
            found.add(format!("{fp}.name"), format!("{name:?} names an earlier tool too"));
        }
        let description = match function.get("description") {
            None => None,
            Some(Value::String(d)) => Some(d.clone()),
            Some(other) => {
                found.add(
                    format!("{fp}.description"),
                    format!("must be a string, not a JSON {}", kind(other)),
                );
                None
            }
        };
        // Documented: leaving `parameters` out declares no parameters.
        let schema = function.get("parameters").cloned().unwrap_or(Value::Null);
        if function.contains_key("parameters") {
            check_object_schema(&schema, &format!("{fp}.parameters"), found);
        }
        out.push(ToolSpec { name, description, schema });
    }
    out
}

fn check_tool_choice(choice: Option<&Value>, tools: &[ToolSpec], found: &mut Findings) {
    match choice {
        None => {}
        Some(Value::String(s)) if (s == "auto" || s == "required") && tools.is_empty() => {
            found.add("$.tool_choice", format!("{s:?} needs tools"))
        }
        Some(Value::String(s)) if s == "none" || s == "auto" || s == "required" => {}
        Some(Value::Object(obj)) => {
            if obj.get("type").and_then(Value::as_str) != Some("function") {
                found.add("$.tool_choice.type", "must be \"function\"");
            }
            match obj.get("function").and_then(|f| f.get("name")).and_then(Value::as_str) {
                Some(name) if tools.iter().any(|t| t.name == name) => {}
                Some(name) => {
                    found.add("$.tool_choice.function.name", format!("{name:?} is not a declared tool"))
                }
                None => found.add("$.tool_choice.function.name", "missing"),
            }
        }
        Some(other) => found.add(
            "$.tool_choice",
            format!("must be \"none\", \"auto\", \"required\" or a function, not {other}"),
        ),
    }
}

/// The answer to a usable request.
pub(crate) fn render(resolved: &Resolved, conversation: &Conversation, request_body_len: usize) -> Answer {
    match resolved {
        Resolved::Reply(plan) | Resolved::Truncated(plan) => {
            let usage = plan.usage.unwrap_or_else(|| answer::estimate(request_body_len, plan));
            let calls: Vec<Value> = plan
                .calls
                .iter()
                .map(|c| {
                    let arguments = match &c.args {
                        PlannedArgs::Json(v) if c.other_encoding => v.clone(),
                        PlannedArgs::Json(v) => Value::String(v.to_string()),
                        PlannedArgs::Malformed(s) => Value::String((*s).to_owned()),
                    };
                    let mut call = json!({
                        "type": "function",
                        "function": {"name": c.name, "arguments": arguments},
                    });
                    if !c.missing_id {
                        call["id"] = Value::String(answer::id("call_"));
                    }
                    call
                })
                .collect();
            // `content` is null when the reply is only tool calls, as the
            // API sends it; a reply of nothing is an empty string.
            let content = match (&plan.text, calls.is_empty()) {
                (Some(t), _) => Value::String(t.clone()),
                (None, true) => Value::String(String::new()),
                (None, false) => Value::Null,
            };
            let mut message = json!({"role": "assistant", "content": content, "refusal": null});
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(calls);
            }
            let finish_reason = match plan.stop {
                Stop::Natural => "stop",
                Stop::ToolUse => "tool_calls",
                Stop::MaxTokens => "length",
            };
            let model = if conversation.model.is_empty() { "provider-double" } else { &conversation.model };
            let body = json!({
                "id": answer::id("chatcmpl-"),
                "object": "chat.completion",
                "created": answer::unix_now(),
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": message,
                    "logprobs": null,
                    "finish_reason": finish_reason,
                }],
                "usage": {
                    "prompt_tokens": usage.input_tokens,
                    "completion_tokens": usage.output_tokens,
                    "total_tokens": usage.input_tokens + usage.output_tokens,
                },
            });
            let mut out = with_request_id(Answer::json(StatusCode::OK, &body));
            if matches!(resolved, Resolved::Truncated(_)) {
                out.truncated = true;
            } else {
                out.usage = Some(usage);
            }
            out
        }
        Resolved::Error(ProviderError::RateLimited { retry_after_secs }) => error(
            StatusCode::TOO_MANY_REQUESTS,
            &format!("Rate limit reached for requests. Please try again in {retry_after_secs}s."),
            "requests",
            None,
            Some("rate_limit_exceeded"),
        )
        .with_header(HeaderName::from_static("retry-after"), HeaderValue::from(*retry_after_secs)),
        Resolved::Error(ProviderError::Server) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
            None,
        ),
        Resolved::Error(ProviderError::Overloaded) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "The engine is currently overloaded, please try again later.",
            "server_error",
            None,
            None,
        ),
        Resolved::Error(ProviderError::ContextLength) => {
            let tokens = OPENAI_CONTEXT_TOKENS + answer::estimate_input(request_body_len);
            error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "This model's maximum context length is {OPENAI_CONTEXT_TOKENS} tokens. However, your messages \
                     resulted in {tokens} tokens. Please reduce the length of the messages."
                ),
                "invalid_request_error",
                Some("messages"),
                Some("context_length_exceeded"),
            )
        }
    }
}

/// The answer to a request the script never saw.
pub(crate) fn unusable(kind: Unusable, req: &RequestParts<'_>) -> Answer {
    match kind {
        Unusable::NotFound => error(
            StatusCode::NOT_FOUND,
            &format!("Invalid URL ({} {})", req.method, req.path),
            "invalid_request_error",
            None,
            None,
        ),
        Unusable::BadBody => error(
            StatusCode::BAD_REQUEST,
            "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload, but what \
             was sent was not valid JSON.",
            "invalid_request_error",
            None,
            None,
        ),
    }
}

/// `{"error": {"message", "type", "param", "code"}}`.
fn error(status: StatusCode, message: &str, kind: &str, param: Option<&str>, code: Option<&str>) -> Answer {
    let body = json!({"error": {"message": message, "type": kind, "param": param, "code": code}});
    with_request_id(Answer::json(status, &body))
}

fn with_request_id(a: Answer) -> Answer {
    match HeaderValue::from_str(&answer::id("req_")) {
        Ok(v) => a.with_header(HeaderName::from_static("x-request-id"), v),
        Err(_) => a,
    }
}
