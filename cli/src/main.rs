//! `patchpilot`: the operator's and security engineer's command line.
//!
//! - `submit FILE...`: read Trivy, Grype or PatchPilot assessment reports and
//!   publish them to `ASSESSMENTS` (a file goes all or nothing);
//! - `status`: streams, consumers, remediations by state, unmapped images,
//!   dead letters;
//! - `remediations`: the planner's remediation work;
//! - `runs list` / `runs show RUN [--transcript]`: the controller's sandbox
//!   runs, one run with its agent record, or its model session;
//! - `dlq list` / `dlq replay SEQ`: inspect and replay dead letters;
//! - `scan IMAGE | --archive | --oci-layout | --rootfs`: scan one image;
//! - `db import | status | query`: the local OSV advisory database;
//! - `remediate --workspace DIR --assessment FILE`: plan, build, rescan and
//!   print the diff that fixes an assessment, on a local checkout; with
//!   `--agent model`, a model session where the rules stop, or a repair;
//! - `sandbox image build` / `sandbox run --workspace DIR -- CMD`: the
//!   microVM sandbox, for debugging a policy or a guest image;
//! - `forge init` / `forge prs`: the controller's single-machine forge;
//! - `eval [--cases DIR] [--provider NAME …] [--json]`: the evals'
//!   injection suite through the whole system on this machine; it runs
//!   `patchpilot-eval`, the runner built beside this binary.
//!
//! Connection settings come from `--config FILE` and `PATCHPILOT_…`
//! variables, as for the services (see `scripts/services env`).

mod broker;
mod config;
mod db;
mod dlq;
mod events;
mod forge;
mod progress;
mod remediate;
mod remediations;
mod retros;
mod runs;
mod sandbox;
mod scan;
mod status;
mod submit;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use patchpilot_fleet::telemetry;

use crate::config::CliConfig;

/// PatchPilot: fix the CVEs that ship inside your container images.
#[derive(Debug, Parser)]
#[command(name = "patchpilot", version)]
struct Cli {
    /// TOML config file (the services' file works too).
    #[arg(long, global = true, env = "PATCHPILOT_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Publish scanner reports as assessments.
    Submit(submit::Args),
    /// Show queues, remediations, unmapped images and dead letters.
    Status(status::Args),
    /// List remediations.
    Remediations(remediations::Args),
    /// The controller's sandbox runs: list them, show one or its model session.
    #[command(subcommand)]
    Runs(runs::Command),
    /// Inspect and replay dead letters.
    #[command(subcommand)]
    Dlq(dlq::Command),
    /// Lifecycle events: remediation state changes, finished runs.
    Events(events::Args),
    /// The fleet's retrospectives condensed: clusters, trends, hot spots; `retros import FILE`.
    Retros(retros::Args),
    /// Scan an image for vulnerabilities.
    Scan(scan::Args),
    /// The local OSV advisory database.
    #[command(subcommand)]
    Db(db::Command),
    /// The capability broker: create the local PKI.
    #[command(subcommand)]
    Broker(broker::Command),
    /// Fix a checkout's Dockerfile for an assessment: plan, build, rescan, diff.
    Remediate(remediate::Args),
    /// The microVM sandbox: build its image, run a command in it.
    #[command(subcommand)]
    Sandbox(sandbox::Command),
    /// The controller's local forge: create repositories, list pull requests.
    #[command(subcommand)]
    Forge(forge::Command),
    /// The evals' injection suite through the whole system on this machine; `eval --help` for its options.
    #[command(disable_help_flag = true)]
    Eval {
        /// `patchpilot-eval`'s arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to standard output.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to standard output: `patchpilot man > patchpilot.1`.
    Man,
}

/// `patchpilot eval ARGS`: replaces this process with `patchpilot-eval
/// ARGS`, found beside this binary (the runner links the whole local
/// stack's harness, which the operator's CLI does not). Its exit status is
/// the runner's: 0 held, 1 a row did not, 2 it could not run.
fn eval(args: &[String]) -> ExitCode {
    use std::os::unix::process::CommandExt as _;
    let runner = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join("patchpilot-eval")));
    let Some(runner) = runner.filter(|r| r.is_file()) else {
        eprintln!(
            "patchpilot: eval needs patchpilot-eval beside this binary; build it with \
             `cargo build -p patchpilot-e2e --bin patchpilot-eval` (scripts/test and cargo build --workspace --bins do)"
        );
        return ExitCode::from(2);
    };
    let error = std::process::Command::new(&runner).args(args).exec();
    eprintln!("patchpilot: cannot run {}: {error}", runner.display());
    ExitCode::from(2)
}

/// Completions for `shell`, written to `out`.
fn completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    use clap::CommandFactory as _;
    clap_complete::generate(shell, &mut Cli::command(), "patchpilot", out);
}

/// The man page, written to `out`.
fn man_page(out: &mut dyn std::io::Write) -> std::io::Result<()> {
    use clap::CommandFactory as _;
    clap_mangen::Man::new(Cli::command()).render(out)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Neither needs the configuration or a runtime.
    match &cli.command {
        Command::Completions { shell } => {
            completions(*shell, &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        Command::Eval { args } => return eval(args),
        Command::Man => {
            return match man_page(&mut std::io::stdout()) {
                // `patchpilot man | head` is not a failure.
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("patchpilot: writing the man page: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        _ => {}
    }
    let config: CliConfig = match patchpilot_fleet::config::load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("patchpilot: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("patchpilot: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        telemetry::install_crypto_provider();
        let mut telemetry_config = config.fleet.telemetry.clone();
        // The CLI talks to people: only warnings unless RUST_LOG says more.
        telemetry_config.log_filter = "warn".into();
        // `scan --quiet` leaves standard error to errors, the libraries'
        // warnings included.
        if matches!(&cli.command, Command::Scan(args) if args.quiet()) {
            telemetry_config.log_filter = "error".into();
        }
        let guard = match telemetry::init("patchpilot-cli", &telemetry_config) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("patchpilot: {e}");
                return ExitCode::FAILURE;
            }
        };
        let result = match cli.command {
            Command::Submit(args) => submit::run(&config, args).await,
            Command::Status(args) => status::run(&config, args).await,
            Command::Remediations(args) => remediations::run(&config, args).await,
            Command::Runs(command) => runs::run(&config, command).await,
            Command::Broker(command) => broker::run(&config, command),
            Command::Dlq(command) => dlq::run(&config, command).await,
            Command::Events(args) => events::run(&config, args).await,
            Command::Retros(args) => retros::run(&config, args).await,
            Command::Scan(args) => scan::run(&config, args).await,
            Command::Db(command) => db::run(&config, command).await,
            Command::Remediate(args) => remediate::run(&config, args).await,
            Command::Sandbox(command) => sandbox::run(&config, command).await,
            Command::Forge(command) => forge::run(&config, command).await,
            Command::Completions { .. } | Command::Man | Command::Eval { .. } => Ok(ExitCode::SUCCESS),
        };
        guard.shutdown();
        match result {
            Ok(code) => code,
            Err(e) => {
                eprintln!("patchpilot: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}

/// Connects to the bus with the CLI's settings.
pub(crate) async fn connect_bus(config: &CliConfig) -> anyhow::Result<patchpilot_fleet::Bus> {
    let bus = patchpilot_fleet::Bus::connect(&config.fleet.nats, config.fleet.bus.clone(), "patchpilot-cli")
        .await?;
    Ok(bus)
}

/// Opens the database without migrating: the CLI never changes the schema.
pub(crate) async fn connect_db(config: &CliConfig) -> anyhow::Result<sqlx::PgPool> {
    let mut database = config.fleet.database.clone();
    database.migrate = false;
    database.max_connections = database.max_connections.min(4);
    Ok(patchpilot_fleet::store::connect(&database).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_and_the_man_page_cover_every_command() {
        let mut bash = Vec::new();
        completions(clap_complete::Shell::Bash, &mut bash);
        let bash = String::from_utf8_lossy(&bash);
        for command in ["submit", "status", "events", "retros", "scan", "db", "remediate", "sandbox"] {
            assert!(bash.contains(command), "{command} missing from the bash completions");
        }
        assert!(bash.contains("--ignore-unfixed"), "scan's flags are completed");
        let mut man = Vec::new();
        man_page(&mut man).expect("render");
        let man = String::from_utf8_lossy(&man);
        assert!(man.starts_with(".ie") || man.contains(".TH patchpilot"), "{}", &man[..man.len().min(200)]);
        assert!(man.contains("retros"), "subcommands listed");
    }
}
