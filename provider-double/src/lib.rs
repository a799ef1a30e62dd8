//! A model-provider double: an HTTP server on loopback that speaks OpenAI
//! Chat Completions and Anthropic Messages as their documentation describes
//! them, checks every request it receives against that documented shape,
//! answers from a script, and injects the faults real providers produce.
//!
//! What this crate owns: the two wire formats as a test sees them (request
//! checks, neutral view, reply and error shapes), scripts and their file
//! format, and the record of every request received. Hosted providers
//! cannot run in tests, so the agent's model client is tested against this.
//!
//! What it must never do:
//! - accept a malformed request silently: every departure from the
//!   documented shape is a [`Violation`], and a test asserts
//!   [`ProviderDouble::violations`] is empty;
//! - refuse a request a real provider would still answer: a request with
//!   violations gets its scripted reply all the same, so one test sees every
//!   violation at once; only an unusable request (not JSON, wrong method or
//!   path) gets an error instead, in that wire's format;
//! - listen anywhere but where it is told: [`ProviderDouble::start`] binds
//!   `127.0.0.1:0` once (the port is never guessed, so no races), and the
//!   server ends when the double is dropped;
//! - reach out: it has no client, and makes no connection of its own.
//!
//! # Layout
//!
//! - [`conversation`]: the neutral view a script reads ([`Conversation`],
//!   [`Message`], [`ToolCall`], [`ToolSpec`]), [`Wire`] and [`Usage`].
//! - [`script`]: [`Turn`], [`Fault`], [`Deviation`], the [`Script`] trait
//!   (closures are scripts) and [`Scripted`], which replays turns in order.
//! - [`file`](mod@file): script files in TOML or JSON.
//! - `check`: [`Violation`] and the checks both wires share.
//! - `openai`, `anthropic`: each wire's request checks, neutral view, replies
//!   and errors, with the documentation each relies on.
//! - `answer`: what a turn means on the wire (faults, deviations, ids, usage
//!   estimates).
//! - `server`: hyper's HTTP/1 server, the shared record, truncated bodies.
//!
//! # Example
//!
//! ```
//! use patchpilot_provider_double::{ProviderDouble, Scripted, Turn};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let double = ProviderDouble::start(Scripted::new(vec![
//!     Turn::tool_call("read_file", json!({"path": "Dockerfile"})),
//!     Turn::text("The base image is pinned."),
//! ]))
//! .await?;
//! // The client under test takes `double.base_url()` as its provider's base
//! // URL and appends `/v1/chat/completions` or `/v1/messages`.
//! assert!(double.base_url().starts_with("http://127.0.0.1:"));
//! // ... run the client ...
//! assert!(double.violations().is_empty());
//! # Ok::<(), std::io::Error>(())
//! # }).unwrap();
//! ```
//!
//! # The wires
//!
//! OpenAI: `POST {base}/v1/chat/completions`. A reply is
//! `{id: "chatcmpl-…", object: "chat.completion", created, model, choices:
//! [{index: 0, message: {role: "assistant", content, refusal: null,
//! tool_calls?}, logprobs: null, finish_reason}], usage: {prompt_tokens,
//! completion_tokens, total_tokens}}`; `content` is null when the reply is
//! only tool calls, and each tool call is `{id: "call_…", type: "function",
//! function: {name, arguments}}` with `arguments` a JSON string. Errors are
//! `{"error": {"message", "type", "param", "code"}}`.
//!
//! Anthropic: `POST {base}/v1/messages`. A reply is `{id: "msg_…", type:
//! "message", role: "assistant", model, content: [text and tool_use blocks],
//! stop_reason, stop_sequence: null, usage: {input_tokens, output_tokens}}`,
//! a tool call being `{type: "tool_use", id: "toolu_…", name, input}`.
//! Errors are `{"type": "error", "error": {"type", "message"}, "request_id"}`
//! with the same id in a `request-id` header.
//!
//! Both echo the request's `model`. The double does not stream: it answers
//! one JSON body even when `stream` is true, and records a violation. Ids
//! are unique across every double in the process.
//!
//! # Request checks
//!
//! Each finding is a [`Violation`] naming the wire, the request's index, a
//! path (`$…` into the body, `header NAME`, `request`, or `script`) and what
//! is wrong.
//!
//! OpenAI: `POST /v1/chat/completions`; `content-type: application/json`;
//! `authorization: Bearer …` present (its value is recorded, not judged: it
//! is a per-run capability); no top-level field outside the documented set
//! (`model`, `messages`, `audio`, `frequency_penalty`, `function_call`,
//! `functions`, `logit_bias`, `logprobs`, `max_completion_tokens`,
//! `max_tokens`, `metadata`, `modalities`, `n`, `parallel_tool_calls`,
//! `prediction`, `presence_penalty`, `prompt_cache_key`,
//! `prompt_cache_retention`, `reasoning_effort`, `response_format`,
//! `safety_identifier`, `seed`, `service_tier`, `stop`, `store`, `stream`,
//! `stream_options`, `temperature`, `tool_choice`, `tools`, `top_logprobs`,
//! `top_p`, `user`, `verbosity`, `web_search_options`); `stream` absent or
//! false; `max_tokens` and `max_completion_tokens` positive; `n` absent or 1;
//! `model` a non-empty string; `messages` a non-empty array whose roles are
//! `system`, `developer`, `user`, `assistant` or `tool`, with content where
//! the role needs it; assistant `tool_calls`, when present, non-empty, each entry with a unique
//! non-empty `id`, `type: "function"`, `function.name`, and
//! `function.arguments` a string that parses as JSON; every `tool` message
//! with a `tool_call_id` naming a call of the assistant message just before
//! the run of `tool` messages it is in, each call answered once, and all of
//! them before the next other message (or the end); `tools[]` with `type:
//! "function"`, a unique `function.name` matching `^[a-zA-Z0-9_-]{1,64}$`,
//! and `function.parameters`, when given, a JSON Schema with `type:
//! "object"` (leaving `parameters` out is documented as "no parameters");
//! `tool_choice` `none`, `auto`, `required` (these two need tools) or a
//! function naming a declared tool.
//!
//! Anthropic: `POST /v1/messages`; `content-type: application/json`;
//! `anthropic-version: 2023-06-01`; `x-api-key` or `authorization` present
//! (for a double started keyless, as a model served without keys, both wires
//! instead require that no credential header arrives);
//! no top-level field outside the documented set (`model`, `messages`,
//! `max_tokens`, `cache_control`, `container`, `inference_geo`, `metadata`,
//! `output_config`, `service_tier`, `stop_sequences`, `stream`, `system`,
//! `temperature`, `thinking`, `tool_choice`, `tools`, `top_k`, `top_p`);
//! `stream` absent or false; `max_tokens` a positive integer (required);
//! `model` a non-empty string; `system` a string or text blocks; `messages`
//! non-empty, roles `user` and `assistant` only (a `system` role is named as
//! such), the first `user`, roles alternating, content non-empty (but for a
//! final assistant prefill); `tool_use` blocks only in assistant messages,
//! with a unique `id`, a `name` and an object `input`; every `tool_use`
//! answered by a `tool_result` with its `tool_use_id` in the very next
//! message, a user message, whose `tool_result` blocks come before any
//! other block; no `tool_result` without a `tool_use` in the message just
//! before, none answered twice; `tools[]` client tools (no `type`, or
//! `custom`: server tools are not emulated) with a unique `name` matching
//! the same pattern and an `input_schema` with `type: "object"`;
//! `tool_choice` `auto`, `any` (needs tools), `none`, or `tool` naming a
//! declared tool.
//!
//! An unusable request gets no scripted reply: a wrong method or path gets
//! 404 (OpenAI `invalid_request_error` "Invalid URL (POST /…)", Anthropic
//! `not_found_error`), as the providers answer; a body that is not a JSON
//! object, or could not be read, gets 400 `invalid_request_error`. On a
//! path neither wire serves, the error is in Anthropic's format when the
//! request has an `anthropic-version` or `x-api-key` header, OpenAI's
//! otherwise. Unusable requests are recorded, and counted by
//! [`ProviderDouble::calls`], but do not count as script calls.
//!
//! # Faults and deviations
//!
//! | turn | OpenAI | Anthropic |
//! |---|---|---|
//! | [`Fault::RateLimited`] | 429, `retry-after`, `type: "requests"`, `code: "rate_limit_exceeded"` | 429, `retry-after`, `rate_limit_error` |
//! | [`Fault::ServerError`] | 500 `server_error` | 500 `api_error` |
//! | [`Fault::Overloaded`] | 503 `server_error` | 529 `overloaded_error` |
//! | [`Fault::ContextLength`] | 400 `invalid_request_error`, `param: "messages"`, `code: "context_length_exceeded"` | 400 `invalid_request_error`, "prompt is too long: N tokens > 200000 maximum" |
//! | [`Fault::TruncatedBody`] | 200, `content-length` of the whole reply, half of it sent, connection closed | same |
//! | [`Fault::MalformedToolArguments`] | `arguments: "{\"path\": "` | `input: "{\"path\": "` (a string) |
//! | [`Fault::MaxTokens`] | `finish_reason: "length"` | `stop_reason: "max_tokens"` |
//! | [`Deviation::MissingCallId`] | tool calls without `id` | `tool_use` without `id` |
//! | [`Deviation::ArgumentsAsObject`] | `arguments` a JSON object | `input` a JSON string |
//!
//! Deviations are per reply: [`Turn::Deviant`] wraps the reply it alters,
//! and deviations nest. When a script runs out ([`Turn::Exhausted`], which
//! [`Scripted`] returns after its last turn) the double answers the text
//! `script exhausted` and records the violation `script exhausted` (path
//! `script`); a script that panics gets a 500 and a violation saying so.
//!
//! # Usage
//!
//! A reply reports the [`Usage`] its turn gives, or else a deterministic
//! estimate: a quarter of the request body's bytes for input, of the reply's
//! text, tool names and serialised arguments for output, rounded up, at
//! least 1. [`ProviderDouble::usage`] sums what whole 200 replies reported
//! (error answers and truncated bodies report none).
//!
//! # Script files
//!
//! The binary `patchpilot-provider-double --script FILE [--listen ADDR]`
//! serves a script file (`.toml` or `.json`, by extension). The file holds
//! `turns`, a list served in order; each turn is a reply, a fault, or the
//! end:
//!
//! ```toml
//! [[turns]]                  # a reply: text, tool calls, or both
//! text = "Reading the Dockerfile."
//! tool_calls = [{ name = "read_file", args = { path = "Dockerfile" } }]
//! usage = { input_tokens = 120, output_tokens = 9 }   # optional; estimated otherwise
//!
//! [[turns]]                  # a deviating reply
//! tool_calls = [{ name = "list_files" }]              # args default to {}
//! deviations = ["missing_call_id", "arguments_as_object"]
//!
//! [[turns]]
//! fault = "rate_limited"
//! retry_after_secs = 2
//!
//! [[turns]]
//! fault = "malformed_tool_arguments"
//! tool = "read_file"
//!
//! [[turns]]
//! fault = "max_tokens"
//! text = "The fix is to"     # what was said before the cut
//!
//! [[turns]]                  # also: server_error, overloaded, truncated_body, context_length
//! fault = "overloaded"
//!
//! [[turns]]
//! exhausted = true           # optional: after the last turn the script is exhausted anyway
//! ```
//!
//! The same in JSON is `{"turns": [{"text": …, "tool_calls": [{"name": …,
//! "args": {…}}]}, {"fault": "rate_limited", "retry_after_secs": 2}, …]}`.
//! Unknown keys, a fault with reply fields, or a fault missing its field are
//! errors naming the turn.
//!
//! # Documentation relied on
//!
//! OpenAI: the Chat Completions reference
//! (<https://platform.openai.com/docs/api-reference/chat/create> and
//! <https://platform.openai.com/docs/api-reference/chat/object>) through the
//! official SDK's generated types (`openai/openai-python`,
//! `src/openai/types/chat/`), the function-calling guide
//! (<https://platform.openai.com/docs/guides/function-calling>) and the
//! error codes guide (<https://platform.openai.com/docs/guides/error-codes>).
//! Anthropic: the Messages reference (<https://docs.anthropic.com/en/api/messages>)
//! through the official SDK's generated types (`anthropics/anthropic-sdk-python`,
//! `src/anthropic/types/`), versioning (<https://docs.anthropic.com/en/api/versioning>),
//! tool use (<https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use>)
//! and errors (<https://docs.anthropic.com/en/api/errors>). Each wire
//! module says which part it took from where.

mod answer;
mod anthropic;
mod check;
pub mod conversation;
pub mod file;
mod openai;
pub mod script;
mod server;

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use check::Violation;
pub use conversation::{Conversation, Message, ToolCall, ToolSpec, Usage, Wire};
pub use script::{Deviation, Fault, Script, Scripted, Turn};

/// A running double: a bound listener and the record of what it received.
/// The server stops, and its connections close, when this is dropped.
pub struct ProviderDouble {
    addr: SocketAddr,
    shared: Arc<server::Shared>,
    /// The accept loop; aborting it ends every connection (see
    /// `server::serve`).
    task: JoinHandle<()>,
}

/// Whether the endpoint the double plays takes a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Credentials {
    /// A hosted provider (or the broker): each wire's credential header
    /// must be there, in its documented form.
    #[default]
    Required,
    /// A model served without keys (llama.cpp's server, vLLM, Ollama on the
    /// fleet's network): a credential header that arrives anyway is a
    /// violation, since no key belongs on that path.
    None,
}

impl ProviderDouble {
    /// Binds `127.0.0.1:0` once (no port races) and serves until dropped.
    pub async fn start(script: impl Script + 'static) -> std::io::Result<ProviderDouble> {
        Self::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), script).await
    }

    /// Same, playing an endpoint that takes no credential.
    pub async fn start_keyless(script: impl Script + 'static) -> std::io::Result<ProviderDouble> {
        Self::start_with(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), Credentials::None, script).await
    }

    /// Same, on a given address (e.g. `0.0.0.0:0`, or a fixed port for the
    /// binary).
    pub async fn start_on(
        addr: SocketAddr,
        script: impl Script + 'static,
    ) -> std::io::Result<ProviderDouble> {
        Self::start_with(addr, Credentials::Required, script).await
    }

    /// On `addr`, with the given credential rule.
    pub async fn start_with(
        addr: SocketAddr,
        credentials: Credentials,
        script: impl Script + 'static,
    ) -> std::io::Result<ProviderDouble> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(server::Shared::new(Box::new(script), credentials));
        let task = tokio::spawn(server::serve(listener, Arc::clone(&shared)));
        Ok(ProviderDouble { addr, shared, task })
    }

    /// The address the double listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: [`addr`](Self::addr) as a client reaches
    /// it, loopback standing in for an unspecified address (`0.0.0.0`,
    /// `::`). Clients append `/v1/chat/completions` or `/v1/messages`.
    pub fn base_url(&self) -> String {
        let ip = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        format!("http://{}", SocketAddr::new(ip, self.addr.port()))
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        self.shared.state().requests.clone()
    }

    /// Model calls answered (faults and unusable requests included), i.e.
    /// `requests().len()`.
    pub fn calls(&self) -> usize {
        self.shared.state().requests.len()
    }

    /// All violations found in any request so far, in order; empty means
    /// every request was well-formed and the script was not exhausted.
    pub fn violations(&self) -> Vec<Violation> {
        self.shared.state().requests.iter().flat_map(|r| r.violations.iter().cloned()).collect()
    }

    /// The total input and output tokens the double reported.
    pub fn usage(&self) -> Usage {
        self.shared.state().usage
    }
}

impl Drop for ProviderDouble {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl fmt::Debug for ProviderDouble {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderDouble").field("addr", &self.addr).field("calls", &self.calls()).finish()
    }
}

/// One request as the double received and answered it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// Its position in [`ProviderDouble::requests`].
    pub index: usize,
    /// The wire it was for (by path; see the crate docs for other paths).
    pub wire: Wire,
    pub method: String,
    pub path: String,
    /// The headers of interest, by lower-case name, when present:
    /// `content-type`, `authorization`, `x-api-key`, `anthropic-version`,
    /// `anthropic-beta`.
    pub headers: BTreeMap<String, String>,
    /// The raw body (invalid UTF-8 replaced).
    pub body: String,
    /// The body as JSON, when it is JSON.
    pub json: Option<serde_json::Value>,
    /// The neutral view the script saw; `None` for an unusable request.
    pub conversation: Option<Conversation>,
    pub violations: Vec<Violation>,
    /// The HTTP status the double answered with.
    pub status: u16,
}

impl ReceivedRequest {
    /// A header of interest, by lower-case name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}
