//! `patchpilot remediate`: the deterministic remediation agent on a local
//! checkout. It reads an assessment (PatchPilot, Trivy or Grype JSON),
//! plans the smallest change, builds and rescans with the Docker daemon at
//! `DOCKER_HOST` unless told not to, and prints the plan and the diff.
//!
//! Unlike the sandbox command, it writes nothing into the checkout but the
//! patch itself (and nothing at all with `--dry-run`); `--result FILE`
//! keeps the full result JSON.
//!
//! `--agent model` adds a model session where the rules stop, or repairs a
//! CI failure (`--mode repair`); [`model`] owns its flags, the key and the
//! working copy it runs in.

mod model;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use patchpilot_agent::run::{self, Options};
use patchpilot_model::{ReleaseIndex, RunPurpose, Severity, Task, TaskPolicy, TaskRegistry};
use patchpilot_planner::intake::{self, Format};

use crate::config::CliConfig;

/// Arguments of `patchpilot remediate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The checkout to fix.
    #[arg(long)]
    workspace: PathBuf,
    /// The assessment: a PatchPilot, Trivy or Grype JSON report.
    #[arg(long)]
    assessment: PathBuf,
    /// Force the report format: patchpilot, trivy, grype.
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
    /// Which image of the assessment, when it holds several.
    #[arg(long)]
    image: Option<String>,
    /// The Dockerfile, relative to the workspace.
    #[arg(long, default_value = "Dockerfile")]
    dockerfile: String,
    /// The build context, relative to the workspace.
    #[arg(long, default_value = ".")]
    context: String,
    /// Plan and edit, but do not build and rescan.
    #[arg(long)]
    no_verify: bool,
    /// Print the plan and the diff; leave the checkout as it is.
    #[arg(long)]
    dry_run: bool,
    /// Advisory DB folder (else PATCHPILOT_DB, the config, the data folder).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Refuse a change that brings a finding at or above this severity.
    #[arg(long, default_value = "high")]
    block_at: Severity,
    /// A package index for an ecosystem: `Alpine:v3.19=https://…/APKINDEX.tar.gz`
    /// or `Debian:12=https://…/Packages.gz`; repeatable.
    #[arg(long = "package-index", value_parser = parse_index)]
    package_indexes: Vec<(String, String)>,
    /// Release index of downloaded binaries (JSON).
    #[arg(long)]
    releases: Option<PathBuf>,
    /// Platform to build and scan: os/arch[/variant].
    #[arg(long)]
    platform: Option<String>,
    /// Write the result JSON here.
    #[arg(long)]
    result: Option<PathBuf>,
    #[command(flatten)]
    model: model::ModelArgs,
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
}

fn parse_index(s: &str) -> Result<(String, String), String> {
    let (ecosystem, url) =
        s.split_once('=').ok_or("expected ECOSYSTEM=URL, e.g. Alpine:v3.19=https://…/APKINDEX.tar.gz")?;
    if ecosystem.is_empty() || !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("`{s}`: expected ECOSYSTEM=URL with an http(s) URL"));
    }
    Ok((ecosystem.to_owned(), url.to_owned()))
}

/// Runs the command. Exit status: 0 when a change was made or planned, 1
/// when nothing could be fixed, 2 on bad input.
pub async fn run(config: &CliConfig, args: Args) -> anyhow::Result<ExitCode> {
    // The model flags and the key first: a missing key stops the command
    // before anything is read, run or sent.
    let model_run = match args.model.resolve(args.no_verify, config.controller.model.as_ref()) {
        Ok(m) => m,
        Err(usage) => {
            eprintln!("patchpilot: {usage}");
            return Ok(ExitCode::from(2));
        }
    };
    if model_run.is_none() {
        let ignored = args.model.ignored_with_rules();
        if !ignored.is_empty() {
            eprintln!(
                "patchpilot: {} apply to --agent model only; the rules make no model call",
                ignored.join(", ")
            );
        }
    }
    let bytes = std::fs::read(&args.assessment)
        .with_context(|| format!("cannot read {}", args.assessment.display()))?;
    let (_, assessments) = intake::parse(&bytes, args.format, None)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.assessment.display()))?;
    let assessment = match &args.image {
        Some(image) => assessments
            .iter()
            .find(|a| &a.image == image)
            .with_context(|| format!("{}: no assessment of the image {image}", args.assessment.display()))?,
        None => match assessments.as_slice() {
            [one] => one,
            [] => anyhow::bail!("{}: holds no assessment", args.assessment.display()),
            many => anyhow::bail!(
                "{}: holds {} images; choose one with --image ({})",
                args.assessment.display(),
                many.len(),
                many.iter().map(|a| a.image.as_str()).collect::<Vec<_>>().join(", ")
            ),
        },
    };
    if assessment.findings.is_empty() {
        println!(
            "{}: the assessment of {} has no findings; nothing to fix",
            args.assessment.display(),
            assessment.image
        );
        return Ok(ExitCode::from(1));
    }
    let releases: ReleaseIndex = match &args.releases {
        Some(path) => {
            let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let mut de = serde_json::Deserializer::from_slice(&text);
            serde_path_to_error::deserialize(&mut de)
                .map_err(|e| anyhow::anyhow!("{}: {}: {}", path.display(), e.path(), e.inner()))?
        }
        None => ReleaseIndex::default(),
    };
    let mut package_indexes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (ecosystem, url) in &args.package_indexes {
        package_indexes.entry(ecosystem.clone()).or_default().push(url.clone());
    }
    let section = &config.scanner;
    let db_dir = patchpilot_scanner::db::resolve_dir(args.db.as_deref(), section.db.as_deref())?;
    let task = Task {
        context: args.context.clone(),
        image: Some(assessment.image.clone()),
        policy: TaskPolicy { block_at: args.block_at },
        package_indexes,
        releases,
        registry: TaskRegistry {
            insecure: section.registry.insecure.clone(),
            timeout_secs: section.registry.timeout_secs,
        },
        db: Some(db_dir.clone()),
        platform: args.platform.clone(),
        purpose: model_run.as_ref().map(|m| m.mode).unwrap_or(RunPurpose::Remediate),
        model: model_run.as_ref().map(|m| m.task_model.clone()),
        ..Task::new(args.dockerfile.clone(), assessment.findings.clone())
    };
    let options = Options {
        verify: !args.no_verify && !args.dry_run,
        dry_run: args.dry_run,
        cache_dir: section.cache_dir().join("remediate"),
        db_dir,
        image_prefix: format!("patchpilot-verify/local-{}", std::process::id()),
        // Outside a sandbox the operator's own registry credentials apply.
        registry: Some(section.registry.clone()),
    };
    let result = match &model_run {
        None => run::remediate(&args.workspace, &task, &options).await,
        Some(m) => m.run(&args.workspace, &task, &options, args.dry_run).await?,
    };
    print!("{}", result.render_text());
    if let Some(m) = &model_run {
        print!("{}", m.render(&result.agent));
    }
    if let Some(path) = &args.result {
        let json = serde_json::to_vec_pretty(&result.report())?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    let changed = result.outcome.keeps_patch();
    Ok(if changed { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
