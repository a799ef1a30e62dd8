//! `patchpilot-provider-double`: serves a script file over OpenAI Chat
//! Completions and Anthropic Messages, for manual runs and evals.
//!
//! It prints the base URL on stdout once it listens; on SIGINT or SIGTERM
//! it prints the calls, the usage it reported and every violation found,
//! and exits 0 when there were none, 3 when there were some, and 1 when it
//! could not run at all (clap's usage errors exit 2). The file format is in
//! the crate docs of `patchpilot_provider_double`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use patchpilot_provider_double::{ProviderDouble, Scripted, file};
use tokio::signal::unix::{SignalKind, signal};

/// Serves a scripted model conversation over OpenAI Chat Completions and
/// Anthropic Messages, checking every request against the documented shape.
#[derive(Debug, Parser)]
#[command(name = "patchpilot-provider-double", version, about)]
struct Args {
    /// The script: a `.toml` or `.json` file of turns.
    #[arg(long)]
    script: PathBuf,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:8089")]
    listen: SocketAddr,
}

/// The exit status of a run whose requests departed from their wire.
const VIOLATIONS_FOUND: u8 = 3;

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("patchpilot-provider-double: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(VIOLATIONS_FOUND),
        Err(e) => {
            eprintln!("patchpilot-provider-double: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Serves until a signal; returns how many violations were found.
async fn run(args: Args) -> anyhow::Result<usize> {
    // Read before anything is bound: a bad script fails without taking the
    // port.
    let turns = file::load(&args.script).with_context(|| format!("loading {}", args.script.display()))?;
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let double = ProviderDouble::start_on(args.listen, Scripted::new(turns))
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    println!("{}", double.base_url());
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted.context("listening for SIGINT")?,
        _ = terminate.recv() => {}
    }
    let usage = double.usage();
    let violations = double.violations();
    println!("calls: {}", double.calls());
    println!("usage: {} input tokens, {} output tokens", usage.input_tokens, usage.output_tokens);
    println!("violations: {}", violations.len());
    for v in &violations {
        println!("  {v}");
    }
    Ok(violations.len())
}
