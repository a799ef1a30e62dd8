//! `patchpilot remediations`: what the planner asked to fix.

use std::process::ExitCode;

use chrono::{DateTime, Utc};
use patchpilot_model::{Finding, ImageSummary, RemediationState, Severity};
use serde::Serialize;
use uuid::Uuid;

use crate::config::CliConfig;

/// Arguments of `patchpilot remediations`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this state (queued, running, ci_pending, needs_human…).
    #[arg(long)]
    state: Option<RemediationState>,
    /// List each remediation's findings.
    #[arg(long)]
    findings: bool,
    /// Print JSON (always with findings).
    #[arg(long)]
    json: bool,
    /// Most remediations to list, newest first.
    #[arg(long, default_value_t = 50)]
    limit: i64,
}

#[derive(Debug, Serialize, sqlx::FromRow)]
struct Row {
    id: Uuid,
    state: RemediationState,
    revision: i32,
    repo_url: String,
    dockerfile: String,
    branch: String,
    build_context: String,
    source_revision: String,
    findings: serde_json::Value,
    images: serde_json::Value,
    updated_at: DateTime<Utc>,
}

/// Runs the command.
pub async fn run(config: &CliConfig, args: Args) -> anyhow::Result<ExitCode> {
    let pool = crate::connect_db(config).await?;
    let schema_ready: bool =
        sqlx::query_scalar("SELECT to_regclass('public.remediations') IS NOT NULL").fetch_one(&pool).await?;
    if !schema_ready {
        println!("no remediations (the schema is created when the planner first starts)");
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, state, revision, repo_url, dockerfile, branch, build_context, source_revision, findings, images, updated_at
         FROM remediations WHERE ($1::text IS NULL OR state = $1::text)
         ORDER BY updated_at DESC, repo_url LIMIT $2",
    )
    .bind(args.state)
    .bind(args.limit)
    .fetch_all(&pool)
    .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no remediations");
        return Ok(ExitCode::SUCCESS);
    }
    for row in rows {
        let findings: Vec<Finding> = serde_json::from_value(row.findings).unwrap_or_default();
        let images: Vec<ImageSummary> = serde_json::from_value(row.images).unwrap_or_default();
        let mut by_severity = std::collections::BTreeMap::<Severity, usize>::new();
        for f in &findings {
            *by_severity.entry(f.severity).or_default() += 1;
        }
        let summary: Vec<String> = by_severity.iter().rev().map(|(s, n)| format!("{n} {s}")).collect();
        println!(
            "{}  {:<11} rev {}  {} {} @ {}",
            &row.id.to_string()[..8],
            row.state,
            row.revision,
            row.repo_url,
            row.dockerfile,
            row.branch
        );
        println!(
            "          {} finding(s) [{}] from {} image(s): {}",
            findings.len(),
            summary.join(", "),
            images.len(),
            images.iter().map(|i| i.image_ref.as_str()).collect::<Vec<_>>().join(", ")
        );
        if args.findings {
            for f in &findings {
                println!(
                    "          - {:<20} {:<10} {} {} -> {}",
                    f.id,
                    f.severity.as_str(),
                    f.package.name,
                    f.package.version,
                    if f.fixed_versions.is_empty() {
                        "(no fix)".to_owned()
                    } else {
                        f.fixed_versions.join(" | ")
                    }
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
