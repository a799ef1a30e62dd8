//! What the double answers: turns, faults, deviations, and the scripts
//! that choose them.
//!
//! This module owns the vocabulary of answers, independent of either wire;
//! each wire module renders a turn in its own format. It must never render
//! JSON itself, and never sees the HTTP request: a script decides from the
//! neutral [`Conversation`] alone, so one script serves both wires.

use serde::Deserialize;
use serde_json::Value;

use crate::conversation::{Conversation, Usage};

/// What the double answers to one model call.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// A well-formed reply: text, tool calls, or both. Tool calls get fresh
    /// unique ids (`call_…` on OpenAI, `toolu_…` on Anthropic). The reply
    /// ends with `finish_reason: "tool_calls"` / `stop_reason: "tool_use"`
    /// when it has tool calls, `"stop"` / `"end_turn"` otherwise. Without
    /// `usage` the double reports a deterministic estimate (see the crate
    /// docs).
    Reply { text: Option<String>, tool_calls: Vec<(String, Value)>, usage: Option<Usage> },
    /// A provider failure, or a reply broken in a way real providers break.
    Fault(Fault),
    /// `reply` as a deviating provider sends it. The deviation alters
    /// every tool call of the reply; deviations nest, so one reply can carry
    /// several. A deviation around a [`Turn::Fault`] or [`Turn::Exhausted`]
    /// changes nothing: it only alters replies.
    Deviant { reply: Box<Turn>, deviation: Deviation },
    /// The script has nothing more to say: the double answers a text reply
    /// `script exhausted` and records a violation `script exhausted`, so a
    /// test that made more calls than it scripted fails on
    /// [`violations`](crate::ProviderDouble::violations).
    Exhausted,
}

impl Turn {
    /// A text reply.
    pub fn text(text: impl Into<String>) -> Turn {
        Turn::Reply { text: Some(text.into()), tool_calls: Vec::new(), usage: None }
    }

    /// A reply with one tool call and no text.
    pub fn tool_call(name: impl Into<String>, args: Value) -> Turn {
        Turn::Reply { text: None, tool_calls: vec![(name.into(), args)], usage: None }
    }

    /// This turn as a deviating provider sends it.
    pub fn deviant(self, deviation: Deviation) -> Turn {
        Turn::Deviant { reply: Box::new(self), deviation }
    }
}

/// A failure a provider can answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// 429 with a `retry-after` header (seconds) and the provider's rate
    /// limit error body (OpenAI `rate_limit_exceeded`, Anthropic
    /// `rate_limit_error`).
    RateLimited { retry_after_secs: u64 },
    /// 500: OpenAI `server_error`, Anthropic `api_error`.
    ServerError,
    /// OpenAI 503 `server_error` ("overloaded"), Anthropic 529
    /// `overloaded_error`.
    Overloaded,
    /// A 200 whose body stops mid-JSON: `content-length` declares the whole
    /// reply, half of it is sent, and the connection is closed. A client
    /// sees an error reading the body, or JSON that does not parse.
    TruncatedBody,
    /// A reply with one tool call `name` whose arguments are not JSON: on
    /// OpenAI `arguments` is the string `{"path": `; Anthropic's `input` is
    /// that same text as a JSON string instead of an object, the closest a
    /// real deviation gets.
    MalformedToolArguments { name: String },
    /// The prompt is over the model's context: OpenAI 400
    /// `invalid_request_error` with code `context_length_exceeded`,
    /// Anthropic 400 `invalid_request_error` "prompt is too long: N tokens >
    /// M maximum".
    ContextLength,
    /// A 200 reply cut at the output token limit: `text` with OpenAI
    /// `finish_reason: "length"`, Anthropic `stop_reason: "max_tokens"`.
    MaxTokens { text: String },
}

/// How a deviating provider alters a reply's tool calls. In script files:
/// `missing_call_id`, `arguments_as_object`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Deviation {
    /// Tool calls carry no id: the `id` field is left out (OpenAI
    /// `tool_calls[].id`, Anthropic `tool_use.id`).
    MissingCallId,
    /// Arguments in the other wire's encoding. On OpenAI `function.arguments`
    /// is a JSON object instead of a string, as llama.cpp and Ollama have
    /// sent it; on Anthropic `input` is the arguments serialised into a JSON
    /// string instead of an object.
    ArgumentsAsObject,
}

/// Chooses the answer to each model call.
///
/// The double calls it once for every usable request, in the order the
/// requests arrive, one at a time. `call_index` counts those calls from 0;
/// requests the double answered without a script (not JSON, wrong path)
/// do not count.
///
/// Closures `Fn(&Conversation, usize) -> Turn` are scripts, so a test can
/// answer what the client sent, such as the tool results it returned.
pub trait Script: Send + Sync {
    fn next(&self, conversation: &Conversation, call_index: usize) -> Turn;
}

impl<F> Script for F
where
    F: Fn(&Conversation, usize) -> Turn + Send + Sync,
{
    fn next(&self, conversation: &Conversation, call_index: usize) -> Turn {
        self(conversation, call_index)
    }
}

/// Replays turns in order, whatever the conversation; after the last one,
/// [`Turn::Exhausted`].
#[derive(Debug, Clone, PartialEq)]
pub struct Scripted(Vec<Turn>);

impl Scripted {
    pub fn new(turns: Vec<Turn>) -> Self {
        Scripted(turns)
    }

    /// The turns, in the order they are served.
    pub fn turns(&self) -> &[Turn] {
        &self.0
    }
}

impl Script for Scripted {
    fn next(&self, _conversation: &Conversation, call_index: usize) -> Turn {
        // The double numbers calls itself, so replaying by index needs no
        // state of its own: a `Scripted` behaves the same in every double.
        self.0.get(call_index).cloned().unwrap_or(Turn::Exhausted)
    }
}
