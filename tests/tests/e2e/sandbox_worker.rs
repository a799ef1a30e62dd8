//! The sandbox worker end to end with real microVMs (QEMU, TCG here): a
//! SandboxRun in, a VM boot, a patch and a SandboxResult out; and a worker
//! killed with SIGKILL mid-run whose run is redelivered, swept and completed
//! by the next worker on the same state folder.
//!
//! These need the VM toolchain (`scripts/services vm`) and a built guest
//! image (`target/debug/patchpilot sandbox image build`, under
//! `$PATCHPILOT_SANDBOX__STATE_DIR`). Without them each test prints why it
//! is skipped and passes; it never skips silently. Each VM boot under TCG
//! takes a few seconds; the tests run one VM at a time (nextest test group
//! `microvm`, and a lock here for plain `cargo test`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use patchpilot_e2e::sandbox::{
    RUN_TIMEOUT, VM_LOCK, WORKER_TOML, is_zombie, private_state, skip_reason, spawn_worker, spawn_worker_with,
};
use patchpilot_e2e::{Service, Stack, wait_for};
use patchpilot_fleet::artifacts::ArtifactStore;
use patchpilot_fleet::bus::{StreamName, topics};
use patchpilot_model::{
    EgressPolicy, Retrospective, RunOutcome, RunPurpose, SandboxResult, SandboxRun, Wire as _,
};

/// A workspace with a text and a binary file, as a folder (to check the
/// patch against) and as a gzip tar (what the controller uploads).
fn workspace(stack: &Stack) -> anyhow::Result<(PathBuf, Vec<u8>)> {
    let dir = stack.dir.path().join("checkout");
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::write(dir.join("README.md"), "hello\n")?;
    std::fs::write(dir.join("src/blob.bin"), [0u8, 159, 146, 150, 255, 0, 1])?;
    let tar_gz = gzip_tar(&dir)?;
    Ok((dir, tar_gz))
}

/// `dir` as a gzip tar, with deterministic headers.
fn gzip_tar(dir: &Path) -> anyhow::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    tar.mode(tar::HeaderMode::Deterministic);
    tar.append_dir_all(".", dir)?;
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    Ok(gz.finish()?)
}

/// The file whose presence in a workspace holds the run at its start
/// (see [`HELD_SCRIPT`]).
const HOLD: &str = "hold";

/// Waits as long as the workspace holds [`HOLD`], then writes `new.txt`.
/// A run of the workspace with the file never ends by itself (the test
/// kills its worker at a moment of its choosing, however slow the VM), and
/// a run of the one without it ends at once: no sleep stands in for
/// "long enough".
const HELD_SCRIPT: &str = "while [ -e hold ]; do sleep 1; done; echo hi > new.txt";

fn sandbox_run(run_id: &str, workspace_object: &str, script: &str) -> SandboxRun {
    SandboxRun {
        run_id: run_id.into(),
        remediation_id: "rem-e2e".into(),
        purpose: RunPurpose::Remediate,
        workspace_object: workspace_object.into(),
        agent_command: vec!["sh".into(), "-c".into(), script.into()],
        env: Default::default(),
        egress: EgressPolicy::default(),
        limits: Default::default(),
        docker: false,
        attempt: 0,
        ci_logs_object: None,
        connections: Vec::new(),
        requested_at: None,
    }
}

fn processes_naming(needle: &str) -> Vec<(u32, String)> {
    patchpilot_e2e::sandbox::processes_mentioning(Path::new(needle))
}

async fn results(stack: &Stack) -> anyhow::Result<Vec<SandboxResult>> {
    let messages = stack.stream_contents(StreamName::SandboxResults).await?;
    messages.iter().map(|m| Ok(SandboxResult::decode(m.payload.as_ref())?)).collect()
}

async fn wait_result(stack: &Stack, worker: &Service) -> anyhow::Result<SandboxResult> {
    wait_for("a SandboxResult", RUN_TIMEOUT, || async { Ok(results(stack).await?.into_iter().next()) })
        .await
        .map_err(|e| e.context(format!("worker log:\n{}", worker.log_text())))
}

/// Waits until a VM of the worker on `state` has started; returns the
/// processes naming its run folders (the VMM and its helpers).
async fn wait_vm_started(state: &Path, worker: &Service) -> anyhow::Result<Vec<(u32, String)>> {
    let runs = format!("{}/", state.join("runs").display());
    wait_for(&format!("a VM under {runs} to start"), RUN_TIMEOUT, || async {
        let found = processes_naming(&runs);
        Ok(found.iter().any(|(_, cmd)| cmd.contains("qemu")).then_some(found))
    })
    .await
    .map_err(|e| e.context(format!("worker log:\n{}", worker.log_text())))
}

/// Waits until every delivery of `SANDBOX_RUNS` has settled: the workers'
/// consumers have nothing pending and nothing unacknowledged.
async fn wait_settled(stack: &Stack) -> anyhow::Result<()> {
    wait_for("the run requests' deliveries to settle", RUN_TIMEOUT, || async {
        let states = stack.bus.consumer_states(StreamName::SandboxRuns).await?;
        Ok(states.iter().all(|c| c.pending == 0 && c.in_flight == 0).then_some(()))
    })
    .await
}

/// `git apply --check` of `patch` on `dir`.
fn applies(dir: &Path, patch: &[u8]) -> anyhow::Result<()> {
    let file = dir.with_extension("patch");
    std::fs::write(&file, patch)?;
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["apply", "--check"])
        .arg(&file)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "git apply --check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[tokio::test]
async fn sandbox_run_completes_with_a_patch_that_applies() -> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("sandbox_run_completes_with_a_patch_that_applies").is_some() {
        return Ok(());
    }
    let stack = Stack::start().await?;
    let state = private_state(&stack)?;
    let (checkout, tar_gz) = workspace(&stack)?;
    let store = ArtifactStore::open(&stack.bus).await?;
    store.put_bytes("workspaces/e2e-ok.tar.gz", &tar_gz).await?;

    let mut worker = spawn_worker(&stack, &state, "worker")?;
    // The lookup of a name outside the policy is refused and recorded; it
    // never leaves the host (the forwarder decides before resolving).
    let script = "echo hi > new.txt; getent hosts not-allowed.example.test || true";
    stack
        .bus
        .publish(
            &topics::SANDBOX_RUNS,
            None,
            "e2e-ok",
            &sandbox_run("e2e-ok", "workspaces/e2e-ok.tar.gz", script),
        )
        .await?;

    let result = wait_result(&stack, &worker).await?;
    assert_eq!(result.outcome, RunOutcome::Completed, "{result:?}\n{}", worker.log_text());
    assert_eq!(result.run_id, "e2e-ok");
    assert_eq!(result.remediation_id, "rem-e2e");
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.patch_object.as_deref(), Some("runs/e2e-ok/patch"));
    let patch = store.get_bytes("runs/e2e-ok/patch", 1 << 20).await?;
    let text = String::from_utf8_lossy(&patch);
    assert!(text.contains("new.txt") && text.contains("+hi"), "{text}");
    applies(&checkout, &patch)?;
    assert!(result.transcript_object.is_some());
    assert_eq!(result.session_object, None, "the command wrote no .patchpilot/transcript.jsonl");
    assert!(result.started_at.is_some() && result.finished_at.is_some());

    let (state_col, attempt, outcome): (String, i32, String) =
        sqlx::query_as("SELECT state, attempt, outcome FROM sandbox_runs WHERE run_id = 'e2e-ok'")
            .fetch_one(&stack.pool)
            .await?;
    assert_eq!((state_col.as_str(), attempt, outcome.as_str()), ("finished", 1, "completed"));
    // The guest's resolver asks more than once (A and AAAA, retries): at
    // least one recorded denial, every one of them for that name.
    let denials = wait_for("the DNS denial in egress_decisions", Duration::from_secs(10), || async {
        let rows: Vec<(String, String, Option<String>)> =
            sqlx::query_as("SELECT verdict, rule, name FROM egress_decisions WHERE run_id = 'e2e-ok'")
                .fetch_all(&stack.pool)
                .await?;
        // The audit writer is asynchronous: wait for every denial counted.
        Ok((!rows.is_empty() && rows.len() >= result.egress_denied as usize).then_some(rows))
    })
    .await
    .map_err(|e| e.context(format!("worker log:\n{}", worker.log_text())))?;
    for (verdict, rule, name) in &denials {
        assert_eq!((verdict.as_str(), rule.as_str()), ("deny", "host-not-allowed"), "{denials:?}");
        assert_eq!(name.as_deref().map(|n| n.trim_end_matches('.')), Some("not-allowed.example.test"));
    }
    assert_eq!(result.egress_denied as usize, denials.len(), "{result:?}");
    let retros = stack.stream_contents(StreamName::Retros).await?;
    assert_eq!(retros.len(), 1);
    let retro = Retrospective::decode(retros[0].payload.as_ref())?;
    assert_eq!(retro.run_id, "e2e-ok");

    // Operators see the run and its denials in `patchpilot status`.
    let out = stack.cli(&["status", "--json"]).await?;
    let fleet: serde_json::Value = serde_json::from_str(&out.stdout)
        .map_err(|e| anyhow::anyhow!("{e}: {}{}", out.stdout, out.stderr))?;
    assert_eq!(fleet["sandbox_runs"]["finished/completed"].as_i64(), Some(1), "{}", out.stdout);
    assert_eq!(fleet["egress_denied_24h"].as_i64(), Some(i64::from(result.egress_denied)), "{}", out.stdout);

    let status = worker.terminate(Duration::from_secs(30)).await?;
    assert!(status.success(), "{status:?}\n{}", worker.log_text());
    let runs = state.join("runs").display().to_string();
    assert_eq!(processes_naming(&format!("{runs}/")), vec![], "processes left behind");
    assert_eq!(std::fs::read_dir(state.join("runs"))?.count(), 0, "run folders left behind");
    Ok(())
}

/// A model session's transcript as the agent leaves it: JSONL, here with
/// a character outside ASCII so the bytes are compared, not the text.
const SESSION_LINES: [&str; 3] = [
    r#"{"type":"session","at_ms":0,"mode":"remediate","provider":"openai","model":"gpt-e2e"}"#,
    r#"{"type":"tool_call","at_ms":12,"id":"c1","name":"read_file","args":"{\"path\":\"RÉADME.md\"}"}"#,
    r#"{"type":"outcome","at_ms":40,"end":"gave_up","reason":"nothing to do"}"#,
];

#[tokio::test]
async fn sandbox_run_brings_the_model_session_back_as_its_own_artifact() -> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("sandbox_run_brings_the_model_session_back_as_its_own_artifact").is_some() {
        return Ok(());
    }
    let stack = Stack::start().await?;
    let state = private_state(&stack)?;
    let (_checkout, tar_gz) = workspace(&stack)?;
    let store = ArtifactStore::open(&stack.bus).await?;
    store.put_bytes("workspaces/e2e-session.tar.gz", &tar_gz).await?;
    let expected: String = SESSION_LINES.iter().map(|l| format!("{l}\n")).collect();
    let quoted: Vec<String> = SESSION_LINES.iter().map(|l| format!("'{l}'")).collect();
    // As the agent does: the transcript under .patchpilot/, and a change.
    let script = format!(
        "mkdir -p .patchpilot && printf '%s\\n' {} > .patchpilot/transcript.jsonl && echo bye >> README.md",
        quoted.join(" ")
    );

    let mut worker = spawn_worker(&stack, &state, "worker")?;
    let run = sandbox_run("e2e-session", "workspaces/e2e-session.tar.gz", &script);
    stack.bus.publish(&topics::SANDBOX_RUNS, None, "e2e-session", &run).await?;
    let result = wait_result(&stack, &worker).await?;
    assert_eq!(result.outcome, RunOutcome::Completed, "{result:?}\n{}", worker.log_text());
    assert_eq!(result.session_object.as_deref(), Some("runs/e2e-session/session"), "{result:?}");
    let session = store.get_bytes("runs/e2e-session/session", 1 << 20).await?;
    assert_eq!(String::from_utf8_lossy(&session), expected);
    assert_eq!(session, expected.as_bytes());
    let patch = store.get_bytes("runs/e2e-session/patch", 1 << 20).await?;
    let patch = String::from_utf8_lossy(&patch);
    assert!(patch.contains("+bye") && !patch.contains(".patchpilot"), "{patch}");

    // Recorded as the controller's result intake does, it is what
    // `patchpilot runs show --transcript` reads.
    let controller = patchpilot_controller::store::Store::new(stack.pool.clone());
    controller.record_run_request("e2e-session", "rem-e2e", 1, RunPurpose::Remediate, "base").await?;
    assert!(controller.record_run_result(&result).await?);
    let out = stack.cli(&["runs", "show", "e2e-session", "--transcript", "--json"]).await?;
    let events: Vec<serde_json::Value> = serde_json::from_str(&out.stdout)
        .map_err(|e| anyhow::anyhow!("{e}: {}{}", out.stdout, out.stderr))?;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds, ["session", "tool_call", "outcome"]);

    let status = worker.terminate(Duration::from_secs(30)).await?;
    assert!(status.success(), "{status:?}\n{}", worker.log_text());
    Ok(())
}

#[tokio::test]
async fn sandbox_worker_killed_mid_run_is_swept_and_the_run_completes_once() -> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("sandbox_worker_killed_mid_run_is_swept_and_the_run_completes_once").is_some() {
        return Ok(());
    }
    let stack = Stack::start().await?;
    let state = private_state(&stack)?;
    let (checkout, tar_gz) = workspace(&stack)?;
    // Worker A gets the workspace with the hold file: its run cannot end
    // before the kill. Worker B downloads the object again for its attempt
    // and gets the one without it.
    std::fs::write(checkout.join(HOLD), "")?;
    let held = gzip_tar(&checkout);
    std::fs::remove_file(checkout.join(HOLD))?;
    let held = held?;
    let store = ArtifactStore::open(&stack.bus).await?;
    store.put_bytes("workspaces/e2e-kill.tar.gz", &held).await?;
    let runs = format!("{}/", state.join("runs").display());

    let mut first = spawn_worker(&stack, &state, "worker-a")?;
    stack
        .bus
        .publish(
            &topics::SANDBOX_RUNS,
            None,
            "e2e-kill",
            &sandbox_run("e2e-kill", "workspaces/e2e-kill.tar.gz", HELD_SCRIPT),
        )
        .await?;
    let leftovers = wait_vm_started(&state, &first).await?;
    // SIGKILL, reaped before `kill` returns. The VMM runs in its own
    // process group, but the kernel kills it with the worker (its
    // parent-death signal); only the run folder is left for the sweep.
    first.kill();
    let pids: Vec<u32> = leftovers.iter().map(|(pid, _)| *pid).collect();
    wait_for("worker A's VM to die with it", Duration::from_secs(20), || {
        let alive = pids.iter().any(|pid| !is_zombie(*pid));
        async move { Ok((!alive).then_some(())) }
    })
    .await?;
    let left = std::fs::read_dir(state.join("runs"))?.count();
    assert!(left > 0, "a SIGKILLed worker removes nothing: the sweep has its run folder to do");
    store.put_bytes("workspaces/e2e-kill.tar.gz", &tar_gz).await?;

    let mut second = spawn_worker(&stack, &state, "worker-b")?;
    let result = wait_result(&stack, &second).await?;
    assert_eq!(result.outcome, RunOutcome::Completed, "{result:?}\n{}", second.log_text());
    let patch = store.get_bytes(result.patch_object.as_deref().unwrap_or_default(), 1 << 20).await?;
    applies(&checkout, &patch)?;

    assert!(second.log_text().contains("swept what a crashed worker left behind"), "{}", second.log_text());

    let (state_col, attempt): (String, i32) =
        sqlx::query_as("SELECT state, attempt FROM sandbox_runs WHERE run_id = 'e2e-kill'")
            .fetch_one(&stack.pool)
            .await?;
    assert_eq!((state_col.as_str(), attempt), ("finished", 2));

    // Exactly one result, once the redelivery has settled: the worker's
    // consumer has nothing pending and nothing unacknowledged.
    wait_settled(&stack).await?;
    assert_eq!(results(&stack).await?.len(), 1);
    let status = second.terminate(Duration::from_secs(30)).await?;
    assert!(status.success(), "{status:?}\n{}", second.log_text());
    assert_eq!(processes_naming(&runs), vec![], "processes left behind");
    assert_eq!(std::fs::read_dir(state.join("runs"))?.count(), 0, "run folders left behind");
    Ok(())
}

/// A second delivery of a run the worker is still running (JetStream
/// redelivers when in-progress acks come late on a loaded host; here the
/// same run is simply published again under another message id) waits for
/// that run and ends as it did: no dead letter, one result. It used to be
/// refused as retryable until it was dead-lettered while the run went fine.
#[tokio::test]
async fn sandbox_worker_waits_on_a_redelivery_of_a_run_it_is_running() -> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("sandbox_worker_waits_on_a_redelivery_of_a_run_it_is_running").is_some() {
        return Ok(());
    }
    let stack = Stack::start().await?;
    let state = private_state(&stack)?;
    let (_checkout, tar_gz) = workspace(&stack)?;
    let store = ArtifactStore::open(&stack.bus).await?;
    store.put_bytes("workspaces/e2e-dup.tar.gz", &tar_gz).await?;
    let toml = patchpilot_e2e::sandbox::WORKER_TOML.replace("slots = 1", "slots = 2");
    anyhow::ensure!(toml.contains("slots = 2"), "the worker config names its slots");
    let mut worker = patchpilot_e2e::sandbox::spawn_worker_with(&stack, &state, "worker", &toml)?;
    let run = sandbox_run("e2e-dup", "workspaces/e2e-dup.tar.gz", "sleep 20; echo hi > new.txt");
    stack.bus.publish(&topics::SANDBOX_RUNS, None, "e2e-dup", &run).await?;
    wait_vm_started(&state, &worker).await?;
    stack.bus.publish(&topics::SANDBOX_RUNS, None, "e2e-dup-again", &run).await?;
    wait_for("the second delivery to wait on the run", Duration::from_secs(60), || async {
        Ok(worker.log_text().contains("redelivered while still running here").then_some(()))
    })
    .await
    .map_err(|e| e.context(worker.log_text()))?;

    let result = wait_result(&stack, &worker).await?;
    assert_eq!(result.outcome, RunOutcome::Completed, "{result:?}\n{}", worker.log_text());
    wait_settled(&stack).await?;
    assert_eq!(results(&stack).await?.len(), 1, "one result");
    assert_eq!(stack.bus.dead_letters(10).await?.len(), 0, "no dead letter\n{}", worker.log_text());
    let (state_col, attempt): (String, i32) =
        sqlx::query_as("SELECT state, attempt FROM sandbox_runs WHERE run_id = 'e2e-dup'")
            .fetch_one(&stack.pool)
            .await?;
    assert_eq!((state_col.as_str(), attempt), ("finished", 1), "run once");
    let status = worker.terminate(Duration::from_secs(30)).await?;
    assert!(status.success(), "{status:?}\n{}", worker.log_text());
    Ok(())
}

/// A second delivery of a run that is live on another worker (JetStream
/// redelivers when the holder's in-progress acks are lost, as when the NATS
/// node leading the stream dies; here the run is simply published again
/// under another message id) is waited for, not taken over: the holder
/// beats in its row, so the second worker boots no VM, and once the run
/// has finished it publishes the stored result again, which the bus drops
/// as a duplicate. One VM, one attempt, one result, no dead letter.
#[tokio::test]
async fn sandbox_worker_waits_for_a_run_live_on_another_worker_instead_of_running_it_twice()
-> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("sandbox_worker_waits_for_a_run_live_on_another_worker_instead_of_running_it_twice")
        .is_some()
    {
        return Ok(());
    }
    let stack = Stack::start().await?;
    let (_checkout, tar_gz) = workspace(&stack)?;
    let store = ArtifactStore::open(&stack.bus).await?;
    store.put_bytes("workspaces/e2e-live.tar.gz", &tar_gz).await?;
    let state_a = private_state(&stack)?;
    let state_b = patchpilot_e2e::sandbox::private_state_named(&stack, "state-b")?;
    let mut holder = spawn_worker(&stack, &state_a, "worker-a")?;
    // Longer than the holder may stay silent: the second worker must see
    // it beat, not merely catch it early.
    let run = sandbox_run("e2e-live", "workspaces/e2e-live.tar.gz", "sleep 25; echo hi > new.txt");
    stack.bus.publish(&topics::SANDBOX_RUNS, None, "e2e-live", &run).await?;
    wait_vm_started(&state_a, &holder).await?;
    // The holder's one slot is busy, so the second delivery goes to the
    // second worker.
    let mut second = spawn_worker(&stack, &state_b, "worker-b")?;
    stack.bus.publish(&topics::SANDBOX_RUNS, None, "e2e-live-again", &run).await?;
    wait_for("the second worker to wait for the holder", Duration::from_secs(60), || async {
        Ok(second.log_text().contains("redelivered while live on another worker").then_some(()))
    })
    .await
    .map_err(|e| e.context(second.log_text()))?;

    let result = wait_result(&stack, &holder).await?;
    assert_eq!(result.outcome, RunOutcome::Completed, "{result:?}\n{}", holder.log_text());
    wait_settled(&stack).await?;
    assert!(
        second.log_text().contains("run already finished; publishing its stored result again"),
        "{}",
        second.log_text()
    );
    assert!(
        !second.log_text().contains("VM started"),
        "the second worker booted a VM:\n{}",
        second.log_text()
    );
    assert_eq!(results(&stack).await?.len(), 1, "one result");
    assert_eq!(stack.bus.dead_letters(10).await?.len(), 0, "no dead letter\n{}", second.log_text());
    let (state_col, attempt): (String, i32) =
        sqlx::query_as("SELECT state, attempt FROM sandbox_runs WHERE run_id = 'e2e-live'")
            .fetch_one(&stack.pool)
            .await?;
    assert_eq!((state_col.as_str(), attempt), ("finished", 1), "run once");
    for worker in [&mut holder, &mut second] {
        let status = worker.terminate(Duration::from_secs(30)).await?;
        assert!(status.success(), "{status:?}\n{}", worker.log_text());
    }
    Ok(())
}

/// A run that asks for a broker connection: the worker mints its
/// capability at start (the guest gets the broker's loopback address, the
/// capability and the model variables), the call goes through the run's
/// terminator, and the capability is dead once the run has ended.
#[tokio::test]
async fn sandbox_worker_grants_a_runs_connections_and_revokes_them_when_it_ends() -> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("sandbox_worker_grants_a_runs_connections_and_revokes_them_when_it_ends").is_some() {
        return Ok(());
    }
    let connections = r#"
[broker.connections.model]
kind = "openai"
base_url = "http://{upstream}"
auth = "none"
"#;
    let broker = crate::broker::BrokerHarness::start(connections, 100).await?;
    let stack = Stack::start().await?;
    let state = private_state(&stack)?;
    let (_checkout, tar_gz) = workspace(&stack)?;
    let store = ArtifactStore::open(&stack.bus).await?;
    store.put_bytes("workspaces/e2e-broker.tar.gz", &tar_gz).await?;
    let tls = &broker.endpoint.tls;
    let toml = format!(
        "{}\n[sandbox.broker]\nurl = \"{}\"\n[sandbox.broker.tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n",
        patchpilot_e2e::sandbox::WORKER_TOML,
        broker.endpoint.url.as_ref().map(|u| u.to_string()).unwrap_or_default(),
        tls.ca,
        tls.cert,
        tls.key
    );
    let worker = patchpilot_e2e::sandbox::spawn_worker_with(&stack, &state, "worker", &toml)?;
    // What an agent's model client does: its capability as the wire's
    // bearer token, the broker's connection as its base URL.
    let script = r#"curl -s -X POST -d '{}' -H "authorization: Bearer $PP_CAP_MODEL" "$PP_MODEL_URL/v1/chat/completions" > answer.txt
echo "$PATCHPILOT_CAPABILITY" > capability.txt; echo "$PATCHPILOT_BROKER_URL" > broker-url.txt"#;
    let mut run = sandbox_run("e2e-broker", "workspaces/e2e-broker.tar.gz", script);
    run.connections = vec!["model".parse()?];
    stack.bus.publish(&topics::SANDBOX_RUNS, None, "e2e-broker", &run).await?;
    let result = wait_result(&stack, &worker).await?;
    assert_eq!(result.outcome, RunOutcome::Completed, "{result:?}\n{}", worker.log_text());
    let patch = String::from_utf8(store.get_bytes("runs/e2e-broker/patch", 1 << 20).await?)?;
    assert!(patch.contains("hello"), "the model call went through the broker: {patch}");
    assert!(patch.contains("+http://127.0.0.1:4480"), "{patch}");
    let capability = patch
        .lines()
        .find_map(|l| l.strip_prefix("+ppcap_"))
        .map(|hex| format!("ppcap_{hex}"))
        .ok_or_else(|| anyhow::anyhow!("no capability in {patch}"))?;
    let recorded = patchpilot_broker::store::calls(&broker.stack.pool, "e2e-broker").await?;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!((recorded[0].status, recorded[0].route.as_deref()), (200, Some("/v1/chat/completions")));
    // The run is over: a terminator for its id (as a VM that outlived it
    // would have) gets nothing for the capability.
    let socket = broker.terminator("e2e-broker")?;
    let replay =
        crate::broker::guest(&socket, "POST", "/v1/c/model/chat/completions", &capability, "{}").await?;
    assert_eq!(replay.refusal().as_deref(), Some("capability_invalid"), "{replay:?}");
    Ok(())
}

/// How many times the worker's log says `line`.
fn count(worker: &Service, line: &str) -> usize {
    worker.log_text().matches(line).count()
}

#[tokio::test]
async fn sandbox_worker_with_a_warm_pool_runs_on_a_booted_vm_and_leaves_none_when_it_stops()
-> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("sandbox_worker_with_a_warm_pool_runs_on_a_booted_vm_and_leaves_none_when_it_stops")
        .is_some()
    {
        return Ok(());
    }
    let stack = Stack::start().await?;
    let state = private_state(&stack)?;
    let (checkout, tar_gz) = workspace(&stack)?;
    let store = ArtifactStore::open(&stack.bus).await?;
    store.put_bytes("workspaces/e2e-warm.tar.gz", &tar_gz).await?;
    let toml = WORKER_TOML.replacen("[sandbox]\n", "[sandbox]\nwarm_pool = 1\nwarm_docker = false\n", 1);
    let mut worker = spawn_worker_with(&stack, &state, "warm", &toml)?;
    let ready = "a warm VM is ready";
    wait_for("the first warm VM", RUN_TIMEOUT, || async { Ok((count(&worker, ready) >= 1).then_some(())) })
        .await
        .map_err(|e| e.context(format!("worker log:\n{}", worker.log_text())))?;

    // The job sets no limits, so it gets the worker's defaults: the pool's
    // shape.
    stack
        .bus
        .publish(
            &topics::SANDBOX_RUNS,
            None,
            "e2e-warm",
            &sandbox_run("e2e-warm", "workspaces/e2e-warm.tar.gz", "echo hi > new.txt"),
        )
        .await?;
    let result = wait_result(&stack, &worker).await?;
    assert_eq!(result.outcome, RunOutcome::Completed, "{result:?}\n{}", worker.log_text());
    assert_eq!(count(&worker, "took a warm VM"), 1, "{}", worker.log_text());
    applies(&checkout, &store.get_bytes("runs/e2e-warm/patch", 1 << 20).await?)?;
    // The used VM is replaced, not returned.
    wait_for("the replacement warm VM", RUN_TIMEOUT, || async {
        Ok((count(&worker, ready) >= 2).then_some(()))
    })
    .await
    .map_err(|e| e.context(format!("worker log:\n{}", worker.log_text())))?;

    let status = worker.terminate(Duration::from_secs(30)).await?;
    assert!(status.success(), "{status:?}\n{}", worker.log_text());
    let runs = state.join("runs");
    wait_for("the waiting VM to go with its worker", Duration::from_secs(30), || async {
        Ok(processes_naming(&format!("{}/", runs.display())).is_empty().then_some(()))
    })
    .await?;
    assert_eq!(std::fs::read_dir(&runs)?.count(), 0, "warm folders left behind");
    Ok(())
}
