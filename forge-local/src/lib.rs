//! `patchpilot-forge-local`: the single-machine forge, and its CI.
//!
//! The local forge ([`LocalForge`]): bare git repositories under one folder
//! (`<root>/<owner>/<name>.git`), with pull requests, comments, labels,
//! commit statuses and check runs in Postgres (`local_forge_*` tables). It
//! is the forge of the single-machine default and of the end-to-end tests,
//! so it mimics GitHub where the lifecycle can tell the difference: pull
//! request numbers per repository, one open pull request per head branch, a
//! re-run is a new attempt of the same check, deleting a head branch closes
//! its pull request.
//!
//! Its CI: [`LocalCi`] claims check runs and prepares their checkouts in the
//! process that embeds it (the controller); [`check`] is the exchange with
//! the `patchpilot-local-ci` binary, which runs ONE check ([`runner`]) and
//! reports how it ended.
//!
//! It owns the bare repositories, the `local_forge_*` tables and the CI's
//! work folders. It must never run git except through [`Git`], never run a
//! repository's code in any process but `patchpilot-local-ci`, and never
//! hand out a credential: the remote is a `file://` URL.
//!
//! # Threat model of the CI runner
//!
//! A check runs the repository's code with the change under test applied,
//! a change an agent wrote from untrusted input (image contents,
//! advisories, CI logs), so it is treated as hostile. The process that
//! starts it, the controller, holds the database URL in its environment and
//! configuration.
//!
//! What the check gets: a fresh checkout of one commit and a `HOME`, in a
//! work folder of its own (`pp-ci-*` under the CI work folder) owned by its
//! uid; an environment of `PATH`, `HOME` and `PP_CI_ATTEMPT` only; stdin
//! from `/dev/null`, stdout and stderr to the runner, no other open file; a
//! process group the runner kills when the check ends, at the timeout, or
//! when the controller stops or goes away; no-new-privileges, so set-uid
//! programs give it nothing.
//!
//! Who it runs as ([`CheckUser`]):
//! - under a controller running as root, a uid of its own: `nobody`
//!   (65534:65534) by default, or a dedicated one (better: `nobody` may own
//!   other processes), with no supplementary groups. The runner drops the
//!   groups, sets the gid, then the uid, before it touches the checkout, and
//!   refuses to go on as root. That uid cannot read
//!   `/proc/<controller>/environ`, signal or trace the controller, nor read
//!   its files: its configuration (if not world-readable), the forge root
//!   (created 0700), the controller's own work folders (0700).
//! - under a controller that is not root, the controller's uid: switching
//!   needs `CAP_SETUID` and `CAP_SETGID`. Then only the controller being
//!   non-dumpable (`PR_SET_DUMPABLE` 0, set by the controller at start and
//!   by [`LocalCi::new`]) keeps `/proc/<controller>/environ`, its memory
//!   and its open files from the check: the kernel then grants them to root
//!   alone. The check can still read every file that uid can: the
//!   controller's configuration file (so no secret belongs in it; pass the
//!   database URL in the environment), every repository of the forge, the
//!   work folders of other runs.
//!
//! What it can reach in either case: the network as the host sees it, the
//! database server included (only its password keeps the check out, so it
//! must require one); whatever on the host is world-readable; checks
//! running at the same time, which share the uid; processes it leaves
//! behind by leaving its process group, until they exit. A sandbox VM per
//! check, as the agent gets, would close those; this crate does not.
//!
//! `tests/check_isolation.rs` holds these lines: the check's uid and
//! groups, its environment and open files, that it can read neither the
//! controller's environ (in both modes, with a control run in which a
//! dumpable controller's environ is read) nor the forge root, and that
//! checks as root are refused.

pub mod check;
mod ci;
pub mod runner;
mod workdir;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use sqlx::{FromRow, PgPool};

pub use check::{CheckUser, RUNNER_BINARY, RUNNER_LOST};
pub use ci::{LocalCi, LocalCiConfig, SetupError};

use patchpilot_forge::{
    Access, Check, CheckSource, CheckState, Comment, Error, Forge, GitRemote, NewPullRequest, PrState,
    PullRequest, Repo, StatusState,
};
use patchpilot_git::Git;

/// `SELECT … FROM local_forge_pull_requests <condition>` as one literal
/// (sqlx accepts only static SQL without an audit marker).
macro_rules! pr_select {
    ($condition:literal) => {
        concat!(
            "SELECT number, head, base, head_sha, state, title, body, labels FROM local_forge_pull_requests ",
            $condition
        )
    };
}

/// The local forge. Cheap to clone (the pool is shared).
#[derive(Debug, Clone)]
pub struct LocalForge {
    root: PathBuf,
    pool: PgPool,
}

impl LocalForge {
    /// A forge keeping repositories under `root` and everything else in the
    /// database behind `pool` (migrated with `patchpilot_fleet::store`).
    pub fn new(root: impl Into<PathBuf>, pool: PgPool) -> Self {
        let root = root.into();
        // `file://` URLs need an absolute path; a relative root would also
        // change meaning with the working folder of each git call.
        let root = std::path::absolute(&root).unwrap_or(root);
        LocalForge { root, pool }
    }

    /// The folder holding the repositories.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Where `repo`'s bare repository is (whether or not it exists).
    pub fn repository_path(&self, repo: &Repo) -> Result<PathBuf, Error> {
        // `Repo`'s fields are public, so they are checked again here: they
        // become path components.
        if !valid_name(&repo.owner) || !valid_name(&repo.name) {
            return Err(Error::Invalid(format!("{repo:?} is not a valid owner/name")));
        }
        Ok(self.root.join(&repo.owner).join(format!("{}.git", repo.name)))
    }

    /// The web-ish address of a pull request (`local://owner/name/pull/N`),
    /// which [`Repo::from_url`] maps back to the repository.
    pub fn pull_request_url(repo: &Repo, number: u64) -> String {
        format!("local://{}/{}/pull/{number}", repo.owner, repo.name)
    }

    /// Creates `repo` as an empty bare repository whose default branch is
    /// `default_branch` and, when `seed_dir` is given and the branch does
    /// not exist yet, pushes one commit of that folder's files to it.
    /// Idempotent: an existing repository is kept as it is.
    pub async fn create_repository(
        &self,
        repo: &Repo,
        default_branch: &str,
        seed_dir: Option<&Path>,
    ) -> Result<(), Error> {
        let path = self.repository_path(repo)?;
        check_branch_name(default_branch)?;
        if !path.join("HEAD").is_file() {
            let parent = path.parent().unwrap_or(&self.root);
            // 0700: the repositories are the controller's; a check of one
            // repository running under another uid must not read the rest.
            tokio::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .await
                .map_err(|e| local(format!("creating {}", parent.display()), e))?;
            let path_str = utf8(&path)?;
            Git::new(parent)
                .run(&["init", "--bare", "-q", &format!("--initial-branch={default_branch}"), "--", path_str])
                .await
                .map_err(|e| local(format!("creating {repo}"), e))?;
        }
        sqlx::query(
            "INSERT INTO local_forge_repositories (owner, repo, default_branch) VALUES ($1, $2, $3)
             ON CONFLICT (owner, repo) DO NOTHING",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(default_branch)
        .execute(&self.pool)
        .await
        .map_err(db(format!("recording {repo}")))?;
        if let Some(seed) = seed_dir
            && self.branch_head(repo, default_branch).await?.is_none()
        {
            self.seed(repo, &path, default_branch, seed).await?;
        }
        tracing::info!(%repo, path = %path.display(), "local forge repository ready");
        Ok(())
    }

    /// Commits `seed`'s files in a scratch repository and pushes them as
    /// `branch`, so the bare repository never gets an index or work tree.
    async fn seed(&self, repo: &Repo, bare: &Path, branch: &str, seed: &Path) -> Result<(), Error> {
        let context = format!("seeding {repo} from {}", seed.display());
        if !seed.is_dir() {
            return Err(Error::Invalid(format!("{context}: not a folder")));
        }
        // 0700, as the repositories: a check running meanwhile must not
        // read the seed's objects.
        let scratch = tempfile::Builder::new()
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()
            .map_err(|e| local(&context, e))?;
        let git_dir = scratch.path().join("seed.git");
        let git_dir_arg = format!("--git-dir={}", utf8(&git_dir)?);
        let work_tree_arg = format!("--work-tree={}", utf8(seed)?);
        let git = Git::new(seed);
        let init_arg = format!("--initial-branch={branch}");
        let push_arg = format!("HEAD:refs/heads/{branch}");
        let steps: [Vec<&str>; 4] = [
            vec!["init", "-q", "--bare", &init_arg, "--", utf8(&git_dir)?],
            vec![&git_dir_arg, &work_tree_arg, "add", "-A"],
            vec![&git_dir_arg, &work_tree_arg, "commit", "-q", "--allow-empty", "-m", "Initial commit"],
            vec![&git_dir_arg, "push", "-q", "--", utf8(bare)?, &push_arg],
        ];
        for args in steps {
            git.run(&args).await.map_err(|e| local(&context, e))?;
        }
        Ok(())
    }

    /// Sets (or replaces) the check `name` of `repo`: the command the
    /// local CI runner runs, as argv, in a checkout of each open pull
    /// request's head commit.
    pub async fn set_check(&self, repo: &Repo, name: &str, command: Vec<String>) -> Result<(), Error> {
        self.repository_path(repo)?;
        if name.trim().is_empty() || command.is_empty() || command[0].is_empty() {
            return Err(Error::Invalid(format!("check {name:?} of {repo} needs a name and a command")));
        }
        let done = sqlx::query(
            "INSERT INTO local_forge_checks (owner, repo, name, command)
             SELECT owner, repo, $3, $4 FROM local_forge_repositories WHERE owner = $1 AND repo = $2
             ON CONFLICT (owner, repo, name) DO UPDATE SET command = EXCLUDED.command",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(name)
        .bind(&command)
        .execute(&self.pool)
        .await
        .map_err(db(format!("setting check {name} of {repo}")))?;
        if done.rows_affected() == 0 {
            return Err(Error::NotFound(format!("repository {repo}")));
        }
        Ok(())
    }

    /// The default branch `repo` was created with.
    pub async fn default_branch(&self, repo: &Repo) -> Result<String, Error> {
        sqlx::query_scalar(
            "SELECT default_branch FROM local_forge_repositories WHERE owner = $1 AND repo = $2",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .fetch_optional(&self.pool)
        .await
        .map_err(db(format!("reading {repo}")))?
        .ok_or_else(|| Error::NotFound(format!("repository {repo}")))
    }

    /// git in `repo`'s bare repository, which must exist.
    fn bare(&self, repo: &Repo) -> Result<Git, Error> {
        let path = self.repository_path(repo)?;
        if !path.join("HEAD").is_file() {
            return Err(Error::NotFound(format!("repository {repo}")));
        }
        Ok(Git::new(path))
    }

    /// Every branch of `repo` and its commit.
    pub(crate) async fn branch_heads(&self, repo: &Repo) -> Result<HashMap<String, String>, Error> {
        let out = self
            .bare(repo)?
            .run(&["for-each-ref", "--format=%(refname)%00%(objectname)", "refs/heads/"])
            .await
            .map_err(|e| local(format!("listing branches of {repo}"), e))?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split_once('\0'))
            .filter_map(|(name, sha)| Some((name.strip_prefix("refs/heads/")?.to_owned(), sha.to_owned())))
            .collect())
    }

    async fn require_pr(&self, repo: &Repo, number: u64) -> Result<PrRow, Error> {
        sqlx::query_as::<_, PrRow>(pr_select!("WHERE owner = $1 AND repo = $2 AND number = $3"))
            .bind(&repo.owner)
            .bind(&repo.name)
            .bind(number_param(number)?)
            .fetch_optional(&self.pool)
            .await
            .map_err(db(format!("reading pull request {repo}#{number}")))?
            .ok_or_else(|| Error::NotFound(format!("pull request {repo}#{number}")))
    }

    /// A stored pull request as the trait returns it: the head commit is
    /// the branch's live one while the pull request is open and the branch
    /// exists, the one recorded at opening otherwise.
    async fn to_pull_request(&self, repo: &Repo, row: PrRow) -> Result<PullRequest, Error> {
        let state = match row.state.as_str() {
            "open" => PrState::Open,
            "merged" => PrState::Merged,
            _ => PrState::Closed,
        };
        let head_sha = match state {
            PrState::Open => self.branch_head(repo, &row.head).await?.unwrap_or(row.head_sha),
            _ => row.head_sha,
        };
        let number = u64::try_from(row.number).unwrap_or_default();
        Ok(PullRequest {
            number,
            url: Self::pull_request_url(repo, number),
            head: row.head,
            base: row.base,
            head_sha,
            state,
            title: row.title,
            body: row.body,
            labels: row.labels,
        })
    }
}

#[derive(Debug, FromRow)]
struct PrRow {
    number: i64,
    head: String,
    base: String,
    head_sha: String,
    state: String,
    title: String,
    body: String,
    labels: Vec<String>,
}

#[derive(Debug, FromRow)]
struct CheckRunRow {
    id: i64,
    name: String,
    status: String,
    conclusion: Option<String>,
    summary: String,
}

#[derive(Debug, FromRow)]
struct StatusRow {
    context: String,
    state: String,
    description: String,
}

#[async_trait]
impl Forge for LocalForge {
    fn kind(&self) -> &'static str {
        "local"
    }

    async fn remote(&self, repo: &Repo, _access: Access) -> Result<GitRemote, Error> {
        let path = self.bare(repo)?.dir().to_owned();
        // No credential: the local forge's access control is the file
        // system's.
        Ok(GitRemote { url: format!("file://{}", utf8(&path)?), credential: None })
    }

    async fn branch_head(&self, repo: &Repo, branch: &str) -> Result<Option<String>, Error> {
        check_branch_name(branch)?;
        let refname = format!("refs/heads/{branch}");
        // for-each-ref rather than rev-parse: a missing branch is an empty
        // answer, not an exit status indistinguishable from other failures.
        // Its pattern also matches `refs/heads/<branch>/…`, hence the exact
        // comparison.
        let out = self
            .bare(repo)?
            .run(&["for-each-ref", "--format=%(refname)%00%(objectname)", &refname])
            .await
            .map_err(|e| local(format!("reading branch {branch} of {repo}"), e))?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split_once('\0'))
            .find(|(name, _)| *name == refname)
            .map(|(_, sha)| sha.to_owned()))
    }

    async fn delete_branch(&self, repo: &Repo, branch: &str) -> Result<(), Error> {
        if self.branch_head(repo, branch).await?.is_some() {
            self.bare(repo)?
                .run(&["update-ref", "-d", &format!("refs/heads/{branch}")])
                .await
                .map_err(|e| local(format!("deleting branch {branch} of {repo}"), e))?;
        }
        // GitHub closes a pull request whose head branch is deleted; the
        // lifecycle must see the same here.
        sqlx::query(
            "UPDATE local_forge_pull_requests SET state = 'closed', updated_at = now()
             WHERE owner = $1 AND repo = $2 AND head = $3 AND state = 'open'",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(branch)
        .execute(&self.pool)
        .await
        .map_err(db(format!("closing pull requests from {repo}:{branch}")))?;
        Ok(())
    }

    async fn pull_request_for_branch(&self, repo: &Repo, head: &str) -> Result<Option<PullRequest>, Error> {
        let row = sqlx::query_as::<_, PrRow>(pr_select!(
            "WHERE owner = $1 AND repo = $2 AND head = $3 AND state = 'open'"
        ))
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(head)
        .fetch_optional(&self.pool)
        .await
        .map_err(db(format!("finding the pull request from {repo}:{head}")))?;
        match row {
            Some(row) => Ok(Some(self.to_pull_request(repo, row).await?)),
            None => Ok(None),
        }
    }

    async fn pull_request(&self, repo: &Repo, number: u64) -> Result<PullRequest, Error> {
        let row = self.require_pr(repo, number).await?;
        self.to_pull_request(repo, row).await
    }

    async fn open_pull_request(&self, repo: &Repo, new: &NewPullRequest) -> Result<PullRequest, Error> {
        let what = format!("opening a pull request {repo}:{} → {}", new.head, new.base);
        let rejected = |message: &str| Error::Rejected { what: what.clone(), message: message.to_owned() };
        if new.head == new.base {
            return Err(rejected("head and base are the same branch"));
        }
        let Some(head_sha) = self.branch_head(repo, &new.head).await? else {
            return Err(rejected("the head branch does not exist"));
        };
        if self.branch_head(repo, &new.base).await?.is_none() {
            return Err(rejected("the base branch does not exist"));
        }
        let mut tx = self.pool.begin().await.map_err(db(&what))?;
        // The repository row's lock serialises openings: two controllers
        // opening from the same branch get one pull request.
        let next: Option<i64> = sqlx::query_scalar(
            "SELECT next_number FROM local_forge_repositories WHERE owner = $1 AND repo = $2 FOR UPDATE",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db(&what))?;
        let Some(number) = next else {
            return Err(Error::NotFound(format!("repository {repo}")));
        };
        let existing = sqlx::query_as::<_, PrRow>(pr_select!(
            "WHERE owner = $1 AND repo = $2 AND head = $3 AND state = 'open'"
        ))
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(&new.head)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db(&what))?;
        let row = match existing {
            Some(row) => row,
            None => {
                sqlx::query("UPDATE local_forge_repositories SET next_number = next_number + 1 WHERE owner = $1 AND repo = $2")
                    .bind(&repo.owner)
                    .bind(&repo.name)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(&what))?;
                sqlx::query_as::<_, PrRow>(
                    "INSERT INTO local_forge_pull_requests (owner, repo, number, head, base, head_sha, title, body)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                     RETURNING number, head, base, head_sha, state, title, body, labels",
                )
                .bind(&repo.owner)
                .bind(&repo.name)
                .bind(number)
                .bind(&new.head)
                .bind(&new.base)
                .bind(&head_sha)
                .bind(&new.title)
                .bind(&new.body)
                .fetch_one(&mut *tx)
                .await
                .map_err(db(&what))?
            }
        };
        tx.commit().await.map_err(db(&what))?;
        tracing::info!(%repo, number = row.number, head = %new.head, "local forge pull request open");
        self.to_pull_request(repo, row).await
    }

    async fn update_pull_request(
        &self,
        repo: &Repo,
        number: u64,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, Error> {
        let row = sqlx::query_as::<_, PrRow>(
            "UPDATE local_forge_pull_requests SET title = $4, body = $5, updated_at = now()
             WHERE owner = $1 AND repo = $2 AND number = $3
             RETURNING number, head, base, head_sha, state, title, body, labels",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(number_param(number)?)
        .bind(title)
        .bind(body)
        .fetch_optional(&self.pool)
        .await
        .map_err(db(format!("updating pull request {repo}#{number}")))?
        .ok_or_else(|| Error::NotFound(format!("pull request {repo}#{number}")))?;
        self.to_pull_request(repo, row).await
    }

    async fn close_pull_request(&self, repo: &Repo, number: u64) -> Result<(), Error> {
        let done = sqlx::query(
            "UPDATE local_forge_pull_requests SET state = 'closed', updated_at = now()
             WHERE owner = $1 AND repo = $2 AND number = $3 AND state = 'open'",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(number_param(number)?)
        .execute(&self.pool)
        .await
        .map_err(db(format!("closing pull request {repo}#{number}")))?;
        if done.rows_affected() == 0 {
            // Closing a closed pull request is a no-op; a missing one is not.
            self.require_pr(repo, number).await?;
        }
        Ok(())
    }

    async fn add_labels(&self, repo: &Repo, number: u64, labels: &[String]) -> Result<(), Error> {
        if labels.iter().any(|l| l.trim().is_empty()) {
            return Err(Error::Invalid(format!("empty label for {repo}#{number}")));
        }
        // Appends the new labels in order, skipping ones already there, in
        // one statement so concurrent additions do not lose each other.
        let done = sqlx::query(
            "UPDATE local_forge_pull_requests p SET updated_at = now(), labels = p.labels || ARRAY(
                 SELECT l FROM unnest($4::text[]) WITH ORDINALITY AS t(l, n)
                 WHERE l <> ALL(p.labels) GROUP BY l ORDER BY min(n))
             WHERE owner = $1 AND repo = $2 AND number = $3",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(number_param(number)?)
        .bind(labels)
        .execute(&self.pool)
        .await
        .map_err(db(format!("labelling pull request {repo}#{number}")))?;
        if done.rows_affected() == 0 {
            return Err(Error::NotFound(format!("pull request {repo}#{number}")));
        }
        Ok(())
    }

    async fn comments(&self, repo: &Repo, number: u64) -> Result<Vec<Comment>, Error> {
        self.require_pr(repo, number).await?;
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT id, body FROM local_forge_comments WHERE owner = $1 AND repo = $2 AND number = $3 ORDER BY id",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(number_param(number)?)
        .fetch_all(&self.pool)
        .await
        .map_err(db(format!("reading comments of {repo}#{number}")))?;
        Ok(rows
            .into_iter()
            .map(|(id, body)| Comment { id: u64::try_from(id).unwrap_or_default(), body })
            .collect())
    }

    async fn comment(&self, repo: &Repo, number: u64, body: &str) -> Result<Comment, Error> {
        self.require_pr(repo, number).await?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO local_forge_comments (owner, repo, number, body) VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(number_param(number)?)
        .bind(body)
        .fetch_one(&self.pool)
        .await
        .map_err(db(format!("commenting on {repo}#{number}")))?;
        Ok(Comment { id: u64::try_from(id).unwrap_or_default(), body: body.to_owned() })
    }

    async fn checks(&self, repo: &Repo, sha: &str) -> Result<Vec<Check>, Error> {
        let what = format!("reading checks of {repo}@{sha}");
        let runs: Vec<CheckRunRow> = sqlx::query_as(
            "SELECT DISTINCT ON (name) id, name, status, conclusion, summary FROM local_forge_check_runs
             WHERE owner = $1 AND repo = $2 AND sha = $3 ORDER BY name, attempt DESC",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(sha)
        .fetch_all(&self.pool)
        .await
        .map_err(db(&what))?;
        let statuses: Vec<StatusRow> = sqlx::query_as(
            "SELECT DISTINCT ON (context) context, state, description FROM local_forge_statuses
             WHERE owner = $1 AND repo = $2 AND sha = $3 ORDER BY context, id DESC",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(sha)
        .fetch_all(&self.pool)
        .await
        .map_err(db(&what))?;
        let mut checks: Vec<Check> = runs
            .into_iter()
            .map(|run| {
                let conclusion = run.conclusion.unwrap_or_default();
                let state = match (run.status.as_str(), conclusion.as_str()) {
                    ("completed", "success") => CheckState::Passed,
                    ("completed", "timed_out") => CheckState::TimedOut,
                    ("completed", "cancelled") => CheckState::Cancelled,
                    ("completed", _) => CheckState::Failed,
                    _ => CheckState::Pending,
                };
                Check {
                    id: run.id.to_string(),
                    details_url: Some(format!("local://{}/{}/checks/{}", repo.owner, repo.name, run.id)),
                    name: run.name,
                    source: CheckSource::CheckRun,
                    state,
                    conclusion,
                    summary: if run.summary.is_empty() { run.status.replace('_', " ") } else { run.summary },
                }
            })
            .collect();
        checks.extend(statuses.into_iter().map(|s| Check {
            id: s.context.clone(),
            name: s.context,
            source: CheckSource::CommitStatus,
            state: match s.state.as_str() {
                "success" => CheckState::Passed,
                "pending" => CheckState::Pending,
                _ => CheckState::Failed,
            },
            conclusion: s.state,
            details_url: None,
            summary: s.description,
        }));
        Ok(checks)
    }

    async fn check_log(&self, repo: &Repo, check: &Check) -> Result<String, Error> {
        if check.source == CheckSource::CommitStatus {
            // A commit status has no log; its description is all there is.
            return Ok(check.summary.clone());
        }
        let id = check_run_id(check)?;
        sqlx::query_scalar(
            "SELECT log FROM local_forge_check_runs WHERE id = $1 AND owner = $2 AND repo = $3",
        )
        .bind(id)
        .bind(&repo.owner)
        .bind(&repo.name)
        .fetch_optional(&self.pool)
        .await
        .map_err(db(format!("reading the log of check run {id} of {repo}")))?
        .ok_or_else(|| Error::NotFound(format!("check run {id} of {repo}")))
    }

    async fn check_command(&self, repo: &Repo, check: &Check) -> Result<Option<Vec<String>>, Error> {
        if check.source == CheckSource::CommitStatus {
            // Statuses are set by callers (the controller's vetting); no
            // command of this forge's produced them.
            return Ok(None);
        }
        sqlx::query_scalar(
            "SELECT command FROM local_forge_checks WHERE owner = $1 AND repo = $2 AND name = $3",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(&check.name)
        .fetch_optional(&self.pool)
        .await
        .map_err(db(format!("reading the command of check {} of {repo}", check.name)))
    }

    async fn rerun(&self, repo: &Repo, check: &Check) -> Result<(), Error> {
        let what = format!("re-running check {} of {repo}", check.name);
        if check.source == CheckSource::CommitStatus {
            return Err(Error::Rejected { what, message: "a commit status cannot be re-run".into() });
        }
        let id = check_run_id(check)?;
        let run: Option<(String, String, i32, String)> = sqlx::query_as(
            "SELECT sha, name, attempt, status FROM local_forge_check_runs WHERE id = $1 AND owner = $2 AND repo = $3",
        )
        .bind(id)
        .bind(&repo.owner)
        .bind(&repo.name)
        .fetch_optional(&self.pool)
        .await
        .map_err(db(&what))?;
        let Some((sha, name, attempt, status)) = run else {
            return Err(Error::NotFound(format!("check run {id} of {repo}")));
        };
        if status != "completed" {
            return Err(Error::Rejected {
                what,
                message: format!("the check run is still {}", status.replace('_', " ")),
            });
        }
        // "The attempt after this one": asking twice (a controller that
        // crashed after asking) finds it already there and adds nothing.
        let added = sqlx::query(
            "INSERT INTO local_forge_check_runs (owner, repo, sha, name, attempt) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (owner, repo, sha, name, attempt) DO NOTHING",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(&sha)
        .bind(&name)
        .bind(attempt + 1)
        .execute(&self.pool)
        .await
        .map_err(db(&what))?;
        tracing::info!(%repo, check = %name, %sha, attempt = attempt + 1, queued = added.rows_affected() == 1, "local CI re-run");
        Ok(())
    }

    async fn set_status(
        &self,
        repo: &Repo,
        sha: &str,
        context: &str,
        state: StatusState,
        description: &str,
    ) -> Result<(), Error> {
        let what = format!("setting status {context} on {repo}@{sha}");
        if context.trim().is_empty() {
            return Err(Error::Invalid(format!("{what}: empty context")));
        }
        // GitHub refuses statuses on commits it does not have.
        if !is_sha(sha)
            || self.bare(repo)?.run(&["cat-file", "-e", &format!("{sha}^{{commit}}")]).await.is_err()
        {
            return Err(Error::Rejected { what, message: "no commit found for the sha".into() });
        }
        let state = match state {
            StatusState::Pending => "pending",
            StatusState::Success => "success",
            StatusState::Failure => "failure",
        };
        sqlx::query(
            "INSERT INTO local_forge_statuses (owner, repo, sha, context, state, description)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(sha)
        .bind(context)
        .bind(state)
        .bind(description)
        .execute(&self.pool)
        .await
        .map_err(db(&what))?;
        Ok(())
    }
}

/// An owner or repository name usable as a path component.
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// Branch names end up in git arguments: refuse what git would refuse and
/// anything that could read as an option.
fn check_branch_name(branch: &str) -> Result<(), Error> {
    let bad = branch.is_empty()
        || branch.starts_with('-')
        || branch.starts_with('/')
        || branch.ends_with('/')
        || branch.ends_with(".lock")
        || branch.ends_with('.')
        || branch.contains("..")
        || branch.contains("//")
        || branch.contains("@{")
        || branch.split('/').any(|part| part.starts_with('.'))
        || branch.chars().any(|c| c.is_ascii_control() || " ~^:?*[\\".contains(c));
    if bad {
        return Err(Error::Invalid(format!("{branch:?} is not a valid branch name")));
    }
    Ok(())
}

/// A full hexadecimal object name.
pub(crate) fn is_sha(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn check_run_id(check: &Check) -> Result<i64, Error> {
    check.id.parse().map_err(|_| Error::Invalid(format!("{:?} is not a local check run id", check.id)))
}

fn number_param(number: u64) -> Result<i64, Error> {
    i64::try_from(number).map_err(|_| Error::Invalid(format!("pull request number {number} is out of range")))
}

fn utf8(path: &Path) -> Result<&str, Error> {
    path.to_str().ok_or_else(|| Error::Invalid(format!("{} is not a UTF-8 path", path.display())))
}

fn local(context: impl Into<String>, e: impl std::fmt::Display) -> Error {
    Error::Local { context: context.into(), message: e.to_string() }
}

/// Maps a database error: a database that cannot be reached is worth
/// retrying, like a forge that is down.
fn db(context: impl Into<String>) -> impl FnOnce(sqlx::Error) -> Error {
    let context = context.into();
    move |e| match e {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => Error::Unavailable { what: context, message: e.to_string() },
        _ => Error::Local { context, message: e.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_that_could_be_options_or_paths_are_refused() {
        for bad in ["", "-x", "--upload-pack=x", "a..b", "a b", "a:b", "/a", "a/", "a.lock", "a/.b", "a@{1}"]
        {
            assert!(check_branch_name(bad).is_err(), "{bad:?}");
        }
        for good in ["main", "patchpilot/fix-cve-2024-1234", "release-1.2"] {
            assert!(check_branch_name(good).is_ok(), "{good:?}");
        }
    }

    #[tokio::test]
    async fn repository_paths_stay_under_the_root() {
        let pool = sqlx::PgPool::connect_lazy("postgres://localhost/none");
        let Ok(pool) = pool else { return };
        let forge = LocalForge::new("/srv/forge", pool);
        let repo = Repo { owner: "acme".into(), name: "api".into() };
        assert_eq!(forge.repository_path(&repo).ok(), Some(PathBuf::from("/srv/forge/acme/api.git")));
        let escape = Repo { owner: "..".into(), name: "x".into() };
        assert!(forge.repository_path(&escape).is_err());
    }
}
