//! What can go wrong with a model call, with the kind that decides what
//! the caller does: retry (transient), compact the conversation (context
//! length) or stop and say why (permanent).

use std::time::Duration;

use patchpilot_model::ErrorKind;

/// A model call that did not produce a usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The client could not be built from its settings.
    #[error("model client: {field}: {reason}")]
    Config {
        /// The setting.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The provider asked to slow down (HTTP 429).
    #[error("the provider is rate-limiting (HTTP 429): {message}")]
    RateLimited {
        /// Its `retry-after`, when it sent one.
        retry_after: Option<Duration>,
        /// Its error message.
        message: String,
    },
    /// The provider failed or is overloaded (HTTP 5xx, Anthropic's 529).
    #[error("the provider failed (HTTP {status}): {message}")]
    Server {
        /// The status.
        status: u16,
        /// Its error message.
        message: String,
    },
    /// The conversation does not fit the model's context window.
    #[error("the conversation is longer than the model's context: {message}")]
    ContextLength {
        /// The provider's message.
        message: String,
    },
    /// The credential (a run's capability, or a developer's key) was refused.
    #[error("the provider refused the credential (HTTP {status}): {message}")]
    Auth {
        /// 401 or 403.
        status: u16,
        /// Its error message.
        message: String,
    },
    /// The provider refused the request as malformed.
    #[error("the provider refused the request (HTTP {status}): {message}")]
    Refused {
        /// The status.
        status: u16,
        /// Its error message.
        message: String,
    },
    /// The answer is not a complete JSON document (a body cut short).
    #[error("the provider's answer is cut short or not JSON ({bytes} bytes): {detail}")]
    Truncated {
        /// Bytes received.
        bytes: usize,
        /// The parse or read error.
        detail: String,
    },
    /// The answer is JSON but not the documented shape.
    #[error("the provider's answer is not the documented shape: {field}: {reason}")]
    Shape {
        /// Where in the answer.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The provider could not be reached, or the body not read.
    #[error("cannot reach the model at {url}")]
    Transport {
        /// The endpoint.
        url: String,
        /// The HTTP client's error.
        #[source]
        source: reqwest::Error,
    },
}

impl ModelError {
    /// Whether retrying the same call later can help.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ModelError::RateLimited { .. }
            | ModelError::Server { .. }
            | ModelError::Truncated { .. }
            | ModelError::Transport { .. } => ErrorKind::Transient,
            ModelError::Config { .. }
            | ModelError::ContextLength { .. }
            | ModelError::Auth { .. }
            | ModelError::Refused { .. }
            | ModelError::Shape { .. } => ErrorKind::Permanent,
        }
    }

    /// How long the provider asked the caller to wait, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The `retry-after` header: seconds (both providers send seconds; an
/// HTTP date is read as "no hint").
pub(crate) fn parse_retry_after(value: Option<&str>) -> Option<Duration> {
    let v = value?.trim();
    v.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64)
}

/// An error answer's kind by its status, once the wire-specific cases
/// (context length) are ruled out.
pub(crate) fn by_status(status: u16, retry_after: Option<&str>, message: String) -> ModelError {
    match status {
        429 => ModelError::RateLimited { retry_after: parse_retry_after(retry_after), message },
        401 | 403 => ModelError::Auth { status, message },
        // Anthropic's 529 ("overloaded") is in this range too.
        500..=599 => ModelError::Server { status, message },
        _ => ModelError::Refused { status, message },
    }
}
