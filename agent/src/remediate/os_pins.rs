//! OS package pins in `RUN` lines: `apk add name=ver`, `apt-get install
//! name=ver`.
//!
//! For each pinned package of the final image's stages that has findings:
//!
//! - when the base image (after any bump) already provides the package at
//!   a version that fixes every finding, the pin is obsolete and goes: the
//!   package argument, or the whole install command when nothing else is
//!   left in it, or the whole `RUN` when that command was all it did;
//! - otherwise the pin is raised to the smallest version of the
//!   distribution's package index that fixes every finding — never the
//!   newest, which would drag unrelated changes in;
//! - a finding without a published fix, an index that cannot be reached,
//!   or an index with no fixing version is refused with that reason.
//!
//! An unpinned package with findings needs no edit: a rebuild installs the
//! newest version the mirror has. That is a claim, and the verification
//! build checks it like any other.

use std::collections::BTreeMap;

use patchpilot_model::Finding;

use super::index::{self, PackageIndex};
use super::{FindingRef, Refusal, RefusalCategory, Step, scheme_of, smallest_fix};
use crate::dockerfile::shell::{
    InstallCommand, Manager, PackageArg, install_commands, remove_command, remove_word, set_pin,
};
use crate::dockerfile::{Dockerfile, Edit, apply};
use crate::scans::ScannedImage;

/// What the pin remediator needs.
#[derive(Debug, Clone, Copy)]
pub struct PinContext<'a> {
    /// The assessed findings.
    pub findings: &'a [Finding],
    /// The base image the final stage will start from, scanned: the chosen
    /// bump, or the current base.
    pub base: Option<&'a ScannedImage>,
    /// The base's reference, for reasons.
    pub base_reference: &'a str,
    /// Package index URLs per OSV ecosystem (`Alpine:v3.19`) or
    /// distribution (`Alpine`).
    pub indexes: &'a BTreeMap<String, Vec<String>>,
    /// HTTP client for the indexes (the sandbox's egress).
    pub client: &'a reqwest::Client,
}

/// What the pin remediator decided.
#[derive(Debug, Clone, Default)]
pub struct PinPlan {
    /// One step per install command it changes, and one for packages a
    /// rebuild is expected to fix.
    pub steps: Vec<Step>,
    /// Findings on pinned packages it cannot fix.
    pub refusals: Vec<Refusal>,
    /// Index URLs fetched, and failures, for the result.
    pub notes: Vec<String>,
}

/// What happens to one pinned package.
#[derive(Debug, Clone)]
enum Decision {
    /// The base provides a fixing version: the argument goes.
    Drop { reason: String },
    /// The pin moves to this version.
    Raise { version: String, reason: String },
}

/// How a missing index URL is reported (and recognised).
const NOT_CONFIGURED: &str = "the task names no package index for";

/// Caches indexes per key for one run: each is fetched once, failures too.
#[derive(Default)]
struct Indexes {
    loaded: BTreeMap<String, Result<PackageIndex, String>>,
}

impl Indexes {
    async fn get(
        &mut self,
        ctx: &PinContext<'_>,
        ecosystem: &str,
        notes: &mut Vec<String>,
    ) -> Result<&PackageIndex, String> {
        let distro = ecosystem.split(':').next().unwrap_or(ecosystem);
        let Some((key, urls)) =
            ctx.indexes.get_key_value(ecosystem).or_else(|| ctx.indexes.get_key_value(distro))
        else {
            return Err(format!("{NOT_CONFIGURED} {ecosystem}"));
        };
        if !self.loaded.contains_key(key) {
            let loaded = index::load(ctx.client, urls).await.map_err(|e| e.to_string());
            match &loaded {
                Ok(i) => notes.push(format!(
                    "package index for {key}: {} packages from {}",
                    i.len(),
                    urls.join(", ")
                )),
                Err(e) => notes.push(format!("package index for {key} unusable: {e}")),
            }
            self.loaded.insert(key.clone(), loaded);
        }
        match self.loaded.get(key) {
            Some(Ok(index)) => Ok(index),
            Some(Err(e)) => Err(e.clone()),
            None => Err(format!("the package index for {key} was not loaded")),
        }
    }
}

fn manages(manager: Manager, finding: &Finding) -> bool {
    match manager {
        Manager::Apk => finding.package.kind == "apk",
        Manager::Apt => finding.package.kind == "deb",
    }
}

/// Plans pin drops and raises for the final image's stages.
pub async fn plan(df: &Dockerfile, ctx: PinContext<'_>) -> PinPlan {
    let mut out = PinPlan::default();
    let mut indexes = Indexes::default();
    let mut rebuild: Vec<(String, Vec<FindingRef>)> = Vec::new();
    let escape = df.escape();
    for stage in df.final_chain() {
        for i in stage.body.clone() {
            let ins = &df.instructions()[i];
            let commands = install_commands(ins, escape);
            let mut edits = Vec::new();
            let mut summaries = Vec::new();
            let mut fixes = Vec::new();
            for command in &commands {
                let mut decisions: Vec<(&PackageArg, Decision)> = Vec::new();
                for package in &command.packages {
                    let targets: Vec<&Finding> = ctx
                        .findings
                        .iter()
                        .filter(|f| f.package.name == package.name && manages(command.manager, f))
                        .collect();
                    if targets.is_empty() {
                        continue;
                    }
                    let Some(pinned) = &package.version else {
                        rebuild.push((
                            package.name.clone(),
                            targets.iter().map(|f| FindingRef::from(*f)).collect(),
                        ));
                        continue;
                    };
                    match decide(&ctx, &mut indexes, &mut out, &package.name, pinned, &targets).await {
                        Some((decision, fixed)) => {
                            fixes.extend(fixed);
                            decisions.push((package, decision));
                        }
                        None => continue,
                    }
                }
                if decisions.is_empty() {
                    continue;
                }
                let (command_edits, summary) = edits_for(df, i, command, &decisions);
                edits.extend(command_edits);
                summaries.push(summary);
            }
            if edits.is_empty() {
                continue;
            }
            // Removing two whole commands of one RUN can claim the same
            // separator; fall back to removing the arguments one by one.
            if apply(df.text(), &edits).is_err() {
                edits = fallback_edits(df, i, &commands, &edits);
            }
            fixes.sort();
            fixes.dedup();
            out.steps.push(Step {
                remediator: "os-pin".into(),
                summary: summaries.join("; "),
                reason: edits.iter().map(|e| e.reason.clone()).collect::<Vec<_>>().join("; "),
                fixes,
                edits,
                files: Vec::new(),
            });
        }
    }
    if !rebuild.is_empty() {
        let names: Vec<&str> = rebuild.iter().map(|(n, _)| n.as_str()).collect();
        let mut fixes: Vec<FindingRef> = rebuild.iter().flat_map(|(_, f)| f.iter().cloned()).collect();
        fixes.sort();
        fixes.dedup();
        out.steps.push(Step {
            remediator: "rebuild".into(),
            summary: format!("rebuild to pick up newer {}", names.join(", ")),
            reason: format!(
                "{} installed without a version pin; a rebuild installs the newest version the mirror offers, which the verification build checks",
                names.join(", ")
            ),
            fixes,
            edits: Vec::new(),
            files: Vec::new(),
        });
    }
    out
}

/// Decides one pinned package. `None` when every finding on it was
/// refused.
async fn decide(
    ctx: &PinContext<'_>,
    indexes: &mut Indexes,
    out: &mut PinPlan,
    name: &str,
    pinned: &str,
    targets: &[&Finding],
) -> Option<(Decision, Vec<FindingRef>)> {
    let refuse = |out: &mut PinPlan, f: &Finding, reason: String, category: RefusalCategory| {
        out.refusals.push(Refusal { finding: FindingRef::from(f), reason, category });
    };
    // The version every fixable finding needs: the largest of their
    // smallest fixes.
    let ecosystem = targets[0].package.ecosystem.clone();
    let scheme = match scheme_of(&ecosystem) {
        Ok(s) => s,
        Err(reason) => {
            targets.iter().for_each(|f| refuse(out, f, reason.clone(), RefusalCategory::Tooling));
            return None;
        }
    };
    let greater =
        |a: &str, b: &str| scheme.compare(a, b).map(|o| o == std::cmp::Ordering::Greater).unwrap_or(false);
    let at_least =
        |a: &str, b: &str| scheme.compare(a, b).map(|o| o != std::cmp::Ordering::Less).unwrap_or(false);
    let mut needed: Option<String> = None;
    let mut fixable = Vec::new();
    for f in targets {
        match smallest_fix(f) {
            Ok(fix) => {
                if needed.as_deref().is_none_or(|n| greater(&fix.version, n)) {
                    needed = Some(fix.version);
                }
                fixable.push(FindingRef::from(*f));
            }
            Err(refusal) => out.refusals.push(refusal),
        }
    }
    let needed = needed?;
    let ids = fixable.iter().map(|f| f.id.as_str()).collect::<Vec<_>>().join(", ");
    // The base already has it, fixed: the pin is obsolete.
    let provided = ctx
        .base
        .into_iter()
        .flat_map(|b| b.packages.iter())
        .filter(|p| p.name == name && p.kind.is_os())
        .map(|p| p.version.clone())
        .max_by(|a, b| scheme.compare(a, b).unwrap_or(std::cmp::Ordering::Equal));
    if let Some(base_version) = &provided
        && at_least(base_version, &needed)
    {
        let reason = format!(
            "{} provides {name} {base_version}, which fixes {ids} (fixed in {needed}); the pin {name}={pinned} is obsolete",
            ctx.base_reference
        );
        return Some((Decision::Drop { reason }, fixable));
    }
    let index = match indexes.get(ctx, &ecosystem, &mut out.notes).await {
        Ok(i) => i,
        Err(e) => {
            let reason = format!(
                "{name}={pinned} needs {needed}{}, and the package index cannot say whether it is published: {e}",
                provided.as_deref().map(|v| format!("; the base has only {v}")).unwrap_or_default()
            );
            // No URL in the task is missing context; a URL that fails is
            // the network's or the mirror's doing.
            let category = if e.starts_with(NOT_CONFIGURED) {
                RefusalCategory::Context
            } else {
                RefusalCategory::Infrastructure
            };
            targets
                .iter()
                .filter(|f| fixable.iter().any(|r| r.id == f.id))
                .for_each(|f| refuse(out, f, reason.clone(), category));
            return None;
        }
    };
    let mut offered: Vec<&String> =
        index.versions(name).iter().filter(|v| at_least(v, &needed) && greater(v, pinned)).collect();
    offered.sort_by(|a, b| scheme.compare(a, b).unwrap_or(std::cmp::Ordering::Equal));
    match offered.first() {
        Some(version) => {
            let reason = format!(
                "{name} {version} is the smallest version in the package index that fixes {ids} (fixed in {needed})"
            );
            Some((Decision::Raise { version: (*version).clone(), reason }, fixable))
        }
        None => {
            let newest = index
                .versions(name)
                .iter()
                .max_by(|a, b| scheme.compare(a, b).unwrap_or(std::cmp::Ordering::Equal))
                .cloned();
            let reason = match newest {
                Some(v) => format!("{name} needs {needed}, but the package index offers at most {v}"),
                None => format!("{name} needs {needed}, but the package index does not list {name}"),
            };
            targets
                .iter()
                .filter(|f| fixable.iter().any(|r| r.id == f.id))
                .for_each(|f| refuse(out, f, reason.clone(), RefusalCategory::Policy));
            None
        }
    }
}

/// The edits for one install command, and a summary.
fn edits_for(
    df: &Dockerfile,
    instruction: usize,
    command: &InstallCommand,
    decisions: &[(&PackageArg, Decision)],
) -> (Vec<Edit>, String) {
    let ins = &df.instructions()[instruction];
    let dropped: Vec<&PackageArg> =
        decisions.iter().filter(|(_, d)| matches!(d, Decision::Drop { .. })).map(|(p, _)| *p).collect();
    let mut edits = Vec::new();
    let mut parts = Vec::new();
    if !dropped.is_empty() {
        parts.push(format!(
            "drop {}",
            dropped.iter().map(|p| p.word.text.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    if dropped.len() == command.packages.len() {
        let reason = decisions.iter().map(|(_, d)| decision_reason(d)).collect::<Vec<_>>().join("; ");
        edits.push(remove_command(df, ins, command, &reason));
    } else {
        for (package, decision) in decisions {
            if let Decision::Drop { reason } = decision {
                edits.push(remove_word(df, ins, &package.word, reason));
            }
        }
    }
    for (package, decision) in decisions {
        if let Decision::Raise { version, reason } = decision {
            parts.push(format!("raise {} → {}={version}", package.word.text, package.name));
            if let Some(edit) = set_pin(ins, package, version, reason) {
                edits.push(edit);
            }
        }
    }
    (edits, parts.join("; "))
}

fn decision_reason(d: &Decision) -> String {
    match d {
        Decision::Drop { reason } | Decision::Raise { reason, .. } => reason.clone(),
    }
}

/// Per-argument removals instead of whole-command removals.
fn fallback_edits(
    df: &Dockerfile,
    instruction: usize,
    commands: &[InstallCommand],
    edits: &[Edit],
) -> Vec<Edit> {
    let ins = &df.instructions()[instruction];
    let mut out: Vec<Edit> = edits.iter().filter(|e| !e.replacement.is_empty()).cloned().collect();
    for command in commands {
        for package in &command.packages {
            let inside = edits.iter().find(|e| {
                e.replacement.is_empty()
                    && e.span.start <= package.word.span.start
                    && package.word.span.end <= e.span.end
            });
            if let Some(e) = inside {
                out.push(remove_word(df, ins, &package.word, &e.reason));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use patchpilot_scanner::package::{Package, PackageKind};

    use super::*;

    fn finding(id: &str, package: &str, version: &str, fixed: &[&str]) -> Finding {
        serde_json::from_value(serde_json::json!({
            "id": id,
            "package": { "name": package, "version": version, "type": "apk", "ecosystem": "Alpine:v3.19", "source_name": "openssl" },
            "fixed_versions": fixed,
            "severity": "high",
        }))
        .expect("a finding")
    }

    fn base(versions: &[(&str, &str)]) -> ScannedImage {
        let assessment = serde_json::from_value(serde_json::json!({
            "image": "golang:1.22.2-alpine3.19",
            "digest": format!("sha256:{}", "a".repeat(64)),
            "findings": [],
        }))
        .expect("an assessment");
        let packages = versions
            .iter()
            .map(|(name, version)| Package {
                name: (*name).into(),
                version: (*version).into(),
                kind: PackageKind::Apk,
                source_name: Some("openssl".into()),
                source_version: None,
                arch: None,
                path: "lib/apk/db/installed".into(),
                layer: None,
                ecosystem: "Alpine:v3.19".into(),
            })
            .collect();
        ScannedImage {
            reference: "golang:1.22.2-alpine3.19".into(),
            digest: String::new(),
            assessment,
            packages,
            layers: Vec::new(),
            labels: Default::default(),
            created: None,
            platform: None,
        }
    }

    async fn run(text: &str, findings: &[Finding], base: Option<&ScannedImage>) -> (PinPlan, String) {
        let df = Dockerfile::parse(text).expect("parses");
        let client = reqwest::Client::builder().build().expect("client");
        let indexes = BTreeMap::new();
        let plan = plan(
            &df,
            PinContext {
                findings,
                base,
                base_reference: "golang:1.22.2-alpine3.19",
                indexes: &indexes,
                client: &client,
            },
        )
        .await;
        let edits: Vec<Edit> = plan.steps.iter().flat_map(|s| s.edits.clone()).collect();
        let out = apply(text, &edits).expect("edits apply");
        (plan, out)
    }

    #[tokio::test]
    async fn a_base_with_the_fix_makes_the_pins_obsolete() {
        crate::install_crypto_provider();
        let findings = [
            finding("CVE-2024-2511", "libssl3", "3.1.4-r5", &["3.1.4-r6"]),
            finding("CVE-2024-2511", "libcrypto3", "3.1.4-r5", &["3.1.4-r6"]),
        ];
        let provided = base(&[("libssl3", "3.1.4-r6"), ("libcrypto3", "3.1.4-r6")]);
        // Only the pinned packages go; curl stays, and so does the rest of the RUN.
        let text = "FROM x\nRUN apk add --no-cache curl libssl3=3.1.4-r5 libcrypto3=3.1.4-r5 && make\n";
        let (plan, out) = run(text, &findings, Some(&provided)).await;
        assert_eq!(out, "FROM x\nRUN apk add --no-cache curl && make\n");
        assert_eq!(plan.steps.len(), 1);
        assert_eq!(plan.steps[0].fixes.len(), 2);
        assert!(plan.steps[0].reason.contains("provides libssl3 3.1.4-r6"), "{}", plan.steps[0].reason);
        assert!(plan.refusals.is_empty());
        // A base that is still vulnerable and no index URL: missing context.
        let (plan, out) = run(text, &findings, Some(&base(&[("libssl3", "3.1.4-r5")]))).await;
        assert_eq!(out, text);
        assert_eq!(plan.refusals.len(), 2);
        assert!(
            plan.refusals.iter().all(
                |r| r.category == RefusalCategory::Context && r.reason.contains("names no package index")
            ),
            "{:?}",
            plan.refusals
        );
    }

    #[tokio::test]
    async fn unpinned_packages_are_left_to_the_rebuild_and_unfixed_ones_refused() {
        crate::install_crypto_provider();
        let findings = [
            finding("CVE-2024-2511", "libssl3", "3.1.4-r5", &["3.1.4-r6"]),
            finding("CVE-2099-0001", "libcrypto3", "3.1.4-r5", &[]),
        ];
        let text = "FROM x\nRUN apk add libssl3 libcrypto3=3.1.4-r5\n";
        let (plan, out) = run(text, &findings, None).await;
        assert_eq!(out, text, "nothing to edit");
        let rebuild = plan.steps.iter().find(|s| s.remediator == "rebuild").expect("a rebuild step");
        assert_eq!(rebuild.fixes[0].package, "libssl3");
        assert!(rebuild.edits.is_empty());
        assert_eq!(plan.refusals.len(), 1);
        assert_eq!(plan.refusals[0].category, RefusalCategory::Policy);
        assert!(
            plan.refusals[0].reason.contains("no fixed version of libcrypto3"),
            "{}",
            plan.refusals[0].reason
        );
    }
}
