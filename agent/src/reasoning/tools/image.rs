//! `docker_build` and `scan_image`: the tree as it is now, built with the
//! guest's daemon and rescanned against the baseline.
//!
//! A build exports and scans the image in the same step (the scan needs
//! the exported layers), so `scan_image` right after `docker_build` costs
//! nothing; after an edit it builds again, because a scan of an image the
//! tree no longer describes would prove nothing.

use std::fmt::Write as _;

use patchpilot_model::{Severity, VerificationStatus as Status};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{LastBuild, ToolOutput, Toolbox, parse};
use crate::verify::{self, Verification};

pub(super) const DOCKER_BUILD: &str = "Build the task's Dockerfile from the workspace as it is now, with the \
                                       sandbox's Docker daemon. Reports success or the build's error lines.";
pub(super) const SCAN_IMAGE: &str = "Rescan the image of the current tree (building it first when the tree \
                                     changed) and compare with the original: each target finding fixed or \
                                     present, and any finding introduced.";

/// `docker_build`: no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DockerBuild {}

/// `scan_image`: no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScanImage {}

pub(super) async fn docker_build(tools: &mut Toolbox, args: &Value) -> Result<ToolOutput, String> {
    let _: DockerBuild = parse(args)?;
    let build = build_current(tools).await?;
    Ok(match &build.error {
        None => ToolOutput::ok(format!(
            "built {} ({} s)",
            tools.task.dockerfile,
            build.verification.as_ref().map(|v| v.build_time.as_secs()).unwrap_or_default()
        )),
        Some(e) => ToolOutput::error(format!("the build failed:\n{e}")),
    })
}

pub(super) async fn scan_image(tools: &mut Toolbox, args: &Value) -> Result<ToolOutput, String> {
    let _: ScanImage = parse(args)?;
    let build = match &tools.last_build {
        Some(b) if b.tree_version == tools.tree_version => b.clone(),
        _ => build_current(tools).await?,
    };
    match (&build.error, &build.verification) {
        (Some(e), _) => {
            Ok(ToolOutput::error(format!("the image does not build, so it cannot be scanned:\n{e}")))
        }
        (None, Some(v)) => Ok(ToolOutput::ok(render(v, tools.task.policy.block_at))),
        (None, None) => Err("the build left no scan".into()),
    }
}

/// Builds and scans the tree as it is now, and remembers the result.
pub(crate) async fn build_current(tools: &mut Toolbox) -> Result<LastBuild, String> {
    let text = std::fs::read_to_string(tools.workspace.root().join(&tools.task.dockerfile))
        .map_err(|e| format!("cannot read {}: {e}", tools.task.dockerfile))?;
    let context = tools.workspace.root().join(&tools.task.context);
    let tag = format!("{}:agent-{}", tools.env.image_prefix, tools.tree_version);
    tools.builder().await?;
    let (Some(builder), Some(scans)) = (tools.builder.as_ref(), tools.env.scans.as_ref()) else {
        return Err("no scanner in this run".into());
    };
    let started = std::time::Instant::now();
    let built = builder.build_and_scan(&context, &text, &tag, scans).await;
    let last = match built {
        Ok(b) => {
            builder.remove(&tag).await;
            let rows = verify::compare(&tools.task.findings, &tools.baseline, &b.scanned);
            LastBuild {
                tree_version: tools.tree_version,
                error: None,
                verification: Some(Verification {
                    image: b.tag.clone(),
                    image_id: b.id.clone(),
                    build_time: b.build_time,
                    scan_time: b.scan_time,
                    rows,
                    baseline: "the original image (as the run found it)".into(),
                }),
                findings: b.scanned.assessment.findings.clone(),
            }
        }
        Err(verify::Error::Build { excerpt }) => LastBuild {
            tree_version: tools.tree_version,
            error: Some(excerpt),
            verification: None,
            findings: Vec::new(),
        },
        Err(e) => return Err(patchpilot_model::error_chain(&e)),
    };
    tools.commands.push(patchpilot_model::CommandRun {
        command: format!("docker build -f {} (through the sandbox's daemon)", tools.task.dockerfile),
        dir: tools.task.context.clone(),
        exit_code: Some(if last.error.is_none() { 0 } else { 1 }),
        duration: started.elapsed(),
        error_excerpt: last.error.clone().unwrap_or_default(),
    });
    tools.last_build = Some(last.clone());
    Ok(last)
}

/// The verification table as the model reads it.
pub(crate) fn render(v: &Verification, block_at: Severity) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} fixed, {} still present, {} introduced (block at {block_at})",
        v.count(Status::Fixed),
        v.count(Status::Present),
        v.count(Status::Introduced)
    );
    for r in &v.rows {
        let blocking = r.status == Status::Introduced && r.severity >= block_at;
        let _ = writeln!(
            out,
            "- {} {} {} ({}): {}{}{}",
            r.finding.id,
            r.finding.package,
            r.finding.version,
            r.severity,
            r.status,
            r.version_after.as_deref().map(|v| format!(", now {v}")).unwrap_or_default(),
            if blocking { " — BLOCKS the change" } else { "" }
        );
    }
    out
}
