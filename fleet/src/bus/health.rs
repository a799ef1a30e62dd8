//! Bus health as gauges: each consumer's backlog and in-flight messages,
//! and the dead letters its stream has left, sampled from JetStream while
//! the consumer runs.
//!
//! Every worker of a service samples the same durable consumer, so the
//! gauges of two workers carry the same value; dashboards take `max` over
//! instances. The dead-letter count is per stream for the same reason.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use super::{Bus, ConsumerSpec};

/// How often a running consumer samples JetStream: often enough for a
/// 15 s scrape to see a backlog grow, rare enough to cost the server
/// nothing (two small requests).
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConsumerLabels {
    stream: String,
    consumer: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabels {
    stream: String,
}

/// The `pp_bus_consumer_*` and `pp_bus_dead_letters` gauges.
#[derive(Debug, Clone, Default)]
pub struct BusHealthMetrics {
    pending: Family<ConsumerLabels, Gauge>,
    in_flight: Family<ConsumerLabels, Gauge>,
    dead_letters: Family<StreamLabels, Gauge>,
}

impl BusHealthMetrics {
    /// Registers the gauges.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = BusHealthMetrics::default();
        registry.register(
            "pp_bus_consumer_pending",
            "Messages a durable consumer has not been delivered yet (its lag)",
            metrics.pending.clone(),
        );
        registry.register(
            "pp_bus_consumer_in_flight",
            "Messages delivered to a durable consumer and not yet acknowledged",
            metrics.in_flight.clone(),
        );
        registry.register(
            "pp_bus_dead_letters",
            "Dead letters DEAD_LETTERS holds for a stream",
            metrics.dead_letters.clone(),
        );
        metrics
    }

    /// Samples `spec`'s consumer and its stream's dead letters once.
    pub async fn sample(&self, bus: &Bus, spec: &ConsumerSpec) -> Result<(), super::Error> {
        let labels =
            ConsumerLabels { stream: spec.stream.as_str().to_owned(), consumer: spec.durable.clone() };
        let state = bus.consumer_state(spec.stream, &spec.durable).await?;
        self.pending.get_or_create(&labels).set(gauge_value(state.pending));
        self.in_flight.get_or_create(&labels).set(gauge_value(state.in_flight));
        let dead = bus.dead_letter_count(spec.stream).await?;
        self.dead_letters.get_or_create(&StreamLabels { stream: labels.stream }).set(gauge_value(dead));
        Ok(())
    }

    /// Samples every [`SAMPLE_EVERY`] until `shutdown`. A failed sample is
    /// logged and tried again at the next tick: the gauges keep their last
    /// value, which is what a scrape should see while the bus is away.
    pub async fn watch(&self, bus: &Bus, spec: &ConsumerSpec, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(SAMPLE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.sample(bus, spec).await {
                tracing::debug!(consumer = %spec.durable, error = %crate::error_chain(&e), "bus health sample failed");
            }
        }
    }
}

fn gauge_value(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
