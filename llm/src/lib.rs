//! Model conversations for PatchPilot's reasoning agent, provider-neutral.
//!
//! - [`message`]: the conversation the loop keeps: text, tool calls
//!   `{id, name, args}` and tool results `{id, content, is_error}`.
//! - [`openai`] and [`anthropic`]: the two wire adapters, pure functions
//!   from a [`ModelRequest`] to a request body and from an answer (or an
//!   error) back. They tolerate the deviations real servers have (a
//!   missing call id, arguments as an object) and keep malformed
//!   arguments so the loop can hand the error back to the model.
//! - [`client`]: the HTTP client with the documented retry behaviour, and
//!   the [`Model`] trait the loop is written against.
//!
//! What it must never do: hold a long-lived secret in a sandbox (the
//! credential a run's client sends is its per-run capability; only a
//! developer's own machine passes an API key), follow a redirect, or treat
//! anything a model says as more than data for the loop to check.

pub mod anthropic;
pub mod client;
pub mod error;
pub mod message;
pub mod openai;

pub use client::{ClientConfig, Exchange, Model, ModelClient, RetryPolicy, route, sha256_hex};
pub use error::ModelError;
pub use message::{
    Arguments, Message, ModelRequest, ModelResponse, StopReason, ToolCall, ToolResult, ToolSpec, Usage,
};
pub use patchpilot_model::ProviderWire;
