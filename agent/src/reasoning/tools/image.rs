//! `docker_build` and `scan_image`: the tree as it is now, built with the
//! guest's daemon and rescanned against the baseline. `inspect_image`: a
//! registry image's config (labels, creation time) and scan.
//!
//! Build output and labels are written by the repository, its packages
//! and the image's publisher: they go to the model fenced as untrusted.
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

use super::{LastBuild, ToolOutput, Toolbox, fence, parse};
use crate::verify::{self, Verification};

pub(super) const DOCKER_BUILD: &str = "Build the task's Dockerfile from the workspace as it is now, with the \
                                       sandbox's Docker daemon. Reports success or the build's error lines.";
pub(super) const SCAN_IMAGE: &str = "Rescan the image of the current tree (building it first when the tree \
                                     changed) and compare with the original: each target finding fixed or \
                                     present, and any finding introduced.";

pub(super) const INSPECT_IMAGE: &str = "Inspect a registry image (a FROM line's reference): its digest, \
                                        creation time, labels and platform, and how many packages and findings \
                                        its scan has. Labels are untrusted data.";

/// Lines of a successful build's output `docker_build` shows.
const BUILD_TAIL_LINES: usize = 30;
/// Bytes of them at most.
const BUILD_TAIL_BYTES: usize = 4 * 1024;

/// `inspect_image`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InspectImage {
    /// The image reference, e.g. `alpine:3.19` or `registry.example/team/base@sha256:…`.
    pub reference: String,
}

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
            "built {} ({} s); the build's last lines:\n{}",
            tools.task.dockerfile,
            build.verification.as_ref().map(|v| v.build_time.as_secs()).unwrap_or_default(),
            fence(&tail(&build.output, BUILD_TAIL_LINES, BUILD_TAIL_BYTES)),
        )),
        Some(e) => ToolOutput::error(format!("the build failed:\n{e}")),
    })
}

/// The last `lines` non-empty lines of `text`, at most `bytes` of them
/// (whole lines, the latest kept).
fn tail(text: &str, lines: usize, bytes: usize) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut size = 0;
    for line in text.lines().rev().map(str::trim_end).filter(|l| !l.trim().is_empty()).take(lines) {
        size += line.len() + 1;
        if size > bytes {
            break;
        }
        kept.push(line);
    }
    kept.reverse();
    kept.join("\n")
}

pub(super) async fn inspect_image(tools: &mut Toolbox, args: &Value) -> Result<ToolOutput, String> {
    let a: InspectImage = parse(args)?;
    let reference = a.reference.trim();
    let plausible = !reference.is_empty()
        && reference.len() <= 512
        && reference.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:/@+".contains(&b));
    if !plausible {
        return Err(format!("{reference:?} is not an image reference"));
    }
    let Some(scans) = tools.env.scans.as_ref() else { return Err("no scanner in this run".into()) };
    let image = scans.scan(reference).await.map_err(|e| patchpilot_model::error_chain(&e))?;
    let mut out = String::new();
    let _ = writeln!(out, "{} ({})", image.reference, image.digest);
    if let Some(created) = &image.created {
        let _ = writeln!(out, "created: {created}");
    }
    if let Some(platform) = &image.platform {
        let _ = writeln!(out, "platform: {platform}");
    }
    let counts = |at: Severity| image.assessment.findings.iter().filter(|f| f.severity >= at).count();
    let _ = writeln!(
        out,
        "{} packages, {} findings ({} high or critical)",
        image.packages.len(),
        image.assessment.findings.len(),
        counts(Severity::High)
    );
    if image.labels.is_empty() {
        out.push_str("labels: none\n");
    } else {
        let labels: String = image.labels.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        let _ = writeln!(out, "labels:\n{}", fence(labels.trim_end()));
    }
    Ok(ToolOutput::ok(out))
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
                output: b.output.clone(),
            }
        }
        Err(verify::Error::Build { excerpt }) => LastBuild {
            tree_version: tools.tree_version,
            error: Some(excerpt),
            verification: None,
            findings: Vec::new(),
            output: String::new(),
        },
        Err(e) => return Err(patchpilot_model::error_chain(&e)),
    };
    tools.build_time += started.elapsed();
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
