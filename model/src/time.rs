//! Timestamps at the protobuf edge.

use chrono::{DateTime, Utc};

/// A protobuf timestamp of `t`.
pub fn timestamp(t: DateTime<Utc>) -> patchpilot_proto::Timestamp {
    patchpilot_proto::Timestamp { seconds: t.timestamp(), nanos: t.timestamp_subsec_nanos() as i32 }
}

/// The time of a protobuf timestamp; `None` when it is out of range.
pub fn from_timestamp(t: patchpilot_proto::Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.seconds, t.nanos.max(0) as u32)
}
