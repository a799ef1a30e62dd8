//! The deterministic remediators as tools: the model may ask for the same
//! changes the fast path makes, on the tree as it is now.

use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{ToolOutput, Toolbox, parse};
use crate::run::{Remediators, apply_rules};

pub(super) const BUMP_BASE_IMAGE: &str = "Move each FROM to the closest tag of the same image whose scan fixes \
                                          the targets (the deterministic remediator).";
pub(super) const DROP_OBSOLETE_PINS: &str = "Raise or drop OS package pins (apk/apt version pins) so the \
                                             targets' fixed versions install (the deterministic remediator).";
pub(super) const BUMP_DOWNLOAD: &str = "Bump versioned binary downloads in the Dockerfile to the release that \
                                        fixes the targets, from the run's release index.";
pub(super) const BUMP_LOCKFILE: &str = "Bump the targets' packages in lockfiles and manifests with the \
                                        ecosystem's own tool (go get, cargo update, npm, pip-compile).";

/// The remediator tools take no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}

pub(super) async fn apply(tools: &mut Toolbox, name: &str, args: &Value) -> Result<ToolOutput, String> {
    let _: NoArguments = parse(args)?;
    let which = match name {
        "bump_base_image" => Remediators { base_image: true, ..Remediators::NONE },
        "drop_obsolete_pins" => Remediators { os_pins: true, ..Remediators::NONE },
        "bump_download" => Remediators { downloads: true, ..Remediators::NONE },
        "bump_lockfile" => Remediators { lockfiles: true, ..Remediators::NONE },
        other => return Err(format!("{other} is not a remediator")),
    };
    let Some(scans) = tools.env.scans.as_ref() else {
        return Err("no registry or scanner in this run".into());
    };
    let applied = apply_rules(tools.workspace.root(), &tools.task, scans, which).await?;
    tools.commands.extend(applied.commands);
    let mut out = String::new();
    if applied.steps.is_empty() {
        out.push_str("no change\n");
    } else {
        tools.touched();
    }
    for step in &applied.steps {
        let fixes: Vec<&str> = step.fixes.iter().map(|f| f.id.as_str()).collect();
        let _ = writeln!(
            out,
            "changed: {} (expected to fix {}): {}",
            step.summary,
            fixes.join(", "),
            step.reason
        );
    }
    for r in &applied.refusals {
        let _ = writeln!(out, "refused {} in {}: {}", r.finding.id, r.finding.package, r.reason);
    }
    for p in &applied.problems {
        let _ = writeln!(out, "problem: {p}");
    }
    tools.notes.extend(applied.notes);
    tools.steps.extend(applied.steps);
    Ok(ToolOutput::ok(out))
}
