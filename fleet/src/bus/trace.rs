//! W3C trace context (`traceparent`, `tracestate`) in NATS message headers,
//! so one assessment can be followed from `patchpilot submit` to its PR.

use async_nats::HeaderMap;
use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key, value.as_str());
    }
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.as_str())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| k.as_ref()).collect()
    }
}

/// Writes `cx`'s span context into `headers`.
pub fn inject(cx: &Context, headers: &mut HeaderMap) {
    TraceContextPropagator::new().inject_context(cx, &mut HeaderInjector(headers));
}

/// The current `tracing` span's context, to publish under.
pub fn current() -> Context {
    tracing::Span::current().context()
}

/// Writes the current `tracing` span's context into `headers`.
pub fn inject_current(headers: &mut HeaderMap) {
    inject(&current(), headers);
}

/// Reads a remote span context from `headers`; an empty context when absent.
pub fn extract(headers: &HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&HeaderExtractor(headers))
}

/// The 32-hex-digit trace id in `cx`, if it has a valid span context.
pub fn trace_id(cx: &Context) -> Option<String> {
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid().then(|| sc.trace_id().to_string())
}

/// The trace id of the current `tracing` span.
pub fn current_trace_id() -> Option<String> {
    trace_id(&tracing::Span::current().context())
}

/// The `traceparent` header value for `cx`, for storing with work that is
/// published later (outboxes).
pub fn traceparent(cx: &Context) -> Option<String> {
    let mut headers = HeaderMap::new();
    inject(cx, &mut headers);
    headers.get("traceparent").map(|v| v.as_str().to_owned())
}

/// The `traceparent` header value for the current span.
pub fn current_traceparent() -> Option<String> {
    traceparent(&tracing::Span::current().context())
}

/// Rebuilds a context from a stored `traceparent` value.
pub fn from_traceparent(traceparent: &str) -> Context {
    let mut headers = HeaderMap::new();
    headers.insert("traceparent", traceparent);
    extract(&headers)
}
