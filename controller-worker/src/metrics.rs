//! The controller's metrics: the remediation funnel and the time spent in
//! each state.
//!
//! They are counted where each stored transition is announced (the event
//! outbox in [`crate::events`]), so a fleet counts every transition once,
//! whichever controller made it and whichever announced it. The gauge of
//! remediations by state is read from the shared table: every controller
//! reports the same fleet-wide numbers, and dashboards take `max` over
//! instances.

use patchpilot_model::RemediationState;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::store::Transition;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransitionLabels {
    from: String,
    to: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

/// 1 s to about 36 h in doublings: a sandbox run takes minutes, CI can take
/// hours, and a remediation can wait a day for a person.
fn state_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 18))
}

/// The `pp_remediation*` metrics.
#[derive(Debug, Clone)]
pub struct ControllerMetrics {
    transitions: Family<TransitionLabels, Counter>,
    state_seconds: Family<StateLabels, Histogram, fn() -> Histogram>,
    remediations: Family<StateLabels, Gauge>,
}

impl ControllerMetrics {
    /// Registers the metrics.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = ControllerMetrics {
            transitions: Family::default(),
            state_seconds: Family::new_with_constructor(state_buckets),
            remediations: Family::default(),
        };
        registry.register(
            "pp_remediation_transitions",
            "Remediation state changes, by the state left and the state entered",
            metrics.transitions.clone(),
        );
        registry.register(
            "pp_remediation_state_seconds",
            "Time a remediation spent in a state before leaving it",
            metrics.state_seconds.clone(),
        );
        registry.register(
            "pp_remediations",
            "Remediations the controllers hold, by current state (fleet-wide)",
            metrics.remediations.clone(),
        );
        metrics
    }

    /// Counts one announced transition and the time spent in the state it
    /// left.
    pub fn transition(&self, transition: &Transition) {
        let from = transition.from_state.as_str().to_owned();
        self.transitions
            .get_or_create(&TransitionLabels {
                from: from.clone(),
                to: transition.to_state.as_str().to_owned(),
            })
            .inc();
        let spent = (transition.at - transition.entered_at).num_milliseconds().max(0) as f64 / 1000.0;
        self.state_seconds.get_or_create(&StateLabels { state: from }).observe(spent);
    }

    /// Sets the by-state gauge; states absent from `counts` read zero, so a
    /// state that emptied does not keep its last value.
    pub fn set_remediations(&self, counts: &[(RemediationState, i64)]) {
        for &state in RemediationState::ALL {
            let count = counts.iter().find(|(s, _)| *s == state).map_or(0, |(_, n)| *n);
            self.remediations.get_or_create(&StateLabels { state: state.as_str().to_owned() }).set(count);
        }
    }
}
