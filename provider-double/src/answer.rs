//! From a script's [`Turn`] to what goes on the wire: the resolved plan
//! both wires render, ids, usage estimates, and the HTTP answer.
//!
//! This module owns the meaning of a turn (which faults are replies, how
//! deviations compose, what "exhausted" answers) so both wires agree on
//! it. It must never hold a wire's field names; the wire modules render a
//! [`Resolved`] into their own JSON.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode};
use serde_json::Value;

use crate::conversation::Usage;
use crate::script::{Deviation, Fault, Turn};

/// The arguments [`Fault::MalformedToolArguments`] sends: JSON cut short.
pub(crate) const MALFORMED_ARGUMENTS: &str = "{\"path\": ";

/// The text of the reply after a script ran out of turns.
pub(crate) const EXHAUSTED_TEXT: &str = "script exhausted";

/// The context window the context-length errors name.
pub(crate) const OPENAI_CONTEXT_TOKENS: u64 = 128_000;
pub(crate) const ANTHROPIC_CONTEXT_TOKENS: u64 = 200_000;

/// A turn, resolved into what to answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolved {
    /// A 200 with a whole reply.
    Reply(Plan),
    /// A 200 with this reply cut in half.
    Truncated(Plan),
    /// A provider error response.
    Error(ProviderError),
}

/// The provider errors a fault can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProviderError {
    RateLimited { retry_after_secs: u64 },
    Server,
    Overloaded,
    ContextLength,
}

/// A reply, before a wire renders it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    pub(crate) text: Option<String>,
    pub(crate) calls: Vec<PlannedCall>,
    pub(crate) stop: Stop,
    /// The usage the script gave; `None` means estimate it.
    pub(crate) usage: Option<Usage>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlannedCall {
    pub(crate) name: String,
    pub(crate) args: PlannedArgs,
    /// [`Deviation::MissingCallId`]: leave the id out.
    pub(crate) missing_id: bool,
    /// [`Deviation::ArgumentsAsObject`]: the other wire's encoding.
    pub(crate) other_encoding: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PlannedArgs {
    Json(Value),
    /// Text that is not JSON, sent where the arguments go.
    Malformed(&'static str),
}

/// Why a reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// OpenAI `stop`, Anthropic `end_turn`.
    Natural,
    /// OpenAI `tool_calls`, Anthropic `tool_use`.
    ToolUse,
    /// OpenAI `length`, Anthropic `max_tokens`.
    MaxTokens,
}

/// Resolves a turn. `exhausted` is set when the turn was (or wrapped)
/// [`Turn::Exhausted`], for the caller to record.
pub(crate) fn resolve(turn: &Turn, exhausted: &mut bool) -> Resolved {
    match turn {
        Turn::Reply { text, tool_calls, usage } => Resolved::Reply(Plan {
            text: text.clone(),
            calls: tool_calls
                .iter()
                .map(|(name, args)| PlannedCall {
                    name: name.clone(),
                    args: PlannedArgs::Json(args.clone()),
                    missing_id: false,
                    other_encoding: false,
                })
                .collect(),
            stop: if tool_calls.is_empty() { Stop::Natural } else { Stop::ToolUse },
            usage: *usage,
        }),
        Turn::Fault(fault) => match fault {
            Fault::RateLimited { retry_after_secs } => {
                Resolved::Error(ProviderError::RateLimited { retry_after_secs: *retry_after_secs })
            }
            Fault::ServerError => Resolved::Error(ProviderError::Server),
            Fault::Overloaded => Resolved::Error(ProviderError::Overloaded),
            Fault::ContextLength => Resolved::Error(ProviderError::ContextLength),
            Fault::TruncatedBody => Resolved::Truncated(Plan {
                text: Some("This reply is cut short before its end, mid-JSON.".to_owned()),
                calls: Vec::new(),
                stop: Stop::Natural,
                usage: None,
            }),
            Fault::MalformedToolArguments { name } => Resolved::Reply(Plan {
                text: None,
                calls: vec![PlannedCall {
                    name: name.clone(),
                    args: PlannedArgs::Malformed(MALFORMED_ARGUMENTS),
                    missing_id: false,
                    other_encoding: false,
                }],
                stop: Stop::ToolUse,
                usage: None,
            }),
            Fault::MaxTokens { text } => Resolved::Reply(Plan {
                text: Some(text.clone()),
                calls: Vec::new(),
                stop: Stop::MaxTokens,
                usage: None,
            }),
        },
        Turn::Deviant { reply, deviation } => match resolve(reply, exhausted) {
            Resolved::Reply(mut plan) => {
                for call in &mut plan.calls {
                    match deviation {
                        Deviation::MissingCallId => call.missing_id = true,
                        Deviation::ArgumentsAsObject => call.other_encoding = true,
                    }
                }
                Resolved::Reply(plan)
            }
            other => other,
        },
        Turn::Exhausted => {
            *exhausted = true;
            Resolved::Reply(Plan {
                text: Some(EXHAUSTED_TEXT.to_owned()),
                calls: Vec::new(),
                stop: Stop::Natural,
                usage: None,
            })
        }
    }
}

/// The estimate when a reply brings no usage: a quarter of the request
/// body's bytes for input, of the reply's text, tool names and arguments
/// for output, at least 1 each. Deterministic, so tests can assert it.
pub(crate) fn estimate(request_body_len: usize, plan: &Plan) -> Usage {
    let output: usize = plan.text.as_deref().map_or(0, str::len)
        + plan
            .calls
            .iter()
            .map(|c| {
                c.name.len()
                    + match &c.args {
                        PlannedArgs::Json(v) => v.to_string().len(),
                        PlannedArgs::Malformed(s) => s.len(),
                    }
            })
            .sum::<usize>();
    Usage { input_tokens: tokens(request_body_len), output_tokens: tokens(output) }
}

/// The input estimate alone, for the context-length error's numbers.
pub(crate) fn estimate_input(request_body_len: usize) -> u64 {
    tokens(request_body_len)
}

fn tokens(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(4)).unwrap_or(u64::MAX).max(1)
}

/// A fresh number for ids. Process-wide, so ids stay unique across every
/// double a test binary starts.
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// An id in the provider's style: `prefix` and 24 hex digits.
pub(crate) fn id(prefix: &str) -> String {
    format!("{prefix}{:024x}", next_id())
}

/// Seconds since the epoch, for OpenAI's `created`.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// An HTTP answer, ready to send.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    pub(crate) body: Bytes,
    /// Send half of `body` under a `content-length` for all of it, then
    /// close the connection.
    pub(crate) truncated: bool,
    /// The usage this answer reports, counted once it is served whole.
    pub(crate) usage: Option<Usage>,
}

impl Answer {
    pub(crate) fn json(status: StatusCode, body: &Value) -> Answer {
        Answer {
            status,
            headers: vec![(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            body: Bytes::from(body.to_string()),
            truncated: false,
            usage: None,
        }
    }

    pub(crate) fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Answer {
        self.headers.push((name, value));
        self
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn deviations_nest_and_alter_every_call() {
        let turn = Turn::Reply {
            text: None,
            tool_calls: vec![("a".into(), json!({})), ("b".into(), json!({"x": 1}))],
            usage: None,
        }
        .deviant(Deviation::MissingCallId)
        .deviant(Deviation::ArgumentsAsObject);
        let mut exhausted = false;
        let Resolved::Reply(plan) = resolve(&turn, &mut exhausted) else { panic!("not a reply") };
        assert!(plan.calls.iter().all(|c| c.missing_id && c.other_encoding));
        assert_eq!(plan.stop, Stop::ToolUse);
        assert!(!exhausted);
    }

    #[test]
    fn a_deviation_leaves_a_fault_alone() {
        let mut exhausted = false;
        let turn = Turn::Fault(Fault::ServerError).deviant(Deviation::MissingCallId);
        assert_eq!(resolve(&turn, &mut exhausted), Resolved::Error(ProviderError::Server));
    }

    #[test]
    fn exhausted_is_reported_through_deviations() {
        let mut exhausted = false;
        let Resolved::Reply(plan) =
            resolve(&Turn::Exhausted.deviant(Deviation::MissingCallId), &mut exhausted)
        else {
            panic!("not a reply")
        };
        assert!(exhausted);
        assert_eq!(plan.text.as_deref(), Some(EXHAUSTED_TEXT));
    }

    #[test]
    fn estimates_are_a_quarter_of_the_bytes_and_never_zero() {
        let plan = Plan { text: Some("12345".into()), calls: Vec::new(), stop: Stop::Natural, usage: None };
        assert_eq!(estimate(8, &plan), Usage { input_tokens: 2, output_tokens: 2 });
        let empty = Plan { text: None, calls: Vec::new(), stop: Stop::Natural, usage: None };
        assert_eq!(estimate(0, &empty), Usage { input_tokens: 1, output_tokens: 1 });
    }

    #[test]
    fn ids_are_unique() {
        let a = id("call_");
        let b = id("call_");
        assert_ne!(a, b);
        assert!(a.starts_with("call_") && a.len() == "call_".len() + 24);
    }
}
