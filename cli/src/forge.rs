//! `patchpilot forge …`: the single-machine forge the controller writes to
//! when `controller.forge = "local"`.
//!
//! - `init OWNER/NAME --from DIR [--check NAME=COMMAND]…`: a bare
//!   repository seeded from a folder, with CI checks (each run as
//!   `sh -c COMMAND` in a checkout of a pull request's head);
//! - `prs [OWNER/NAME]`: its pull requests with labels, checks on the head
//!   commit and comments, what a reviewer would look at.
//!
//! The repositories live under `controller.local.root`; pull requests,
//! checks and comments in Postgres.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use patchpilot_forge::{CheckState, Forge, Repo};
use patchpilot_forge_local::LocalForge;

use crate::config::CliConfig;

/// `patchpilot forge …`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Create a repository on the local forge, seeded from a folder.
    Init(InitArgs),
    /// List pull requests with their checks and comments.
    Prs(PrsArgs),
}

/// Arguments of `forge init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// `owner/name`.
    repo: String,
    /// The folder whose files make the first commit.
    #[arg(long)]
    from: PathBuf,
    /// The default branch.
    #[arg(long, default_value = "main")]
    branch: String,
    /// A CI check, `NAME=COMMAND`; repeatable.
    #[arg(long = "check")]
    checks: Vec<String>,
}

/// Arguments of `forge prs`.
#[derive(Debug, clap::Args)]
pub struct PrsArgs {
    /// Only this repository (`owner/name`).
    repo: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn parse_repo(text: &str) -> anyhow::Result<Repo> {
    Repo::from_url(&format!("local://{text}"))
        .with_context(|| format!("repository {text:?}: expected owner/name"))
}

/// Runs the command.
pub async fn run(config: &CliConfig, command: Command) -> anyhow::Result<ExitCode> {
    let pool = crate::connect_db(config).await?;
    let forge = LocalForge::new(&config.controller.local.root, pool.clone());
    match command {
        Command::Init(args) => {
            let repo = parse_repo(&args.repo)?;
            anyhow::ensure!(args.from.is_dir(), "--from {}: not a folder", args.from.display());
            forge.create_repository(&repo, &args.branch, Some(&args.from)).await?;
            for check in &args.checks {
                let (name, command) = check
                    .split_once('=')
                    .filter(|(n, c)| !n.is_empty() && !c.is_empty())
                    .with_context(|| format!("--check {check:?}: expected NAME=COMMAND"))?;
                forge.set_check(&repo, name, vec!["sh".into(), "-c".into(), command.into()]).await?;
            }
            println!("{repo}: {} ({} check(s))", forge.repository_path(&repo)?.display(), args.checks.len());
        }
        Command::Prs(args) => {
            let rows: Vec<(String, String, i64)> = sqlx::query_as(
                "SELECT owner, repo, number FROM local_forge_pull_requests \
                 WHERE $1::text IS NULL OR owner || '/' || repo = $1 ORDER BY owner, repo, number",
            )
            .bind(args.repo.as_deref())
            .fetch_all(&pool)
            .await?;
            let mut out = Vec::new();
            for (owner, name, number) in rows {
                let repo = Repo { owner, name };
                let pr = forge.pull_request(&repo, number.max(0) as u64).await?;
                let checks = forge.checks(&repo, &pr.head_sha).await.unwrap_or_default();
                let comments = forge.comments(&repo, pr.number).await.unwrap_or_default();
                out.push(serde_json::json!({
                    "repository": repo.to_string(),
                    "number": pr.number,
                    "url": pr.url,
                    "state": format!("{:?}", pr.state).to_ascii_lowercase(),
                    "title": pr.title,
                    "head": pr.head,
                    "head_sha": pr.head_sha,
                    "labels": pr.labels,
                    "checks": checks.iter().map(|c| serde_json::json!({
                        "name": c.name,
                        "state": match c.state {
                            CheckState::Pending => "pending",
                            CheckState::Passed => "passed",
                            _ => "failed",
                        },
                        "conclusion": c.conclusion,
                    })).collect::<Vec<_>>(),
                    "comments": comments.iter().map(|c| c.body.clone()).collect::<Vec<_>>(),
                    "body": pr.body,
                }));
            }
            if args.json {
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(ExitCode::SUCCESS);
            }
            if out.is_empty() {
                println!("(no pull requests)");
            }
            for pr in &out {
                println!("{} #{} [{}] {}", pr["repository"], pr["number"], pr["state"], pr["title"]);
                println!("  branch  {} at {}", pr["head"], pr["head_sha"]);
                println!("  labels  {}", pr["labels"]);
                for c in pr["checks"].as_array().into_iter().flatten() {
                    println!("  check   {} {} ({})", c["name"], c["state"], c["conclusion"]);
                }
                for c in pr["comments"].as_array().into_iter().flatten() {
                    let first = c.as_str().unwrap_or("").lines().next().unwrap_or("");
                    println!("  comment {first}");
                }
                println!();
                for line in pr["body"].as_str().unwrap_or("").lines() {
                    println!("  | {line}");
                }
                println!();
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
