//! The durable consumer loop every service runs.
//!
//! Delivery policy, in one place:
//!
//! - Messages arrive in batches of whatever is ready, up to
//!   [`ConsumeOptions::batch_size`], so a handler can write a batch in one
//!   database transaction; up to [`ConsumeOptions::concurrency`] batches are
//!   handled at once.
//! - While the handler works, the loop sends in-progress acks every third of
//!   the ack wait, so long work is not redelivered under it.
//! - A handler reports one outcome per message. `Ok` acks. A
//!   [`HandlerError::Permanent`] failure (malformed or invalid input) goes to
//!   `DEAD_LETTERS` at once. A [`HandlerError::Retryable`] failure is nak'd
//!   with exponential backoff until the message has been delivered
//!   `max_deliver` times, then dead-lettered.
//! - The server-side consumer has no delivery limit: the loop enforces it.
//!   A message whose handler crashed the process, or never settled it, comes
//!   back with a higher delivery count; past `max_deliver` it is dead-lettered
//!   before the handler sees it again, so one poisonous message cannot crash
//!   a fleet in a loop, and nothing is dropped silently by the server.
//! - A message is acked only after its dead letter is stored, so nothing is
//!   lost between the two.
//! - On shutdown the current batch finishes and is settled; messages already
//!   fetched but not started are nak'd without delay for another worker.

use std::future::Future;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::AckKind;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
use async_nats::jetstream::message::Acker;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::{FutureExt as _, StreamExt as _};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::client::{Bus, Error};
use super::dead_letter::dead_letter_headers;
use super::topology::{StreamName, subjects};
use super::trace;
use crate::error_chain;

/// Which durable consumer to run.
#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    /// The stream to consume.
    pub stream: StreamName,
    /// Durable name, shared by every worker of the service so they split the
    /// work.
    pub durable: String,
    /// Only these subjects; `None` for all of the stream's.
    pub filter_subject: Option<String>,
}

/// How the loop fetches.
#[derive(Debug, Clone, Copy)]
pub struct ConsumeOptions {
    /// Most messages handed to the handler at once.
    pub batch_size: usize,
    /// Batches handled at the same time. Two lets the handler prepare one
    /// batch while the database writes the previous one.
    pub concurrency: usize,
}

impl Default for ConsumeOptions {
    fn default() -> Self {
        Self { batch_size: 64, concurrency: 1 }
    }
}

/// One delivered message.
#[derive(Debug)]
pub struct Delivery {
    /// Subject it was published to.
    pub subject: String,
    /// The payload.
    pub payload: Bytes,
    /// Its headers (empty when it had none).
    pub headers: HeaderMap,
    /// Sequence in the stream.
    pub stream_sequence: u64,
    /// Which delivery this is, from 1.
    pub delivered: i64,
    /// When JetStream stored it.
    pub published: DateTime<Utc>,
    /// A span parented to the publisher's trace context; enter it for work
    /// on this message.
    pub span: Span,
}

impl Delivery {
    /// The `Nats-Msg-Id` the publisher set, if any.
    pub fn msg_id(&self) -> Option<&str> {
        self.headers.get(async_nats::header::NATS_MESSAGE_ID).map(|v| v.as_str())
    }

    /// The publisher's trace context.
    pub fn trace_context(&self) -> opentelemetry::Context {
        self.span.context()
    }

    /// The payload as `M`, checked at the edge. A payload that does not
    /// decode or is invalid never will be: the error is permanent and names
    /// the message type and the field.
    pub fn decode<M: patchpilot_model::Wire>(&self) -> Result<M, HandlerError> {
        M::decode(self.payload.as_ref()).map_err(|e| {
            HandlerError::Permanent(if e.path.is_empty() {
                e.reason
            } else {
                format!("invalid {}: {e}", M::PROTO_NAME)
            })
        })
    }
}

/// How a handler failed on one message. Callers branch on the variant,
/// never on the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// Might work later (database down, deadlock, registry timeout): nak with
    /// backoff, dead-letter after `max_deliver` deliveries.
    #[error("{0}")]
    Retryable(String),
    /// Will never work (undecodable, invalid): dead-letter now.
    #[error("{0}")]
    Permanent(String),
}

impl HandlerError {
    /// A retryable failure described by `err` and its whole source chain.
    pub fn retryable(err: &(dyn std::error::Error + 'static)) -> Self {
        HandlerError::Retryable(error_chain(err))
    }

    /// A permanent failure described by `err` and its whole source chain.
    pub fn permanent(err: &(dyn std::error::Error + 'static)) -> Self {
        HandlerError::Permanent(error_chain(err))
    }
}

/// A service's message handler.
pub trait BatchHandler: Send + Sync {
    /// Handles a batch and returns one outcome per delivery, in order.
    ///
    /// Must be idempotent: a message may be delivered again after a crash,
    /// even after the handler's effects were committed.
    fn handle(&self, batch: &[Delivery]) -> impl Future<Output = Vec<Result<(), HandlerError>>> + Send;
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    stream: String,
    consumer: String,
    outcome: String,
}

/// Prometheus metrics of consumer loops.
#[derive(Debug, Clone)]
pub struct ConsumerMetrics {
    messages: Family<OutcomeLabels, Counter>,
    batch_seconds: Histogram,
    batch_size: Histogram,
}

impl ConsumerMetrics {
    /// Registers the metrics under `pp_bus_*`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = ConsumerMetrics {
            messages: Family::default(),
            batch_seconds: Histogram::new(exponential_buckets(0.000_5, 2.0, 16)),
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 12)),
        };
        registry.register(
            "pp_bus_messages",
            "Messages settled by consumer loops, by outcome (acked, retried, dead_lettered)",
            metrics.messages.clone(),
        );
        registry.register(
            "pp_bus_batch_seconds",
            "Time handlers spent on one batch",
            metrics.batch_seconds.clone(),
        );
        registry.register("pp_bus_batch_size", "Messages per handled batch", metrics.batch_size.clone());
        metrics
    }

    fn count(&self, spec: &ConsumerSpec, outcome: &str) {
        self.messages
            .get_or_create(&OutcomeLabels {
                stream: spec.stream.as_str().to_owned(),
                consumer: spec.durable.clone(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }
}

/// Runs `handler` on the durable consumer `spec` until `shutdown` fires,
/// then drains. Creates or updates the consumer first.
pub async fn run_consumer<H: BatchHandler>(
    bus: &Bus,
    spec: &ConsumerSpec,
    options: ConsumeOptions,
    handler: &H,
    metrics: &ConsumerMetrics,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let settings = bus.settings().clone();
    let consumer_error = |source: Box<dyn std::error::Error + Send + Sync>| Error::Consumer {
        stream: spec.stream.as_str(),
        durable: spec.durable.clone(),
        source,
    };
    let stream =
        bus.jetstream().get_stream(spec.stream.as_str()).await.map_err(|e| consumer_error(Box::new(e)))?;
    let consumer = stream
        .create_consumer(pull::Config {
            durable_name: Some(spec.durable.clone()),
            description: Some(format!("PatchPilot {} on {}", spec.durable, spec.stream.as_str())),
            ack_policy: AckPolicy::Explicit,
            ack_wait: settings.ack_wait(),
            // Enforced by this loop, see the module docs.
            max_deliver: -1,
            max_ack_pending: settings.max_ack_pending,
            deliver_policy: DeliverPolicy::All,
            filter_subject: spec.filter_subject.clone().unwrap_or_default(),
            ..Default::default()
        })
        .await
        .map_err(|e| consumer_error(Box::new(e)))?;
    let messages = consumer
        .stream()
        .max_messages_per_batch(options.batch_size.max(1))
        .heartbeat(Duration::from_secs(5))
        .expires(Duration::from_secs(30))
        .messages()
        .await
        .map_err(|e| consumer_error(Box::new(e)))?;
    let mut chunks = messages.ready_chunks(options.batch_size.max(1));
    let concurrency = options.concurrency.max(1);
    tracing::info!(stream = spec.stream.as_str(), consumer = %spec.durable, concurrency, "consuming");

    // Batches being handled; each settles its own messages.
    let mut in_flight = futures::stream::FuturesUnordered::new();
    let mut stream_ended = false;
    loop {
        tokio::select! {
            biased;
            // Stop taking new work; what is being handled finishes below.
            _ = shutdown.cancelled() => break,
            // A batch finished: room for another.
            Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
            chunk = chunks.next(), if in_flight.len() < concurrency => {
                let Some(chunk) = chunk else {
                    stream_ended = true;
                    break;
                };
                let mut batch = Vec::with_capacity(chunk.len());
                for item in chunk {
                    match item {
                        Ok(message) => batch.push(message),
                        // Missed heartbeats and the like: the stream recovers itself.
                        Err(e) => tracing::warn!(error = %e, consumer = %spec.durable, "pull stream error"),
                    }
                }
                if !batch.is_empty() {
                    in_flight.push(handle_batch(bus, spec, handler, metrics, batch));
                }
            }
        }
    }
    while in_flight.next().await.is_some() {}
    if stream_ended {
        return Err(consumer_error("message stream ended".into()));
    }

    // Hand back what was fetched but not started, so another worker can take
    // it now instead of after the ack wait.
    let mut returned = 0;
    while let Some(Some(Ok(message))) = chunks.get_mut().next().now_or_never() {
        if message.ack_with(AckKind::Nak(None)).await.is_ok() {
            returned += 1;
        }
    }
    // Acks and naks are published without a reply: flush, so that when the
    // loop returns they have reached the server and another worker (or a
    // test reading the stream) sees the batch settled, not still pending.
    if let Err(e) = bus.client().flush().await {
        tracing::warn!(consumer = %spec.durable, error = %e, "flushing the last acks failed; they may be redelivered");
    }
    tracing::info!(consumer = %spec.durable, returned, "consumer drained");
    Ok(())
}

async fn handle_batch<H: BatchHandler>(
    bus: &Bus,
    spec: &ConsumerSpec,
    handler: &H,
    metrics: &ConsumerMetrics,
    batch: Vec<async_nats::jetstream::Message>,
) {
    let settings = bus.settings();
    let max_deliver = i64::from(settings.max_deliver);
    let mut deliveries = Vec::with_capacity(batch.len());
    let mut ackers = Vec::with_capacity(batch.len());
    for message in batch {
        let (stream_sequence, delivered, published) = match message.info() {
            Ok(info) => (info.stream_sequence, info.delivered, info.published),
            Err(e) => {
                // Not a JetStream delivery: nothing to ack. Should not happen.
                tracing::error!(error = %e, "message without JetStream metadata");
                continue;
            }
        };
        let (message, acker) = message.split();
        let headers = message.headers.unwrap_or_default();
        let span = tracing::info_span!(
            "bus.receive",
            otel.kind = "consumer",
            messaging.system = "nats",
            messaging.destination.name = %message.subject,
            stream = spec.stream.as_str(),
            consumer = %spec.durable,
            stream_seq = stream_sequence,
            delivered,
            trace_id = tracing::field::Empty,
        );
        let parent = trace::extract(&headers);
        if trace::trace_id(&parent).is_some() {
            let _ = span.set_parent(parent);
        }
        if let Some(id) = trace::trace_id(&span.context()) {
            span.record("trace_id", id.as_str());
        }
        deliveries.push(Delivery {
            subject: message.subject.to_string(),
            payload: message.payload,
            headers,
            stream_sequence,
            delivered,
            published,
            span,
        });
        ackers.push(acker);
    }

    // Poison check: these were delivered before and never settled.
    let mut work = Vec::with_capacity(deliveries.len());
    let mut work_ackers = Vec::with_capacity(deliveries.len());
    for (delivery, acker) in deliveries.into_iter().zip(ackers) {
        if delivery.delivered > max_deliver {
            let reason = format!(
                "delivered {} times without being settled (the handler crashed or timed out); max_deliver is {}",
                delivery.delivered, max_deliver
            );
            settle_dead(bus, spec, metrics, &delivery, &acker, &reason).await;
        } else {
            work.push(delivery);
            work_ackers.push(acker);
        }
    }
    if work.is_empty() {
        return;
    }

    let started = Instant::now();
    let batch_span = tracing::info_span!("bus.batch", consumer = %spec.durable, size = work.len());
    for d in &work {
        // Links, not parents: one batch serves many traces.
        batch_span
            .add_link(opentelemetry::trace::TraceContextExt::span(&d.trace_context()).span_context().clone());
    }
    let outcomes = {
        let handling = handler.handle(&work).instrument(batch_span);
        tokio::pin!(handling);
        let period = settings.ack_wait() / 3;
        let mut progress = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            tokio::select! {
                outcomes = &mut handling => break outcomes,
                // Keep the server from redelivering work that is still going.
                _ = progress.tick() => {
                    for acker in &work_ackers {
                        if let Err(e) = acker.ack_with(AckKind::Progress).await {
                            tracing::warn!(error = %e, "in-progress ack failed");
                        }
                    }
                }
            }
        }
    };
    metrics.batch_seconds.observe(started.elapsed().as_secs_f64());
    metrics.batch_size.observe(work.len() as f64);

    let mut outcomes = outcomes.into_iter();
    for (delivery, acker) in work.iter().zip(&work_ackers) {
        let outcome = outcomes
            .next()
            .unwrap_or_else(|| Err(HandlerError::Retryable("handler returned no outcome".into())));
        match outcome {
            Ok(()) => {
                if let Err(e) = acker.ack().await {
                    tracing::warn!(error = %e, seq = delivery.stream_sequence, "ack failed; message will be redelivered");
                }
                metrics.count(spec, "acked");
            }
            Err(HandlerError::Permanent(reason)) => {
                settle_dead(bus, spec, metrics, delivery, acker, &reason).await;
            }
            Err(HandlerError::Retryable(reason)) if delivery.delivered >= max_deliver => {
                let reason = format!("gave up after {} deliveries: {reason}", delivery.delivered);
                settle_dead(bus, spec, metrics, delivery, acker, &reason).await;
            }
            Err(HandlerError::Retryable(reason)) => {
                let delay = settings.retry_delay(u32::try_from(delivery.delivered).unwrap_or(u32::MAX));
                delivery.span.in_scope(|| {
                    tracing::warn!(%reason, delivered = delivery.delivered, retry_in = ?delay, "handler failed; will retry");
                });
                if let Err(e) = acker.ack_with(AckKind::Nak(Some(delay))).await {
                    tracing::warn!(error = %e, "nak failed; message will be redelivered after the ack wait");
                }
                metrics.count(spec, "retried");
            }
        }
    }
}

/// Stores `delivery` in `DEAD_LETTERS`, then acks it. If the dead letter
/// cannot be stored, naks instead: the message must not be lost.
async fn settle_dead(
    bus: &Bus,
    spec: &ConsumerSpec,
    metrics: &ConsumerMetrics,
    delivery: &Delivery,
    acker: &Acker,
    reason: &str,
) {
    let headers = dead_letter_headers(
        Some(&delivery.headers),
        reason,
        &delivery.subject,
        spec.stream.as_str(),
        &spec.durable,
        delivery.stream_sequence,
        delivery.delivered,
    );
    let msg_id = format!("dlq:{}:{}", spec.stream.as_str(), delivery.stream_sequence);
    let stored = bus
        .publish_raw(subjects::dead_letter(spec.stream.as_str()), &msg_id, headers, delivery.payload.clone())
        .await;
    match stored {
        Ok(_) => {
            delivery.span.in_scope(|| {
                tracing::error!(%reason, seq = delivery.stream_sequence, "message dead-lettered");
            });
            if let Err(e) = acker.ack().await {
                // Redelivery will dead-letter it again; the msg id dedups.
                tracing::warn!(error = %e, "ack after dead-lettering failed");
            }
            metrics.count(spec, "dead_lettered");
        }
        Err(e) => {
            tracing::error!(error = %error_chain(&e), "cannot store dead letter; message will be retried");
            let _ = acker.ack_with(AckKind::Nak(Some(Duration::from_secs(5)))).await;
            metrics.count(spec, "retried");
        }
    }
}
