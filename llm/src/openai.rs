//! OpenAI Chat Completions: `POST {base}/v1/chat/completions`.
//!
//! The format as OpenAI documents it (platform.openai.com/docs/api-reference/chat/create):
//! messages with roles `system`, `user`, `assistant` (with `tool_calls`:
//! `{id, type: "function", function: {name, arguments}}`, the arguments a
//! JSON *string*) and `tool` (with `tool_call_id`); `tools` as
//! `{type: "function", function: {name, description, parameters}}`; the
//! answer in `choices[0].message`, `finish_reason`, and `usage` with
//! `prompt_tokens` and `completion_tokens`. Errors are
//! `{"error": {"message", "type", "param", "code"}}`; a conversation too
//! long for the model is code `context_length_exceeded`.
//!
//! vLLM, llama.cpp's server and Ollama serve the same route, with
//! deviations this reader tolerates: a tool call without an id, arguments
//! as an object instead of a string, `content` as a list of parts, no
//! `usage`.

use serde_json::{Value, json};

use crate::error::{ModelError, by_status};
use crate::message::{
    Arguments, Message, ModelRequest, ModelResponse, StopReason, ToolCall, Usage, settle_call_ids,
};

/// The route, after the base URL.
pub const PATH: &str = "/v1/chat/completions";

/// The request body for `request` to `model`.
pub fn request_body(request: &ModelRequest, model: &str) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        match message {
            Message::User { text } => messages.push(json!({"role": "user", "content": text})),
            Message::Assistant { text, tool_calls } => {
                let mut m = json!({"role": "assistant", "content": text});
                if !tool_calls.is_empty() {
                    m["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.args.wire_value().to_string()},
                            })
                        })
                        .collect();
                }
                messages.push(m);
            }
            // OpenAI's tool message has no error flag: the text says it.
            Message::ToolResults { results } => messages.extend(results.iter().map(|r| {
                let content = if r.is_error { format!("ERROR: {}", r.content) } else { r.content.clone() };
                json!({"role": "tool", "tool_call_id": r.id, "content": content})
            })),
        }
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        "max_tokens": request.max_output_tokens,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                })
            })
            .collect();
        body["tool_choice"] = json!("auto");
    }
    body
}

/// Reads a 200 answer.
pub fn parse_response(body: &[u8]) -> Result<ModelResponse, ModelError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ModelError::Truncated { bytes: body.len(), detail: e.to_string() })?;
    let shape = |field: &str, reason: &str| ModelError::Shape { field: field.into(), reason: reason.into() };
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| shape("choices", "no choice"))?;
    let message = choice.get("message").ok_or_else(|| shape("choices[0].message", "missing"))?;
    let text = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        // Content parts: the text ones, joined.
        Some(Value::Array(parts)) => Some(
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(""),
        ),
        Some(_) => return Err(shape("choices[0].message.content", "neither a string nor parts")),
    }
    .filter(|t| !t.is_empty());
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").filter(|v| !v.is_null()) {
        let calls = calls.as_array().ok_or_else(|| shape("choices[0].message.tool_calls", "not a list"))?;
        for (i, call) in calls.iter().enumerate() {
            let function = call
                .get("function")
                .ok_or_else(|| shape(&format!("choices[0].message.tool_calls[{i}].function"), "missing"))?;
            let name = function.get("name").and_then(Value::as_str).ok_or_else(|| {
                shape(&format!("choices[0].message.tool_calls[{i}].function.name"), "missing")
            })?;
            let args = match function.get("arguments") {
                Some(Value::String(s)) => Arguments::from_text(s),
                Some(other) => Arguments::from_value(other.clone()),
                None => Arguments::from_text(""),
            };
            let id = call.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
            tool_calls.push(ToolCall { id, name: name.to_owned(), args });
        }
    }
    let id = value.get("id").and_then(Value::as_str).map(str::to_owned);
    settle_call_ids(&mut tool_calls, "call_", id.as_deref().unwrap_or("r"));
    let stop = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("length") => StopReason::MaxTokens,
        // Some servers say "stop" with calls, or nothing at all.
        _ if !tool_calls.is_empty() => StopReason::ToolUse,
        Some("stop") | None => StopReason::EndTurn,
        Some(_) => StopReason::Other,
    };
    let usage = value.get("usage").map_or(Usage::default(), |u| Usage {
        input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
    });
    Ok(ModelResponse {
        id,
        model: value.get("model").and_then(Value::as_str).map(str::to_owned),
        text,
        tool_calls,
        stop,
        usage,
    })
}

/// Reads a non-2xx answer.
pub fn parse_error(status: u16, retry_after: Option<&str>, body: &[u8]) -> ModelError {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let error = value.get("error").unwrap_or(&Value::Null);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| error.as_str().map(str::to_owned))
        .unwrap_or_else(|| crate::client::excerpt(body));
    let code = error.get("code").and_then(Value::as_str).unwrap_or_default();
    let kind = error.get("type").and_then(Value::as_str).unwrap_or_default();
    let lower = message.to_ascii_lowercase();
    // OpenAI's code; llama.cpp's type; vLLM's message.
    if code == "context_length_exceeded"
        || kind == "exceed_context_size_error"
        || lower.contains("maximum context length")
        || lower.contains("context length")
    {
        return ModelError::ContextLength { message };
    }
    by_status(status, retry_after, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ToolResult, ToolSpec};

    fn request() -> ModelRequest {
        ModelRequest {
            system: "be small".into(),
            messages: vec![
                Message::User { text: "fix it".into() },
                Message::Assistant {
                    text: None,
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "read_file".into(),
                        args: Arguments::Parsed { value: json!({"path": "Dockerfile"}) },
                    }],
                },
                Message::ToolResults {
                    results: vec![ToolResult {
                        id: "call_1".into(),
                        content: "FROM x".into(),
                        is_error: true,
                    }],
                },
            ],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "reads".into(),
                parameters: json!({"type": "object", "properties": {}}),
            }],
            max_output_tokens: 512,
        }
    }

    #[test]
    fn the_request_has_the_documented_shape() {
        let body = request_body(&request(), "m");
        assert_eq!(body["messages"][0], json!({"role": "system", "content": "be small"}));
        let call = &body["messages"][2]["tool_calls"][0];
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["arguments"], json!(r#"{"path":"Dockerfile"}"#));
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "tool_call_id": "call_1", "content": "ERROR: FROM x"})
        );
        assert_eq!(body["tools"][0]["function"]["parameters"]["type"], "object");
        assert_eq!(body["max_tokens"], 512);
    }

    #[test]
    fn deviations_are_tolerated() {
        let body = br#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
            {"function":{"name":"list_files","arguments":{"path":"."}}},
            {"id":"","type":"function","function":{"name":"read_file","arguments":"{\"path\": "}}]},
            "finish_reason":"stop"}]}"#;
        let r = parse_response(body).expect("parsed");
        assert_eq!(r.tool_calls.len(), 2);
        assert!(r.tool_calls.iter().all(|c| !c.id.is_empty()));
        assert_ne!(r.tool_calls[0].id, r.tool_calls[1].id);
        assert_eq!(r.tool_calls[0].args, Arguments::Parsed { value: json!({"path": "."}) });
        assert!(matches!(r.tool_calls[1].args, Arguments::Malformed { .. }));
        assert_eq!(r.stop, StopReason::ToolUse);
        assert_eq!(r.usage, Usage::default());
    }

    #[test]
    fn errors_are_classified_as_documented() {
        let e = parse_error(429, Some("3"), br#"{"error":{"message":"slow down","type":"requests"}}"#);
        assert_eq!(e.retry_after(), Some(std::time::Duration::from_secs(3)));
        let e = parse_error(
            400,
            None,
            br#"{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
        );
        assert!(matches!(e, ModelError::ContextLength { .. }));
        assert!(matches!(parse_error(503, None, b"<html>"), ModelError::Server { status: 503, .. }));
        assert!(matches!(parse_error(401, None, b"{}"), ModelError::Auth { .. }));
        assert!(matches!(parse_response(br#"{"choices":[{"message":{"#), Err(ModelError::Truncated { .. })));
    }
}
