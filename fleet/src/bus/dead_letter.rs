//! Dead letters: messages a consumer gave up on, kept in `DEAD_LETTERS` with
//! the reason, so nothing is lost and an operator can replay them.

use async_nats::HeaderMap;
use async_nats::jetstream::message::StreamMessage;
use bytes::Bytes;
use chrono::{DateTime, Utc};

/// Header names on dead letters.
pub mod headers {
    /// Why the message was dead-lettered.
    pub const REASON: &str = "Pp-Dlq-Reason";
    /// The subject it was originally published to.
    pub const SUBJECT: &str = "Pp-Dlq-Subject";
    /// The stream it was consumed from.
    pub const STREAM: &str = "Pp-Dlq-Stream";
    /// The consumer that gave up.
    pub const CONSUMER: &str = "Pp-Dlq-Consumer";
    /// Its sequence in the original stream.
    pub const SEQUENCE: &str = "Pp-Dlq-Stream-Seq";
    /// How many times it was delivered.
    pub const DELIVERIES: &str = "Pp-Dlq-Deliveries";
    /// When it was dead-lettered (RFC 3339).
    pub const AT: &str = "Pp-Dlq-At";
    /// Its original `Nats-Msg-Id`, if it had one.
    pub const MSG_ID: &str = "Pp-Dlq-Msg-Id";

    /// Prefix shared by all of the above.
    pub const PREFIX: &str = "Pp-Dlq-";
}

/// Longest reason kept in a header; longer ones are cut.
const MAX_REASON_BYTES: usize = 2_048;

/// A dead letter as listed by operators.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// Sequence in `DEAD_LETTERS`; the id for replay.
    pub sequence: u64,
    /// When it was dead-lettered.
    pub at: DateTime<Utc>,
    /// Why.
    pub reason: String,
    /// Original subject.
    pub original_subject: String,
    /// Original stream.
    pub stream: String,
    /// Consumer that gave up.
    pub consumer: String,
    /// Delivery count when it gave up.
    pub deliveries: u64,
    /// Size of the payload in bytes.
    pub payload_len: usize,
    /// The original payload.
    pub payload: Bytes,
}

impl DeadLetter {
    pub(crate) fn from_stream_message(m: StreamMessage) -> DeadLetter {
        let get = |name: &str| m.headers.get(name).map(|v| v.as_str().to_owned()).unwrap_or_default();
        DeadLetter {
            sequence: m.sequence,
            at: m.time,
            reason: get(headers::REASON),
            original_subject: get(headers::SUBJECT),
            stream: get(headers::STREAM),
            consumer: get(headers::CONSUMER),
            deliveries: get(headers::DELIVERIES).parse().unwrap_or(0),
            payload_len: m.payload.len(),
            payload: m.payload,
        }
    }
}

/// Header values are single lines; keep the reason readable and bounded.
pub(crate) fn sanitize_reason(reason: &str) -> String {
    let mut line: String = reason.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if line.len() > MAX_REASON_BYTES {
        let mut cut = MAX_REASON_BYTES;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push('…');
    }
    line
}

/// Builds the headers of a dead letter: the original headers (trace context
/// included, `Nats-Msg-Id` moved to [`headers::MSG_ID`]) plus the reason
/// and provenance.
pub(crate) fn dead_letter_headers(
    original: Option<&HeaderMap>,
    reason: &str,
    subject: &str,
    stream: &str,
    consumer: &str,
    stream_seq: u64,
    deliveries: i64,
) -> HeaderMap {
    let mut out = HeaderMap::new();
    if let Some(original) = original {
        for (name, values) in original.iter() {
            let name: &str = name.as_ref();
            if name.eq_ignore_ascii_case(async_nats::header::NATS_MESSAGE_ID.as_ref()) {
                if let Some(v) = values.first() {
                    out.insert(headers::MSG_ID, v.as_str());
                }
                continue;
            }
            if name.starts_with(headers::PREFIX) {
                continue;
            }
            for v in values {
                out.append(name, v.as_str());
            }
        }
    }
    out.insert(headers::REASON, sanitize_reason(reason).as_str());
    out.insert(headers::SUBJECT, subject);
    out.insert(headers::STREAM, stream);
    out.insert(headers::CONSUMER, consumer);
    out.insert(headers::SEQUENCE, stream_seq.to_string().as_str());
    out.insert(headers::DELIVERIES, deliveries.to_string().as_str());
    out.insert(headers::AT, Utc::now().to_rfc3339().as_str());
    out
}

/// The headers to replay a dead letter with: everything except the
/// dead-letter bookkeeping and the old `Nats-Msg-Id`.
pub(crate) fn original_headers(dead: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, values) in dead.iter() {
        let name: &str = name.as_ref();
        if name.starts_with(headers::PREFIX)
            || name.eq_ignore_ascii_case(async_nats::header::NATS_MESSAGE_ID.as_ref())
        {
            continue;
        }
        for v in values {
            out.append(name, v.as_str());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_is_one_bounded_line() {
        let r = sanitize_reason("line one\nline two\r\n");
        assert!(!r.contains('\n') && !r.contains('\r'));
        let long = "é".repeat(5_000);
        let r = sanitize_reason(&long);
        assert!(r.len() <= MAX_REASON_BYTES + '…'.len_utf8());
    }

    #[test]
    fn headers_keep_trace_and_move_msg_id() {
        let mut original = HeaderMap::new();
        original.insert("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        original.insert(async_nats::header::NATS_MESSAGE_ID, "asmt-1");
        let h = dead_letter_headers(
            Some(&original),
            "bad\nproto",
            "pp.assessment.cli",
            "ASSESSMENTS",
            "planner",
            7,
            3,
        );
        assert_eq!(
            h.get("traceparent").map(|v| v.as_str()),
            Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        );
        assert!(h.get(async_nats::header::NATS_MESSAGE_ID).is_none());
        assert_eq!(h.get(headers::MSG_ID).map(|v| v.as_str()), Some("asmt-1"));
        assert_eq!(h.get(headers::REASON).map(|v| v.as_str()), Some("bad proto"));
        assert_eq!(h.get(headers::DELIVERIES).map(|v| v.as_str()), Some("3"));
        let replay = original_headers(&h);
        assert!(replay.get(headers::REASON).is_none());
        assert!(replay.get("traceparent").is_some());
    }
}
