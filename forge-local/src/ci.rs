//! The local CI runner: runs each repository's configured check commands
//! against the head commit of every open pull request on the local forge
//! and records the outcome as check runs, the way a CI service reports to
//! GitHub.
//!
//! It owns the `local_forge_check_runs` rows it claims, from `queued` to
//! `completed`, and the work folders of its checks. It runs repository code
//! by design (that is what CI does), but never in its own process: each
//! check gets a fresh checkout, handed to the check's uid, and runs in a
//! `patchpilot-local-ci` process ([`crate::check`]) with an environment of
//! PATH, a scratch HOME and `PP_CI_ATTEMPT` only. See the crate's threat
//! model for what that code can still reach.
//!
//! Several runners may share one database: claims skip locked rows, and a
//! runner only completes a run it still holds.
//!
//! Conclusions are kept simple on purpose: exit 0 is `success`, running past
//! the timeout is `timed_out`, any other exit is `failure`. A checkout that
//! fails, a runner process that fails, a runner that shuts down mid-run and
//! a run whose runner disappeared (its deadline passed) are `cancelled`, the
//! latter two with "runner lost" in the log; telling infrastructure from
//! code failures is the controller's triage, from the conclusion and the
//! log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::FromRow;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::check::{self, CheckReport, CheckRequest, CheckUser, Conclusion, RUNNER_BINARY, RUNNER_LOST};
use crate::workdir::{barrier_for, hand_over};
use crate::{LocalForge, db, is_sha, local};
use patchpilot_forge::{Error, Repo};
use patchpilot_git::Git;

/// How the runner behaves.
#[derive(Debug, Clone)]
pub struct LocalCiConfig {
    /// How long a check command may run before it is killed (`timed_out`).
    pub timeout: Duration,
    /// Extra time past the timeout before another runner presumes the
    /// holder of an in-progress run dead (covers checkout, kill and write).
    pub grace: Duration,
    /// How often to look for work.
    pub poll_interval: Duration,
    /// Most bytes of output kept per run; the tail is kept, where failures
    /// are.
    pub log_cap: usize,
    /// Runs at once. They share the check's uid, so checks running at the
    /// same time can reach each other's work folders.
    pub parallel: usize,
    /// Where checkouts are made (default: the system's temporary folder).
    /// The check's uid must be able to pass through every folder above it.
    pub work_dir: Option<PathBuf>,
    /// The `patchpilot-local-ci` binary (default: next to this process's
    /// executable, or one folder up from a test executable in cargo's
    /// `deps`).
    pub runner: Option<PathBuf>,
    /// Who checks run as (default: [`CheckUser::for_this_process`], which
    /// is `nobody` for a controller running as root).
    pub check_user: Option<CheckUser>,
}

impl Default for LocalCiConfig {
    fn default() -> Self {
        LocalCiConfig {
            timeout: Duration::from_secs(20 * 60),
            grace: Duration::from_secs(60),
            poll_interval: Duration::from_secs(1),
            log_cap: 1024 * 1024,
            parallel: 1,
            work_dir: None,
            runner: None,
            check_user: None,
        }
    }
}

/// Why a runner cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Checks would run as root.
    #[error(
        "local CI checks would run as root ({0:?}): they never do; a controller running as root runs them as another uid (default {uid})",
        uid = check::NOBODY
    )]
    RootCheckUser(CheckUser),
    /// Checks should switch uid, which only root can do: every check would
    /// fail at the switch, so the runner does not start.
    #[error(
        "local CI checks are to run as uid {uid}, gid {gid}, but this process (uid {own}) is not root and cannot switch: run the controller as root, or unset controller.local.ci_uid"
    )]
    CannotSwitch {
        /// The uid asked for.
        uid: u32,
        /// The gid asked for.
        gid: u32,
        /// This process's uid.
        own: u32,
    },
    /// This process's executable, next to which the runner is looked for,
    /// is unknown.
    #[error("finding this process's executable, next to which {RUNNER_BINARY} is looked for")]
    CurrentExe(#[source] std::io::Error),
    /// The runner binary is not there.
    #[error(
        "the local CI runner {} is missing: build it (`cargo build -p patchpilot-forge-local`), install it next to the controller, or name it (controller.local.ci_runner)",
        .0.display()
    )]
    RunnerMissing(PathBuf),
    /// The work folder cannot be made.
    #[error("creating the CI work folder {}", path.display())]
    WorkDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The check's uid could not reach its work folder.
    #[error(
        "the CI work folder {} is out of reach of uid {uid}: {} does not let it pass (it needs o+x, or choose another work folder)",
        path.display(),
        barrier.display()
    )]
    WorkDirUnreachable {
        /// The work folder.
        path: PathBuf,
        /// The first folder on the way the uid cannot pass through.
        barrier: PathBuf,
        /// The check's uid.
        uid: u32,
    },
    /// `PR_SET_DUMPABLE` failed.
    #[error("making this process non-dumpable")]
    NonDumpable(#[source] nix::Error),
}

/// The runner. See the module documentation.
#[derive(Debug, Clone)]
pub struct LocalCi {
    config: Arc<LocalCiConfig>,
    /// Names this runner in the rows it holds, so it completes only those.
    runner: String,
    /// The `patchpilot-local-ci` binary.
    program: PathBuf,
    /// Who checks run as.
    user: CheckUser,
    /// Where work folders are made.
    work_base: PathBuf,
}

/// A claimed run.
#[derive(Debug, FromRow)]
struct Job {
    id: i64,
    owner: String,
    repo: String,
    sha: String,
    name: String,
    attempt: i32,
    command: Option<Vec<String>>,
}

impl LocalCi {
    /// A runner with `config`: finds the runner binary, settles who checks
    /// run as (refusing root) and that they can reach their work folders.
    ///
    /// It also makes this process non-dumpable (`PR_SET_DUMPABLE` 0), for
    /// the case where checks run under this process's own uid: a process of
    /// the same uid may otherwise read `/proc/<this pid>/environ` (the
    /// database URL), its memory and its open files. With a uid of their
    /// own, checks are kept out by the uid already; this is the second
    /// line.
    pub fn new(config: LocalCiConfig) -> Result<Self, SetupError> {
        let user = config.check_user.unwrap_or_else(CheckUser::for_this_process);
        if user.is_root() {
            return Err(SetupError::RootCheckUser(user));
        }
        if let CheckUser::Switch { uid, gid } = user
            && !nix::unistd::geteuid().is_root()
        {
            return Err(SetupError::CannotSwitch { uid, gid, own: nix::unistd::geteuid().as_raw() });
        }
        let program = match &config.runner {
            Some(program) => program.clone(),
            None => default_runner()?,
        };
        if !program.is_file() {
            return Err(SetupError::RunnerMissing(program));
        }
        let work_base = config.work_dir.clone().unwrap_or_else(std::env::temp_dir);
        let work_base = std::path::absolute(&work_base).unwrap_or(work_base);
        std::fs::create_dir_all(&work_base)
            .map_err(|source| SetupError::WorkDir { path: work_base.clone(), source })?;
        if let CheckUser::Switch { uid, gid } = user {
            let barrier = barrier_for(&work_base, uid, gid)
                .map_err(|source| SetupError::WorkDir { path: work_base.clone(), source })?;
            if let Some(barrier) = barrier {
                return Err(SetupError::WorkDirUnreachable { path: work_base, barrier, uid });
            }
        }
        nix::sys::prctl::set_dumpable(false).map_err(SetupError::NonDumpable)?;
        let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).unwrap_or_default();
        let runner =
            format!("{host}:{}:{}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..8]);
        Ok(LocalCi { config: Arc::new(config), runner, program, user, work_base })
    }

    /// Who checks run as.
    pub fn check_user(&self) -> CheckUser {
        self.user
    }

    /// Runs until `shutdown`: each round cancels runs whose runner was
    /// lost, queues first attempts for new head commits, and starts queued
    /// runs up to the parallelism. Database trouble is logged and retried
    /// next round. On shutdown, commands in progress are killed and their
    /// runs recorded as cancelled ("runner lost").
    pub async fn run(&self, forge: &LocalForge, shutdown: CancellationToken) {
        tracing::info!(
            runner = %self.runner,
            program = %self.program.display(),
            check_user = ?self.user,
            "local CI runner started"
        );
        if let CheckUser::Switch { uid, gid } = self.user
            && let Ok(None) = barrier_for(forge.root(), uid, gid)
        {
            // Not refused: the forge may predate this check. But every
            // repository on it is then readable by any repository's CI.
            tracing::warn!(
                root = %forge.root().display(),
                uid,
                "local CI: checks can reach the forge's repositories; make the forge root 0700"
            );
        }
        let mut running = JoinSet::new();
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            if let Err(e) = self.reap_lost(forge).await {
                tracing::warn!(error = %e, "local CI: cannot cancel lost runs");
            }
            if let Err(e) = self.enqueue(forge).await {
                tracing::warn!(error = %e, "local CI: cannot queue runs");
            }
            while running.len() < self.config.parallel.max(1) {
                match self.claim(forge).await {
                    Ok(Some(job)) => {
                        let (ci, forge, stop) = (self.clone(), forge.clone(), shutdown.child_token());
                        running.spawn(async move { ci.execute(&forge, job, stop).await });
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "local CI: cannot claim a run");
                        break;
                    }
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.config.poll_interval) => {}
                Some(_) = running.join_next(), if !running.is_empty() => {}
            }
        }
        while running.join_next().await.is_some() {}
        tracing::info!(runner = %self.runner, "local CI runner stopped");
    }

    /// Cancels runs still in progress past their deadline: their runner
    /// died or lost the database. Returns how many.
    pub async fn reap_lost(&self, forge: &LocalForge) -> Result<u64, Error> {
        let done = sqlx::query(
            "UPDATE local_forge_check_runs
             SET status = 'completed', conclusion = 'cancelled', summary = $1, finished_at = now(),
                 log = $1 || ': runner ' || coalesce(runner, '?') || ' stopped reporting before its deadline'
             WHERE status = 'in_progress' AND deadline < now()",
        )
        .bind(RUNNER_LOST)
        .execute(forge.pool())
        .await
        .map_err(db("cancelling lost check runs"))?;
        if done.rows_affected() > 0 {
            tracing::warn!(runs = done.rows_affected(), "local CI: cancelled runs whose runner was lost");
        }
        Ok(done.rows_affected())
    }

    /// Queues the first attempt of every configured check for the head
    /// commit of every open pull request that has none yet. Returns how
    /// many runs were queued.
    pub async fn enqueue(&self, forge: &LocalForge) -> Result<u64, Error> {
        let open: Vec<(String, String, Vec<String>, Vec<String>)> = sqlx::query_as(
            "SELECT p.owner, p.repo, array_agg(DISTINCT p.head),
                    (SELECT array_agg(c.name) FROM local_forge_checks c WHERE c.owner = p.owner AND c.repo = p.repo)
             FROM local_forge_pull_requests p
             WHERE p.state = 'open'
               AND EXISTS (SELECT 1 FROM local_forge_checks c WHERE c.owner = p.owner AND c.repo = p.repo)
             GROUP BY p.owner, p.repo",
        )
        .fetch_all(forge.pool())
        .await
        .map_err(db("listing open pull requests for CI"))?;
        let mut queued = 0;
        for (owner, name, heads, checks) in open {
            let repo = Repo { owner, name };
            let branches = match forge.branch_heads(&repo).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(%repo, error = %e, "local CI: cannot read branches");
                    continue;
                }
            };
            let shas: Vec<&String> = heads.iter().filter_map(|h| branches.get(h)).collect();
            let done = sqlx::query(
                "INSERT INTO local_forge_check_runs (owner, repo, sha, name, attempt)
                 SELECT $1, $2, s, n, 1 FROM unnest($3::text[]) AS s CROSS JOIN unnest($4::text[]) AS n
                 ON CONFLICT (owner, repo, sha, name, attempt) DO NOTHING",
            )
            .bind(&repo.owner)
            .bind(&repo.name)
            .bind(&shas)
            .bind(&checks)
            .execute(forge.pool())
            .await
            .map_err(db(format!("queueing check runs of {repo}")))?;
            queued += done.rows_affected();
        }
        Ok(queued)
    }

    /// Takes the oldest queued run, if any.
    async fn claim(&self, forge: &LocalForge) -> Result<Option<Job>, Error> {
        sqlx::query_as::<_, Job>(
            "WITH claimed AS (
                 UPDATE local_forge_check_runs
                 SET status = 'in_progress', started_at = now(), runner = $1,
                     deadline = now() + make_interval(secs => $2)
                 WHERE id = (SELECT id FROM local_forge_check_runs WHERE status = 'queued'
                             ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1)
                 RETURNING id, owner, repo, sha, name, attempt)
             SELECT claimed.*, c.command FROM claimed
             LEFT JOIN local_forge_checks c ON c.owner = claimed.owner AND c.repo = claimed.repo AND c.name = claimed.name",
        )
        .bind(&self.runner)
        .bind(self.deadline_secs())
        .fetch_optional(forge.pool())
        .await
        .map_err(db("claiming a check run"))
    }

    fn deadline_secs(&self) -> f64 {
        (self.config.timeout + self.config.grace).as_secs_f64()
    }

    /// Runs one claimed job to its end and records the outcome.
    async fn execute(&self, forge: &LocalForge, job: Job, stop: CancellationToken) {
        let repo = Repo { owner: job.owner.clone(), name: job.repo.clone() };
        let span =
            tracing::info_span!("local_ci", %repo, check = %job.name, sha = %job.sha, attempt = job.attempt);
        self.execute_in_span(forge, repo, job, stop).instrument(span).await;
    }

    async fn execute_in_span(&self, forge: &LocalForge, repo: Repo, job: Job, stop: CancellationToken) {
        tracing::info!("local CI run started");
        let outcome = match self.prepare_and_run(forge, &repo, &job, stop).await {
            Ok(Some(outcome)) => outcome,
            // This runner no longer holds the run; whoever does records it.
            Ok(None) => return,
            Err(e) => CheckReport {
                conclusion: Conclusion::Cancelled,
                summary: "checkout failed".into(),
                log: e.to_string(),
            },
        };
        tracing::info!(
            conclusion = outcome.conclusion.as_str(),
            summary = %outcome.summary,
            "local CI run finished"
        );
        if let Err(e) = self.complete(forge, job.id, &outcome).await {
            // Left in progress: its deadline passes and a runner cancels it.
            tracing::warn!(error = %e, "local CI: cannot record the outcome");
        }
    }

    async fn prepare_and_run(
        &self,
        forge: &LocalForge,
        repo: &Repo,
        job: &Job,
        stop: CancellationToken,
    ) -> Result<Option<CheckReport>, Error> {
        let Some(command) = job.command.clone().filter(|c| !c.is_empty()) else {
            return Ok(Some(CheckReport {
                conclusion: Conclusion::Cancelled,
                summary: "check no longer configured".into(),
                log: format!("the check {} is no longer configured for {repo}", job.name),
            }));
        };
        if !is_sha(&job.sha) {
            return Err(Error::Invalid(format!("{:?} is not a commit id", job.sha)));
        }
        // Made again if something cleaned it away since the start.
        tokio::fs::create_dir_all(&self.work_base)
            .await
            .map_err(|e| local("creating the CI work folder", e))?;
        // 0700 (tempfile leaves the umask's mode): until it is handed
        // over, only the controller can enter; after, only the check's uid.
        let scratch = tempfile::Builder::new()
            .prefix("pp-ci-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&self.work_base)
            .map_err(|e| local("creating a CI checkout folder", e))?;
        let src = scratch.path().join("src");
        let home = scratch.path().join("home");
        tokio::fs::create_dir_all(&home).await.map_err(|e| local("creating the CI home", e))?;
        let bare = forge.repository_path(repo)?;
        let utf8 =
            |p: &Path| p.to_str().map(str::to_owned).ok_or_else(|| Error::Invalid("non-UTF-8 path".into()));
        let context = format!("checking out {}", job.sha);
        Git::new(scratch.path())
            .run(&["clone", "--no-hardlinks", "--no-checkout", "-q", "--", &utf8(&bare)?, &utf8(&src)?])
            .await
            .map_err(|e| local(&context, e))?;
        Git::new(&src)
            .run(&["checkout", "-q", "--detach", &job.sha])
            .await
            .map_err(|e| local(&context, e))?;
        if let CheckUser::Switch { uid, gid } = self.user {
            // Before any of the repository's code runs: the checkout was
            // written by the controller and becomes the check's own.
            let dir = scratch.path().to_owned();
            tokio::task::spawn_blocking(move || hand_over(&dir, uid, gid))
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)))
                .map_err(|e| local(format!("handing the checkout to uid {uid}"), e))?;
        }
        // The checkout took some of the time the claim allowed; the command
        // gets its full timeout, so the deadline moves. No row means another
        // runner decided this one was lost.
        if !self.refresh_deadline(forge, job.id).await? {
            tracing::warn!("local CI: the run was taken from this runner");
            return Ok(None);
        }
        if stop.is_cancelled() {
            return Ok(Some(CheckReport {
                conclusion: Conclusion::Cancelled,
                summary: RUNNER_LOST.to_owned(),
                log: format!("{RUNNER_LOST}: the runner shut down before the command started\n"),
            }));
        }
        let request = CheckRequest {
            command,
            dir: src,
            home,
            attempt: job.attempt,
            timeout: self.config.timeout,
            log_cap: self.config.log_cap,
            user: self.user,
        };
        Ok(Some(check::run_in_runner(&self.program, &request, &stop).await))
    }

    async fn refresh_deadline(&self, forge: &LocalForge, id: i64) -> Result<bool, Error> {
        let done = sqlx::query(
            "UPDATE local_forge_check_runs SET deadline = now() + make_interval(secs => $3)
             WHERE id = $1 AND status = 'in_progress' AND runner = $2",
        )
        .bind(id)
        .bind(&self.runner)
        .bind(self.deadline_secs())
        .execute(forge.pool())
        .await
        .map_err(db("extending a check run's deadline"))?;
        Ok(done.rows_affected() == 1)
    }

    async fn complete(&self, forge: &LocalForge, id: i64, outcome: &CheckReport) -> Result<(), Error> {
        let done = sqlx::query(
            "UPDATE local_forge_check_runs
             SET status = 'completed', conclusion = $3, summary = $4, log = $5, finished_at = now()
             WHERE id = $1 AND status = 'in_progress' AND runner = $2",
        )
        .bind(id)
        .bind(&self.runner)
        .bind(outcome.conclusion.as_str())
        .bind(&outcome.summary)
        .bind(&outcome.log)
        .execute(forge.pool())
        .await
        .map_err(db("completing a check run"))?;
        if done.rows_affected() == 0 {
            tracing::warn!("local CI: the run was taken from this runner; its outcome is dropped");
        }
        Ok(())
    }
}

/// `patchpilot-local-ci` next to this process's executable; for a test
/// executable in cargo's `deps` folder, one folder up, where cargo puts the
/// workspace's binaries.
fn default_runner() -> Result<PathBuf, SetupError> {
    let exe = std::env::current_exe().map_err(SetupError::CurrentExe)?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let beside = dir.join(RUNNER_BINARY);
    if !beside.is_file()
        && dir.file_name().is_some_and(|name| name == "deps")
        && let Some(profile) = dir.parent()
    {
        return Ok(profile.join(RUNNER_BINARY));
    }
    Ok(beside)
}
