//! Intake benchmark: assessments through submit → planner → RemediationJob.
//!
//! ```text
//! scripts/services up && eval "$(scripts/services env)"
//! cargo build --release --bins
//! cargo bench -p patchpilot-e2e --bench intake -- [--assessments 10000] [--findings 50]
//!     [--planners 1,2] [--rate 0] [--batch-size 256] [--bus-messages 2000] [--json-out FILE]
//! ```
//!
//! Each run gets a private NATS server and a fresh database on the test
//! Postgres server, starts N real `patchpilot-planner` processes (release
//! build), publishes the assessments as `patchpilot submit` does, and
//! watches `pp.remediation.>` for the jobs. Every synthetic image maps to its
//! own repository, so each assessment yields exactly one job and its latency
//! is read off that job. `--rate 0` submits as fast as possible (throughput);
//! a rate below capacity measures latency without queueing.
//!
//! It also measures the bus alone: one message at a time through JetStream
//! and the real consumer loop, against core NATS request/reply on the same
//! server, so the overhead is a ratio measured in the same run.
//!
//! Benchmarks report; they never assert.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use patchpilot_e2e::synthetic::{SyntheticSpec, synthetic};
use patchpilot_e2e::{NatsServer, Service, TestDatabase, binary};
use patchpilot_fleet::Bus;
use patchpilot_fleet::bus::{
    self, BatchHandler, ConsumeOptions, ConsumerMetrics, ConsumerSpec, Delivery, HandlerError, StreamName,
};
use patchpilot_fleet::bus::{Outgoing, topics};
use patchpilot_fleet::config::{BusConfig, NatsConfig};
use patchpilot_model::{Assessment, RemediationJob, SubmittedAssessment, Wire as _};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
struct Args {
    assessments: usize,
    findings: usize,
    planners: Vec<usize>,
    rate: u32,
    batch_size: usize,
    bus_messages: usize,
    json_out: Option<String>,
    timeout: Duration,
}

impl Args {
    fn parse() -> anyhow::Result<Args> {
        let mut args = Args {
            assessments: 10_000,
            findings: 50,
            planners: vec![1, 2],
            rate: 0,
            batch_size: 256,
            bus_messages: 2_000,
            json_out: None,
            timeout: Duration::from_secs(600),
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            // cargo bench passes --bench to every bench binary.
            if flag == "--bench" {
                continue;
            }
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--assessments" => args.assessments = value()?.parse()?,
                "--findings" => args.findings = value()?.parse()?,
                "--planners" => {
                    args.planners = value()?.split(',').map(str::parse).collect::<Result<_, _>>()?
                }
                "--rate" => args.rate = value()?.parse()?,
                "--batch-size" => args.batch_size = value()?.parse()?,
                "--bus-messages" => args.bus_messages = value()?.parse()?,
                "--json-out" => args.json_out = Some(value()?),
                "--timeout-secs" => args.timeout = Duration::from_secs(value()?.parse()?),
                other => bail!("unknown argument {other}"),
            }
        }
        Ok(args)
    }
}

#[derive(Debug, Serialize)]
struct IntakeResult {
    planners: usize,
    rate: u32,
    assessments: usize,
    findings_per_assessment: usize,
    jobs: usize,
    submit_seconds: f64,
    total_seconds: f64,
    assessments_per_second: f64,
    latency_p50_ms: f64,
    latency_p99_ms: f64,
    planner_peak_rss_mib: f64,
}

#[derive(Debug, Serialize)]
struct BusResult {
    messages: usize,
    jetstream_consume_p50_ms: f64,
    jetstream_consume_p99_ms: f64,
    core_request_reply_p50_ms: f64,
    ratio_p50: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    machine: String,
    bus: BusResult,
    intake: Vec<IntakeResult>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_default();
    format!("{} cores, {cpu}", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    patchpilot_fleet::telemetry::install_crypto_provider();
    let machine = machine();
    eprintln!("bench: {machine}");
    eprintln!("bench: generating {} assessments × {} findings", args.assessments, args.findings);
    let assessments = Arc::new(synthetic(&SyntheticSpec {
        assessments: args.assessments,
        findings: args.findings,
        repos: 0,
        seed: 1,
    })?);

    let bus = bus_overhead(args.bus_messages).await?;
    eprintln!(
        "bench: bus p50 {:.3} ms (JetStream publish → consumer loop) vs {:.3} ms core request/reply: ratio {:.2}",
        bus.jetstream_consume_p50_ms, bus.core_request_reply_p50_ms, bus.ratio_p50
    );
    let mut intake = Vec::new();
    for &planners in &args.planners {
        let r = intake_run(&args, planners, assessments.clone()).await?;
        eprintln!(
            "bench: {} planner(s): {:.0} assessments/s, p50 {:.1} ms, p99 {:.1} ms, peak RSS {:.1} MiB",
            r.planners, r.assessments_per_second, r.latency_p50_ms, r.latency_p99_ms, r.planner_peak_rss_mib
        );
        intake.push(r);
    }
    let report = Report { machine, bus, intake };
    println!();
    println!(
        "| planners | submit rate | assessments/s | p50 latency | p99 latency | planner peak RSS | submit alone |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in &report.intake {
        println!(
            "| {} | {} | {:.0} | {:.1} ms | {:.1} ms | {:.1} MiB | {:.0}/s |",
            r.planners,
            if r.rate == 0 { "unpaced".to_owned() } else { format!("{}/s", r.rate) },
            r.assessments_per_second,
            r.latency_p50_ms,
            r.latency_p99_ms,
            r.planner_peak_rss_mib,
            r.assessments as f64 / r.submit_seconds
        );
    }
    println!();
    println!(
        "bus, one message at a time: JetStream publish → consumer loop p50 {:.3} ms (p99 {:.3} ms); \
         core NATS request/reply p50 {:.3} ms; ratio {:.2}",
        report.bus.jetstream_consume_p50_ms,
        report.bus.jetstream_consume_p99_ms,
        report.bus.core_request_reply_p50_ms,
        report.bus.ratio_p50
    );
    if let Some(path) = &args.json_out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(())
}

/// Records when each message reached the handler.
struct Echo(tokio::sync::mpsc::UnboundedSender<Instant>);

impl BatchHandler for Echo {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        for _ in batch {
            let _ = self.0.send(Instant::now());
        }
        vec![Ok(()); batch.len()]
    }
}

async fn bus_overhead(messages: usize) -> anyhow::Result<BusResult> {
    const WARMUP: usize = 50;
    let server = NatsServer::start().await?;
    let nats = NatsConfig { url: server.url.clone(), ..NatsConfig::default() };
    let bus = Bus::connect(&nats, BusConfig::default(), "bench-bus").await?;
    bus.ensure_topology().await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let consumer = {
        let (bus, shutdown) = (bus.clone(), shutdown.clone());
        tokio::spawn(async move {
            let mut registry = prometheus_client::registry::Registry::default();
            let metrics = ConsumerMetrics::register(&mut registry);
            let spec = ConsumerSpec {
                stream: StreamName::Assessments,
                durable: "bench-echo".into(),
                filter_subject: None,
            };
            let options = ConsumeOptions { batch_size: 64, concurrency: 1 };
            bus::run_consumer(&bus, &spec, options, &Echo(tx), &metrics, shutdown).await
        })
    };
    let message = bench_message()?;
    // The core NATS baseline carries the same bytes.
    let payload = bytes::Bytes::from(message.encode());
    let mut js = Vec::with_capacity(messages);
    for i in 0..messages + WARMUP {
        let start = Instant::now();
        bus.publish(&topics::ASSESSMENTS, Some("bench"), &format!("bench-{i}"), &message).await?;
        let handled =
            tokio::time::timeout(Duration::from_secs(10), rx.recv()).await?.context("consumer stopped")?;
        if i >= WARMUP {
            js.push(handled.duration_since(start).as_secs_f64() * 1000.0);
        }
    }
    shutdown.cancel();
    consumer.await??;

    let client = bus.client().clone();
    let mut sub = client.subscribe("bench.echo").await?;
    let responder = {
        let client = client.clone();
        tokio::spawn(async move {
            while let Some(m) = sub.next().await {
                if let Some(reply) = m.reply {
                    let _ = client.publish(reply, m.payload).await;
                }
            }
        })
    };
    let mut core = Vec::with_capacity(messages);
    for i in 0..messages + WARMUP {
        let start = Instant::now();
        client.request("bench.echo", payload.clone()).await?;
        if i >= WARMUP {
            core.push(start.elapsed().as_secs_f64() * 1000.0);
        }
    }
    responder.abort();
    bus.drain().await;
    js.sort_by(f64::total_cmp);
    core.sort_by(f64::total_cmp);
    let (js50, core50) = (percentile(&js, 0.5), percentile(&core, 0.5));
    Ok(BusResult {
        messages,
        jetstream_consume_p50_ms: js50,
        jetstream_consume_p99_ms: percentile(&js, 0.99),
        core_request_reply_p50_ms: core50,
        ratio_p50: if core50 > 0.0 { js50 / core50 } else { 0.0 },
    })
}

fn peak_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

async fn intake_run(
    args: &Args,
    planners: usize,
    assessments: Arc<Vec<Assessment>>,
) -> anyhow::Result<IntakeResult> {
    // The planner under test is the release build next to this benchmark.
    binary("patchpilot-planner").context("build it first: cargo build --release --bins")?;
    let server = NatsServer::start().await?;
    let db = TestDatabase::create().await?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("planner.toml");
    std::fs::write(
        &config,
        format!(
            "[planner]\nbatch_size = {}\n[planner.registry]\nlookup_labels = false\n\
             [[planner.mappings]]\nimage = \"bench.local/svc-*\"\nrepo = \"https://git.bench.local/svc-{{1}}\"\n",
            args.batch_size
        ),
    )?;
    let nats = NatsConfig { url: server.url.clone(), ..NatsConfig::default() };
    let bus = Bus::connect(&nats, BusConfig::default(), "bench-submit").await?;
    bus.ensure_topology().await?;
    // Core subscribers see every message JetStream stores on the subject.
    let mut jobs_sub = bus.client().subscribe("pp.remediation.>").await?;
    let index: HashMap<String, usize> =
        assessments.iter().enumerate().map(|(i, a)| (a.digest.to_string(), i)).collect();

    let env = vec![
        ("PATCHPILOT_NATS__URL".to_owned(), server.url.clone()),
        ("PATCHPILOT_DATABASE__URL".to_owned(), db.url.clone()),
        ("RUST_LOG".to_owned(), "warn".to_owned()),
    ];
    let mut services = Vec::new();
    for n in 0..planners {
        services.push(Service::spawn(
            "patchpilot-planner",
            &config,
            &env,
            dir.path().join(format!("planner-{n}.log")),
        )?);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while bus.consumer_states(StreamName::Assessments).await.map(|c| c.is_empty()).unwrap_or(true) {
        if Instant::now() > deadline {
            bail!("the planner did not start; logs in {}", dir.path().display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    let expected = assessments.len();
    let collector = tokio::spawn(async move {
        let mut seen: Vec<Option<Instant>> = vec![None; index.len()];
        let mut jobs = 0usize;
        while let Some(m) = jobs_sub.next().await {
            let at = Instant::now();
            jobs += 1;
            if let Ok(job) = RemediationJob::decode(m.payload.as_ref()) {
                for image in &job.images {
                    if let Some(&i) = index.get(&image.image_digest) {
                        seen[i].get_or_insert(at);
                    }
                }
            }
            if jobs >= expected {
                break;
            }
        }
        (jobs, seen)
    });

    let started = Instant::now();
    let mut sent_at = vec![started; assessments.len()];
    let cx = patchpilot_fleet::bus::trace::current();
    let pace = (args.rate > 0).then(|| Duration::from_secs_f64(1.0 / f64::from(args.rate)));
    let mut in_flight = futures::stream::FuturesUnordered::new();
    for (i, a) in assessments.iter().enumerate() {
        let message = SubmittedAssessment::now(a.clone());
        if let Some(pace) = pace {
            let due = started + pace * i as u32;
            if due > Instant::now() {
                tokio::time::sleep_until(due.into()).await;
            }
        }
        sent_at[i] = Instant::now();
        let ack =
            bus.send(Outgoing::new(&topics::ASSESSMENTS, Some("bench"), &message.id, &message, &cx)).await?;
        in_flight.push(ack);
        while in_flight.len() >= 1024 {
            if let Some(r) = in_flight.next().await {
                r?;
            }
        }
    }
    while let Some(r) = in_flight.next().await {
        r?;
    }
    let submit_seconds = started.elapsed().as_secs_f64();
    let (jobs, seen) = tokio::time::timeout(args.timeout, collector)
        .await
        .context("timed out waiting for remediation jobs")??;
    let total_seconds = started.elapsed().as_secs_f64();
    let mut latencies: Vec<f64> = seen
        .iter()
        .zip(&sent_at)
        .filter_map(|(seen, sent)| seen.map(|s| s.duration_since(*sent).as_secs_f64() * 1000.0))
        .collect();
    latencies.sort_by(f64::total_cmp);
    let rss = services.iter().filter_map(Service::pid).map(peak_rss_mib).fold(0.0, f64::max);
    for service in &mut services {
        service.terminate(Duration::from_secs(30)).await?;
    }
    bus.drain().await;
    Ok(IntakeResult {
        planners,
        rate: args.rate,
        assessments: assessments.len(),
        findings_per_assessment: args.findings,
        jobs,
        submit_seconds,
        total_seconds,
        assessments_per_second: assessments.len() as f64 / total_seconds,
        latency_p50_ms: percentile(&latencies, 0.5),
        latency_p99_ms: percentile(&latencies, 0.99),
        planner_peak_rss_mib: rss,
    })
}

/// The message of the bus-alone measurement: one small assessment (one
/// finding), which the echo consumer never decodes.
fn bench_message() -> anyhow::Result<SubmittedAssessment> {
    let spec = SyntheticSpec { assessments: 1, findings: 1, repos: 0, seed: 7 };
    let assessment = synthetic(&spec)?.pop().context("no synthetic assessment")?;
    Ok(SubmittedAssessment::now(assessment))
}
