//! Malformed and invalid messages end in DEAD_LETTERS with a reason, the
//! stream keeps flowing, and operators can list and replay them.

use std::time::Duration;

use patchpilot_e2e::{Stack, fixture, wait_for};
use patchpilot_fleet::bus::{StreamName, dead_letter};
use prost::Message as _;

use crate::support::arg;

#[tokio::test]
async fn malformed_messages_are_dead_lettered_and_the_stream_keeps_flowing() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let _planner = stack.spawn_planner("[planner.registry]\nlookup_labels = false\n")?;

    // Not a protobuf Assessment at all.
    stack
        .bus
        .publish_raw(
            "pp.assessment.cli".into(),
            "garbage-1",
            Default::default(),
            bytes::Bytes::from_static(b"\xff\xff\xff{not protobuf"),
        )
        .await?;
    // A well-formed message with an invalid digest.
    let invalid = patchpilot_proto::v1::Assessment {
        image_ref: "r.test/x:1".into(),
        image_digest: "sha256:not-hex".into(),
        ..Default::default()
    };
    stack
        .bus
        .publish_raw(
            "pp.assessment.cli".into(),
            "invalid-1",
            Default::default(),
            invalid.encode_to_vec().into(),
        )
        .await?;
    // A good one behind them.
    let out = stack.cli(&["submit", arg(&fixture("reports/trivy-alpine-310-registry.json"))]).await?;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    stack.wait_count("SELECT count(*) FROM assessments", 1, Duration::from_secs(20)).await?;

    let letters = wait_for("two dead letters", Duration::from_secs(20), || async {
        let l = stack.stream_contents(StreamName::DeadLetters).await?;
        Ok((l.len() == 2).then_some(l))
    })
    .await?;
    let header = |m: &async_nats::jetstream::message::StreamMessage, h: &str| {
        m.headers.get(h).map(|v| v.as_str().to_owned()).unwrap_or_default()
    };
    let garbage = letters
        .iter()
        .find(|m| header(m, dead_letter::headers::MSG_ID) == "garbage-1")
        .expect("garbage dead-lettered");
    assert!(
        header(garbage, dead_letter::headers::REASON)
            .starts_with("payload is not a patchpilot.v1.Assessment"),
        "{}",
        header(garbage, dead_letter::headers::REASON)
    );
    assert_eq!(header(garbage, dead_letter::headers::SUBJECT), "pp.assessment.cli");
    assert_eq!(header(garbage, dead_letter::headers::STREAM), "ASSESSMENTS");
    assert_eq!(header(garbage, dead_letter::headers::DELIVERIES), "1", "permanent failures are not retried");
    assert_eq!(garbage.subject.as_str(), "pp.dlq.assessments");
    assert_eq!(garbage.payload.as_ref(), b"\xff\xff\xff{not protobuf", "payload kept as it was");
    let invalid = letters
        .iter()
        .find(|m| header(m, dead_letter::headers::MSG_ID) == "invalid-1")
        .expect("invalid dead-lettered");
    assert!(
        header(invalid, dead_letter::headers::REASON).contains("image_digest"),
        "{}",
        header(invalid, dead_letter::headers::REASON)
    );

    // The CLI lists them…
    let list = stack.cli(&["dlq", "list", "--json"]).await?;
    assert_eq!(list.code, Some(0), "{}", list.stderr);
    let listed: Vec<serde_json::Value> = serde_json::from_str(&list.stdout)?;
    assert_eq!(listed.len(), 2);
    let status: serde_json::Value = serde_json::from_str(&stack.cli(&["status", "--json"]).await?.stdout)?;
    assert_eq!(status["dead_letters"], 2);

    // …and replays one: it goes back to its subject (and, still malformed,
    // back to the dead letters under a new sequence).
    let id = garbage.sequence.to_string();
    let replay = stack.cli(&["dlq", "replay", &id]).await?;
    assert_eq!(replay.code, Some(0), "{}", replay.stderr);
    let after =
        wait_for("the replayed message to be dead-lettered again", Duration::from_secs(20), || async {
            let l = stack.stream_contents(StreamName::DeadLetters).await?;
            Ok((l.len() == 2 && l.iter().all(|m| m.sequence != garbage.sequence)).then_some(l))
        })
        .await?;
    let again = after
        .iter()
        .find(|m| header(m, dead_letter::headers::MSG_ID).starts_with("garbage-1:replay:"))
        .expect("replayed copy");
    assert_eq!(again.payload, garbage.payload);
    let missing = stack.cli(&["dlq", "replay", &id]).await?;
    assert_eq!(missing.code, Some(1), "a replayed letter is gone");
    Ok(())
}
