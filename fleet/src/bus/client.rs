//! The connection to the bus and publishing.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, context::PublishAckFuture, publish::PublishAck};
use bytes::Bytes;

use super::dead_letter::{self, DeadLetter};
use super::topology::StreamName;
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

    /// Publishes `message` to `subject` with `msg_id` as `Nats-Msg-Id` and the
    /// current span's trace context, and waits for JetStream's ack.
    ///
    /// A repeat of the same `msg_id` inside the duplicate window is
    /// acknowledged as a duplicate and not stored again.
    pub async fn publish<M: prost::Message>(
        &self,
        subject: impl Into<String>,
        msg_id: &str,
        message: &M,
    ) -> Result<PublishAck, Error> {
        let mut headers = HeaderMap::new();
        trace::inject_current(&mut headers);
        self.publish_raw(subject.into(), msg_id, headers, Bytes::from(message.encode_to_vec())).await
    }

    /// Publishes a payload with caller-built headers (trace context already
    /// set) and waits for JetStream's ack.
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

    /// Sends a payload without waiting for the ack; await the returned future
    /// for it. Lets callers keep many publishes in flight.
    pub async fn send_raw(
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
