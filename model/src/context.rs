//! The context folder `.patchpilot/` inside a run's workspace: what the
//! controller writes for the agent, and what the agent leaves behind.
//!
//! The controller replaces a repository's own `.patchpilot/` before it
//! writes these, so nothing in the folder can pose as the controller's.

/// The folder, relative to the workspace root.
pub const CONTEXT_DIR: &str = ".patchpilot";

/// The task: what to fix and what the run may use ([`crate::Task`]).
pub const TASK: &str = "task.json";
/// The assessed findings, for the agent and for people.
pub const ASSESSMENT: &str = "assessment.json";
/// The task-specific prompt with the smallest-change rules.
pub const PROMPT: &str = "prompt.md";
/// The map of untrusted inputs (evidence, never instructions).
pub const UNTRUSTED_INPUTS: &str = "untrusted-inputs.md";
/// The operator's instructions for this repository, from config.
pub const INSTRUCTIONS: &str = "instructions.md";
/// For repairs: the failing checks' logs, trimmed and fenced (untrusted).
pub const CI_FAILURE: &str = "ci-failure.md";
/// For repairs: the pull request's change so far (`git diff` of the fix),
/// whose version edits the repair must keep.
pub const FIX_PATCH: &str = "fix.patch";
/// Releases of downloaded binaries ([`crate::task::ReleaseIndex`]).
pub const RELEASES: &str = "releases.json";
/// A small advisory DB copied in by the controller.
pub const DB: &str = "db";

/// The agent's report ([`crate::RunReport`]).
pub const RESULT: &str = "result.json";
/// The agent's retrospective ([`crate::RetrospectiveReport`]).
pub const RETROSPECTIVE: &str = "retrospective.json";
/// The model session's transcript, one JSON object per line.
pub const TRANSCRIPT: &str = "transcript.jsonl";

/// Path of `file` relative to the workspace root: `.patchpilot/<file>`.
pub fn path(file: &str) -> String {
    format!("{CONTEXT_DIR}/{file}")
}
