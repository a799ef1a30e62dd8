//! The broker's metrics: calls by connection and outcome (a refusal is
//! named by its type, so denials are every outcome but `relayed`), their
//! latency, and model tokens by type, as OpenTelemetry's GenAI conventions
//! count them (`gen_ai.token.type`: input, output).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    connection: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectionLabels {
    connection: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    connection: String,
    token_type: String,
}

/// 1 ms to about 65 s: a refusal takes a database round trip, a model call
/// can take a minute.
fn call_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The `pp_broker_*` metrics. `Default` gives unregistered ones, for a
/// broker built without a service (tests, tools).
#[derive(Debug, Clone)]
pub struct BrokerMetrics {
    calls: Family<CallLabels, Counter>,
    call_seconds: Family<ConnectionLabels, Histogram, fn() -> Histogram>,
    tokens: Family<TokenLabels, Counter>,
}

impl Default for BrokerMetrics {
    fn default() -> Self {
        BrokerMetrics {
            calls: Family::default(),
            call_seconds: Family::new_with_constructor(call_buckets),
            tokens: Family::default(),
        }
    }
}

impl BrokerMetrics {
    /// Registers the metrics.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = BrokerMetrics::default();
        registry.register(
            "pp_broker_calls",
            "Guest calls, by connection and outcome (relayed, or the refusal's type)",
            metrics.calls.clone(),
        );
        registry.register(
            "pp_broker_call_seconds",
            "Time from a guest call's arrival to its answer",
            metrics.call_seconds.clone(),
        );
        registry.register(
            "pp_broker_model_tokens",
            "Model tokens upstreams reported, by connection and token_type (input, output)",
            metrics.tokens.clone(),
        );
        metrics
    }

    /// Counts one answered call.
    pub(crate) fn call(&self, connection: &str, outcome: &str, took: Duration) {
        self.calls
            .get_or_create(&CallLabels { connection: connection.to_owned(), outcome: outcome.to_owned() })
            .inc();
        self.call_seconds
            .get_or_create(&ConnectionLabels { connection: connection.to_owned() })
            .observe(took.as_secs_f64());
    }

    /// Counts a model call's tokens.
    pub(crate) fn model_tokens(&self, connection: &str, usage: &crate::relay::ModelUsage) {
        for (kind, n) in [("input", usage.input_tokens), ("output", usage.output_tokens)] {
            self.tokens
                .get_or_create(&TokenLabels {
                    connection: connection.to_owned(),
                    token_type: kind.to_owned(),
                })
                .inc_by(n);
        }
    }
}
