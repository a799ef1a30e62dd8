//! What a run leaves behind: `.patchpilot/result.json` (the edits with
//! their reasons, the verification table, the commands run) and the
//! Retrospective, both built from what actually happened in the run.

use std::path::Path;

pub use patchpilot_model::{AgentOutcome as Outcome, BaseRecord, EditRecord, PlanStats};
use patchpilot_model::{
    AgentRecord, RefusalCategory, RetroCategory, RetrospectiveReport, RunReport, context,
};

use crate::remediate::{CommandRun, Refusal, Step};
use crate::verify::{Status, Verification};

/// `.patchpilot/result.json`.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// How it ended.
    pub outcome: Outcome,
    /// One line for people.
    pub summary: String,
    /// The Dockerfile worked on.
    pub dockerfile: String,
    /// The assessed image.
    pub image: Option<String>,
    /// The base image before and after, and the candidates scanned.
    pub base: Option<BaseRecord>,
    /// The changes, each with the findings it is expected to fix.
    pub steps: Vec<Step>,
    /// The edits, token by token.
    pub edits: Vec<EditRecord>,
    /// Findings not fixed, and why.
    pub refusals: Vec<Refusal>,
    /// The build and rescan.
    pub verification: Option<Verification>,
    /// Every command run.
    pub commands: Vec<CommandRun>,
    /// Facts worth keeping: indexes read, candidates passed over.
    pub notes: Vec<String>,
    /// What went wrong, in order, with first error lines.
    pub problems: Vec<String>,
    /// Whether the working tree holds changes.
    pub patch: bool,
    /// The changes as a unified diff (empty without a patch).
    pub diff: String,
    /// Planning numbers.
    pub stats: PlanStats,
    /// The session: rules alone, or the model's.
    pub agent: AgentRecord,
    /// Every finding of the original image as rebuilt, when verification
    /// rebuilt it (not reported: the model session measures against it).
    pub baseline: Vec<patchpilot_model::Finding>,
}

impl RunResult {
    /// A result for `task` that has done nothing yet (outcome `failed`
    /// until something better is known).
    pub fn new(task: &patchpilot_model::Task) -> RunResult {
        RunResult {
            outcome: Outcome::Failed,
            summary: String::new(),
            dockerfile: task.dockerfile.clone(),
            image: task.image.clone(),
            base: None,
            steps: Vec::new(),
            edits: Vec::new(),
            refusals: Vec::new(),
            verification: None,
            commands: Vec::new(),
            notes: Vec::new(),
            problems: Vec::new(),
            patch: false,
            diff: String::new(),
            stats: PlanStats::default(),
            agent: AgentRecord::default(),
            baseline: Vec::new(),
        }
    }

    /// The report as `result.json` carries it.
    pub fn report(&self) -> RunReport {
        RunReport {
            outcome: self.outcome,
            summary: self.summary.clone(),
            dockerfile: self.dockerfile.clone(),
            image: self.image.clone(),
            base: self.base.clone(),
            steps: self.steps.iter().map(Step::record).collect(),
            edits: self.edits.clone(),
            refusals: self.refusals.clone(),
            verification: self.verification.clone(),
            commands: self.commands.clone(),
            notes: self.notes.clone(),
            problems: self.problems.clone(),
            patch: self.patch,
            diff: self.diff.clone(),
            stats: self.stats,
            agent: self.agent.clone(),
        }
    }

    /// Writes `result.json` and `retrospective.json` into `dir`.
    pub fn write(&self, dir: &Path, retro: &RetrospectiveReport) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let json = serde_json::to_vec_pretty(&self.report()).map_err(std::io::Error::other)?;
        write_atomic(&dir.join(context::RESULT), &json)?;
        let json = serde_json::to_vec_pretty(retro).map_err(std::io::Error::other)?;
        write_atomic(&dir.join(context::RETROSPECTIVE), &json)
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Builds the retrospective of a run from its result.
pub fn retrospective(result: &RunResult) -> RetrospectiveReport {
    let mut went_well = Vec::new();
    let mut went_wrong = result.problems.clone();
    let mut missing_tools = Vec::new();
    let mut missing_context = Vec::new();
    if let Some(base) = &result.base
        && base.current != base.chosen
    {
        went_well.push(format!(
            "moved the base {} → {} after scanning {} candidate tag(s)",
            base.current,
            base.chosen,
            base.candidates_scanned.len()
        ));
    }
    for step in result.steps.iter().filter(|s| s.remediator != "base-image") {
        went_well.push(format!("{}: {}", step.remediator, step.summary));
    }
    if let Some(v) = &result.verification {
        let (fixed, present, introduced) =
            (v.count(Status::Fixed), v.count(Status::Present), v.count(Status::Introduced));
        if fixed > 0 {
            went_well.push(format!(
                "verified by build ({:.1} s) and rescan: {fixed} finding(s) fixed",
                v.build_time.as_secs_f64()
            ));
        }
        for row in v.rows.iter().filter(|r| r.status == Status::Present) {
            went_wrong.push(format!(
                "{} in {} {} is still present after the rebuild{}",
                row.finding.id,
                row.finding.package,
                row.finding.version,
                row.version_after.as_deref().map(|a| format!(" ({a} installed)")).unwrap_or_default()
            ));
        }
        if introduced > 0 {
            went_wrong.push(format!(
                "the rebuilt image has {introduced} finding(s) the original did not: {}",
                v.rows
                    .iter()
                    .filter(|r| r.status == Status::Introduced)
                    .map(|r| format!("{} ({})", r.finding.id, r.severity))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let _ = present;
    }
    for r in &result.refusals {
        let line = format!("{} in {} {}: {}", r.finding.id, r.finding.package, r.finding.version, r.reason);
        match r.category {
            RefusalCategory::Tooling => missing_tools.push(line.clone()),
            RefusalCategory::Context => missing_context.push(line.clone()),
            _ => {}
        }
        went_wrong.push(line);
    }
    went_wrong.dedup();
    let category = category(result);
    RetrospectiveReport {
        went_well,
        went_wrong,
        missing_tools,
        missing_context,
        category,
        summary: result.summary.clone(),
        model: Some(driven_by(&result.agent)),
    }
}

/// What drove the run, for the fleet to count runs by: the model's name
/// when a session ran (`model` if it had none), else `rules`.
fn driven_by(agent: &AgentRecord) -> String {
    match agent.driver {
        patchpilot_model::AgentDriver::Model => agent.model.clone().unwrap_or_else(|| "model".to_owned()),
        patchpilot_model::AgentDriver::Rules => patchpilot_model::retrospective::RULES.to_owned(),
    }
}

/// The broad cause of what went wrong: the first that applies of an
/// unreachable service, a failed build, a missing tool, policy.
fn category(result: &RunResult) -> RetroCategory {
    let has = |c: RefusalCategory| result.refusals.iter().any(|r| r.category == c);
    if result.outcome == Outcome::Fixed && result.refusals.is_empty() {
        return RetroCategory::Unspecified;
    }
    if has(RefusalCategory::Infrastructure)
        || result.problems.iter().any(|p| p.starts_with("infrastructure:"))
    {
        return RetroCategory::Infrastructure;
    }
    if result.outcome == Outcome::BuildFailed || has(RefusalCategory::Repository) {
        return RetroCategory::RepositoryComplexity;
    }
    if has(RefusalCategory::Tooling) || result.problems.iter().any(|p| p.starts_with("tooling:")) {
        return RetroCategory::Tooling;
    }
    if has(RefusalCategory::Policy) || has(RefusalCategory::Context) || result.outcome == Outcome::Rejected {
        return RetroCategory::Policy;
    }
    RetroCategory::Unspecified
}

impl RunResult {
    /// The plan, the verification and the outcome, for a terminal.
    pub fn render_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "PatchPilot remediation of {}{}",
            self.dockerfile,
            self.image.as_deref().map(|i| format!(" (image {i})")).unwrap_or_default()
        );
        if let Some(base) = &self.base {
            if base.current == base.chosen {
                let _ = writeln!(
                    out,
                    "base image: {} (kept; {} candidate tag(s) scanned)",
                    base.current,
                    base.candidates_scanned.len()
                );
            } else {
                let _ = writeln!(
                    out,
                    "base image: {} → {} ({} candidate tag(s) scanned)",
                    base.current,
                    base.chosen,
                    base.candidates_scanned.len()
                );
            }
        }
        if self.steps.is_empty() {
            let _ = writeln!(out, "changes: none");
        } else {
            let _ = writeln!(out, "changes:");
            for step in &self.steps {
                let _ = writeln!(out, "  [{}] {}", step.remediator, step.summary);
                let fixes: Vec<String> =
                    step.fixes.iter().map(|f| format!("{} ({} {})", f.id, f.package, f.version)).collect();
                if !fixes.is_empty() {
                    let _ = writeln!(out, "      fixes: {}", fixes.join(", "));
                }
                let _ = writeln!(out, "      why: {}", step.reason);
            }
        }
        if !self.refusals.is_empty() {
            let _ = writeln!(out, "not fixed:");
            for r in &self.refusals {
                let _ = writeln!(
                    out,
                    "  {} in {} {} [{}]: {}",
                    r.finding.id, r.finding.package, r.finding.version, r.category, r.reason
                );
            }
        }
        if let Some(v) = &self.verification {
            let _ = writeln!(
                out,
                "verification: built in {:.1} s, rescanned in {:.1} s: {} fixed, {} still present, {} introduced",
                v.build_time.as_secs_f64(),
                v.scan_time.as_secs_f64(),
                v.count(Status::Fixed),
                v.count(Status::Present),
                v.count(Status::Introduced)
            );
            for row in &v.rows {
                let status = row.status.label();
                let _ = writeln!(
                    out,
                    "  {:<16} {:<20} {} → {:<14} {:<8} {status}",
                    row.finding.id,
                    row.finding.package,
                    row.finding.version,
                    row.version_after.as_deref().unwrap_or("(gone)"),
                    row.severity.to_string()
                );
            }
        }
        for p in &self.problems {
            let _ = writeln!(out, "problem: {}", p.replace('\n', "\n    "));
        }
        let _ = writeln!(
            out,
            "planning: {} ms ({} ms registry, {} ms scanning, {} image(s) scanned)",
            self.stats.planning.as_millis(),
            self.stats.registry.as_millis(),
            self.stats.scanning.as_millis(),
            self.stats.images_scanned
        );
        let _ = writeln!(out, "outcome: {} — {}", self.outcome, self.summary);
        if !self.diff.is_empty() {
            out.push('\n');
            out.push_str(&self.diff);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use patchpilot_model::AgentDriver;

    /// The retrospective names what drove the run, so the fleet can count
    /// runs by model.
    #[test]
    fn the_retrospective_names_the_model_or_the_rules() {
        let mut agent = AgentRecord::default();
        assert_eq!(driven_by(&agent), "rules");
        agent.driver = AgentDriver::Model;
        assert_eq!(driven_by(&agent), "model", "a session without a name");
        agent.model = Some("gpt-4.1-mini".into());
        assert_eq!(driven_by(&agent), "gpt-4.1-mini");
    }
}
