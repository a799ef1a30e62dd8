//! Faults survived: a three-node NATS cluster, PostgreSQL, a controller
//! and a sandbox worker each fail in turn under the controller's loop
//! (`patchpilot_e2e::faults`). A few remediations here; `cargo bench
//! --profile dev -p patchpilot-e2e --bench faults` runs 50.

use patchpilot_e2e::faults::FaultRun;
use patchpilot_e2e::sandbox::VM_LOCK;

#[tokio::test]
async fn a_nats_node_postgres_a_controller_and_a_sandbox_worker_fail_in_turn_and_every_remediation_opens_one_pr()
-> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    // Six is the fewest the run takes: one at first, three kept for the
    // faults (each meets work in flight however many finished before it),
    // and two submitted just before the worker's, so that a VM is running
    // when it is killed.
    let Some(run) = FaultRun::start(6).await? else { return Ok(()) };
    let report = run.run(true).await?;
    eprintln!("{}", report.table());
    assert_eq!(report.faults.len(), 4);
    // The worker was killed with a VM running: the other took its run over.
    assert!(report.runs_taken_over >= 1, "{}", report.table());
    Ok(())
}
