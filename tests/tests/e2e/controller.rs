//! The controller's whole loop on the local forge with real sandbox runs
//! (QEMU microVMs), a real local CI runner, NATS and Postgres: a job in,
//! a workspace packed, a run in a VM, its patch vetted, a PR opened, CI
//! watched, repairs requested, and the end (green or a person) notified.
//!
//! The agent in the VM is a script standing in for the model-driven agent
//! (a model provider cannot run here): it bumps the base image like the
//! built-in agent would, and on a repair run it plays each scenario's part
//! (a real forward fix, a fix that does not help, a revert of the fix).
//! The repositories' CI is a lint check that fails while the linter's
//! config lags the base image, and one that loses its network on the first
//! attempt.
//!
//! The crash test SIGKILLs the controller each time it stores a new state
//! and starts another; the remediation must still end green with exactly
//! one PR, one branch and no repeated comment.

use std::time::Duration;

use anyhow::Context as _;

use patchpilot_e2e::alpine::{advisory_db, cve_2024_2511};
use patchpilot_e2e::chain::{self, Chain, golang_bases};
use patchpilot_e2e::jobs::apk_finding;
use patchpilot_e2e::sandbox::{VM_LOCK, skip_reason};
use patchpilot_e2e::wait_for;
use patchpilot_fleet::bus::{StreamName, topics};
use patchpilot_model::{JobReason, RemediationJob};
use patchpilot_provider_double::Message;

pub(crate) use patchpilot_e2e::controller_loop::*;

/// The planner's `remediations.state` follows the controller's lifecycle
/// events, in order: a real controller (no VM: its run stays queued) moves
/// a remediation to `running`, and the planner's row, its history and
/// `patchpilot events` say so. Then events crafted as a controller would
/// publish them check the consumer's rules: an older or repeated event
/// changes nothing, an unknown remediation is skipped, an event that would
/// reopen a closed remediation while a newer one holds its target is
/// skipped, and an event without its `seq` is dead-lettered naming it.
#[tokio::test]
async fn remediation_states_follow_the_controller_through_its_events() -> anyhow::Result<()> {
    let lp = Loop::start_without_worker(&["states", "other"]).await?;
    let mut controller = lp.spawn_controller(0)?;
    let _planner = lp.stack.spawn_planner("[planner.registry]\nlookup_labels = false\n")?;
    let first = job("states");
    lp.planner_row(&first).await?;
    let id = lp.submit_job(first.clone()).await?;
    let planner_state = |id: String| {
        let pool = lp.stack.pool.clone();
        async move {
            let row: Option<(String, i64)> =
                sqlx::query_as("SELECT state, state_seq FROM remediations WHERE id = $1::uuid")
                    .bind(&id)
                    .fetch_optional(&pool)
                    .await?;
            anyhow::Ok(row)
        }
    };
    wait_for("the planner to see the run requested", Duration::from_secs(60), || async {
        Ok(planner_state(id.clone()).await?.filter(|(state, _)| state == "running"))
    })
    .await
    .map_err(|e| e.context(lp.logs()))?;
    let history: Vec<(Option<String>, String)> = sqlx::query_as(
        "SELECT from_state, to_state FROM remediation_history WHERE remediation_id = $1::uuid ORDER BY id",
    )
    .bind(&id)
    .fetch_all(&lp.stack.pool)
    .await?;
    assert_eq!(
        history,
        [
            (Some("queued".to_owned()), "preparing".to_owned()),
            (Some("preparing".to_owned()), "running".to_owned())
        ],
        "one line per change (the row was inserted here, without the planner's first line)"
    );
    let out = lp.stack.cli(&["events", "--remediation", &id[..8], "--json"]).await?;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let events: Vec<serde_json::Value> =
        out.stdout.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap_or_default()).collect();
    assert_eq!(kinds, ["remediation.preparing", "remediation.running"], "{}", out.stdout);
    assert_eq!(events[1]["source"], "controller");
    assert_eq!(events[1]["attributes"]["from_state"], "preparing");
    let out = lp.stack.cli(&["events"]).await?;
    assert!(out.stdout.contains("remediation.running"), "the table: {}", out.stdout);
    let status = controller.terminate(Duration::from_secs(30)).await?;
    assert!(status.success(), "{status:?}\n{}", controller.log_text());

    // Crafted events, numbered above every real transition.
    let publish = |remediation: String, state: &'static str, seq: Option<i64>, n: u32| {
        let bus = lp.stack.bus.clone();
        async move {
            let mut event = patchpilot_model::Event::new(format!("remediation.{state}"), "controller");
            event.event_id = format!("crafted-{n}");
            event.remediation_id = remediation;
            event.state = state.to_owned();
            event.message = format!("crafted {n}");
            if let Some(seq) = seq {
                event.attributes.insert("seq".into(), seq.to_string());
            }
            bus.publish(&topics::EVENTS, Some(&event.kind), &event.event_id, &event).await?;
            anyhow::Ok(())
        }
    };
    let reaches = |state: &'static str, seq: i64| {
        let id = id.clone();
        async move {
            wait_for(&format!("the planner's row at {state} ({seq})"), Duration::from_secs(30), || async {
                Ok(planner_state(id.clone()).await?.filter(|row| row.0 == state && row.1 == seq).map(|_| ()))
            })
            .await
        }
    };
    publish(id.clone(), "ci_pending", Some(1_000_010), 1).await?;
    reaches("ci_pending", 1_000_010).await?;
    // Older, repeated, unknown, malformed: none changes the row; the newer
    // event after them shows they were all handled first.
    publish(id.clone(), "publishing", Some(1_000_005), 2).await?;
    publish(id.clone(), "ci_pending", Some(1_000_010), 3).await?;
    publish(uuid::Uuid::new_v4().to_string(), "failed", Some(1_000_011), 4).await?;
    publish(id.clone(), "failed", None, 5).await?;
    publish(id.clone(), "succeeded", Some(1_000_020), 6).await?;
    reaches("succeeded", 1_000_020).await?;
    let lines: i64 =
        sqlx::query_scalar("SELECT count(*) FROM remediation_history WHERE remediation_id = $1::uuid")
            .bind(&id)
            .fetch_one(&lp.stack.pool)
            .await?;
    assert_eq!(lines, 4, "preparing, running, ci_pending, succeeded: one line each");
    let letters = lp.stack.bus.dead_letters(10).await?;
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert!(
        letters[0].reason.contains("crafted-5") && letters[0].reason.contains("seq"),
        "{}",
        letters[0].reason
    );

    // A newer remediation holds the target now: the closed one is not
    // reopened (two open remediations for one target would break grouping).
    let mut newer = job("states");
    newer.remediation_id = patchpilot_model::RemediationId::new();
    lp.planner_row(&newer).await?;
    publish(id.clone(), "running", Some(1_000_030), 7).await?;
    publish(newer.remediation_id.to_string(), "preparing", Some(1_000_031), 8).await?;
    wait_for("the newer remediation to move", Duration::from_secs(30), || async {
        Ok(planner_state(newer.remediation_id.to_string())
            .await?
            .filter(|row| row.0 == "preparing")
            .map(|_| ()))
    })
    .await?;
    assert_eq!(planner_state(id.clone()).await?, Some(("succeeded".to_owned(), 1_000_020)));
    assert_eq!(lp.stack.bus.dead_letters(10).await?.len(), 1, "skipped, not dead-lettered");
    lp.stop().await
}

/// A run waiting in the work queue past `run_timeout_secs` (every slot is
/// busy) is waited for, not requested again, which would queue it twice
/// (seen when the evals queued 20 runs on 2 slots). A run whose request
/// left the queue without a result (a worker took it and was lost with it)
/// times out and is retried. No VM: nothing takes the request but the test.
#[tokio::test]
async fn controller_waits_for_a_queued_run_and_retries_only_a_lost_one() -> anyhow::Result<()> {
    let lp = Loop::start_without_worker(&["queued"]).await?;
    let mut controller = lp.spawn_controller_with(0, &[("PATCHPILOT_CONTROLLER__RUN_TIMEOUT_SECS", "2")])?;
    let id = lp.submit("queued").await?;
    wait_for("the controller to wait on its queued run", Duration::from_secs(60), || async {
        Ok(controller.log_text().contains("run still queued or running past run_timeout_secs").then_some(()))
    })
    .await
    .map_err(|e| e.context(lp.logs()))?;
    let runs = lp.requested(&id).await?;
    assert_eq!(runs.len(), 1, "requested once, however long it waits: {runs:?}");
    assert_eq!(lp.stack.bus.stream_messages(StreamName::SandboxRuns).await?, 1);
    let seq = runs[0].1.context("the request's stream sequence is recorded")?;

    // The request leaves the queue with no result to follow.
    let stream = lp.stack.bus.jetstream().get_stream("SANDBOX_RUNS").await?;
    anyhow::ensure!(stream.delete_message(seq as u64).await?, "message {seq} was not in SANDBOX_RUNS");
    let runs = wait_for("the lost run to be retried", Duration::from_secs(60), || async {
        let runs = lp.requested(&id).await?;
        Ok((runs.len() == 2).then_some(runs))
    })
    .await
    .map_err(|e| e.context(lp.logs()))?;
    assert_ne!(runs[0].0, runs[1].0);
    let (_, machine) = lp.state(&id).await?.context("the remediation is stored")?;
    assert!(machine.contains("\"run_retries\":1"), "one retry: {machine}");
    assert!(
        controller.log_text().contains("no longer queued"),
        "the log says why:\n{}",
        controller.log_text()
    );

    let status = controller.terminate(Duration::from_secs(30)).await?;
    assert!(status.success(), "{status:?}\n{}", controller.log_text());
    lp.stop().await
}

#[tokio::test]
async fn controller_loop_ends_green_repaired_retried_or_with_a_person() -> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("controller_loop_ends_green_repaired_retried_or_with_a_person").is_some() {
        return Ok(());
    }
    let scenarios = ["green", "infra", "repair", "stubborn", "revert"];
    let lp = Loop::start(&scenarios).await?;
    let mut controller = lp.spawn_controller(0)?;
    // The planner follows the controller's lifecycle events; the retro
    // aggregator stores every run's retrospective.
    let _planner = lp.stack.spawn_planner("[planner.registry]\nlookup_labels = false\n")?;
    let _retro = lp.stack.spawn_retro("")?;
    let mut ids = Vec::new();
    let mut jobs = Vec::new();
    for name in scenarios {
        let j = job(name);
        jobs.push(j.clone());
        lp.planner_row(&j).await?;
        ids.push(lp.submit_job(j).await?);
    }
    // A job naming a Dockerfile the repository does not have: a permanent
    // failure at once, naming the path, with no run requested.
    let mut missing = job("green");
    missing.target.dockerfile = "services/gone/Dockerfile".into();
    lp.planner_row(&missing).await?;
    let missing_id = lp.submit_job(missing).await?;
    ids.push(missing_id.clone());
    let ends = lp.wait_terminal(&ids, Duration::from_secs(1200)).await?;
    let (state, machine) = &ends[ids.len() - 1];
    assert_eq!(state, "failed", "{machine}");
    assert!(
        machine.contains("target.dockerfile: services/gone/Dockerfile is not in acme/green"),
        "{machine}"
    );
    assert_eq!(lp.runs(&missing_id).await?, vec![], "no run for a job that cannot be worked");
    let log = controller.log_text();
    let by_name = |name: &str| scenarios.iter().position(|s| *s == name).map(|i| (&ids[i], &ends[i]));

    // Remediation → PR → green, with the PR a security engineer expects.
    let (id, (state, _)) = by_name("green").ok_or_else(|| anyhow::anyhow!("green"))?;
    assert_eq!(state, "succeeded", "{}", lp.logs());
    let prs = lp.pull_requests("green").await?;
    assert_eq!(prs.len(), 1, "{prs:?}");
    let (_, pr_state, labels, body) = &prs[0];
    assert_eq!(pr_state, "open");
    assert!(
        labels.contains(&"patchpilot".to_string()) && labels.contains(&"security".to_string()),
        "{labels:?}"
    );
    assert!(body.contains("| CVE-2024-0001 | libbase | 1.0-r0 → 1.1-r0 | high |"), "{body}");
    assert!(body.contains("base 1.0 to 1.1"), "{body}");
    let branches = lp.branches("green")?;
    assert_eq!(branches.len(), 1, "{branches:?}");
    assert!(lp.file_on("green", &branches[0], "Dockerfile")?.contains("base:1.1"));
    assert_eq!(lp.runs(id).await?, vec![("remediate".into(), Some("completed".into()))]);
    assert!(log.contains("patchpilot: green acme/green"), "{log}");

    // An infrastructure failure is re-run, not repaired.
    let (id, (state, _)) = by_name("infra").ok_or_else(|| anyhow::anyhow!("infra"))?;
    assert_eq!(state, "succeeded", "{}", lp.logs());
    assert_eq!(lp.runs(id).await?.len(), 1, "no repair run for an infrastructure failure");
    let attempts: Vec<(i32, Option<String>)> = sqlx::query_as(
        "SELECT attempt, conclusion FROM local_forge_check_runs WHERE owner = 'acme' AND repo = 'infra' ORDER BY attempt",
    )
    .fetch_all(&lp.stack.pool)
    .await?;
    assert_eq!(attempts, vec![(1, Some("failure".into())), (2, Some("success".into()))]);

    // A failure the patch caused → a repair run → green → notified.
    let (id, (state, machine)) = by_name("repair").ok_or_else(|| anyhow::anyhow!("repair"))?;
    assert_eq!(state, "succeeded", "{machine}\n{}", lp.logs());
    let runs = lp.runs(id).await?;
    assert_eq!(
        runs.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        vec!["remediate", "repair"],
        "{runs:?}"
    );
    let branches = lp.branches("repair")?;
    assert_eq!(branches.len(), 1);
    assert!(lp.file_on("repair", &branches[0], "Dockerfile")?.contains("base:1.1"), "the fix stayed");
    assert_eq!(lp.file_on("repair", &branches[0], "lint.conf")?.trim(), "1.1", "the forward fix landed");
    assert_eq!(lp.pull_requests("repair").await?.len(), 1);
    assert!(log.contains("patchpilot: green acme/repair"), "{log}");

    // The repair limit hands the PR to a person: label, comment, notice.
    let (id, (state, machine)) = by_name("stubborn").ok_or_else(|| anyhow::anyhow!("stubborn"))?;
    assert_eq!(state, "needs_human", "{machine}");
    assert!(machine.contains("after 2 repair run(s)"), "{machine}");
    assert_eq!(lp.runs(id).await?.len(), 3, "one remediation and two repairs");
    let prs = lp.pull_requests("stubborn").await?;
    assert_eq!(prs.len(), 1);
    assert!(prs[0].2.contains(&"patchpilot:needs-human".to_string()), "{:?}", prs[0].2);
    let comments = lp.comments("stubborn").await?;
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(comments[0].contains("handing this pull request to a person"), "{comments:?}");
    assert_eq!(comments[0].matches("| repair | completed |").count(), 2, "what was tried: {comments:?}");
    assert!(log.contains("patchpilot: needs_human acme/stubborn"), "{log}");

    // A repair that reverts the fix is refused by vetting, never published.
    let (_, (state, machine)) = by_name("revert").ok_or_else(|| anyhow::anyhow!("revert"))?;
    assert_eq!(state, "needs_human", "{machine}");
    assert!(machine.contains("Vetting refused"), "{machine}");
    let branches = lp.branches("revert")?;
    assert!(
        lp.file_on("revert", &branches[0], "Dockerfile")?.contains("base:1.1"),
        "the revert never landed"
    );
    let comments = lp.comments("revert").await?;
    assert!(comments.iter().any(|c| c.contains("Vetting refused")), "{comments:?}");

    // New findings for the infra remediation: a new revision updates the
    // same PR (title and findings table) on the same branch.
    let mut more = jobs[1].clone();
    more.revision = 2;
    more.reason = JobReason::FindingsChanged;
    let mut extra = apk_finding("libother", "2.0-r0", "2.1-r0", "");
    extra.id = "CVE-2024-0002".into();
    more.findings.push(extra);
    more.job_id = RemediationJob::job_id_for(more.remediation_id, 2, &more.target, "more");
    lp.submit_job(more).await?;
    let infra_id = ids[1].clone();
    wait_for("the infra remediation's second revision to finish", Duration::from_secs(300), || async {
        let row: Option<(String, i32, bool)> = sqlx::query_as(
            "SELECT state, (machine->>'revision')::int, json_array_length(machine->'outbox') = 0 \
             FROM controller_remediations WHERE remediation_id = $1",
        )
        .bind(&infra_id)
        .fetch_optional(&lp.stack.pool)
        .await?;
        Ok(row.filter(|(s, rev, done)| s == "succeeded" && *rev == 2 && *done).map(|_| ()))
    })
    .await
    .map_err(|e| e.context(lp.logs()))?;
    let prs = lp.pull_requests("infra").await?;
    assert_eq!(prs.len(), 1, "still one PR: {prs:?}");
    assert!(prs[0].3.contains("CVE-2024-0002") && prs[0].3.contains("CVE-2024-0001"), "{}", prs[0].3);
    assert_eq!(lp.branches("infra")?.len(), 1);

    // The planner says the green PR's findings are gone: it is closed with
    // a comment saying why.
    let mut gone = jobs[0].clone();
    gone.revision = 2;
    gone.reason = JobReason::Resolved;
    gone.findings.clear();
    gone.job_id = RemediationJob::job_id_for(gone.remediation_id, 2, &gone.target, "resolved");
    lp.submit_job(gone).await?;
    let green_id = ids[0].clone();
    wait_for("the green remediation to be superseded", Duration::from_secs(60), || async {
        let row: Option<(String, bool)> = sqlx::query_as(
            "SELECT state, json_array_length(machine->'outbox') = 0 FROM controller_remediations WHERE remediation_id = $1",
        )
        .bind(&green_id)
        .fetch_optional(&lp.stack.pool)
        .await?;
        Ok(row.filter(|(s, done)| s == "superseded" && *done).map(|_| ()))
    })
    .await
    .map_err(|e| e.context(lp.logs()))?;
    let prs = lp.pull_requests("green").await?;
    assert_eq!(prs[0].1, "closed", "{prs:?}");
    let comments = lp.comments("green").await?;
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(comments[0].contains("gone from the image"), "{comments:?}");

    // Operators see one state per remediation: the planner's rows follow
    // the controller's through its lifecycle events, so `status`,
    // `remediations` and the PR list agree.
    lp.wait_states_in_step(&ids).await.map_err(|e| e.context(lp.logs()))?;
    let out = lp.stack.cli(&["status", "--json"]).await?;
    let fleet: serde_json::Value = serde_json::from_str(&out.stdout)
        .map_err(|e| anyhow::anyhow!("{e}: {}{}", out.stdout, out.stderr))?;
    let by_state = &fleet["remediations"];
    assert_eq!(by_state["succeeded"].as_i64(), Some(2), "{}", out.stdout);
    assert_eq!(by_state["superseded"].as_i64(), Some(1), "{}", out.stdout);
    assert_eq!(by_state["needs_human"].as_i64(), Some(2), "{}", out.stdout);
    assert_eq!(by_state["failed"].as_i64(), Some(1), "{}", out.stdout);
    assert_eq!(by_state.as_object().map(|m| m.len()), Some(4), "nothing left queued: {}", out.stdout);
    for pr in fleet["pull_requests"].as_array().into_iter().flatten() {
        let id = pr["remediation_id"].as_str().unwrap_or_default();
        let (controller_state, _) = lp.state(id).await?.unwrap_or_default();
        assert_eq!(pr["state"].as_str(), Some(controller_state.as_str()), "{pr}");
    }
    let out = lp.stack.cli(&["remediations", "--json"]).await?;
    let listed: Vec<serde_json::Value> = serde_json::from_str(&out.stdout)
        .map_err(|e| anyhow::anyhow!("{e}: {}{}", out.stdout, out.stderr))?;
    assert_eq!(listed.len(), ids.len());
    for row in &listed {
        let id = row["id"].as_str().unwrap_or_default();
        let (controller_state, _) = lp.state(id).await?.unwrap_or_default();
        assert_eq!(row["state"].as_str(), Some(controller_state.as_str()), "{row}");
    }
    // The green remediation's life, as `patchpilot events` tells it, and as
    // the planner's history recorded it.
    let out = lp.stack.cli(&["events", "--remediation", &ids[0], "--kind", "remediation", "--json"]).await?;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let states: Vec<String> = out
        .stdout
        .lines()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .map(|e| e["state"].as_str().unwrap_or_default().to_owned())
        })
        .collect::<Result<_, _>>()?;
    assert_eq!(
        states,
        ["preparing", "running", "vetting", "publishing", "ci_pending", "succeeded", "superseded"],
        "{}",
        out.stdout
    );
    let history: Vec<String> = sqlx::query_scalar(
        "SELECT to_state FROM remediation_history WHERE remediation_id = $1::uuid ORDER BY at, id",
    )
    .bind(&ids[0])
    .fetch_all(&lp.stack.pool)
    .await?;
    assert_eq!(history.first().map(String::as_str), Some("preparing"));
    assert_eq!(history.iter().filter(|s| *s == "succeeded").count(), 1);
    assert_eq!(history.last().map(String::as_str), Some("superseded"));
    let out = lp.stack.cli(&["events", "--kind", "run.completed", "--json"]).await?;
    assert!(out.stdout.lines().count() >= 8, "one per completed run: {}", out.stdout);
    // Every run's retrospective, stored once with its run's facts, and in
    // the fleet view.
    let finished: i64 = sqlx::query_scalar("SELECT count(*) FROM sandbox_runs WHERE state = 'finished'")
        .fetch_one(&lp.stack.pool)
        .await?;
    wait_for("every run's retrospective stored", Duration::from_secs(60), || async {
        let stored: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM retrospectives r JOIN sandbox_runs s USING (run_id) \
             WHERE r.outcome = s.outcome AND r.repository <> ''",
        )
        .fetch_one(&lp.stack.pool)
        .await?;
        Ok((stored == finished).then_some(()))
    })
    .await
    .map_err(|e| e.context(lp.logs()))?;
    let out = lp.stack.cli(&["retros", "--json"]).await?;
    let view: serde_json::Value = serde_json::from_str(&out.stdout)
        .map_err(|e| anyhow::anyhow!("{e}: {}{}", out.stdout, out.stderr))?;
    assert_eq!(view["runs"].as_i64(), Some(finished), "{}", out.stdout);

    let status = controller.terminate(Duration::from_secs(30)).await?;
    assert!(status.success(), "{status:?}\n{}", controller.log_text());
    lp.stop().await
}

#[tokio::test]
async fn controller_killed_at_every_step_still_opens_one_pr_on_one_branch() -> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("controller_killed_at_every_step_still_opens_one_pr_on_one_branch").is_some() {
        return Ok(());
    }
    let lp = Loop::start(&["repair"]).await?;
    let id = lp.submit("repair").await?;
    let mut n = 0;
    let mut controller = lp.spawn_controller(n)?;
    let mut seen = 0i64;
    let mut kills = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(900);
    loop {
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "did not finish\n{}", lp.logs());
        let (count, last): (i64, Option<String>) = sqlx::query_as(
            "SELECT count(*), (array_agg(to_state ORDER BY id DESC))[1] FROM controller_transitions WHERE remediation_id = $1",
        )
        .bind(&id)
        .fetch_one(&lp.stack.pool)
        .await?;
        if count > seen {
            seen = count;
            // SIGKILL right after a new state was stored: whatever the step
            // that follows had begun is cut off mid-way.
            controller.kill();
            kills.push(last.clone().unwrap_or_default());
            if last.as_deref().is_some_and(|s| TERMINAL.contains(&s)) {
                let outbox_empty: Option<(bool,)> = sqlx::query_as(
                    "SELECT json_array_length(machine->'outbox') = 0 FROM controller_remediations WHERE remediation_id = $1",
                )
                .bind(&id)
                .fetch_optional(&lp.stack.pool)
                .await?;
                if outbox_empty.is_some_and(|(e,)| e) {
                    break;
                }
            }
            n += 1;
            controller = lp.spawn_controller(n)?;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (state, machine) = lp.state(&id).await?.ok_or_else(|| anyhow::anyhow!("no row"))?;
    assert_eq!(state, "succeeded", "{machine}\nkills at {kills:?}\n{}", lp.logs());
    eprintln!("controller SIGKILLed {} times, after: {kills:?}", kills.len());
    assert!(kills.len() >= 8, "killed only at {kills:?}");
    for step in ["preparing", "running", "vetting", "publishing", "ci_pending"] {
        assert!(kills.iter().any(|k| k == step), "never killed after {step}: {kills:?}");
    }
    let prs = lp.pull_requests("repair").await?;
    assert_eq!(prs.len(), 1, "exactly one PR: {prs:?}");
    let branches = lp.branches("repair")?;
    assert_eq!(branches.len(), 1, "exactly one branch: {branches:?}");
    assert_eq!(lp.file_on("repair", &branches[0], "lint.conf")?.trim(), "1.1");
    // One commit for the fix and one for the repair on top of main: a replayed
    // publish pushes nothing new.
    let commits = git_dir(&lp.bare("repair"), &["rev-list", "--count", &format!("main..{}", branches[0])])?;
    assert_eq!(commits.trim(), "2", "one fix and one repair commit");
    let runs = lp.runs(&id).await?;
    assert_eq!(runs.len(), 2, "a killed request is not requested twice: {runs:?}");
    lp.stop().await
}

#[tokio::test]
async fn controller_with_the_built_in_agent_in_the_vm_opens_a_verified_pr() -> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("controller_with_the_built_in_agent_in_the_vm_opens_a_verified_pr").is_some() {
        return Ok(());
    }
    let (_registry, sreg) = golang_bases("1.22.1-alpine3.19", "1.22.2-alpine3.19").await?;
    let dockerfile = format!(
        "FROM {sreg}/library/golang:1.22.1-alpine3.19\n\
         RUN apk add --no-cache libcrypto3=3.1.4-r5 libssl3=3.1.4-r5\n\
         CMD [\"/bin/sh\"]\n"
    );
    let seeds = vec![("api".to_owned(), vec![("Dockerfile", dockerfile)])];
    let worker = docker_worker(&sreg, &["registry.test"]);
    let scratch = tempfile::tempdir()?;
    let db = advisory_db(&scratch.path().join("db"), &[cve_2024_2511()])?;
    let controller = format!(
        "agent_command = [\"patchpilot-agent\"]\nagent_docker = true\ninsecure_registries = [\"{sreg}\"]\nagent_db_source = \"{}\"\n",
        db.display()
    );
    let ci = "grep -q 'golang:1.22.2' Dockerfile && ! grep -q 'libssl3=3.1.4-r5' Dockerfile";
    let lp = Loop::start_with(&seeds, ci, &controller, &worker).await?;
    let mut controller = lp.spawn_controller(0)?;
    let id = lp
        .submit_job(job_with(
            "api",
            vec![
                apk_finding("libcrypto3", "3.1.4-r5", "3.1.4-r6", "openssl"),
                apk_finding("libssl3", "3.1.4-r5", "3.1.4-r6", "openssl"),
            ]
            .into_iter()
            .map(|mut f| {
                f.id = "CVE-2024-2511".into();
                f
            })
            .collect(),
        ))
        .await?;
    let ends = lp.wait_terminal(std::slice::from_ref(&id), Duration::from_secs(900)).await?;
    assert_eq!(ends[0].0, "succeeded", "{}\n{}", ends[0].1, lp.logs());
    let branches = lp.branches("api")?;
    assert_eq!(branches.len(), 1, "{branches:?}");
    let fixed = lp.file_on("api", &branches[0], "Dockerfile")?;
    assert!(fixed.contains(&format!("FROM {sreg}/library/golang:1.22.2-alpine3.19")), "{fixed}");
    assert!(!fixed.contains("3.1.4-r5"), "the obsolete pins are gone: {fixed}");
    let prs = lp.pull_requests("api").await?;
    assert_eq!(prs.len(), 1);
    let body = &prs[0].3;
    // The numbers come from the rebuild and rescan inside the VM.
    assert!(body.contains("**2 fixed**, 0 still present, 0 introduced"), "{body}");
    assert!(body.contains("| CVE-2024-2511 | libssl3 | 3.1.4-r5 → 3.1.4-r6 |"), "{body}");
    let log = controller.log_text();
    assert!(log.contains("patchpilot: green acme/api"), "{log}");
    let status = controller.terminate(Duration::from_secs(30)).await?;
    assert!(status.success(), "{status:?}");
    lp.stop().await
}

/// The chain the model-driven agent exists for, end to end in VMs: the fix
/// bumps the Go base image (a CVE in its OpenSSL), the newer Go needs a
/// newer golangci-lint, and the newer linter flags existing code.
///
/// - The remediation is the rules' alone: they fix every target, so no
///   model is asked (every request the double receives is a repair's).
/// - CI's lint fails: the pinned linter is older than the Go it must load.
///   The repair applies the companion table (golangci-lint v1.57.2 →
///   v1.60.1) before the model, which reads the evidence and finishes on
///   that change.
/// - The `failing_check` gate runs the lint check (the local forge names
///   its command) again in the VM: the new linter's printf check flags
///   `main.go`, so `finish` is refused with that output. The model reads
///   the file and edits it through the tools, and finishes again; the
///   gates run the check, rebuild and rescan in the VM.
/// - CI is green on the first repair, with two commits (fix, repair) and
///   nothing of the fix reverted: the gate saved a CI round trip.
///
/// The model is the provider double on the host's loopback, a hosted
/// provider's stand-in that requires its key. The VMs reach it only
/// through the capability broker (`controller.model_connection`): each run
/// is granted the `model` connection, the agent calls the broker's
/// loopback address with its run's capability, and the broker signs with
/// the key the gateway holds. The double answers from what it was sent, so
/// a step that never reached it (the brief, the log, a tool result) fails
/// the chain; every request carries the gateway's key and never the
/// capability, and the broker recorded every call.
#[tokio::test]
async fn the_go_linter_chain_is_carried_to_green_by_companion_and_model_repairs() -> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("the_go_linter_chain_is_carried_to_green_by_companion_and_model_repairs").is_some() {
        return Ok(());
    }
    let chain = Chain::start().await?;
    let (lp, double) = (&chain.lp, &chain.double);
    let (id, end, _) = chain.run(Duration::from_secs(1500)).await?;
    let ends = [end];
    let requests = double.requests();
    let asked: Vec<String> = requests
        .iter()
        .filter_map(|r| r.conversation.as_ref())
        .map(|c| format!("{} tool results", c.tool_results().count()))
        .collect();
    assert_eq!(ends[0].0, "succeeded", "{}\nmodel calls: {asked:?}\n{}", ends[0].1, lp.logs());
    assert_eq!(
        lp.runs(&id).await?,
        vec![
            ("remediate".to_owned(), Some("completed".to_owned())),
            ("repair".to_owned(), Some("completed".to_owned())),
        ]
    );

    // The model was asked only by the repairs, over the documented wire,
    // with the key the broker got from the gateway: the run held only its
    // capability, which never left the broker.
    assert!(double.violations().is_empty(), "{:#?}", double.violations());
    assert!(!requests.is_empty());
    for r in &requests {
        let system = r.conversation.as_ref().and_then(|c| c.system.clone()).unwrap_or_default();
        assert!(
            system.starts_with("You are PatchPilot's repair agent"),
            "a remediation asked the model: {system:.80}"
        );
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {}", chain::KEY).as_str()),
            "{:?}",
            r.headers
        );
        assert!(!format!("{:?}", r.headers).contains("ppcap_"), "the capability reached the upstream");
    }
    let brokered: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM broker_calls WHERE connection = 'model' AND status = 200 AND model_tokens > 0",
    )
    .fetch_one(&chain.broker.stack.pool)
    .await?;
    assert_eq!(brokered as usize, requests.len(), "the broker recorded every model call");
    // After the gate's refusal, the repair's model edited main.go through
    // the tools.
    let edited = requests
        .iter()
        .filter_map(|r| r.conversation.as_ref())
        .filter(|c| c.messages.iter().any(|m| matches!(m, Message::Assistant { tool_calls, .. } if tool_calls.iter().any(|t| t.name == "edit_file"))))
        .count();
    assert!(edited >= 1, "no request shows the edit_file call: {asked:?}");

    let branches = lp.branches("api")?;
    assert_eq!(branches.len(), 1, "{branches:?}");
    let branch = &branches[0];
    let dockerfile = lp.file_on("api", branch, "Dockerfile")?;
    assert!(dockerfile.contains("golang:1.23.4-alpine3.19"), "the fix stayed: {dockerfile}");
    let makefile = lp.file_on("api", branch, "Makefile")?;
    assert!(makefile.contains("GOLANGCI_LINT_VERSION ?= v1.60.1"), "the companion bump: {makefile}");
    assert_eq!(makefile.replace("v1.60.1", "v1.57.2"), chain::MAKEFILE, "only the version token moved");
    let main_go = lp.file_on("api", branch, "main.go")?;
    assert_eq!(
        main_go,
        chain::MAIN_GO.replace("fmt.Printf(msg)", "fmt.Print(msg)"),
        "the model's forward fix"
    );
    let subjects = git_dir(&lp.bare("api"), &["log", "--format=%s", &format!("main..{branch}")])?;
    let subjects: Vec<&str> = subjects.lines().collect();
    assert_eq!(subjects.len(), 2, "{subjects:?}");
    assert!(subjects[0].starts_with("Repair CI after:"), "{subjects:?}");
    let prs = lp.pull_requests("api").await?;
    assert_eq!(prs.len(), 1);
    let Chain { lp, mut controller, .. } = chain;
    let log = controller.log_text();
    assert!(log.contains("patchpilot: green acme/api"), "{log}");
    let status = controller.terminate(Duration::from_secs(30)).await?;
    assert!(status.success(), "{status:?}");
    lp.stop().await
}
