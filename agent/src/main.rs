//! `patchpilot-agent`: the built-in agent command of a sandbox run.
//!
//! Reads `.patchpilot/task.json` in the workspace, remediates, and writes
//! `.patchpilot/result.json` and `.patchpilot/retrospective.json`; the
//! working tree is the patch. It never commits, pushes or opens anything,
//! and it holds no credential: the task has none, and the registry and the
//! package mirrors are reached through the sandbox's egress.
//!
//! `--mode repair` (or a task whose purpose is repair) works on a CI
//! failure; with `task.model` set, a model session follows the rules when
//! they do not fix everything, reaching the model at `PP_MODEL_URL` with
//! the run's capability `PP_CAP_MODEL`.
//!
//! Exit status: 0 when the run finished and wrote its result, whatever the
//! outcome (the outcome is in the result); 2 when the task is unreadable;
//! 1 when the result could not be written.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use patchpilot_agent::run::Options;
use patchpilot_llm::{ClientConfig, ModelClient, RetryPolicy};
use patchpilot_model::context::CONTEXT_DIR;
use patchpilot_model::{RunPurpose, Task};

/// Remediate the workspace's task.
#[derive(Debug, Parser)]
#[command(name = "patchpilot-agent", version)]
struct Args {
    /// The workspace (a checkout with its `.patchpilot/` folder).
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// Plan and edit, but do not build and rescan.
    #[arg(long)]
    no_verify: bool,
    /// Scratch folder for image blobs and builds (outside the workspace).
    #[arg(long, env = "PATCHPILOT_AGENT_CACHE")]
    cache_dir: Option<PathBuf>,
    /// `remediate` or `repair`; the task's purpose when absent.
    #[arg(long)]
    mode: Option<RunPurpose>,
}

/// The run's endpoint when the task names none: the broker's address.
const MODEL_URL_VAR: &str = "PP_MODEL_URL";
/// The run's per-run capability for the model connection.
const MODEL_CAPABILITY_VAR: &str = "PP_CAP_MODEL";

/// The model client of `task`, if it names a model.
fn model_client(task: &Task) -> Result<Option<ModelClient>, String> {
    let Some(m) = &task.model else { return Ok(None) };
    let base_url = m
        .base_url
        .clone()
        .or_else(|| std::env::var(MODEL_URL_VAR).ok())
        .ok_or_else(|| format!("task.model.base_url: absent, and {MODEL_URL_VAR} is not set"))?;
    let config = ClientConfig {
        wire: m.provider,
        base_url,
        model: m.model.clone(),
        credential: std::env::var(MODEL_CAPABILITY_VAR).ok().filter(|c| !c.is_empty()),
        timeout: std::time::Duration::from_secs(300),
        retry: RetryPolicy::default(),
    };
    ModelClient::new(config)
        .map(Some)
        .map_err(|e| format!("task.model: {}", patchpilot_model::error_chain(&e)))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("patchpilot-agent: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        patchpilot_agent::install_crypto_provider();
        // Logs go to stderr, which the guest keeps as the run's transcript;
        // the agent exports no telemetry of its own (it has no route out but
        // the run's egress).
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
        run(args).await
    })
}

async fn run(args: Args) -> ExitCode {
    let task = match Task::load(&args.workspace) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("patchpilot-agent: {e}");
            return ExitCode::from(2);
        }
    };
    let db_dir = match patchpilot_scanner::db::resolve_dir(None, None) {
        Ok(d) => d,
        Err(e) if task.db.is_some() => {
            tracing::debug!(error = %e, "no default DB folder; the task names one");
            PathBuf::new()
        }
        Err(e) => {
            eprintln!("patchpilot-agent: advisory DB: {e}");
            return ExitCode::from(2);
        }
    };
    let cache_dir = args.cache_dir.unwrap_or_else(|| std::env::temp_dir().join("patchpilot-agent"));
    let run_name = if task.run_id.is_empty() {
        format!("{:x}", std::process::id())
    } else {
        task.run_id.to_ascii_lowercase()
    };
    let options = Options {
        verify: !args.no_verify,
        dry_run: false,
        cache_dir,
        db_dir,
        // Unique per process too: two runs sharing a daemon (tests, a
        // retried run) must never export each other's image.
        image_prefix: format!("patchpilot-verify/{}-{:x}", sanitize(&run_name), std::process::id()),
        registry: None,
    };
    let model = match model_client(&task) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("patchpilot-agent: {e}");
            return ExitCode::from(2);
        }
    };
    // The capability is the agent's alone: the `run` tool takes `PP_CAP_*`
    // out of every child's environment (edition 2024 makes removing it from
    // our own environment unsafe, which the crate forbids).
    let mode = args.mode.unwrap_or(task.purpose);
    let (result, retro) =
        patchpilot_agent::reasoning::drive(&args.workspace, &task, mode, &options, model.as_ref()).await;
    print!("{}", result.render_text());
    match result.write(&args.workspace.join(CONTEXT_DIR), &retro) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("patchpilot-agent: cannot write the result: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A Docker repository name component from a run id.
fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '-' })
        .collect();
    let s: String = s.trim_matches(|c: char| !c.is_ascii_alphanumeric()).chars().take(64).collect();
    if s.is_empty() { "run".into() } else { s }
}
