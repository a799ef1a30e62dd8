//! The agent's report of a run: `.patchpilot/result.json`. The agent
//! writes it; the controller reads it for the pull request and the sandbox
//! worker stores it as an artifact.
//!
//! It comes from the guest and is untrusted: missing fields take their
//! defaults (any agent may write a partial report) but a field of the
//! wrong type is an error naming it, and readers clip and escape every text
//! before a person sees it. Numbers a reviewer relies on come from the
//! verification table, never from prose.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Finding, Severity, ValidationError};

crate::named_enum! {
    /// How the agent's run ended; a report that does not say is taken as
    /// unverified changes.
    #[derive(Default)]
    pub enum AgentOutcome("agent outcome") {
        /// Verified: every assessed finding is gone.
        Fixed = "fixed",
        /// Verified: some are gone; the rest are refused or still present.
        PartlyFixed = "partly_fixed",
        /// Changes were made and not verified.
        #[default]
        Unverified = "unverified",
        /// Nothing to change, or the rebuilt image fixes nothing: no patch.
        NotFixed = "not_fixed",
        /// The patched image did not build: no patch.
        BuildFailed = "build_failed",
        /// The patched image brings a finding at or above the policy's
        /// severity: no patch.
        Rejected = "rejected",
        /// The run could not work (unreadable Dockerfile, no daemon): no patch.
        Failed = "failed",
    }
}

impl AgentOutcome {
    /// Whether the working tree keeps the changes.
    pub fn keeps_patch(self) -> bool {
        matches!(self, AgentOutcome::Fixed | AgentOutcome::PartlyFixed | AgentOutcome::Unverified)
    }
}

/// A finding as a report refers to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct FindingRef {
    /// Vulnerability id.
    pub id: String,
    /// Package name.
    pub package: String,
    /// Installed version.
    pub version: String,
}

impl From<&Finding> for FindingRef {
    fn from(f: &Finding) -> Self {
        FindingRef { id: f.id.clone(), package: f.package.name.clone(), version: f.package.version.clone() }
    }
}

/// One change the agent made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StepRecord {
    /// Which remediator or tool: `base-image`, `os-pin`, `download`,
    /// `lockfile`, `model`.
    pub remediator: String,
    /// What it does, for people: "bump golang 1.22.1-alpine3.19 → 1.22.2-alpine3.19".
    pub summary: String,
    /// Why: the evidence that made it choose this change.
    pub reason: String,
    /// The findings it is expected to fix.
    pub fixes: Vec<FindingRef>,
    /// Files it changed, relative to the workspace.
    pub files: Vec<String>,
}

/// One edit, token by token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EditRecord {
    /// The file, relative to the workspace.
    pub file: String,
    /// 1-based line where the edit starts.
    pub line: usize,
    /// The text replaced.
    pub before: String,
    /// The text that replaces it.
    pub after: String,
    /// Why.
    pub reason: String,
}

crate::named_enum! {
    /// Broad cause of a refusal, for the retrospective.
    pub enum RefusalCategory("refusal category") {
        /// No fix is published, or a worse finding would come in.
        Policy = "policy",
        /// An index or registry was unreachable.
        Infrastructure = "infrastructure",
        /// A tool was missing.
        Tooling = "tooling",
        /// The build does something unusual.
        Repository = "repository",
        /// Knowledge the agent did not have.
        Context = "context",
    }
}

/// A finding the agent did not fix, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The finding.
    pub finding: FindingRef,
    /// Why not, for people and for the retrospective.
    pub reason: String,
    /// Broad cause.
    pub category: RefusalCategory,
}

impl Refusal {
    /// A refusal of `finding`.
    pub fn new(
        finding: impl Into<FindingRef>,
        reason: impl Into<String>,
        category: RefusalCategory,
    ) -> Refusal {
        Refusal { finding: finding.into(), reason: reason.into(), category }
    }
}

/// Durations as whole milliseconds.
pub mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes whole milliseconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// Reads whole milliseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// A command the agent or its verification ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CommandRun {
    /// The command line, as run.
    pub command: String,
    /// Its working directory, relative to the workspace.
    pub dir: String,
    /// Exit code; `None` when it could not start or was killed.
    pub exit_code: Option<i32>,
    /// How long it took.
    #[serde(with = "duration_ms")]
    pub duration: Duration,
    /// The first lines of its error output, when it failed.
    pub error_excerpt: String,
}

crate::named_enum! {
    /// What the rebuild did to one finding.
    pub enum VerificationStatus("verification status") {
        /// Assessed, and gone from the rebuilt image.
        Fixed = "fixed",
        /// Assessed, and still in the rebuilt image.
        Present = "present",
        /// Not in the image before, in it now.
        Introduced = "introduced",
    }
}

impl VerificationStatus {
    /// How a person reads it.
    pub fn label(self) -> &'static str {
        match self {
            VerificationStatus::Fixed => "fixed",
            VerificationStatus::Present => "still present",
            VerificationStatus::Introduced => "introduced",
        }
    }
}

/// One row of the verification table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerificationRow {
    /// The finding (for `introduced`, as found in the rebuilt image).
    pub finding: FindingRef,
    /// Its severity.
    #[serde(default)]
    pub severity: Severity,
    /// What happened to it.
    pub status: VerificationStatus,
    /// The package version in the rebuilt image, when it still has it.
    #[serde(default)]
    pub version_after: Option<String>,
}

/// The build and rescan of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Verification {
    /// The image tag built.
    pub image: String,
    /// Its image id.
    pub image_id: String,
    /// How long the build took.
    #[serde(with = "duration_ms")]
    pub build_time: Duration,
    /// How long export and rescan took.
    #[serde(with = "duration_ms")]
    pub scan_time: Duration,
    /// One row per assessed finding, then one per introduced finding.
    pub rows: Vec<VerificationRow>,
    /// What "before" means for `introduced`.
    pub baseline: String,
}

impl Verification {
    /// Rows with `status`.
    pub fn count(&self, status: VerificationStatus) -> usize {
        self.rows.iter().filter(|r| r.status == status).count()
    }
}

/// The base image before and after.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BaseRecord {
    /// The base the final stage started from.
    pub current: String,
    /// The base it starts from after the run.
    pub chosen: String,
    /// Candidate tags scanned, in order.
    pub candidates_scanned: Vec<String>,
}

/// The planning numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanStats {
    /// Planning time, without builds.
    #[serde(with = "duration_ms")]
    pub planning: Duration,
    /// Of which registry requests.
    #[serde(with = "duration_ms")]
    pub registry: Duration,
    /// Of which cataloging and matching.
    #[serde(with = "duration_ms")]
    pub scanning: Duration,
    /// Images scanned (current base and candidates).
    pub images_scanned: usize,
}

/// `.patchpilot/result.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunReport {
    /// How it ended.
    pub outcome: AgentOutcome,
    /// One line for people.
    pub summary: String,
    /// The Dockerfile worked on.
    pub dockerfile: String,
    /// The assessed image.
    pub image: Option<String>,
    /// The base image before and after, and the candidates scanned.
    pub base: Option<BaseRecord>,
    /// The changes, each with the findings it is expected to fix.
    pub steps: Vec<StepRecord>,
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
    /// The agent's session: rules alone, or the model's, with its usage,
    /// gates and how it ended.
    pub agent: crate::AgentRecord,
}

impl RunReport {
    /// Parses a report; the error names the field that is wrong.
    pub fn parse(bytes: &[u8]) -> Result<RunReport, ValidationError> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        serde_path_to_error::deserialize(&mut de)
            .map_err(|e| ValidationError::new(e.path().to_string(), e.inner().to_string()))
    }

    /// Rows of the verification table with `status` (0 without one).
    pub fn count(&self, status: VerificationStatus) -> usize {
        self.verification.as_ref().map(|v| v.count(status)).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_report_takes_defaults() {
        let report = RunReport::parse(br#"{"summary":"forward fix","steps":[{"summary":"s","reason":"r"}]}"#)
            .expect("parses");
        assert_eq!(report.summary, "forward fix");
        assert_eq!(report.steps[0].reason, "r");
        assert_eq!(report.outcome, AgentOutcome::Unverified);
        assert_eq!(report.count(VerificationStatus::Fixed), 0);
    }

    #[test]
    fn a_wrong_field_is_named() {
        let err = RunReport::parse(br#"{"verification":{"rows":[{"finding":{},"status":"gone"}]}}"#)
            .expect_err("refused");
        assert_eq!(err.path, "verification.rows[0].status");
        assert!(err.reason.contains("fixed, present, introduced"), "{err}");
        assert_eq!(RunReport::parse(br#"{"summary":3}"#).expect_err("refused").path, "summary");
    }

    #[test]
    fn a_full_report_survives_json() {
        let report = RunReport {
            outcome: AgentOutcome::Fixed,
            summary: "bump".into(),
            verification: Some(Verification {
                build_time: Duration::from_millis(1500),
                rows: vec![VerificationRow {
                    finding: FindingRef { id: "CVE-1".into(), package: "p".into(), version: "1".into() },
                    severity: Severity::High,
                    status: VerificationStatus::Fixed,
                    version_after: Some("2".into()),
                }],
                ..Verification::default()
            }),
            refusals: vec![Refusal::new(FindingRef::default(), "no fix", RefusalCategory::Policy)],
            ..RunReport::default()
        };
        let json = serde_json::to_vec(&report).expect("json");
        assert_eq!(RunReport::parse(&json).expect("parses"), report);
    }
}
