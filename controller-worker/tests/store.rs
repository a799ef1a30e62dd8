//! The controller's store against a real Postgres: job revisions, leases
//! with fencing, and state that survives a controller.

use std::time::Duration;

use patchpilot_controller::lifecycle::{Event, Limits, Machine, State};
use patchpilot_controller::store::{Error, JobOutcome, Store};

mod support;
use support::TestDb;

#[tokio::test]
async fn revisions_are_recorded_once_and_never_go_backwards() {
    let Some(db) = TestDb::create().await else { return };
    let store = Store::new(db.pool.clone());
    assert_eq!(store.record_job("rem-1", 1, b"job-1").await.expect("record"), JobOutcome::Created);
    assert_eq!(store.record_job("rem-1", 1, b"job-1").await.expect("redelivery"), JobOutcome::Ignored);
    assert_eq!(store.record_job("rem-1", 3, b"job-3").await.expect("newer"), JobOutcome::Updated);
    assert_eq!(store.record_job("rem-1", 2, b"job-2").await.expect("older"), JobOutcome::Ignored);
    let (machine, revision, job) = store.load("rem-1").await.expect("load").expect("row");
    assert_eq!((revision, job.as_slice()), (3, &b"job-3"[..]));
    assert_eq!(machine.state, State::Queued);
}

#[tokio::test]
async fn one_controller_at_a_time_and_a_stalled_one_cannot_write_after_a_takeover() {
    let Some(db) = TestDb::create().await else { return };
    let store = Store::new(db.pool.clone());
    store.record_job("rem-1", 1, b"job").await.expect("record");
    let a = store
        .acquire("rem-1", "controller-a", Duration::from_millis(300))
        .await
        .expect("acquire")
        .expect("free");
    assert!(
        store.acquire("rem-1", "controller-b", Duration::from_secs(30)).await.expect("acquire").is_none(),
        "held by a"
    );
    assert_eq!(store.due(10).await.expect("due"), Vec::<String>::new(), "a leased remediation is not due");
    let renewed = store
        .acquire("rem-1", "controller-a", Duration::from_millis(300))
        .await
        .expect("renew")
        .expect("own");
    assert_eq!(renewed.epoch, a.epoch, "a renewal keeps the epoch");

    // a stalls past its lease; b takes over.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(store.due(10).await.expect("due"), vec!["rem-1".to_string()]);
    let b = store
        .acquire("rem-1", "controller-b", Duration::from_secs(30))
        .await
        .expect("acquire")
        .expect("expired");
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
            .fetch_one(&db.pool)
            .await
            .expect("count");
    assert_eq!(transitions, 1);

    // Released: free for anyone at once, with a new epoch.
    store.release(&b).await.expect("release");
    let c = store
        .acquire("rem-1", "controller-c", Duration::from_secs(30))
        .await
        .expect("acquire")
        .expect("released");
    assert!(c.epoch > b.epoch);
}
