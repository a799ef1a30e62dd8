//! The HTTP side: the accept loop, one task per connection, and the
//! answer to each request, recorded in order.
//!
//! This module owns the shared state (every request received, the script's
//! call count, the usage reported) and the one lock around it. It must
//! never hold that lock across an `.await`, and never decide an answer
//! itself: the wire modules check and render, the script chooses.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::{BodyExt as _, Limited};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::answer::{self, Answer, ProviderError, Resolved};
use crate::check::{Checked, RequestParts, Unusable, Violation};
use crate::conversation::{Usage, Wire};
use crate::{ReceivedRequest, Script, anthropic, openai};

/// The largest request body the double reads; a conversation is far
/// smaller, and a bound keeps a runaway client from filling memory.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// The request headers kept in [`ReceivedRequest::headers`].
pub(crate) const HEADERS_OF_INTEREST: &[&str] =
    &["content-type", "authorization", "x-api-key", "anthropic-version", "anthropic-beta"];

/// What the connections share.
pub(crate) struct Shared {
    script: Box<dyn Script>,
    credentials: crate::Credentials,
    state: Mutex<State>,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) requests: Vec<ReceivedRequest>,
    /// How often the script was asked: the next `call_index`.
    script_calls: usize,
    pub(crate) usage: Usage,
}

impl Shared {
    pub(crate) fn new(script: Box<dyn Script>, credentials: crate::Credentials) -> Self {
        Shared { script, credentials, state: Mutex::new(State::default()) }
    }

    /// The state, even after a panic elsewhere: it is a record, and a
    /// half-written one is still worth reading.
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Checks, answers and records one request. Under the lock throughout,
    /// so requests are numbered, scripted and recorded in one order even
    /// when they arrive together.
    fn answer(&self, parts: &http::request::Parts, body: &Bytes, read_error: Option<String>) -> Answer {
        let mut state = self.state();
        let index = state.requests.len();
        let path = parts.uri.path();
        let wire = wire_of(path, &parts.headers);
        let req = RequestParts {
            index,
            credentials: self.credentials,
            method: &parts.method,
            path,
            headers: &parts.headers,
            body,
        };
        let mut checked = match read_error {
            Some(e) => Checked {
                conversation: None,
                violations: vec![Violation {
                    wire,
                    request: index,
                    path: "$".to_owned(),
                    message: format!("the body could not be read: {e}"),
                }],
                unusable: Some(Unusable::BadBody),
            },
            None => match wire {
                Wire::OpenAi => openai::check(&req),
                Wire::Anthropic => anthropic::check(&req),
            },
        };
        let answer = match (checked.unusable, &checked.conversation) {
            (None, Some(conversation)) => {
                let call_index = state.script_calls;
                state.script_calls += 1;
                let mut note = |message: String| {
                    checked.violations.push(Violation {
                        wire,
                        request: index,
                        path: "script".to_owned(),
                        message,
                    })
                };
                // A panicking test script answers 500 and says why, rather
                // than leaving the client with a dropped connection.
                let resolved =
                    match catch_unwind(AssertUnwindSafe(|| self.script.next(conversation, call_index))) {
                        Ok(turn) => {
                            let mut exhausted = false;
                            let resolved = answer::resolve(&turn, &mut exhausted);
                            if exhausted {
                                note(answer::EXHAUSTED_TEXT.to_owned());
                            }
                            resolved
                        }
                        Err(panic) => {
                            let why = panic
                                .downcast_ref::<&str>()
                                .map(|s| (*s).to_owned())
                                .or_else(|| panic.downcast_ref::<String>().cloned())
                                .unwrap_or_default();
                            note(format!("the script panicked: {why}"));
                            Resolved::Error(ProviderError::Server)
                        }
                    };
                match wire {
                    Wire::OpenAi => openai::render(&resolved, conversation, body.len()),
                    Wire::Anthropic => anthropic::render(&resolved, conversation, body.len()),
                }
            }
            (unusable, _) => {
                let kind = unusable.unwrap_or(Unusable::BadBody);
                match wire {
                    Wire::OpenAi => openai::unusable(kind, &req),
                    Wire::Anthropic => anthropic::unusable(kind),
                }
            }
        };
        if let Some(usage) = answer.usage {
            state.usage.add(usage);
        }
        let headers: BTreeMap<String, String> = HEADERS_OF_INTEREST
            .iter()
            .filter_map(|name| {
                parts
                    .headers
                    .get(*name)
                    .map(|v| ((*name).to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            })
            .collect();
        state.requests.push(ReceivedRequest {
            index,
            wire,
            method: parts.method.to_string(),
            path: path.to_owned(),
            headers,
            body: String::from_utf8_lossy(body).into_owned(),
            json: serde_json::from_slice(body).ok(),
            conversation: checked.conversation,
            violations: checked.violations,
            status: answer.status.as_u16(),
        });
        answer
    }
}

/// The wire a request is for: by its path, or, on a path neither wire
/// serves, by its headers, so the 404 is at least in the format its
/// client reads.
fn wire_of(path: &str, headers: &HeaderMap) -> Wire {
    if path == Wire::OpenAi.path() {
        Wire::OpenAi
    } else if path == Wire::Anthropic.path()
        || headers.contains_key("anthropic-version")
        || headers.contains_key("x-api-key")
    {
        Wire::Anthropic
    } else {
        Wire::OpenAi
    }
}

/// Accepts connections until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    // The connections live in this set, so aborting this task (the
    // double's drop) ends every one of them too.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(connection(stream, Arc::clone(&shared)));
                }
                Err(e) => {
                    // Out of file descriptors, most likely: wait for some
                    // to close rather than spin.
                    tracing::warn!(error = %e, "provider double: accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            // Reaps ended connections, so the set does not grow with each.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    let service = service_fn(move |req: Request<Incoming>| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(handle(req, &shared).await) }
    });
    if let Err(e) = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await {
        // Truncated bodies end their connection with an error on purpose,
        // and clients hang up as they please.
        tracing::debug!(error = %e, "provider double: connection ended");
    }
}

async fn handle(req: Request<Incoming>, shared: &Shared) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let (body, read_error) = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => (collected.to_bytes(), None),
        Err(e) => (Bytes::new(), Some(e.to_string())),
    };
    let answer = shared.answer(&parts, &body, read_error);
    let body = if answer.truncated {
        let cut = answer.body.len() / 2;
        Body::Truncated { part: Some(answer.body.slice(..cut)), stalled: false }
    } else {
        Body::Full(Some(answer.body.clone()))
    };
    let mut response = Response::new(body);
    *response.status_mut() = answer.status;
    let headers = response.headers_mut();
    for (name, value) in answer.headers {
        headers.append(name, value);
    }
    if answer.truncated {
        // The whole reply's length, of which only half is sent.
        headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(answer.body.len()));
    }
    response
}

/// A response body: whole, or cut short.
pub(crate) enum Body {
    Full(Option<Bytes>),
    /// Sends `part`, then fails, which makes hyper close the connection
    /// short of the `content-length` it announced.
    Truncated {
        part: Option<Bytes>,
        stalled: bool,
    },
}

/// Why a truncated body ends.
#[derive(Debug, thiserror::Error)]
#[error("the provider double cuts this body short on purpose")]
pub(crate) struct Truncated;

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Truncated;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Truncated>>> {
        match self.get_mut() {
            Body::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Body::Truncated { part, stalled } => {
                if let Some(part) = part.take() {
                    return Poll::Ready(Some(Ok(Frame::data(part))));
                }
                if !*stalled {
                    // One pending poll lets hyper flush the part it just
                    // buffered before the error drops the connection, which
                    // would otherwise discard it unsent.
                    *stalled = true;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Poll::Ready(Some(Err(Truncated)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(Some(data)) => SizeHint::with_exact(data.len() as u64),
            Body::Full(None) => SizeHint::with_exact(0),
            // Unknown, so hyper takes the `content-length` header as given.
            Body::Truncated { .. } => SizeHint::default(),
        }
    }
}
