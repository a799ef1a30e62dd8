//! Lifecycle events: every stored state change of a remediation announced
//! as `pp.event.remediation.<state>` on `EVENTS`.
//!
//! The transition rows are the outbox: [`Store::save`] writes the state and
//! its transition in one transaction, and this publisher sends the rows
//! not yet announced, oldest first, after commit. A row is marked only once
//! JetStream acknowledged it; its id is the `Nats-Msg-Id`, so a crash
//! between the ack and the mark (or two controllers publishing the same
//! row) stores it once. The planner keeps its `remediations.state` in step
//! from these events, ordered by the row id it carries as `seq`.

use std::time::Duration;

use patchpilot_fleet::bus::{Bus, Outgoing, topics, trace};
use patchpilot_model::Event;
use tokio_util::sync::CancellationToken;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::metrics::ControllerMetrics;
use crate::store::{Error, Store, Transition};

/// Most rows published per round.
const BATCH: i64 = 256;

/// How often rows are looked for without a wake-up: those another
/// controller stored, or left when the bus was down.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// Publishes stored state changes.
#[derive(Debug, Clone)]
pub struct StateEvents {
    store: Store,
    bus: Bus,
    metrics: ControllerMetrics,
}

impl StateEvents {
    /// A publisher of `store`'s transitions on `bus`, counting each in
    /// `metrics` once announced.
    pub fn new(store: Store, bus: Bus, metrics: ControllerMetrics) -> Self {
        StateEvents { store, bus, metrics }
    }

    /// The event announcing one transition.
    pub fn event(transition: &Transition) -> Event {
        let mut event = Event::new(transition.to_state.event_kind(), "controller");
        event.event_id = format!("remediation-transition-{}", transition.id);
        event.remediation_id = transition.remediation_id.clone();
        event.state = transition.to_state.as_str().to_owned();
        event.message = format!("{} → {} ({})", transition.from_state, transition.to_state, transition.event);
        event.occurred_at = transition.at;
        event.attributes.insert("seq".into(), transition.id.to_string());
        event.attributes.insert("from_state".into(), transition.from_state.as_str().to_owned());
        event.attributes.insert("revision".into(), transition.revision.to_string());
        if let Some(url) = &transition.pr_url {
            event.attributes.insert("pr_url".into(), url.clone());
        }
        event
    }

    /// Publishes every unannounced transition; returns how many were
    /// acknowledged. Stops at the first that was not, so order holds.
    pub async fn publish_pending(&self) -> Result<usize, Error> {
        let mut published = 0;
        loop {
            let pending = self.store.unpublished_transitions(BATCH).await?;
            if pending.is_empty() {
                return Ok(published);
            }
            let context = tracing::Span::current().context();
            let outgoing = pending
                .iter()
                .map(|t| {
                    let event = Self::event(t);
                    // Each event continues its remediation's trace, so a
                    // consumer's handling of it joins submit → PR.
                    let cx = t.traceparent.as_deref().map(trace::from_traceparent);
                    Outgoing::new(
                        &topics::EVENTS,
                        Some(&event.kind),
                        &event.event_id,
                        &event,
                        cx.as_ref().unwrap_or(&context),
                    )
                })
                .collect();
            let acks = self.bus.publish_many(outgoing).await;
            let acked: Vec<i64> =
                pending.iter().zip(&acks).map_while(|(t, ack)| ack.as_ref().ok().map(|_| t.id)).collect();
            if !acked.is_empty() {
                self.store.mark_transitions_published(&acked).await?;
                published += acked.len();
                pending.iter().take(acked.len()).for_each(|t| self.metrics.transition(t));
            }
            if let Some(Err(e)) = acks.iter().find(|ack| ack.is_err()) {
                tracing::warn!(error = %patchpilot_fleet::error_chain(e), "state events not published; retrying later");
                return Ok(published);
            }
            if pending.len() < BATCH as usize {
                return Ok(published);
            }
        }
    }

    /// Publishes until `shutdown`: after each stored state change, and
    /// every few seconds for what was left.
    pub async fn run(&self, shutdown: CancellationToken) {
        loop {
            if let Err(e) = self.publish_pending().await {
                tracing::warn!(error = %patchpilot_fleet::error_chain(&e), "state events: reading the outbox failed");
            }
            match self.store.count_by_state().await {
                Ok(counts) => self.metrics.set_remediations(&counts),
                Err(e) => {
                    tracing::debug!(error = %patchpilot_fleet::error_chain(&e), "remediation counts not read")
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.store.transition_saved() => {}
                _ = tokio::time::sleep(SWEEP_EVERY) => {}
            }
        }
        // What the last steps stored before shutdown.
        if let Err(e) = self.publish_pending().await {
            tracing::warn!(error = %patchpilot_fleet::error_chain(&e), "state events: final publish failed");
        }
    }
}
