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

pub(super) const COMPANION_BUMPS: &str = "The companion-bump table: tools that must follow a toolchain \
                                          (Go → golangci-lint and staticcheck, Node → npm, Python → pip and \
                                          setuptools), each rule with its source. Shows the toolchains found, \
                                          the bumps to each rule's minimum (forward only) and the pins left \
                                          alone; with `apply`, makes exactly those token edits.";

/// The arguments of `companion_bumps`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompanionBumps {
    /// Make the planned edits (default: only show the plan).
    #[serde(default)]
    pub apply: bool,
}

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

/// Plans the companion bumps on the tree as it is now and, when asked,
/// applies them (the same table and checks as the repair's first step).
pub(super) fn companion_bumps(tools: &mut Toolbox, args: &Value) -> Result<ToolOutput, String> {
    let args: CompanionBumps = parse(args)?;
    let plan = crate::companion::plan(tools.workspace.root());
    let mut out = String::new();
    for t in &plan.toolchains {
        let _ =
            writeln!(out, "toolchain: {} {} ({}:{}, {})", t.toolchain, t.version, t.path, t.line, t.origin);
    }
    if plan.bumps.is_empty() {
        out.push_str("no bump needed\n");
    }
    for b in &plan.bumps {
        let _ = writeln!(out, "{}: {}", if args.apply { "bumped" } else { "would bump" }, b.describe());
    }
    for n in &plan.notes {
        let _ = writeln!(out, "note: {n}");
    }
    if args.apply && !plan.bumps.is_empty() {
        crate::companion::apply(tools.workspace.root(), &plan)
            .map_err(|e| format!("companion bumps: {}", patchpilot_model::error_chain(&e)))?;
        tools.touched();
        tools.steps.extend(plan.bumps.iter().map(|b| b.step()));
    }
    Ok(ToolOutput::ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reasoning::tools::{Called, ToolEnv};
    use crate::reasoning::workspace::Workspace;
    use patchpilot_model::{Finding, Package, RunPurpose, Severity, Task};

    #[tokio::test]
    async fn companion_bumps_shows_the_plan_then_applies_exactly_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("repo");
        std::fs::create_dir_all(&root).expect("mkdir");
        std::fs::write(root.join("Dockerfile"), "FROM golang:1.23.4-alpine3.19\n").expect("write");
        let makefile = "GOLANGCI_LINT_VERSION ?= v1.57.2\n\nlint:\n\tgolangci-lint run\n";
        std::fs::write(root.join("Makefile"), makefile).expect("write");
        let task = Task::new(
            "Dockerfile",
            vec![Finding::new("CVE-2024-24790", Package::new("stdlib", "1.22.0", "Go"), Severity::Critical)],
        );
        crate::install_crypto_provider();
        let env = ToolEnv {
            scans: None,
            cache_dir: dir.path().join("cache"),
            image_prefix: "patchpilot-test/companion".into(),
            db_dir: dir.path().join("db"),
            http: reqwest::Client::new(),
        };
        let ws = Workspace::new(&root).expect("workspace");
        let mut tools = Toolbox::new(ws, task, RunPurpose::Repair, env, Vec::new());
        let text = |called: Called| match called {
            Called::Output(out) => {
                assert!(!out.is_error, "{}", out.content);
                out.content
            }
            Called::Finish(_) => panic!("not finish"),
        };
        let shown = text(tools.call("companion_bumps", &serde_json::json!({})).await);
        assert!(shown.contains("toolchain: go 1.23.4"), "{shown}");
        assert!(shown.contains("would bump: golangci-lint v1.57.2 → v1.60.1 in Makefile:1"), "{shown}");
        assert_eq!(
            std::fs::read_to_string(root.join("Makefile")).expect("read"),
            makefile,
            "a plan changes nothing"
        );
        assert_eq!(tools.tree_version, 0);

        let applied = text(tools.call("companion_bumps", &serde_json::json!({"apply": true})).await);
        assert!(applied.contains("bumped: golangci-lint v1.57.2 → v1.60.1"), "{applied}");
        assert_eq!(
            std::fs::read_to_string(root.join("Makefile")).expect("read"),
            makefile.replace("v1.57.2", "v1.60.1")
        );
        assert_eq!((tools.tree_version, tools.steps.len()), (1, 1));
        let again = text(tools.call("companion_bumps", &serde_json::json!({"apply": true})).await);
        assert!(again.contains("no bump needed"), "forward only, once: {again}");
    }
}
