//! The provider-neutral view of a request: what a [`Script`](crate::Script)
//! reads, whichever wire the client spoke.
//!
//! This module owns the neutral types and nothing else. It must never know
//! a wire's field names: each wire module maps its own JSON to these types,
//! so a script written against them runs unchanged on both wires.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The wire format a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wire {
    /// OpenAI Chat Completions, `POST /v1/chat/completions` (also what vLLM,
    /// llama.cpp's server and Ollama serve).
    OpenAi,
    /// Anthropic Messages, `POST /v1/messages`.
    Anthropic,
}

impl Wire {
    /// The one path the double serves for this wire.
    pub fn path(self) -> &'static str {
        match self {
            Wire::OpenAi => "/v1/chat/completions",
            Wire::Anthropic => "/v1/messages",
        }
    }
}

impl fmt::Display for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Wire::OpenAi => "openai",
            Wire::Anthropic => "anthropic",
        })
    }
}

/// A received conversation, as a script sees it.
///
/// It is built from whatever the request held, even a malformed one: a
/// field the check found wrong is left out or empty here, and the
/// violation says why.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub wire: Wire,
    /// The request's `model`, empty when it had none.
    pub model: String,
    /// Anthropic's top-level `system`; on OpenAI every `system` and
    /// `developer` message, joined by a blank line in order.
    pub system: Option<String>,
    /// The turns, system prompts aside, in order.
    pub messages: Vec<Message>,
    /// The tools the request declared.
    pub tools: Vec<ToolSpec>,
}

impl Conversation {
    /// Every tool result the client sent, in order.
    pub fn tool_results(&self) -> impl Iterator<Item = (&str, &str, bool)> {
        self.messages.iter().filter_map(|m| match m {
            Message::ToolResult { id, content, is_error } => Some((id.as_str(), content.as_str(), *is_error)),
            _ => None,
        })
    }

    /// The first user message's text: the task the client opened with
    /// (empty when there is none).
    pub fn brief(&self) -> &str {
        self.messages
            .iter()
            .find_map(|m| match m {
                Message::User(text) => Some(text.as_str()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The last message, if any.
    pub fn last(&self) -> Option<&Message> {
        self.messages.last()
    }
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// What the user said: the text of the message, its text parts or
    /// blocks joined by newlines (images and documents are not kept).
    User(String),
    /// What the model said before: its text, if any, and its tool calls.
    Assistant { text: Option<String>, tool_calls: Vec<ToolCall> },
    /// The answer to one tool call: OpenAI's `tool` message, Anthropic's
    /// `tool_result` block. `content` is the string, or its text blocks
    /// joined by newlines. OpenAI has no error flag: `is_error` is false there.
    ToolResult { id: String, content: String, is_error: bool },
}

/// A tool call the model made in an earlier turn, as the client sent it back.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// OpenAI's `arguments` parsed from their string (a string that does not
    /// parse is kept as a JSON string); Anthropic's `input` as is.
    pub args: serde_json::Value,
}

/// A tool the request declared.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: Option<String>,
    /// OpenAI's `function.parameters`, Anthropic's `input_schema`; `null`
    /// when the request had none.
    pub schema: serde_json::Value,
}

/// Token counts, as a provider reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub(crate) fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}
