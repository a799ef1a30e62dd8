//! `patchpilot-forge`: what a forge is to PatchPilot, and GitHub.
//!
//! It owns:
//! - the [`Forge`] trait the controller's lifecycle sees, with its types
//!   ([`Repo`], [`PullRequest`], [`Check`]…) and [`Error`], whose
//!   [`kind`](Error::kind) says whether waiting may help;
//! - [`credential`]: the in-memory git credential helper, how a token
//!   reaches the controller's own git and nothing else;
//! - [`github`]: the GitHub App implementation, through octocrab.
//!
//! The local forge (bare repositories, pull requests in Postgres, a local
//! CI runner) implements the trait in `patchpilot-forge-local`; the
//! executor and its store stay in the controller.
//!
//! Tokens never leave a forge implementation except as a [`GitCredential`]
//! handed to the controller's own git process through the in-memory
//! credential helper; they are never written to disk, logged (see
//! [`Secret`]'s `Debug`) or put into any other child's environment.

pub mod credential;
pub mod github;

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A repository on a forge.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Repo {
    /// Owner (user or organisation).
    pub owner: String,
    /// Name, without `.git`.
    pub name: String,
}

impl Repo {
    /// `owner/name` from a repository URL as the planner stores it
    /// (`https://github.com/owner/name`, `…/name.git`, `git@host:owner/name`,
    /// `local://owner/name`).
    pub fn from_url(url: &str) -> Result<Repo, Error> {
        let trimmed = url.trim().trim_end_matches('/').trim_end_matches(".git");
        let path = if let Some(rest) = trimmed.strip_prefix("local://") {
            // The local forge has no host part.
            rest
        } else if let Some((_, rest)) = trimmed.split_once("://") {
            rest.split_once('/').map(|(_, p)| p).unwrap_or("")
        } else if let Some((_, rest)) = trimmed.split_once(':') {
            rest
        } else {
            trimmed
        };
        let mut parts = path.rsplitn(2, '/');
        let name = parts.next().unwrap_or("");
        let owner = parts.next().unwrap_or("").rsplit('/').next().unwrap_or("");
        let valid = |s: &str| {
            !s.is_empty()
                && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                && s != "."
                && s != ".."
        };
        if !valid(owner) || !valid(name) {
            return Err(Error::Invalid(format!("repository URL {url:?} does not name owner/name")));
        }
        Ok(Repo { owner: owner.to_owned(), name: name.to_owned() })
    }
}

impl fmt::Display for Repo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// A string that never prints: tokens and passwords.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The value, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Read or write access to a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Clone and fetch.
    Read,
    /// Push branches.
    Write,
}

/// Username and token for git over HTTPS.
#[derive(Debug, Clone)]
pub struct GitCredential {
    /// The username git sends (`x-access-token` for GitHub App tokens).
    pub username: String,
    /// The token.
    pub password: Secret,
}

/// Where git clones from and pushes to.
#[derive(Debug, Clone)]
pub struct GitRemote {
    /// The URL, without credentials in it.
    pub url: String,
    /// The credential git asks for, if the remote needs one.
    pub credential: Option<GitCredential>,
}

/// A pull request to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPullRequest {
    /// The branch with the change.
    pub head: String,
    /// The branch to merge into.
    pub base: String,
    /// Title.
    pub title: String,
    /// Body (Markdown).
    pub body: String,
}

/// Open, closed or merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrState {
    /// Open.
    Open,
    /// Closed without merging.
    Closed,
    /// Merged.
    Merged,
}

/// A pull request as the forge has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// Number within the repository.
    pub number: u64,
    /// Web address.
    pub url: String,
    /// Head branch.
    pub head: String,
    /// Base branch.
    pub base: String,
    /// Commit at the head of the head branch.
    pub head_sha: String,
    /// State.
    pub state: PrState,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// Labels.
    pub labels: Vec<String>,
}

/// A comment on a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// Forge id.
    pub id: u64,
    /// Body (Markdown).
    pub body: String,
}

/// Where a check comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckSource {
    /// A check run (GitHub Actions and apps).
    CheckRun,
    /// A commit status (older CI integrations).
    CommitStatus,
}

/// Where a check is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckState {
    /// Queued or running.
    Pending,
    /// Passed (success, neutral or skipped).
    Passed,
    /// Failed (failure, error, startup failure, action required).
    Failed,
    /// Cancelled.
    Cancelled,
    /// Timed out.
    TimedOut,
}

/// One check on a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Forge id of the check run, or the status context.
    pub id: String,
    /// Check run name or status context.
    pub name: String,
    /// Check run or commit status.
    pub source: CheckSource,
    /// Where it is.
    pub state: CheckState,
    /// The forge's own word for the outcome (`failure`, `timed_out`…).
    pub conclusion: String,
    /// Link to the run.
    pub details_url: Option<String>,
    /// Short text the check gave (title, summary or status description).
    pub summary: String,
}

/// State of a commit status the controller sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusState {
    /// In progress.
    Pending,
    /// Passed.
    Success,
    /// Failed.
    Failure,
}

/// What a forge can do. Implementations must be idempotent where the
/// lifecycle needs it: opening a pull request for a branch that has one
/// returns the existing one.
#[async_trait]
pub trait Forge: Send + Sync + fmt::Debug {
    /// `"github"`, `"local"`.
    fn kind(&self) -> &'static str;
    /// Where to clone from or push to, with a credential scoped to `repo`
    /// and `access`.
    async fn remote(&self, repo: &Repo, access: Access) -> Result<GitRemote, Error>;
    /// The commit a branch points to, or `None` if it does not exist.
    async fn branch_head(&self, repo: &Repo, branch: &str) -> Result<Option<String>, Error>;
    /// Deletes a branch; a missing branch is not an error.
    async fn delete_branch(&self, repo: &Repo, branch: &str) -> Result<(), Error>;
    /// The open pull request from `head`, if any.
    async fn pull_request_for_branch(&self, repo: &Repo, head: &str) -> Result<Option<PullRequest>, Error>;
    /// A pull request by number.
    async fn pull_request(&self, repo: &Repo, number: u64) -> Result<PullRequest, Error>;
    /// Opens a pull request, or returns the open one from the same branch.
    async fn open_pull_request(&self, repo: &Repo, new: &NewPullRequest) -> Result<PullRequest, Error>;
    /// Replaces title and body.
    async fn update_pull_request(
        &self,
        repo: &Repo,
        number: u64,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, Error>;
    /// Closes without merging.
    async fn close_pull_request(&self, repo: &Repo, number: u64) -> Result<(), Error>;
    /// Adds labels (creating them on the repository if needed).
    async fn add_labels(&self, repo: &Repo, number: u64, labels: &[String]) -> Result<(), Error>;
    /// Comments, oldest first.
    async fn comments(&self, repo: &Repo, number: u64) -> Result<Vec<Comment>, Error>;
    /// Adds a comment.
    async fn comment(&self, repo: &Repo, number: u64, body: &str) -> Result<Comment, Error>;
    /// Check runs and commit statuses of a commit (the latest of each).
    async fn checks(&self, repo: &Repo, sha: &str) -> Result<Vec<Check>, Error>;
    /// The log of a failed check, as the forge gives it (untrusted text).
    async fn check_log(&self, repo: &Repo, check: &Check) -> Result<String, Error>;
    /// Re-runs a failed check (the failed jobs of its workflow run).
    async fn rerun(&self, repo: &Repo, check: &Check) -> Result<(), Error>;
    /// The command the forge runs for `check`, when it knows one, for a
    /// repair to run again in its VM. `None` by default: a GitHub check is
    /// a job of a workflow, whose steps are the repository's text.
    async fn check_command(&self, _repo: &Repo, _check: &Check) -> Result<Option<Vec<String>>, Error> {
        Ok(None)
    }
    /// Sets a commit status, e.g. the controller's own vetting verdict.
    async fn set_status(
        &self,
        repo: &Repo,
        sha: &str,
        context: &str,
        state: StatusState,
        description: &str,
    ) -> Result<(), Error>;
}

/// What can go wrong talking to a forge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not there (404).
    #[error("{0}: not found")]
    NotFound(String),
    /// The forge refused the request as invalid (422), with its message.
    #[error("{what}: rejected: {message}")]
    Rejected {
        /// The request.
        what: String,
        /// The forge's words.
        message: String,
    },
    /// Authentication or permission (401, 403 without rate limit).
    #[error("{what}: not allowed: {message}")]
    Denied {
        /// The request.
        what: String,
        /// The forge's words.
        message: String,
    },
    /// Rate limited; retry after the given seconds.
    #[error("{what}: rate limited, retry in {retry_after_secs}s")]
    RateLimited {
        /// The request.
        what: String,
        /// Seconds until the limit resets.
        retry_after_secs: u64,
    },
    /// The forge or the network failed (5xx, timeouts); worth retrying.
    #[error("{what}: forge unavailable: {message}")]
    Unavailable {
        /// The request.
        what: String,
        /// The cause.
        message: String,
    },
    /// Our input is wrong.
    #[error("{0}")]
    Invalid(String),
    /// Local trouble (git, files, the database).
    #[error("{context}: {message}")]
    Local {
        /// What was being done.
        context: String,
        /// The cause.
        message: String,
    },
}

impl Error {
    /// Whether trying again later may work.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::RateLimited { .. } | Error::Unavailable { .. })
    }

    /// Transient, or permanent: a refusal, a denial or bad input of ours
    /// will not change by waiting (a person must act). "Not found" is
    /// transient: forges are eventually consistent (a commit just pushed,
    /// a PR just opened), and the step's attempt limit bounds it.
    pub fn kind(&self) -> patchpilot_model::ErrorKind {
        match self {
            Error::Rejected { .. } | Error::Denied { .. } | Error::Invalid(_) => {
                patchpilot_model::ErrorKind::Permanent
            }
            _ => patchpilot_model::ErrorKind::Transient,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_urls_name_owner_and_repo() {
        for (url, owner, name) in [
            ("https://github.com/acme/api", "acme", "api"),
            ("https://github.com/acme/api.git", "acme", "api"),
            ("git@github.com:acme/api.git", "acme", "api"),
            ("local://acme/api", "acme", "api"),
            ("https://git.example.com/group/sub/acme/api/", "acme", "api"),
        ] {
            assert_eq!(
                Repo::from_url(url).ok(),
                Some(Repo { owner: owner.into(), name: name.into() }),
                "{url}"
            );
        }
        assert!(Repo::from_url("https://github.com/onlyowner").is_err());
        assert!(Repo::from_url("https://github.com/../x").is_err());
    }

    #[test]
    fn secrets_do_not_print() {
        let cred = GitCredential { username: "x-access-token".into(), password: Secret::new("ghs_abc") };
        assert!(!format!("{cred:?}").contains("ghs_abc"));
    }
}
