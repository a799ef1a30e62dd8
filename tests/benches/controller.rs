//! Controller overhead per remediation, excluding sandbox and CI time.
//!
//! ```text
//! scripts/services up && eval "$(scripts/services env)"
//! cargo bench -p patchpilot-e2e --bench controller -- [--remediations 10]
//! ```
//!
//! Real NATS, Postgres, the local forge (bare repositories, PRs in
//! Postgres) and its CI runner; the controller's intakes and executor run
//! in this process. The sandbox is replaced by a responder that answers
//! each SandboxRun at once with a prepared patch, so the time measured is
//! the controller's own: job intake; clone, `.patchpilot/`, pack, upload and
//! run request; result intake; clone and vet; clone, re-vet, commit, push
//! and PR; CI looks; notification. It is the executor's busy time (ticks
//! that worked on something), so waits for CI and for the responder are
//! excluded.
//!
//! Baseline, in the same run: the git work any publisher must do for the
//! same change (a shallow clone, a commit, a push to a new branch).
//! Benchmarks report; they never assert.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use patchpilot_controller::config::ControllerConfig;
use patchpilot_controller::executor::Executor;
use patchpilot_controller::service::{JobIntake, ResultIntake};
use patchpilot_controller::store::Store;
use patchpilot_e2e::Stack;
use patchpilot_e2e::jobs::{apk_finding, new_job};
use patchpilot_fleet::artifacts::ArtifactStore;
use patchpilot_fleet::bus::{self, ConsumeOptions, ConsumerMetrics, ConsumerSpec, StreamName, topics};
use patchpilot_forge::Repo;
use patchpilot_forge_local::{LocalCi, LocalCiConfig, LocalForge};
use patchpilot_model::{RunOutcome, SandboxResult, SandboxRun, Wire as _};
use tokio_util::sync::CancellationToken;

const DOCKERFILE: &str = "FROM registry.test:5000/base:1.0\nCOPY app.txt /app.txt\n";

fn git(dir: &std::path::Path, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@patchpilot.invalid"])
        .args(args)
        .output()?;
    anyhow::ensure!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The patch the responder returns: the base bump, made by git.
fn patch(scratch: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let dir = scratch.join("patch-src");
    std::fs::create_dir_all(&dir)?;
    git(&dir, &["init", "-q"])?;
    std::fs::write(dir.join("Dockerfile"), DOCKERFILE)?;
    git(&dir, &["add", "-A"])?;
    git(&dir, &["commit", "-qm", "seed"])?;
    std::fs::write(dir.join("Dockerfile"), DOCKERFILE.replace("base:1.0", "base:1.1"))?;
    Ok(git(&dir, &["diff", "--binary"])?.into_bytes())
}

/// Answers every SandboxRun with the prepared patch.
async fn respond(stack_bus: patchpilot_fleet::Bus, stop: CancellationToken) -> anyhow::Result<()> {
    let stream = stack_bus.jetstream().get_stream(StreamName::SandboxRuns.as_str()).await?;
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            durable_name: Some("bench-responder".into()),
            ..Default::default()
        })
        .await?;
    let mut messages = consumer.messages().await?;
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            m = messages.next() => m,
        };
        let Some(message) = next else { return Ok(()) };
        let message = message.map_err(|e| anyhow::anyhow!("{e}"))?;
        let run = SandboxRun::decode(message.payload.as_ref())?;
        let result = SandboxResult {
            patch_object: Some("bench/patch".into()),
            result_object: Some("bench/result.json".into()),
            ..SandboxResult::without_artifacts(&run.run_id, &run.remediation_id, RunOutcome::Completed, "")
        };
        stack_bus.publish(&topics::SANDBOX_RESULTS, Some(&run.run_id), &run.run_id, &result).await?;
        message.ack().await.map_err(|e| anyhow::anyhow!("{e}"))?;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut remediations = 10usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--remediations" {
            remediations = args.next().context("--remediations N")?.parse()?;
        }
    }
    let stack = Stack::start().await?;
    let scratch = stack.dir.path().to_owned();
    let root = scratch.join("forge");
    let forge = LocalForge::new(&root, stack.pool.clone());
    let seed = scratch.join("seed");
    std::fs::create_dir_all(&seed)?;
    std::fs::write(seed.join("Dockerfile"), DOCKERFILE)?;
    std::fs::write(seed.join("app.txt"), "hello\n")?;
    let names: Vec<String> = (0..remediations).map(|i| format!("svc-{i}")).collect();
    for name in &names {
        let repo = Repo { owner: "bench".into(), name: name.clone() };
        forge.create_repository(&repo, "main", Some(&seed)).await?;
        forge.set_check(&repo, "ci", vec!["true".into()]).await?;
    }
    let artifacts = ArtifactStore::open(&stack.bus).await?;
    artifacts.put_bytes("bench/patch", &patch(&scratch)?).await?;
    artifacts
        .put_bytes(
            "bench/result.json",
            br#"{"summary":"Bump the base image","steps":[{"summary":"base 1.0 to 1.1","reason":"fixes CVE-2024-0001"}]}"#,
        )
        .await?;

    let stop = CancellationToken::new();
    let store = Store::new(stack.pool.clone());
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = ConsumerMetrics::register(&mut registry);
    let jobs = JobIntake::new(store.clone(), ControllerConfig::default());
    let results = ResultIntake::new(store.clone());
    let consumers = {
        let (bus, stop, metrics) = (stack.bus.clone(), stop.clone(), metrics.clone());
        tokio::spawn(async move {
            let js =
                ConsumerSpec { stream: StreamName::Remediations, durable: "c".into(), filter_subject: None };
            let rs = ConsumerSpec {
                stream: StreamName::SandboxResults,
                durable: "c".into(),
                filter_subject: None,
            };
            let _ = tokio::join!(
                bus::run_consumer(&bus, &js, ConsumeOptions::default(), &jobs, &metrics, stop.clone()),
                bus::run_consumer(&bus, &rs, ConsumeOptions::default(), &results, &metrics, stop.clone()),
            );
        })
    };
    let responder = tokio::spawn(respond(stack.bus.clone(), stop.clone()));
    // Checkouts in the system's temporary folder (the default): the
    // stack's own folder is private, out of reach of the check's uid.
    let ci =
        LocalCi::new(LocalCiConfig { poll_interval: Duration::from_millis(50), ..LocalCiConfig::default() })?;
    let ci_task = tokio::spawn({
        let (forge, stop) = (forge.clone(), stop.clone());
        async move { ci.run(&forge, stop).await }
    });
    let config = ControllerConfig {
        work_dir: scratch.join("work"),
        tick_millis: 10,
        ci_poll_secs: 1,
        notifiers: vec![],
        agent_docker: false,
        ..ControllerConfig::default()
    };
    let executor = Executor::new(
        store,
        Arc::new(forge.clone()),
        stack.bus.clone(),
        artifacts,
        vec![],
        config,
        "bench".into(),
    );

    let started = Instant::now();
    for name in &names {
        let j =
            new_job(&format!("local://bench/{name}"), vec![apk_finding("libbase", "1.0-r0", "1.1-r0", "")]);
        stack.bus.publish(&topics::REMEDIATIONS, None, &j.job_id, &j).await?;
    }
    let mut busy = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let t = Instant::now();
        let worked = executor.tick(&stop).await?;
        if worked > 0 {
            busy += t.elapsed();
        } else {
            let done: i64 =
                sqlx::query_scalar("SELECT count(*) FROM controller_remediations WHERE state = 'succeeded'")
                    .fetch_one(&stack.pool)
                    .await?;
            if done as usize == remediations {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "only {done} of {remediations} finished");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let wall = started.elapsed();
    stop.cancel();
    let _ = tokio::join!(consumers, responder, ci_task);

    // Baseline: the git work of publishing the same change by hand.
    let mut baseline = Duration::ZERO;
    for (i, name) in names.iter().enumerate() {
        let dir = scratch.join(format!("baseline-{i}"));
        let url = format!("file://{}", root.join("bench").join(format!("{name}.git")).display());
        let t = Instant::now();
        let parent = scratch.as_path();
        git(
            parent,
            &["clone", "-q", "--depth", "1", "--branch", "main", &url, dir.to_str().context("path")?],
        )?;
        std::fs::write(dir.join("Dockerfile"), DOCKERFILE.replace("base:1.0", "base:1.1"))?;
        git(&dir, &["commit", "-qam", "bump"])?;
        git(&dir, &["push", "-q", "origin", "HEAD:refs/heads/baseline"])?;
        baseline += t.elapsed();
    }
    let per = busy / remediations as u32;
    let base = baseline / remediations as u32;
    println!("controller overhead ({remediations} remediations, local forge, sandbox and CI excluded)");
    println!("  executor busy per remediation   {:>8.1} ms", per.as_secs_f64() * 1000.0);
    println!("  git clone+commit+push baseline  {:>8.1} ms", base.as_secs_f64() * 1000.0);
    println!("  ratio                           {:>8.2}", per.as_secs_f64() / base.as_secs_f64());
    println!("  wall time, all remediations     {:>8.1} s (includes CI polls)", wall.as_secs_f64());
    Ok(())
}
