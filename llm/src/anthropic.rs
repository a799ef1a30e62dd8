//! Anthropic Messages: `POST {base}/v1/messages`, with the
//! `anthropic-version: 2023-06-01` header.
//!
//! The format as Anthropic documents it (docs.anthropic.com/en/api/messages,
//! and the tool-use guide): `system` at the top level, never a message
//! role; `messages` alternating `user` and `assistant`, starting with
//! `user`; content blocks `text`, `tool_use {id, name, input}` (the input an
//! object) and `tool_result {tool_use_id, content, is_error}`, the results
//! first in the user message right after the assistant's calls, every call
//! answered; `tools` as `{name, description, input_schema}`;
//! `max_tokens` required. The answer is `{content, stop_reason, usage:
//! {input_tokens, output_tokens}}`; errors are
//! `{"type": "error", "error": {"type", "message"}}`, with 429
//! `rate_limit_error`, 529 `overloaded_error`, 500 `api_error`, and a
//! prompt too long as a 400 `invalid_request_error` ("prompt is too long")
//! or a 413 `request_too_large`.

use serde_json::{Value, json};

use crate::error::{ModelError, by_status};
use crate::message::{
    Arguments, Message, ModelRequest, ModelResponse, StopReason, ToolCall, Usage, settle_call_ids,
};

/// The route, after the base URL.
pub const PATH: &str = "/v1/messages";
/// The API version this adapter speaks.
pub const VERSION: &str = "2023-06-01";

/// The request body for `request` to `model`.
pub fn request_body(request: &ModelRequest, model: &str) -> Value {
    // Anthropic wants strict alternation: neighbours of the same role
    // (tool results followed by a nudge) become one message, results first.
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, blocks: Vec<Value>| match messages.last_mut() {
        Some((last, existing)) if *last == role => existing.extend(blocks),
        _ => messages.push((role, blocks)),
    };
    for message in &request.messages {
        match message {
            Message::User { text } => push("user", vec![json!({"type": "text", "text": text})]),
            Message::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if let Some(t) = text.as_deref().filter(|t| !t.is_empty()) {
                    blocks.push(json!({"type": "text", "text": t}));
                }
                blocks.extend(tool_calls.iter().map(|c| {
                    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.args.wire_value()})
                }));
                if blocks.is_empty() {
                    // An empty assistant turn is refused; say it was empty.
                    blocks.push(json!({"type": "text", "text": "(no answer)"}));
                }
                push("assistant", blocks);
            }
            Message::ToolResults { results } => push(
                "user",
                results
                    .iter()
                    .map(|r| {
                        json!({"type": "tool_result", "tool_use_id": r.id, "content": r.content, "is_error": r.is_error})
                    })
                    .collect(),
            ),
        }
    }
    let messages: Vec<Value> =
        messages.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect();
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_output_tokens,
        "messages": messages,
    });
    if !request.system.is_empty() {
        body["system"] = json!(request.system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

/// Reads a 200 answer.
pub fn parse_response(body: &[u8]) -> Result<ModelResponse, ModelError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ModelError::Truncated { bytes: body.len(), detail: e.to_string() })?;
    let shape = |field: String, reason: &str| ModelError::Shape { field, reason: reason.into() };
    let content = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| shape("content".into(), "missing or not a list"))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (i, block) in content.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("tool_use") => {
                let name = block
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| shape(format!("content[{i}].name"), "missing"))?;
                let args = Arguments::from_value(block.get("input").cloned().unwrap_or(Value::Null));
                let id = block.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
                tool_calls.push(ToolCall { id, name: name.to_owned(), args });
            }
            // Thinking and other blocks carry nothing the loop acts on.
            _ => {}
        }
    }
    let id = value.get("id").and_then(Value::as_str).map(str::to_owned);
    settle_call_ids(&mut tool_calls, "toolu_", id.as_deref().unwrap_or("r"));
    let stop = match value.get("stop_reason").and_then(Value::as_str) {
        Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        _ if !tool_calls.is_empty() => StopReason::ToolUse,
        _ => StopReason::Other,
    };
    let usage = value.get("usage").map_or(Usage::default(), |u| Usage {
        input_tokens: u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
    });
    Ok(ModelResponse {
        id,
        model: value.get("model").and_then(Value::as_str).map(str::to_owned),
        text: Some(text).filter(|t| !t.is_empty()),
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
        .unwrap_or_else(|| crate::client::excerpt(body));
    let kind = error.get("type").and_then(Value::as_str).unwrap_or_default();
    if status == 413
        || kind == "request_too_large"
        || message.to_ascii_lowercase().contains("prompt is too long")
    {
        return ModelError::ContextLength { message };
    }
    by_status(status, retry_after, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolResult;

    #[test]
    fn results_and_a_nudge_become_one_user_message_results_first() {
        let request = ModelRequest {
            system: "sys".into(),
            messages: vec![
                Message::User { text: "fix".into() },
                Message::Assistant {
                    text: Some("reading".into()),
                    tool_calls: vec![ToolCall {
                        id: "toolu_1".into(),
                        name: "read_file".into(),
                        args: Arguments::Malformed { raw: "{".into(), error: "bad".into() },
                    }],
                },
                Message::ToolResults {
                    results: vec![ToolResult {
                        id: "toolu_1".into(),
                        content: "bad args".into(),
                        is_error: true,
                    }],
                },
                Message::User { text: "call finish".into() },
            ],
            tools: vec![],
            max_output_tokens: 100,
        };
        let body = request_body(&request, "claude");
        assert_eq!(body["system"], "sys");
        let messages = body["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1]["content"][1]["input"], json!({}));
        assert_eq!(messages[2]["role"], "user");
        assert_eq!(messages[2]["content"][0]["type"], "tool_result");
        assert_eq!(messages[2]["content"][0]["is_error"], true);
        assert_eq!(messages[2]["content"][1]["type"], "text");
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn answers_and_errors_read_as_documented() {
        let r = parse_response(
            br#"{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[
            {"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_a","name":"search","input":{"pattern":"x"}}],
            "stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":3}}"#,
        )
        .expect("parsed");
        assert_eq!(r.text.as_deref(), Some("ok"));
        assert_eq!(r.tool_calls[0].id, "toolu_a");
        assert_eq!(r.usage.total(), 13);
        assert!(matches!(
            parse_error(
                529,
                None,
                br#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#
            ),
            ModelError::Server { status: 529, .. }
        ));
        assert!(matches!(
            parse_error(
                400,
                None,
                br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#
            ),
            ModelError::ContextLength { .. }
        ));
    }
}
