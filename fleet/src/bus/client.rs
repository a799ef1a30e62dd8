//! The connection to the bus and publishing.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, context::PublishAckFuture, publish::PublishAck};
use bytes::Bytes;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use patchpilot_model::Wire;

use super::dead_letter::{self, DeadLetter};
use super::topology::{StreamName, Topic, subjects};
use super::trace;
use crate::config::{BusConfig, NatsConfig};

/// Why a bus operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The first connection could not be made.
    #[error("cannot connect to NATS at {url}")]
    Connect {
        /// The configured URL.
        url: String,
        /// The client's error.
        #[source]
        source: async_nats::ConnectError,
    },
    /// Creating or updating a stream failed.
    #[error("cannot create or update stream {stream}")]
    Stream {
        /// The stream.
        stream: &'static str,
        /// The server's answer.
        #[source]
        source: async_nats::jetstream::context::CreateStreamError,
    },
    /// Creating a consumer failed.
    #[error("cannot create consumer {durable} on {stream}")]
    Consumer {
        /// The stream.
        stream: &'static str,
        /// The durable name.
        durable: String,
        /// The server's answer.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A publish was not acknowledged by JetStream.
    #[error("publish to {subject} failed")]
    Publish {
        /// The subject.
        subject: String,
        /// The client's error.
        #[source]
        source: async_nats::jetstream::context::PublishError,
    },
    /// Reading stream or consumer state failed.
    #[error("cannot read {what}")]
    Read {
        /// What was being read.
        what: String,
        /// The client's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// No dead letter has that sequence number.
    #[error("no dead letter with sequence {0}")]
    NoSuchDeadLetter(u64),
    /// A dead letter lacks the headers needed to replay it.
    #[error("dead letter {seq} has no {header} header; cannot replay")]
    NotReplayable {
        /// Its sequence.
        seq: u64,
        /// The missing header.
        header: &'static str,
    },
}

/// A connection to the bus: NATS core plus a JetStream context.
///
/// Cheap to clone; clones share the connection.
#[derive(Debug, Clone)]
pub struct Bus {
    client: async_nats::Client,
    jetstream: jetstream::Context,
    settings: BusConfig,
}

impl Bus {
    /// Connects to NATS. `name` identifies the service in server monitoring.
    pub async fn connect(nats: &NatsConfig, settings: BusConfig, name: &str) -> Result<Bus, Error> {
        let mut options = async_nats::ConnectOptions::new()
            .name(name)
            .connection_timeout(Duration::from_secs(nats.connect_timeout_secs))
            .retry_on_initial_connect()
            .max_reconnects(None);
        if let Some(path) = &nats.credentials_file {
            options = options.credentials_file(path).await.map_err(|e| Error::Connect {
                url: nats.url.clone(),
                source: async_nats::ConnectError::with_source(async_nats::ConnectErrorKind::Io, e),
            })?;
        }
        let urls: Vec<async_nats::ServerAddr> =
            nats.url.split(',').filter_map(|u| u.trim().parse().ok()).collect();
        // retry_on_initial_connect makes connect return at once; wait for the
        // first connection with a deadline so a wrong URL fails at start.
        let client =
            options.connect(urls).await.map_err(|source| Error::Connect { url: nats.url.clone(), source })?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(nats.connect_timeout_secs);
        while client.connection_state() != async_nats::connection::State::Connected {
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Connect {
                    url: nats.url.clone(),
                    source: async_nats::ConnectError::new(async_nats::ConnectErrorKind::TimedOut),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let jetstream = jetstream::new(client.clone());
        Ok(Bus { client, jetstream, settings })
    }

    /// Creates every stream of the topology, or updates it to the current
    /// configuration. Idempotent; every service calls it at start.
    pub async fn ensure_topology(&self) -> Result<(), Error> {
        for stream in StreamName::ALL {
            self.jetstream
                .create_or_update_stream(stream.config(&self.settings))
                .await
                .map_err(|source| Error::Stream { stream: stream.as_str(), source })?;
        }
        Ok(())
    }

    /// The bus settings.
    pub fn settings(&self) -> &BusConfig {
        &self.settings
    }

    /// The JetStream context.
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.jetstream
    }

    /// The core NATS client.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// Publishes `message` on `topic` (under `key` for a keyed topic) with
    /// `msg_id` as `Nats-Msg-Id` and the current span's trace context, and
    /// waits for JetStream's ack.
    ///
    /// A repeat of the same `msg_id` inside the duplicate window is
    /// acknowledged as a duplicate and not stored again.
    pub async fn publish<M: Wire>(
        &self,
        topic: &Topic<M>,
        key: Option<&str>,
        msg_id: &str,
        message: &M,
    ) -> Result<PublishAck, Error> {
        let outgoing = Outgoing::new(topic, key, msg_id, message, &tracing::Span::current().context());
        self.publish_raw(outgoing.subject, &outgoing.msg_id, outgoing.headers, outgoing.payload).await
    }

    /// Publishes every message with all of them in flight at once, then
    /// waits for each ack; one result per message, in order. What the CLI's
    /// submissions and the planner's outbox use.
    pub async fn publish_many(&self, messages: Vec<Outgoing>) -> Vec<Result<PublishAck, Error>> {
        let mut pending = Vec::with_capacity(messages.len());
        for m in messages {
            pending.push(self.send(m).await);
        }
        let mut acked = Vec::with_capacity(pending.len());
        for sent in pending {
            acked.push(match sent {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            });
        }
        acked
    }

    /// Sends one message without waiting for its ack; the returned future
    /// resolves to it. For callers that keep their own window of messages
    /// in flight (the intake benchmark); others use [`Bus::publish_many`].
    pub async fn send(
        &self,
        message: Outgoing,
    ) -> Result<impl std::future::Future<Output = Result<PublishAck, Error>> + Send + use<>, Error> {
        let subject = message.subject.clone();
        let pending =
            self.send_raw(message.subject, &message.msg_id, message.headers, message.payload).await?;
        Ok(async move { pending.await.map_err(|source| Error::Publish { subject, source }) })
    }

    /// Publishes a payload with caller-built headers (trace context already
    /// set) and waits for JetStream's ack: dead letters and their replays,
    /// and tests that must send what no typed topic would (a payload that
    /// does not decode). Services publish through a [`Topic`].
    pub async fn publish_raw(
        &self,
        subject: String,
        msg_id: &str,
        headers: HeaderMap,
        payload: Bytes,
    ) -> Result<PublishAck, Error> {
        let pending = self.send_raw(subject.clone(), msg_id, headers, payload).await?;
        pending.await.map_err(|source| Error::Publish { subject, source })
    }

    /// Sends a payload without waiting for the ack.
    async fn send_raw(
        &self,
        subject: String,
        msg_id: &str,
        mut headers: HeaderMap,
        payload: Bytes,
    ) -> Result<PublishAckFuture, Error> {
        headers.insert(async_nats::header::NATS_MESSAGE_ID, msg_id);
        self.jetstream
            .publish_with_headers(subject.clone(), headers, payload)
            .await
            .map_err(|source| Error::Publish { subject, source })
    }

    /// Messages stored in `stream` (for work queues: not yet acknowledged).
    pub async fn stream_messages(&self, stream: StreamName) -> Result<u64, Error> {
        let mut s = self
            .jetstream
            .get_stream(stream.as_str())
            .await
            .map_err(|e| Error::Read { what: format!("stream {}", stream.as_str()), source: Box::new(e) })?;
        let info = s
            .info()
            .await
            .map_err(|e| Error::Read { what: format!("stream {}", stream.as_str()), source: Box::new(e) })?;
        Ok(info.state.messages)
    }

    /// Whether `stream` still holds the message at `seq`. For a work queue:
    /// it is waiting for a consumer or being worked on (a worker acks when
    /// it is done), not settled or deleted.
    pub async fn holds(&self, stream: StreamName, seq: u64) -> Result<bool, Error> {
        use async_nats::jetstream::stream::RawMessageErrorKind;
        let read = |e: Box<dyn std::error::Error + Send + Sync>| Error::Read {
            what: format!("message {seq} of stream {}", stream.as_str()),
            source: e,
        };
        // No info request first: one round trip per look.
        let s = self.jetstream.get_stream_no_info(stream.as_str()).await.map_err(|e| read(Box::new(e)))?;
        match s.get_raw_message(seq).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => Ok(false),
            Err(e) => Err(read(Box::new(e))),
        }
    }

    /// Pending and in-flight counts of every consumer on `stream`.
    pub async fn consumer_states(&self, stream: StreamName) -> Result<Vec<ConsumerState>, Error> {
        use futures::TryStreamExt;
        let s = self
            .jetstream
            .get_stream(stream.as_str())
            .await
            .map_err(|e| Error::Read { what: format!("stream {}", stream.as_str()), source: Box::new(e) })?;
        let infos: Vec<_> = s.consumers().try_collect().await.map_err(|e| Error::Read {
            what: format!("consumers of {}", stream.as_str()),
            source: Box::new(e),
        })?;
        Ok(infos
            .into_iter()
            .map(|i| ConsumerState {
                name: i.name,
                pending: i.num_pending,
                in_flight: i.num_ack_pending as u64,
                redelivered: i.num_redelivered as u64,
            })
            .collect())
    }

    /// Pending and in-flight counts of one consumer.
    pub async fn consumer_state(&self, stream: StreamName, durable: &str) -> Result<ConsumerState, Error> {
        let what = || format!("consumer {durable} of {}", stream.as_str());
        let s = self
            .jetstream
            .get_stream_no_info(stream.as_str())
            .await
            .map_err(|e| Error::Read { what: what(), source: Box::new(e) })?;
        let info =
            s.consumer_info(durable).await.map_err(|e| Error::Read { what: what(), source: Box::new(e) })?;
        Ok(ConsumerState {
            name: info.name,
            pending: info.num_pending,
            in_flight: info.num_ack_pending as u64,
            redelivered: info.num_redelivered as u64,
        })
    }

    /// How many dead letters `DEAD_LETTERS` holds for `stream`.
    pub async fn dead_letter_count(&self, stream: StreamName) -> Result<u64, Error> {
        use futures::TryStreamExt;
        let subject = subjects::dead_letter(stream.as_str());
        let mut info = self.dead_letter_stream().await?.info_with_subjects(&subject).await.map_err(|e| {
            Error::Read { what: format!("dead letters of {}", stream.as_str()), source: Box::new(e) }
        })?;
        let mut count = 0;
        while let Some((_, messages)) = info.try_next().await.map_err(|e| Error::Read {
            what: format!("dead letters of {}", stream.as_str()),
            source: Box::new(e),
        })? {
            count += messages as u64;
        }
        Ok(count)
    }

    /// Lists up to `limit` dead letters, oldest first.
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        let stream = self.dead_letter_stream().await?;
        let mut out = Vec::new();
        let mut seq = 1;
        while out.len() < limit {
            let message = stream.raw_message_builder().sequence(seq).next_by_subject("pp.dlq.>").send().await;
            match message {
                Ok(m) => {
                    seq = m.sequence + 1;
                    out.push(DeadLetter::from_stream_message(m));
                }
                Err(e) if e.kind() == async_nats::jetstream::stream::RawMessageErrorKind::NoMessageFound => {
                    break;
                }
                Err(e) => {
                    return Err(Error::Read { what: "dead letters".into(), source: Box::new(e) });
                }
            }
        }
        Ok(out)
    }

    /// Republishes dead letter `seq` to its original subject with its
    /// original headers, then removes it from `DEAD_LETTERS`.
    ///
    /// The replay gets a fresh `Nats-Msg-Id` (`<original>:replay:<seq>`), so
    /// the duplicate window does not swallow it; replaying the same dead
    /// letter twice is impossible because the first replay deletes it.
    pub async fn replay_dead_letter(&self, seq: u64) -> Result<PublishAck, Error> {
        let stream = self.dead_letter_stream().await?;
        let message = stream.get_raw_message(seq).await.map_err(|e| {
            if e.kind() == async_nats::jetstream::stream::RawMessageErrorKind::NoMessageFound {
                Error::NoSuchDeadLetter(seq)
            } else {
                Error::Read { what: format!("dead letter {seq}"), source: Box::new(e) }
            }
        })?;
        let letter = DeadLetter::from_stream_message(message.clone());
        if letter.original_subject.is_empty() {
            return Err(Error::NotReplayable { seq, header: dead_letter::headers::SUBJECT });
        }
        let headers = dead_letter::original_headers(&message.headers);
        let original_id = message
            .headers
            .get(dead_letter::headers::MSG_ID)
            .map(|v| v.as_str().to_owned())
            .unwrap_or_else(|| format!("dlq-{seq}"));
        let ack = self
            .publish_raw(
                letter.original_subject.clone(),
                &format!("{original_id}:replay:{seq}"),
                headers,
                message.payload.clone(),
            )
            .await?;
        stream
            .delete_message(seq)
            .await
            .map_err(|e| Error::Read { what: format!("delete dead letter {seq}"), source: Box::new(e) })?;
        Ok(ack)
    }

    async fn dead_letter_stream(&self) -> Result<jetstream::stream::Stream, Error> {
        self.jetstream
            .get_stream(StreamName::DeadLetters.as_str())
            .await
            .map_err(|e| Error::Read { what: "stream DEAD_LETTERS".into(), source: Box::new(e) })
    }

    /// Flushes outgoing messages and closes the connection.
    pub async fn drain(&self) {
        if let Err(e) = self.client.drain().await {
            tracing::warn!(error = %e, "NATS drain failed");
        }
    }
}

/// A message ready to publish: encoded, addressed, with the trace context
/// it continues.
#[derive(Debug, Clone)]
pub struct Outgoing {
    subject: String,
    msg_id: String,
    headers: HeaderMap,
    payload: Bytes,
}

impl Outgoing {
    /// `message` on `topic` (under `key` for a keyed topic) as `msg_id`,
    /// continuing the trace of `cx` (for an outbox row: the context rebuilt
    /// from its stored `traceparent`).
    pub fn new<M: Wire>(
        topic: &Topic<M>,
        key: Option<&str>,
        msg_id: &str,
        message: &M,
        cx: &opentelemetry::Context,
    ) -> Outgoing {
        let mut headers = HeaderMap::new();
        trace::inject(cx, &mut headers);
        Outgoing {
            subject: topic.subject(key),
            msg_id: msg_id.to_owned(),
            headers,
            payload: Bytes::from(message.encode()),
        }
    }

    /// The message id.
    pub fn msg_id(&self) -> &str {
        &self.msg_id
    }
}

/// Counts of one consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerState {
    /// Consumer (durable) name.
    pub name: String,
    /// Messages not yet delivered.
    pub pending: u64,
    /// Delivered, not yet acknowledged.
    pub in_flight: u64,
    /// Delivered more than once and not yet acknowledged.
    pub redelivered: u64,
}
