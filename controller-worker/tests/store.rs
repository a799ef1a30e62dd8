//! The controller's store against a real Postgres: job revisions, leases
//! with fencing, and state that survives a controller.

use std::time::Duration;

use patchpilot_controller::lifecycle::{Event, Limits, Machine, State};
use patchpilot_controller::store::{Error, JobOutcome, Store};
use patchpilot_e2e::{TestDatabase, wait_for};

const TP1: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const TP3: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";

#[tokio::test]
async fn revisions_are_recorded_once_and_never_go_backwards() -> anyhow::Result<()> {
    let db = TestDatabase::create().await?;
    let store = Store::new(db.migrated_pool().await?);
    assert_eq!(store.record_job("rem-1", 1, b"job-1", Some(TP1)).await.expect("record"), JobOutcome::Created);
    assert_eq!(store.record_job("rem-1", 1, b"job-1", None).await.expect("redelivery"), JobOutcome::Ignored);
    assert_eq!(store.record_job("rem-1", 3, b"job-3", Some(TP3)).await.expect("newer"), JobOutcome::Updated);
    assert_eq!(store.record_job("rem-1", 2, b"job-2", Some(TP1)).await.expect("older"), JobOutcome::Ignored);
    let (machine, revision, job) = store.load("rem-1").await.expect("load").expect("row");
    assert_eq!((revision, job.as_slice()), (3, &b"job-3"[..]));
    assert_eq!(machine.state, State::Queued);
    // The trace context came with the revision kept, in the same write.
    assert_eq!(store.traceparent("rem-1").await.expect("traceparent").as_deref(), Some(TP3));
    Ok(())
}

/// A lease that outlasts the checks made while it is held, however loaded
/// the machine.
const LEASE: Duration = Duration::from_secs(30);

/// The lease a renews with before it stalls: short, so the test's wait for
/// it to run out (polled, as Postgres's clock decides) is short too.
const SHORT_LEASE: Duration = Duration::from_millis(50);

#[tokio::test]
async fn one_controller_at_a_time_and_a_stalled_one_cannot_write_after_a_takeover() -> anyhow::Result<()> {
    let db = TestDatabase::create().await?;
    let pool = db.migrated_pool().await?;
    let store = Store::new(pool.clone());
    store.record_job("rem-1", 1, b"job", None).await.expect("record");
    let a = store.acquire("rem-1", "controller-a", LEASE).await.expect("acquire").expect("free");
    assert!(store.acquire("rem-1", "controller-b", LEASE).await.expect("acquire").is_none(), "held by a");
    assert_eq!(store.due(10).await.expect("due"), Vec::<String>::new(), "a leased remediation is not due");
    // A renewal sets the lease's end anew, here to a short while from now.
    let renewed = store.acquire("rem-1", "controller-a", SHORT_LEASE).await.expect("renew").expect("own");
    assert_eq!(renewed.epoch, a.epoch, "a renewal keeps the epoch");

    // a stalls past its lease (Postgres's clock decides when it ends):
    // the remediation comes due again, and b takes over.
    let due = wait_for("a's lease to run out", Duration::from_secs(30), || async {
        let due = store.due(10).await?;
        Ok((!due.is_empty()).then_some(due))
    })
    .await?;
    assert_eq!(due, vec!["rem-1".to_string()]);
    let b = store.acquire("rem-1", "controller-b", LEASE).await.expect("acquire").expect("expired");
    assert!(b.epoch > a.epoch);

    let (mut machine, _, _) = store.load("rem-1").await.expect("load").expect("row");
    let from = machine.state.clone();
    machine.on(Event::Job, &Limits::default());
    store.save(&b, &from, &machine, "job").await.expect("b writes");
    // a wakes up and tries to write what it had computed.
    let stale = Machine::new("rem-1", 1);
    match store.save(&a, &from, &stale, "job").await {
        Err(Error::LeaseLost { remediation_id }) => assert_eq!(remediation_id, "rem-1"),
        other => panic!("a stale controller wrote: {other:?}"),
    }
    let (stored, _, _) = store.load("rem-1").await.expect("load").expect("row");
    assert_eq!(stored, machine, "b's state stands");
    let transitions: i64 =
        sqlx::query_scalar("SELECT count(*) FROM controller_transitions WHERE remediation_id = 'rem-1'")
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(transitions, 1);

    // Released: free for anyone at once, with a new epoch.
    store.release(&b).await.expect("release");
    let c = store.acquire("rem-1", "controller-c", LEASE).await.expect("acquire").expect("released");
    assert!(c.epoch > b.epoch);
    Ok(())
}

#[tokio::test]
async fn a_run_keeps_its_session_and_times_and_lists_newest_first() -> anyhow::Result<()> {
    use patchpilot_model::{RunOutcome, RunPurpose, SandboxResult};
    let db = TestDatabase::create().await?;
    let store = Store::new(db.migrated_pool().await?);
    store.record_run_request("rem-1-r1-1", "rem-1", 1, RunPurpose::Remediate, "abc").await?;
    store.record_run_request("rem-1-r1-2", "rem-1", 1, RunPurpose::Repair, "def").await?;
    store.record_run_request("rem-2-r1-1", "rem-2", 1, RunPurpose::Remediate, "abc").await?;
    let started = chrono::DateTime::from_timestamp(1_700_000_000, 0);
    let result = SandboxResult {
        session_object: Some("runs/rem-1-r1-1/session".into()),
        transcript_object: Some("runs/rem-1-r1-1/transcript".into()),
        started_at: started,
        ..SandboxResult::without_artifacts("rem-1-r1-1", "rem-1", RunOutcome::Completed, "exit 0")
    };
    assert!(store.record_run_result(&result).await?);

    let record = store.run("rem-1-r1-1").await?.expect("recorded");
    assert_eq!((record.remediation_id.as_str(), record.revision), ("rem-1", 1));
    let stored = record.result.expect("a result");
    assert_eq!(stored.session_object.as_deref(), Some("runs/rem-1-r1-1/session"));
    assert_eq!(stored.started_at, started);
    assert!(stored.finished_at.is_some_and(|f| f >= record.requested_at));
    let pending = store.run("rem-1-r1-2").await?.expect("recorded");
    assert_eq!(pending.result, None);

    let ids = |runs: Vec<patchpilot_controller::store::RunRecord>| {
        runs.into_iter().map(|r| r.run_id).collect::<Vec<_>>()
    };
    assert_eq!(ids(store.recent_runs(Some("rem-1"), 10).await?), ["rem-1-r1-2", "rem-1-r1-1"]);
    assert_eq!(store.recent_runs(None, 10).await?.len(), 3);
    assert_eq!(store.recent_runs(None, 1).await?.len(), 1);
    Ok(())
}
