//! The Go linter chain's wall time, split into where it went.
//!
//! ```text
//! scripts/services up && scripts/services vm && eval "$(scripts/services env)"
//! cargo build --profile guest -p patchpilot-sandbox-guest -p patchpilot-agent && target/debug/patchpilot sandbox image build
//! cargo bench -p patchpilot-e2e --bench chain -- [--reps 3]
//! ```
//!
//! Each rep starts [`patchpilot_e2e::chain::Chain`] afresh (not timed: a
//! fleet is up already), submits its one job and times it from submission
//! to green: a remediation run, CI red, a repair run (companion bump, the
//! `failing_check` gate, the model's edit), CI green. The split comes from
//! the records the product itself keeps, so the bench times nothing of its
//! own beyond the total:
//!
//! - **VM**: each run's sandbox time outside the agent's command: boot,
//!   egress and dockerd before it, artifacts and the result after it (the
//!   worker's `run phase` log lines), and the wait from the controller's
//!   request to the worker's receipt.
//! - **build**: image builds inside the VM: the rules' baseline and
//!   fix, the tools' and the `rescan` gate's (with their rescans); the run
//!   report's `docker build` commands.
//! - **model**: waiting for the model (`agent.model_ms`): the double
//!   answers at once, so this is the broker, the gateway and the vsock
//!   path, not a model's latency.
//! - **tools**: the other tools and gates (`agent.tool_ms` less
//!   `agent.build_ms`).
//! - **planning**: the rules' choice of a base (`stats.planning`:
//!   registry requests, cataloging and matching candidate images).
//! - **agent, other**: the rest of the command: the baseline scan,
//!   companion bumps, snapshots, the diff.
//! - **CI**: the local CI's check runs, queued to finished.
//! - **controller**: what is left: its ticks, clones, vetting, pushes, PRs
//!   and polls of CI.
//!
//! Benchmarks report; they never assert (beyond the chain reaching green,
//! without which there is nothing to split).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use chrono::{DateTime, Utc};
use patchpilot_e2e::chain::Chain;
use patchpilot_fleet::artifacts::ArtifactStore;
use patchpilot_model::RunReport;

struct Args {
    reps: usize,
}

impl Args {
    fn parse() -> anyhow::Result<Args> {
        let mut args = Args { reps: 3 };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "--bench" {
                continue;
            }
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--reps" => args.reps = value()?.parse()?,
                other => bail!("unknown flag {other}"),
            }
        }
        Ok(args)
    }
}

/// Where one rep's time went, in seconds, in the order printed.
const PARTS: [&str; 8] = ["VM", "build", "model", "tools", "planning", "agent, other", "CI", "controller"];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// The worker's `run phase` lines of one run: phase/state → ms since the
/// worker received the run, and when it received it.
#[derive(Debug, Default)]
struct Phases {
    since_receipt_ms: BTreeMap<String, u64>,
    received_at: Option<DateTime<Utc>>,
}

fn phases(worker_log: &str) -> BTreeMap<String, Phases> {
    let mut runs: BTreeMap<String, Phases> = BTreeMap::new();
    for line in worker_log.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let fields = &event["fields"];
        if fields["message"] != "run phase" {
            continue;
        }
        let (Some(run), Some(ms)) = (event["span"]["run_id"].as_str(), fields["since_receipt_ms"].as_u64())
        else {
            continue;
        };
        let at = event["timestamp"].as_str().and_then(|t| t.parse::<DateTime<Utc>>().ok());
        let run = runs.entry(run.to_owned()).or_default();
        let key =
            format!("{}/{}", fields["phase"].as_str().unwrap_or(""), fields["state"].as_str().unwrap_or(""));
        run.since_receipt_ms.entry(key).or_insert(ms);
        if run.received_at.is_none() {
            run.received_at = at.map(|a| a - chrono::Duration::milliseconds(ms as i64));
        }
    }
    runs
}

fn secs(d: chrono::Duration) -> f64 {
    d.num_milliseconds() as f64 / 1000.0
}

/// One rep: the total and its split.
async fn rep() -> anyhow::Result<(f64, BTreeMap<&'static str, f64>, Vec<String>)> {
    let chain = Chain::start().await?;
    let (id, (state, reason), wall) = chain.run(Duration::from_secs(1500)).await?;
    if state != "succeeded" {
        bail!("the chain ended {state}: {reason}\n{}", chain.lp.logs());
    }
    let pool = &chain.lp.stack.pool;
    type RunRow = (String, String, DateTime<Utc>, Option<DateTime<Utc>>, Option<String>);
    let runs: Vec<RunRow> = sqlx::query_as(
        "SELECT run_id, purpose, requested_at, finished_at, result_object FROM controller_runs \
         WHERE remediation_id = $1 ORDER BY requested_at",
    )
    .bind(&id)
    .fetch_all(pool)
    .await?;
    let worker_log = chain.lp.worker().map(|w| w.log_text()).unwrap_or_default();
    let phases = phases(&worker_log);
    let store = ArtifactStore::open(&chain.lp.stack.bus).await?;
    let mut parts: BTreeMap<&'static str, f64> = PARTS.iter().map(|p| (*p, 0.0)).collect();
    let mut lines = Vec::new();
    let mut in_runs = 0.0;
    for (run_id, purpose, requested, finished, result) in &runs {
        let finished = finished.with_context(|| format!("run {run_id} has no result"))?;
        let p = phases.get(run_id).with_context(|| format!("the worker logged no phases for {run_id}"))?;
        let received = p.received_at.with_context(|| format!("no receipt time for {run_id}"))?;
        let at = |key: &str| {
            p.since_receipt_ms
                .get(key)
                .map(|ms| *ms as f64 / 1000.0)
                .with_context(|| format!("run {run_id} logged no {key}"))
        };
        let (started, ended) = (at("command/started")?, at("command/finished")?);
        let command = ended - started;
        let total = secs(finished - *requested);
        let vm = total - command;
        let key = result.as_deref().with_context(|| format!("run {run_id} left no report"))?;
        let report: RunReport = serde_json::from_slice(&store.get_bytes(key, 16 << 20).await?)
            .with_context(|| format!("reading {key}"))?;
        let builds: Vec<f64> = report
            .commands
            .iter()
            .filter(|c| c.command.starts_with("docker build"))
            .map(|c| c.duration.as_secs_f64())
            .collect();
        let build: f64 = builds.iter().sum();
        let a = &report.agent;
        let model = a.model_ms as f64 / 1000.0;
        let tools = a.tool_ms.saturating_sub(a.build_ms) as f64 / 1000.0;
        let planning = report.stats.planning.as_secs_f64();
        let other = command - build - model - tools - planning;
        *parts.entry("VM").or_default() += vm;
        *parts.entry("build").or_default() += build;
        *parts.entry("model").or_default() += model;
        *parts.entry("tools").or_default() += tools;
        *parts.entry("planning").or_default() += planning;
        *parts.entry("agent, other").or_default() += other;
        in_runs += total;
        let docker = match (at("docker/started"), at("docker/ready")) {
            (Ok(s), Ok(r)) => format!(", dockerd {:.1} s", r - s),
            _ => String::new(),
        };
        lines.push(format!(
            "{purpose:<9} {total:6.1} s: queued {:.1} s, to the command {started:.1} s{docker}, command {command:.1} s \
             (build {build:.1}, model {model:.1} in {} calls, tools {tools:.1}, planning {planning:.1} over {} images; builds {builds:.1?}), \
             after it {:.1} s",
            secs(received - *requested),
            a.model_calls,
            report.stats.images_scanned,
            total - secs(received - *requested) - ended,
        ));
    }
    let ci: Vec<(DateTime<Utc>, Option<DateTime<Utc>>)> = sqlx::query_as(
        "SELECT created_at, finished_at FROM local_forge_check_runs WHERE owner = 'acme' AND repo = 'api'",
    )
    .fetch_all(pool)
    .await?;
    let ci: f64 = ci.iter().filter_map(|(c, f)| f.map(|f| secs(f - *c))).sum();
    *parts.entry("CI").or_default() += ci;
    let wall = wall.as_secs_f64();
    *parts.entry("controller").or_default() += wall - in_runs - ci;
    let Chain { lp, mut controller, .. } = chain;
    controller.terminate(Duration::from_secs(30)).await?;
    lp.stop().await?;
    Ok((wall, parts, lines))
}

async fn bench(args: Args) -> anyhow::Result<()> {
    if let Some(why) = patchpilot_e2e::sandbox::why_unavailable() {
        bail!("the chain needs microVMs: {why}");
    }
    let mut walls = Vec::new();
    let mut split: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    for n in 1..=args.reps {
        let (wall, parts, lines) = rep().await?;
        println!("rep {n}: {wall:.1} s submit → green");
        for l in &lines {
            println!("  {l}");
        }
        walls.push(wall);
        for (k, v) in parts {
            split.entry(k).or_default().push(v);
        }
    }
    let wall = median(walls);
    println!("\nthe Go linter chain under TCG, median of {} reps: {wall:.1} s submit → green", args.reps);
    for part in PARTS {
        let s = median(split.remove(part).unwrap_or_default());
        println!("  {part:<13} {s:6.1} s  {:4.0} %", 100.0 * s / wall);
    }
    println!("  (each part is its own median, so the parts need not sum to the total)");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(bench(args))
}
