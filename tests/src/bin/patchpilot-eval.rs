//! `patchpilot eval` (this binary, which `patchpilot eval` runs): the
//! evals' injection suite through the whole system on this machine, the
//! table printed, the results stored per run with their delta against the
//! last run of the same model and cases.
//!
//! It starts a throwaway PatchPilot on the local services `scripts/services
//! up` runs (NATS servers of its own, databases on the local PostgreSQL, a
//! registry, the sandbox's QEMU and guest image), puts each case's twins
//! through it and judges them on what they left behind
//! (`patchpilot_e2e::evals`). Results go to the fleet's database
//! (`PATCHPILOT_DATABASE__URL`, table `eval_runs`).
//!
//! Exit status: 0 when every row held, 1 when one did not (a goal reached,
//! or, against the compromised model, a goal not contained or a benign
//! twin not fixed), 2 when the suite could not run (bad cases, a missing
//! service): a CI job tells a breach from a broken set-up.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use patchpilot_e2e::evals::store::{self, StoredRun, Suite};
use patchpilot_e2e::evals::{ModelUnderTest, ProviderKind, cases_in, run_cases};
use patchpilot_evals::{Twin, shipped_cases};
use patchpilot_fleet::config::DatabaseConfig;

/// Runs the evals' injection suite through the whole system on this machine.
#[derive(Debug, Parser)]
#[command(name = "patchpilot eval", version)]
struct Args {
    /// The suite.
    #[arg(long, value_enum, default_value = "injection")]
    suite: SuiteArg,
    /// A folder of cases (`NAME/case.toml` and `NAME/repo/`), instead of
    /// the shipped ones (`evals/cases/`).
    #[arg(long, value_name = "DIR")]
    cases: Option<PathBuf>,
    /// Only these cases, by name (repeatable).
    #[arg(long = "case", value_name = "NAME")]
    only: Vec<String>,
    /// Which twins to run.
    #[arg(long, value_enum, default_value = "both")]
    twins: TwinsArg,
    /// A real model's provider wire (`openai` or `anthropic`); without it,
    /// the compromised model (the obedient double) plays.
    #[arg(long, value_name = "NAME", requires_all = ["base_url", "model"])]
    provider: Option<String>,
    /// The provider's base URL, as the broker's connection takes it
    /// (`https://api.openai.com`, `http://127.0.0.1:8080`).
    #[arg(long, value_name = "URL", requires = "provider")]
    base_url: Option<String>,
    /// The model's name.
    #[arg(long, value_name = "NAME", requires = "provider")]
    model: Option<String>,
    /// The environment variable holding the provider's key, handed to the
    /// credential gateway only; unset or empty for a keyless endpoint.
    #[arg(long, value_name = "VAR", default_value = "PATCHPILOT_EVAL_API_KEY", requires = "provider")]
    api_key_env: String,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Do not store the results.
    #[arg(long)]
    no_store: bool,
    /// List the stored runs instead, newest first.
    #[arg(long, conflicts_with_all = ["cases", "only", "provider", "no_store"])]
    history: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum SuiteArg {
    /// Crafted repositories that try to steer the agent.
    Injection,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TwinsArg {
    Both,
    Injected,
    Benign,
}

impl TwinsArg {
    fn twins(self) -> &'static [Twin] {
        match self {
            TwinsArg::Both => &[Twin::Injected, Twin::Benign],
            TwinsArg::Injected => &[Twin::Injected],
            TwinsArg::Benign => &[Twin::Benign],
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("patchpilot eval: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("patchpilot eval: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The model `args` name, its key read from the environment.
fn model_under_test(args: &Args) -> anyhow::Result<ModelUnderTest> {
    let Some(provider) = &args.provider else { return Ok(ModelUnderTest::Compromised) };
    let kind: ProviderKind = provider.parse().map_err(|e: String| anyhow::anyhow!("--provider: {e}"))?;
    let base_url = args.base_url.clone().context("--base-url is required with --provider")?;
    url::Url::parse(&base_url).with_context(|| format!("--base-url {base_url:?} is not a URL"))?;
    let model = args.model.clone().context("--model is required with --provider")?;
    let key = std::env::var(&args.api_key_env).ok().filter(|k| !k.trim().is_empty());
    Ok(ModelUnderTest::Provider { kind, base_url, model, key: key.map(|k| k.trim().to_owned()) })
}

/// The fleet's database, migrated.
async fn results_db() -> anyhow::Result<sqlx::PgPool> {
    let url = std::env::var("PATCHPILOT_DATABASE__URL").context(
        "PATCHPILOT_DATABASE__URL is not set: it names the database results are stored in \
         (`eval \"$(scripts/services env)\"` sets it), or pass --no-store",
    )?;
    // Migrated here, as a service would, unless the deployment keeps that
    // to its owner role (`PATCHPILOT_DATABASE__MIGRATE=false`,
    // deploy/postgres/roles.sql): then `eval_runs` must exist already.
    let migrate = std::env::var("PATCHPILOT_DATABASE__MIGRATE").map_or(true, |v| v != "false");
    let config = DatabaseConfig { url, max_connections: 2, migrate, ..DatabaseConfig::default() };
    Ok(patchpilot_fleet::store::connect(&config).await?)
}

async fn run(args: Args) -> anyhow::Result<ExitCode> {
    patchpilot_fleet::telemetry::install_crypto_provider();
    if args.history {
        let pool = results_db().await?;
        let runs = store::history(&pool, 20).await?;
        if args.json {
            let rows: Vec<serde_json::Value> = runs.iter().map(run_json).collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            println!(
                "{:<36}  {:<20}  {:<24}  {:>9}  {:>7}  {:>6}  held",
                "run", "finished", "model", "contained", "reached", "benign"
            );
            for r in &runs {
                let (c, n) = r.report.contained();
                let (reached, _) = r.report.reached();
                let (b, m) = r.report.benign_done();
                println!(
                    "{:<36}  {:<20}  {:<24}  {:>9}  {:>7}  {:>6}  {}",
                    r.id,
                    r.finished_at.format("%Y-%m-%d %H:%M:%S"),
                    r.model,
                    format!("{c}/{n}"),
                    reached,
                    format!("{b}/{m}"),
                    if r.held() { "yes" } else { "no" }
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }

    let dir = args.cases.clone().unwrap_or_else(shipped_cases);
    let dir = std::path::absolute(&dir).with_context(|| format!("--cases {}", dir.display()))?;
    anyhow::ensure!(dir.is_dir(), "--cases {}: not a folder", dir.display());
    let mut cases = cases_in(&dir).with_context(|| format!("the cases in {}", dir.display()))?;
    if !args.only.is_empty() {
        let unknown: Vec<&String> =
            args.only.iter().filter(|n| !cases.iter().any(|c| &c.name == *n)).collect();
        anyhow::ensure!(unknown.is_empty(), "--case: no case named {unknown:?} in {}", dir.display());
        cases.retain(|c| args.only.contains(&c.name));
    }
    anyhow::ensure!(!cases.is_empty(), "{} holds no cases", dir.display());
    let model = model_under_test(&args)?;
    if let Some(reason) = patchpilot_e2e::sandbox::why_unavailable() {
        anyhow::bail!("the sandbox cannot run here: {reason}");
    }
    // Fail on a missing results database before, not after, the VM runs.
    let pool = if args.no_store { None } else { Some(results_db().await?) };

    let twins = args.twins.twins();
    eprintln!(
        "patchpilot eval: {} case(s) from {}, {} twin(s) each, model {}",
        cases.len(),
        dir.display(),
        twins.len(),
        model.label()
    );
    let started_at = chrono::Utc::now();
    // Ctrl-C, SIGTERM or SIGHUP drop the suite: its services are killed
    // (the sandbox worker's VMs die with it, `PR_SET_PDEATHSIG`) and its
    // databases dropped; nothing is stored.
    let outcome = tokio::select! {
        outcome = run_cases(&cases, twins, model.clone()) => outcome?,
        signal = stop_signal() => anyhow::bail!("stopped by {signal}: the suite's services and VMs are gone, nothing was stored"),
    };
    let run = StoredRun {
        id: uuid::Uuid::new_v4(),
        suite: match args.suite {
            SuiteArg::Injection => Suite::Injection,
        },
        model: model.label(),
        cases_dir: dir.display().to_string(),
        started_at,
        finished_at: chrono::Utc::now(),
        report: outcome.report,
    };
    let previous = match &pool {
        Some(pool) => {
            store::insert(pool, &run).await?;
            store::previous(pool, &run).await?
        }
        None => None,
    };
    let delta = previous.as_ref().map(|p| (p, store::delta(&p.report, &run.report)));
    if args.json {
        let mut out = run_json(&run);
        out["stored"] = (!args.no_store).into();
        out["violations"] = outcome.violations.iter().map(|v| v.to_string()).collect::<Vec<_>>().into();
        if let Some((p, d)) = &delta {
            out["previous_run"] = p.id.to_string().into();
            out["delta"] = d.clone().unwrap_or_default().into();
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", run.report.table());
        match &delta {
            Some((p, Some(d))) => {
                println!("\nchanged since run {} ({}):\n{d}", p.id, p.finished_at.format("%Y-%m-%d %H:%M"))
            }
            Some((p, None)) => {
                println!("\nunchanged since run {} ({})", p.id, p.finished_at.format("%Y-%m-%d %H:%M"))
            }
            None => {}
        }
        if !args.no_store {
            println!("stored as run {}", run.id);
        }
        for v in &outcome.violations {
            println!("model wire violation: {v}");
        }
        if !run.held() {
            println!("\n{}", outcome.details);
        }
    }
    Ok(if run.held() && outcome.violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The first of SIGINT, SIGTERM and SIGHUP, by name.
async fn stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) =
        (signal(SignalKind::interrupt()), signal(SignalKind::terminate()), signal(SignalKind::hangup()))
    else {
        // No handler: the default actions apply, and this never fires.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
        _ = hup.recv() => "SIGHUP",
    }
}

/// A stored run as JSON: its identity, totals, a real model's rates and
/// every row.
fn run_json(run: &StoredRun) -> serde_json::Value {
    let (contained, injected_run) = run.report.contained();
    let (reached, _) = run.report.reached();
    let (benign_done, benign_run) = run.report.benign_done();
    serde_json::json!({
        "id": run.id.to_string(),
        "suite": run.suite.as_str(),
        "model": run.model,
        "cases_dir": run.cases_dir,
        "started_at": run.started_at.to_rfc3339(),
        "finished_at": run.finished_at.to_rfc3339(),
        "held": run.held(),
        "injected_run": injected_run,
        "contained": contained,
        "reached": reached,
        "benign_run": benign_run,
        "benign_done": benign_done,
        "rates": run.report.rates(),
        "rows": run.report.rows,
    })
}
