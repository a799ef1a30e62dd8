//! `patchpilot submit`: reports → `ASSESSMENTS`.
//!
//! Every file is parsed and validated completely before anything is
//! published, and a bad file publishes nothing. Each assessment is published
//! with its content id as `Nats-Msg-Id`, so submitting the same report twice
//! stores it once (and the planner ignores it beyond the duplicate window).
//! One trace covers the whole submission; its id is printed so the work can
//! be followed through the fleet.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use patchpilot_fleet::bus::{Outgoing, topics, trace};
use patchpilot_model::{Assessment, SubmittedAssessment};
use patchpilot_planner::intake::{self, Format, ImageOverride, native};
use tracing::Instrument as _;

use crate::config::CliConfig;

/// Arguments of `patchpilot submit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Report files: Trivy JSON, Grype JSON or PatchPilot assessments.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Force the format instead of detecting it: patchpilot, trivy, grype.
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
    /// Attach reports that scan no image (filesystem, repository, SBOM) to
    /// this image: IMAGE@DIGEST.
    #[arg(long, value_parser = parse_image)]
    image: Option<ImageOverride>,
    /// Print the normalised assessments as JSON and publish nothing.
    #[arg(long)]
    dry_run: bool,
    /// Source name in the subject (`pp.assessment.<source>`).
    #[arg(long, default_value = "cli")]
    source: String,
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
}

fn parse_image(s: &str) -> Result<ImageOverride, String> {
    s.parse()
}

/// Reads and validates every file; returns the good ones and the number of
/// bad ones (already reported on stderr).
fn read_all(args: &Args) -> (Vec<(PathBuf, Vec<Assessment>)>, usize) {
    let mut good = Vec::new();
    let mut bad = 0;
    for file in &args.files {
        let bytes = match std::fs::read(file) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{}: cannot read: {e}", file.display());
                bad += 1;
                continue;
            }
        };
        match intake::parse(&bytes, args.format, args.image.as_ref()) {
            Ok((_, assessments)) => good.push((file.clone(), assessments)),
            Err(e) => {
                eprintln!("{}: {e}", file.display());
                bad += 1;
            }
        }
    }
    (good, bad)
}

/// Runs the command.
pub async fn run(config: &CliConfig, args: Args) -> anyhow::Result<ExitCode> {
    if args.source.is_empty()
        || !args.source.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        anyhow::bail!("--source `{}` must be letters, digits, '-' or '_'", args.source);
    }
    let (good, bad) = read_all(&args);
    let failed = if bad > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS };

    if args.dry_run {
        let all: Vec<Assessment> = good.into_iter().flat_map(|(_, a)| a).collect();
        println!("{}", serde_json::to_string_pretty(&native::Document::new(all))?);
        return Ok(failed);
    }
    if good.is_empty() {
        return Ok(failed);
    }

    let bus = crate::connect_bus(config).await?;
    bus.ensure_topology().await.context("cannot create the streams")?;
    let span = tracing::info_span!("patchpilot.submit", otel.kind = "producer", files = good.len());
    let trace_id = {
        let _entered = span.enter();
        trace::current_trace_id()
    };
    let outcome = async {
        let cx = trace::current();
        let mut publish_failed = false;
        for (file, assessments) in &good {
            let submitted: Vec<SubmittedAssessment> =
                assessments.iter().map(|a| SubmittedAssessment::now(a.clone())).collect();
            let messages = submitted
                .iter()
                .map(|m| Outgoing::new(&topics::ASSESSMENTS, Some(&args.source), &m.id, m, &cx))
                .collect();
            let acks = bus.publish_many(messages).await;
            let (mut stored, mut duplicates, mut findings) = (0, 0, 0);
            for (m, acked) in submitted.iter().zip(acks) {
                match acked {
                    Ok(ack) if ack.duplicate => duplicates += 1,
                    Ok(_) => {
                        stored += 1;
                        findings += m.assessment.findings.len();
                    }
                    Err(e) => {
                        eprintln!(
                            "{}: publishing {} failed: {}",
                            file.display(),
                            m.assessment.image,
                            patchpilot_model::error_chain(&e)
                        );
                        publish_failed = true;
                    }
                }
            }
            eprintln!(
                "{}: published {stored} assessment(s) with {findings} finding(s){}",
                file.display(),
                if duplicates > 0 { format!(", {duplicates} already queued") } else { String::new() }
            );
        }
        publish_failed
    }
    .instrument(span)
    .await;
    if let Some(id) = trace_id {
        eprintln!("trace_id={id}");
    }
    bus.drain().await;
    if outcome {
        eprintln!("some assessments were not published; submitting again is safe");
        return Ok(ExitCode::from(1));
    }
    Ok(failed)
}
