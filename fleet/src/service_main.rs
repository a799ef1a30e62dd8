//! The `main` every service binary shares, in the fixed order: parse
//! arguments, load and validate config (exit 2 on error, before anything is
//! bound), optionally print it, start the runtime and telemetry, run until
//! SIGTERM or SIGINT, drain, flush telemetry. A second signal exits at once.

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::config::{self, TelemetryConfig, Validate};
use crate::{shutdown, telemetry};

/// The arguments every service takes.
#[derive(Debug, clap::Parser)]
#[command(version)]
pub struct ServiceArgs {
    /// TOML config file; `PATCHPILOT_…` environment variables override it.
    #[arg(long, env = "PATCHPILOT_CONFIG")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration (passwords masked) and exit.
    #[arg(long)]
    pub dump_config: bool,
}

impl ServiceArgs {
    /// Parses the process arguments, with `name` and `about` in help and
    /// errors.
    pub fn parse_for(name: &'static str, about: &'static str) -> ServiceArgs {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let matches = ServiceArgs::command().name(name).bin_name(name).about(about).get_matches();
        match ServiceArgs::from_arg_matches(&matches) {
            Ok(args) => args,
            Err(e) => e.exit(),
        }
    }
}

/// Runs service `name`: `run(config, shutdown)` with the config `C` loaded
/// as `args` say. `telemetry_of` picks the telemetry section out of `C`.
pub fn run_service<C, F, Fut, E>(
    name: &'static str,
    args: ServiceArgs,
    telemetry_of: fn(&C) -> &TelemetryConfig,
    run: F,
) -> ExitCode
where
    C: Serialize + DeserializeOwned + Default + Validate,
    F: FnOnce(C, CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::error::Error + 'static,
{
    let config: C = match config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{name}: {e}");
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
                eprintln!("{name}: cannot render config: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{name}: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let guard = match telemetry::init(name, telemetry_of(&config)) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{name}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let code = match run(config, shutdown::on_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %crate::error_chain(&e), "{name} failed");
                ExitCode::FAILURE
            }
        };
        guard.shutdown();
        code
    })
}
