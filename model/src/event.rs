//! Fleet events: facts a service announces on `pp.event.<kind>`. The
//! controller's `remediation.<state>` events are how the planner keeps its
//! remediation states in step (they come from a transactional outbox and
//! carry an ordering `seq`); the others (`run.<outcome>`, `scan.progress`)
//! are for people and dashboards, and nothing depends on them: Postgres
//! holds the state.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use patchpilot_proto::v1;

use crate::ValidationError;
use crate::time::{from_timestamp, timestamp};

/// Something that happened in the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Unique id; the message id.
    pub event_id: String,
    /// Dotted kind, also the subject suffix: `scan.progress`.
    pub kind: String,
    /// The service that emitted it.
    pub source: String,
    /// The remediation concerned, when there is one.
    pub remediation_id: String,
    /// The sandbox run concerned, when there is one.
    pub run_id: String,
    /// The image concerned, when there is one.
    pub image_digest: String,
    /// New state, for state changes.
    pub state: String,
    /// One line for people.
    pub message: String,
    /// Extra facts: `repo_url`, `pr_url`, `image_ref`…
    pub attributes: BTreeMap<String, String>,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
}

impl Event {
    /// A new event of `kind` from `source`, now, with a fresh id.
    pub fn new(kind: impl Into<String>, source: impl Into<String>) -> Event {
        Event {
            event_id: uuid::Uuid::new_v4().to_string(),
            kind: kind.into(),
            source: source.into(),
            remediation_id: String::new(),
            run_id: String::new(),
            image_digest: String::new(),
            state: String::new(),
            message: String::new(),
            attributes: BTreeMap::new(),
            occurred_at: Utc::now(),
        }
    }
}

impl From<&Event> for v1::Event {
    fn from(e: &Event) -> v1::Event {
        v1::Event {
            event_id: e.event_id.clone(),
            kind: e.kind.clone(),
            source: e.source.clone(),
            remediation_id: e.remediation_id.clone(),
            run_id: e.run_id.clone(),
            image_digest: e.image_digest.clone(),
            state: e.state.clone(),
            message: e.message.clone(),
            attributes: e.attributes.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            occurred_at: Some(timestamp(e.occurred_at)),
        }
    }
}

impl TryFrom<v1::Event> for Event {
    type Error = ValidationError;
    fn try_from(m: v1::Event) -> Result<Event, ValidationError> {
        if m.kind.is_empty() {
            return Err(ValidationError::new("kind", "must not be empty"));
        }
        Ok(Event {
            event_id: m.event_id,
            kind: m.kind,
            source: m.source,
            remediation_id: m.remediation_id,
            run_id: m.run_id,
            image_digest: m.image_digest,
            state: m.state,
            message: m.message,
            attributes: m.attributes.into_iter().collect(),
            occurred_at: m.occurred_at.and_then(from_timestamp).unwrap_or_default(),
        })
    }
}

crate::wire::wire_by_conversions!(Event, v1::Event, "patchpilot.v1.Event");
