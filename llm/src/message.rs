//! The provider-neutral conversation: what the agent's loop reads and
//! writes, whichever wire carries it.
//!
//! Three kinds of content, as the issue and both providers agree on:
//! text, a tool call `{id, name, args}` and a tool result
//! `{id, content, is_error}`. The system prompt is apart from the messages
//! (Anthropic has it at the top level; OpenAI as the first message), and
//! tool results of one turn travel together, in the order of the calls.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Text from the operator's side: the task, context, nudges.
    User {
        /// The text.
        text: String,
    },
    /// What the model said: text, tool calls, or both.
    Assistant {
        /// Its text, if any.
        text: Option<String>,
        /// The tools it called, in its order.
        tool_calls: Vec<ToolCall>,
    },
    /// The results of the previous assistant message's tool calls, one per
    /// call, in the same order.
    ToolResults {
        /// The results.
        results: Vec<ToolResult>,
    },
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id, or one made up when the provider sent none
    /// (some OpenAI-compatible servers do not).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Its arguments.
    pub args: Arguments,
}

/// A call's arguments: parsed, or kept as the model wrote them when they
/// are not a JSON object, so the error can go back to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Arguments {
    /// A JSON object.
    Parsed {
        /// The object.
        value: Value,
    },
    /// Not a JSON object.
    Malformed {
        /// What the model sent.
        raw: String,
        /// Why it is not usable.
        error: String,
    },
}

impl Arguments {
    /// Arguments from the text a provider sent: a JSON object, or malformed.
    pub fn from_text(raw: &str) -> Arguments {
        // An empty string is how some servers say "no arguments".
        if raw.trim().is_empty() {
            return Arguments::Parsed { value: Value::Object(Default::default()) };
        }
        match serde_json::from_str::<Value>(raw) {
            Ok(value) => Arguments::from_value(value),
            Err(e) => Arguments::Malformed { raw: raw.to_owned(), error: format!("not valid JSON: {e}") },
        }
    }

    /// Arguments from a JSON value: an object, or malformed. A string that
    /// itself holds an object (doubly encoded) is unwrapped.
    pub fn from_value(value: Value) -> Arguments {
        match value {
            Value::Object(_) => Arguments::Parsed { value },
            Value::String(s) => match serde_json::from_str::<Value>(&s) {
                Ok(v @ Value::Object(_)) => Arguments::Parsed { value: v },
                _ => Arguments::Malformed { raw: s, error: "a string, not a JSON object".into() },
            },
            Value::Null => Arguments::Parsed { value: Value::Object(Default::default()) },
            other => Arguments::Malformed {
                raw: other.to_string(),
                error: "arguments must be a JSON object".into(),
            },
        }
    }

    /// The object to send back to the provider in later requests. Malformed
    /// arguments go back as `{}`: both wires require an object (OpenAI a
    /// string holding one), and the tool result already tells the model
    /// what was wrong with what it sent.
    pub fn wire_value(&self) -> Value {
        match self {
            Arguments::Parsed { value } => value.clone(),
            Arguments::Malformed { .. } => Value::Object(Default::default()),
        }
    }
}

/// A tool's answer to one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call's id.
    pub id: String,
    /// What the tool returned (or the error), as text for the model.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Its name: `^[a-zA-Z0-9_-]{1,64}$`, what both providers accept.
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// The JSON Schema of its arguments (an object schema).
    pub parameters: Value,
}

/// One model call.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The system prompt.
    pub system: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools it may call.
    pub tools: Vec<ToolSpec>,
    /// Most tokens of the answer.
    pub max_output_tokens: u32,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It wants tool results.
    ToolUse,
    /// It ran out of output tokens.
    MaxTokens,
    /// Anything else the provider said (content filter, …).
    Other,
}

/// Tokens a call used, as the provider counted them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Answer tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Both together.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// The provider's response id, for the transcript.
    pub id: Option<String>,
    /// The model that answered, as the provider names it.
    pub model: Option<String>,
    /// Its text, if any.
    pub text: Option<String>,
    /// Its tool calls, ids made unique and filled in.
    pub tool_calls: Vec<ToolCall>,
    /// Why it stopped.
    pub stop: StopReason,
    /// Tokens used.
    pub usage: Usage,
}

impl ModelResponse {
    /// The assistant message to append to the conversation.
    pub fn message(&self) -> Message {
        Message::Assistant { text: self.text.clone(), tool_calls: self.tool_calls.clone() }
    }
}

/// Fills in missing call ids and makes repeated ones unique, so every
/// result pairs with exactly one call. `prefix` is the provider's style.
pub(crate) fn settle_call_ids(calls: &mut [ToolCall], prefix: &str, salt: &str) {
    let mut seen = std::collections::BTreeSet::new();
    for (i, call) in calls.iter_mut().enumerate() {
        if call.id.trim().is_empty() || !seen.insert(call.id.clone()) {
            call.id = format!("{prefix}pp_{salt}_{i}");
            seen.insert(call.id.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn arguments_are_lenient_in_shape_and_keep_what_cannot_be_used() {
        assert_eq!(Arguments::from_text(""), Arguments::Parsed { value: json!({}) });
        assert_eq!(Arguments::from_text(r#"{"a":1}"#), Arguments::Parsed { value: json!({"a": 1}) });
        assert_eq!(Arguments::from_value(json!(r#"{"a":1}"#)), Arguments::Parsed { value: json!({"a": 1}) });
        assert!(matches!(Arguments::from_text(r#"{"path": "#), Arguments::Malformed { .. }));
        assert!(matches!(Arguments::from_text("[1]"), Arguments::Malformed { .. }));
        assert_eq!(Arguments::from_text("{\"path\": ").wire_value(), json!({}));
    }

    #[test]
    fn missing_and_repeated_ids_are_made_unique() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "read_file".into(),
            args: Arguments::Parsed { value: json!({}) },
        };
        let mut calls = vec![call(""), call("a"), call("a"), call("")];
        settle_call_ids(&mut calls, "call_", "r1");
        let ids: std::collections::BTreeSet<_> = calls.iter().map(|c| c.id.clone()).collect();
        assert_eq!(ids.len(), 4, "{calls:?}");
        assert_eq!(calls[1].id, "a");
    }
}
