//! GitHub's JSON shapes, reduced to the fields the controller reads, and
//! their mapping to the forge types. Our own structs rather than octocrab's
//! models: a field GitHub adds, drops or makes nullable elsewhere in a large
//! model must not break parsing of the few fields that matter here.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{Check, CheckSource, CheckState, Comment, PrState, PullRequest};

/// Longest summary kept from a check's output.
const SUMMARY_LIMIT: usize = 500;

#[derive(Debug, Deserialize)]
pub(super) struct Ref {
    #[serde(rename = "ref")]
    pub name: String,
    pub object: RefObject,
}

#[derive(Debug, Deserialize)]
pub(super) struct RefObject {
    pub sha: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Pull {
    number: u64,
    html_url: String,
    state: String,
    title: String,
    #[serde(default)]
    body: Option<String>,
    /// Only in the full pull request, not in list items.
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    merged_at: Option<String>,
    head: PullBranch,
    base: PullBranch,
    #[serde(default)]
    labels: Vec<Label>,
}

#[derive(Debug, Deserialize)]
struct PullBranch {
    #[serde(rename = "ref")]
    name: String,
    sha: String,
}

impl From<Pull> for PullRequest {
    fn from(p: Pull) -> Self {
        let state = match p.state.as_str() {
            "open" => PrState::Open,
            // A closed pull request was merged if GitHub says so or gives a
            // merge time (list items carry only `merged_at`).
            _ if p.merged == Some(true) || p.merged_at.is_some() => PrState::Merged,
            _ => PrState::Closed,
        };
        PullRequest {
            number: p.number,
            url: p.html_url,
            head: p.head.name,
            base: p.base.name,
            head_sha: p.head.sha,
            state,
            title: p.title,
            body: p.body.unwrap_or_default(),
            labels: p.labels.into_iter().map(|l| l.name).collect(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct Label {
    pub name: String,
    #[serde(default)]
    pub color: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct IssueComment {
    id: u64,
    #[serde(default)]
    body: Option<String>,
}

impl From<IssueComment> for Comment {
    fn from(c: IssueComment) -> Self {
        Comment { id: c.id, body: c.body.unwrap_or_default() }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct CheckRuns {
    pub check_runs: Vec<CheckRun>,
}

#[derive(Debug, Deserialize)]
pub(super) struct CheckRun {
    id: u64,
    name: String,
    status: String,
    #[serde(default)]
    conclusion: Option<String>,
    #[serde(default)]
    details_url: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    output: Option<CheckOutput>,
}

#[derive(Debug, Deserialize)]
struct CheckOutput {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    summary: Option<String>,
}

impl From<CheckRun> for Check {
    fn from(run: CheckRun) -> Self {
        let (state, conclusion) = if run.status != "completed" {
            // queued, in_progress, waiting, requested, pending.
            (CheckState::Pending, run.status.clone())
        } else {
            let conclusion = run.conclusion.unwrap_or_default();
            let state = match conclusion.as_str() {
                "success" | "neutral" | "skipped" => CheckState::Passed,
                "cancelled" => CheckState::Cancelled,
                // `stale`: GitHub gave up on a run that never completed,
                // which is the runner's fault, not the change's.
                "timed_out" | "stale" => CheckState::TimedOut,
                // failure, action_required, startup_failure, and anything
                // new: not green is not green.
                _ => CheckState::Failed,
            };
            (state, conclusion)
        };
        let summary = run
            .output
            .map(|o| {
                [o.title, o.summary]
                    .into_iter()
                    .flatten()
                    .filter(|s| !s.trim().is_empty())
                    .collect::<Vec<_>>()
                    .join(": ")
            })
            .unwrap_or_default();
        Check {
            id: run.id.to_string(),
            name: run.name,
            source: CheckSource::CheckRun,
            state,
            conclusion,
            details_url: run.details_url.filter(|u| !u.is_empty()).or(run.html_url),
            summary: clip(summary),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct CombinedStatus {
    pub state: String,
    #[serde(default)]
    pub statuses: Vec<Status>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Status {
    state: String,
    context: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    target_url: Option<String>,
}

impl From<Status> for Check {
    fn from(s: Status) -> Self {
        let state = match s.state.as_str() {
            "success" => CheckState::Passed,
            "pending" => CheckState::Pending,
            // failure, error.
            _ => CheckState::Failed,
        };
        Check {
            id: s.context.clone(),
            name: s.context,
            source: CheckSource::CommitStatus,
            state,
            conclusion: s.state,
            details_url: s.target_url.filter(|u| !u.is_empty()),
            summary: clip(s.description.unwrap_or_default()),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct Installation {
    pub id: u64,
}

#[derive(Deserialize)]
pub(super) struct InstallationToken {
    pub token: String,
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub permissions: BTreeMap<String, String>,
    #[serde(default)]
    pub repositories: Option<Vec<NamedRepo>>,
}

// By hand: the derived one would print the token.
impl std::fmt::Debug for InstallationToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstallationToken")
            .field("expires_at", &self.expires_at)
            .field("permissions", &self.permissions)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct NamedRepo {
    pub name: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct FileReply {
    #[serde(default)]
    pub content: Option<FileReplyContent>,
    pub commit: FileReplyCommit,
}

#[derive(Debug, Deserialize)]
pub(super) struct FileReplyContent {
    pub sha: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct FileReplyCommit {
    pub sha: String,
}

fn clip(mut text: String) -> String {
    if text.len() > SUMMARY_LIMIT {
        let mut cut = SUMMARY_LIMIT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}
