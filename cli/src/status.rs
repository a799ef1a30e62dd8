//! `patchpilot status`: the fleet at a glance.

use std::collections::BTreeMap;
use std::process::ExitCode;

use patchpilot_fleet::bus::StreamName;
use serde::Serialize;

use crate::config::CliConfig;

/// Arguments of `patchpilot status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Most unmapped images to list.
    #[arg(long, default_value_t = 20)]
    unmapped_limit: i64,
}

#[derive(Debug, Serialize)]
struct ConsumerView {
    name: String,
    pending: u64,
    in_flight: u64,
    redelivered: u64,
}

#[derive(Debug, Serialize)]
struct StreamView {
    stream: &'static str,
    messages: u64,
    consumers: Vec<ConsumerView>,
}

#[derive(Debug, Serialize, sqlx::FromRow)]
struct UnmappedView {
    reference: String,
    digest: String,
    reason: String,
}

#[derive(Debug, Serialize)]
struct Status {
    streams: Vec<StreamView>,
    remediations: BTreeMap<String, i64>,
    unmapped_total: i64,
    unmapped: Vec<UnmappedView>,
    dead_letters: u64,
    assessments: i64,
    images: i64,
    findings: i64,
    /// Sandbox runs by `state/outcome` (`running`, `finished/completed`…).
    sandbox_runs: BTreeMap<String, i64>,
    /// Egress denials in the last 24 hours.
    egress_denied_24h: i64,
    /// The controller's most recently changed remediations, with the state
    /// every view shows (the planner's, kept in step by the controller's
    /// events; the controller's own for work that never went through the
    /// planner).
    pull_requests: Vec<PullRequestView>,
}

#[derive(Debug, Serialize, sqlx::FromRow)]
struct PullRequestView {
    remediation_id: String,
    state: String,
    pr_url: Option<String>,
    runs: i64,
}

/// Runs the command.
pub async fn run(config: &CliConfig, args: Args) -> anyhow::Result<ExitCode> {
    let bus = crate::connect_bus(config).await?;
    let mut streams = Vec::new();
    for stream in StreamName::ALL {
        let messages = match bus.stream_messages(stream).await {
            Ok(n) => n,
            // Not created yet: no service has started.
            Err(_) => continue,
        };
        let consumers = bus
            .consumer_states(stream)
            .await?
            .into_iter()
            .map(|c| ConsumerView {
                name: c.name,
                pending: c.pending,
                in_flight: c.in_flight,
                redelivered: c.redelivered,
            })
            .collect();
        streams.push(StreamView { stream: stream.as_str(), messages, consumers });
    }
    let dead_letters = streams.iter().find(|s| s.stream == "DEAD_LETTERS").map(|s| s.messages).unwrap_or(0);

    let pool = crate::connect_db(config).await?;
    let schema_ready: bool =
        sqlx::query_scalar("SELECT to_regclass('public.remediations') IS NOT NULL").fetch_one(&pool).await?;
    let mut status = Status {
        streams,
        remediations: BTreeMap::new(),
        unmapped_total: 0,
        unmapped: Vec::new(),
        dead_letters,
        assessments: 0,
        images: 0,
        findings: 0,
        sandbox_runs: BTreeMap::new(),
        egress_denied_24h: 0,
        pull_requests: Vec::new(),
    };
    if schema_ready {
        status.remediations =
            sqlx::query_as::<_, (String, i64)>("SELECT state, count(*) FROM remediations GROUP BY state")
                .fetch_all(&pool)
                .await?
                .into_iter()
                .collect();
        status.unmapped_total =
            sqlx::query_scalar("SELECT count(*) FROM image_refs WHERE unmapped_reason IS NOT NULL")
                .fetch_one(&pool)
                .await?;
        status.unmapped = sqlx::query_as(
            "SELECT reference, digest, unmapped_reason AS reason FROM image_refs
             WHERE unmapped_reason IS NOT NULL ORDER BY updated_at DESC LIMIT $1",
        )
        .bind(args.unmapped_limit)
        .fetch_all(&pool)
        .await?;
        let (a, i, f): (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM assessments), (SELECT count(*) FROM images), (SELECT count(*) FROM findings)",
        )
        .fetch_one(&pool)
        .await?;
        (status.assessments, status.images, status.findings) = (a, i, f);
        status.sandbox_runs = sqlx::query_as::<_, (String, i64)>(
            "SELECT CASE WHEN state = 'finished' THEN 'finished/' || coalesce(outcome, '?') ELSE state END, count(*)
             FROM sandbox_runs GROUP BY 1",
        )
        .fetch_all(&pool)
        .await?
        .into_iter()
        .collect();
        status.egress_denied_24h = sqlx::query_scalar(
            "SELECT count(*) FROM egress_decisions WHERE verdict = 'deny' AND at > now() - interval '24 hours'",
        )
        .fetch_one(&pool)
        .await?;
        status.pull_requests = sqlx::query_as(
            "SELECT c.remediation_id, coalesce(p.state, c.state) AS state, c.pr_url, \
                    (SELECT count(*) FROM controller_runs r WHERE r.remediation_id = c.remediation_id) AS runs \
             FROM controller_remediations c LEFT JOIN remediations p ON p.id::text = c.remediation_id \
             ORDER BY c.updated_at DESC LIMIT $1",
        )
        .bind(args.unmapped_limit)
        .fetch_all(&pool)
        .await?;
    }
    bus.drain().await;

    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<16} {:>9}  {:<12} {:>8} {:>9} {:>11}",
        "STREAM", "MESSAGES", "CONSUMER", "PENDING", "IN-FLIGHT", "REDELIVERED"
    );
    for s in &status.streams {
        if s.consumers.is_empty() {
            println!("{:<16} {:>9}  {:<12}", s.stream, s.messages, "-");
        }
        for c in &s.consumers {
            println!(
                "{:<16} {:>9}  {:<12} {:>8} {:>9} {:>11}",
                s.stream, s.messages, c.name, c.pending, c.in_flight, c.redelivered
            );
        }
    }
    println!();
    if !schema_ready {
        println!("database: schema not initialised yet (it is created when the planner first starts)");
        return Ok(ExitCode::SUCCESS);
    }
    println!("assessments {}  images {}  findings {}", status.assessments, status.images, status.findings);
    println!();
    println!("REMEDIATIONS BY STATE");
    if status.remediations.is_empty() {
        println!("  (none)");
    }
    for (state, n) in &status.remediations {
        println!("  {state:<14} {n}");
    }
    println!();
    println!("UNMAPPED IMAGES: {}", status.unmapped_total);
    for u in &status.unmapped {
        println!("  {}  {}", u.reference, short(&u.digest));
        println!("      {}", u.reason);
    }
    println!();
    println!("SANDBOX RUNS");
    if status.sandbox_runs.is_empty() {
        println!("  (none)");
    }
    for (state, n) in &status.sandbox_runs {
        println!("  {state:<28} {n}");
    }
    println!("  egress denials, last 24 h: {}", status.egress_denied_24h);
    println!();
    println!("PULL REQUESTS");
    if status.pull_requests.is_empty() {
        println!("  (none)");
    }
    for pr in &status.pull_requests {
        println!(
            "  {}  {:<12} runs {:<2} {}",
            pr.remediation_id,
            pr.state,
            pr.runs,
            pr.pr_url.as_deref().unwrap_or("(no pull request yet)")
        );
    }
    println!();
    println!(
        "DEAD LETTERS: {}{}",
        status.dead_letters,
        if status.dead_letters > 0 { "  (patchpilot dlq list)" } else { "" }
    );
    Ok(ExitCode::SUCCESS)
}

/// `sha256:0123456789ab`.
pub(crate) fn short(digest: &str) -> &str {
    let end = digest.find(':').map(|i| i + 13).unwrap_or(12).min(digest.len());
    &digest[..end]
}
