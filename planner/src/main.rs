//! `patchpilot-planner`: consumes assessments, publishes remediation jobs.
//!
//! Order of start-up: parse arguments, load and validate config (exit 2 on
//! error, before anything is bound), start telemetry, run until SIGTERM or
//! SIGINT, drain. A second signal exits at once.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use patchpilot_fleet::{config, shutdown, telemetry};
use patchpilot_planner::{Config, service};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// PatchPilot planner: assessments in, remediation jobs out.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// TOML config file; `PATCHPILOT_…` environment variables override it.
    #[arg(long, env = "PATCHPILOT_CONFIG")]
    config: Option<PathBuf>,
    /// Print the effective configuration (passwords masked) and exit.
    #[arg(long)]
    dump_config: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let config: Config = match config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("patchpilot-planner: {e}");
            return ExitCode::from(2);
        }
    };
    if args.dump_config {
        return match config::dump(&config) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("patchpilot-planner: cannot render config: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("patchpilot-planner: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let telemetry = match telemetry::init("patchpilot-planner", &config.telemetry) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("patchpilot-planner: {e}");
                return ExitCode::FAILURE;
            }
        };
        let result = service::run(config, shutdown::on_signal()).await;
        let code = match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %format!("{:#}", anyhow::Error::from(e)), "planner failed");
                ExitCode::FAILURE
            }
        };
        telemetry.shutdown();
        code
    })
}
