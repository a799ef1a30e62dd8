//! Publishing a vetted change: commit, push, open or update the one pull
//! request of its branch, label it. Safe to repeat after a crash at any
//! point: a push whose tree is already on the branch is skipped, the pull
//! request is looked up by branch before one is opened, and labels are
//! added, never duplicated.
//!
//! It pushes only the branch it was given (never the base branch), with
//! `--force-with-lease` against the head the forge reported, so it cannot
//! overwrite a commit someone else pushed in the meantime.

use std::path::Path;

use patchpilot_forge::credential::{RemoteGitError, run_git_remote};
use patchpilot_forge::{Access, Forge, NewPullRequest, PullRequest, Repo};
use patchpilot_git::{Git, GitError};

/// What to publish.
#[derive(Debug, Clone)]
pub struct PublishRequest<'a> {
    /// The repository.
    pub repo: &'a Repo,
    /// The controller's clone: the base commit checked out, the vetted change
    /// staged (not committed).
    pub clone: &'a Path,
    /// The branch the PR merges into.
    pub base_branch: &'a str,
    /// The PR's branch.
    pub head_branch: &'a str,
    /// Commit message.
    pub message: &'a str,
    /// PR title.
    pub title: &'a str,
    /// PR body.
    pub body: &'a str,
    /// Labels for the PR.
    pub labels: &'a [String],
}

/// What was published.
#[derive(Debug, Clone)]
pub struct Published {
    /// The pull request.
    pub pr: PullRequest,
    /// The branch's head commit.
    pub head_sha: String,
    /// Whether this call pushed (false: the tree was already there).
    pub pushed: bool,
}

/// Why publishing failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// git failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The forge failed.
    #[error(transparent)]
    Forge(#[from] patchpilot_forge::Error),
    /// git against the remote failed.
    #[error(transparent)]
    Remote(#[from] RemoteGitError),
    /// Nothing is staged: there is no change to publish.
    #[error("nothing is staged in {0}: no change to publish")]
    NothingStaged(String),
}

/// Commits the staged change, pushes it to `head_branch` unless the same
/// tree is already there, and opens or updates the branch's PR.
pub async fn publish_change(forge: &dyn Forge, req: &PublishRequest<'_>) -> Result<Published, Error> {
    let git = Git::new(req.clone);
    let staged = git.run(&["diff", "--cached", "--name-only"]).await?.text();
    if staged.is_empty() {
        return Err(Error::NothingStaged(req.clone.display().to_string()));
    }
    git.run(&["commit", "-q", "--no-verify", "-m", req.message]).await?;
    let local_tree = git.run(&["rev-parse", "HEAD^{tree}"]).await?.text();
    let remote = forge.remote(req.repo, Access::Write).await?;
    let remote_head = forge.branch_head(req.repo, req.head_branch).await?;

    // The same tree already on the branch means an earlier attempt pushed
    // and crashed before it could record that: do not push again.
    let mut already_there = None;
    if let Some(sha) = &remote_head {
        let fetch = ["fetch", "-q", "--no-tags", "--depth", "1", &remote.url, sha];
        run_git_remote(&git, &remote, &fetch).await?;
        let remote_tree = git.run(&["rev-parse", &format!("{sha}^{{tree}}")]).await?.text();
        if remote_tree == local_tree {
            already_there = Some(sha.clone());
        }
    }
    let (head_sha, pushed) = match already_there {
        Some(sha) => (sha, false),
        None => {
            let lease = format!(
                "--force-with-lease=refs/heads/{}:{}",
                req.head_branch,
                remote_head.clone().unwrap_or_default()
            );
            let refspec = format!("HEAD:refs/heads/{}", req.head_branch);
            let push = ["push", "-q", "--no-verify", &lease, &remote.url, &refspec];
            run_git_remote(&git, &remote, &push).await?;
            (git.run(&["rev-parse", "HEAD"]).await?.text(), true)
        }
    };

    let pr = match forge.pull_request_for_branch(req.repo, req.head_branch).await? {
        Some(pr) if pr.title == req.title && pr.body == req.body => pr,
        Some(pr) => forge.update_pull_request(req.repo, pr.number, req.title, req.body).await?,
        None => {
            let new = NewPullRequest {
                head: req.head_branch.to_owned(),
                base: req.base_branch.to_owned(),
                title: req.title.to_owned(),
                body: req.body.to_owned(),
            };
            forge.open_pull_request(req.repo, &new).await?
        }
    };
    let missing: Vec<String> = req.labels.iter().filter(|l| !pr.labels.contains(l)).cloned().collect();
    if !missing.is_empty() {
        forge.add_labels(req.repo, pr.number, &missing).await?;
    }
    Ok(Published { pr, head_sha, pushed })
}
