//! The local CI runner: runs each repository's configured check commands
//! against the head commit of every open pull request on the local forge
//! and records the outcome as check runs, the way a CI service reports to
//! GitHub.
//!
//! It owns the `local_forge_check_runs` rows it claims, from `queued` to
//! `completed`. It runs repository code by design (that is what CI does),
//! so it must never give that code more than a scratch checkout, a scratch
//! HOME, PATH and `PP_CI_ATTEMPT`: no controller environment (database
//! URLs, tokens), no access to the bare repositories beyond the clone.
//! Several runners may share one database: claims skip locked rows, and a
//! runner only completes a run it still holds.
//!
//! Conclusions are kept simple on purpose: exit 0 is `success`, running past
//! the timeout is `timed_out`, any other exit is `failure`. A checkout that
//! fails, a runner that shuts down mid-run and a run whose runner
//! disappeared (its deadline passed) are `cancelled`, the latter two with
//! "runner lost" in the log; telling infrastructure from code failures is
//! the controller's triage, from the conclusion and the log.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::FromRow;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

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
    /// Runs at once.
    pub parallel: usize,
    /// Where checkouts are made (default: the system's temporary folder).
    pub work_dir: Option<PathBuf>,
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
        }
    }
}

/// The runner. See the module documentation.
#[derive(Debug, Clone)]
pub struct LocalCi {
    config: Arc<LocalCiConfig>,
    /// Names this runner in the rows it holds, so it completes only those.
    runner: String,
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

/// How a run ended.
#[derive(Debug)]
struct Outcome {
    conclusion: &'static str,
    summary: String,
    log: String,
}

/// Appended to the log of a run whose runner went away; the controller's
/// triage treats it as infrastructure.
pub const RUNNER_LOST: &str = "runner lost";

impl LocalCi {
    /// A runner with `config`.
    pub fn new(config: LocalCiConfig) -> Self {
        let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).unwrap_or_default();
        let runner =
            format!("{host}:{}:{}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..8]);
        LocalCi { config: Arc::new(config), runner }
    }

    /// Runs until `shutdown`: each round cancels runs whose runner was
    /// lost, queues first attempts for new head commits, and starts queued
    /// runs up to the parallelism. Database trouble is logged and retried
    /// next round. On shutdown, commands in progress are killed and their
    /// runs recorded as cancelled ("runner lost").
    pub async fn run(&self, forge: &LocalForge, shutdown: CancellationToken) {
        tracing::info!(runner = %self.runner, "local CI runner started");
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
            Err(e) => {
                Outcome { conclusion: "cancelled", summary: "checkout failed".into(), log: e.to_string() }
            }
        };
        tracing::info!(conclusion = outcome.conclusion, summary = %outcome.summary, "local CI run finished");
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
    ) -> Result<Option<Outcome>, Error> {
        let Some(command) = job.command.clone().filter(|c| !c.is_empty()) else {
            return Ok(Some(Outcome {
                conclusion: "cancelled",
                summary: "check no longer configured".into(),
                log: format!("the check {} is no longer configured for {repo}", job.name),
            }));
        };
        if !is_sha(&job.sha) {
            return Err(Error::Invalid(format!("{:?} is not a commit id", job.sha)));
        }
        let scratch = match &self.config.work_dir {
            Some(dir) => {
                tokio::fs::create_dir_all(dir).await.map_err(|e| local("creating the CI work folder", e))?;
                tempfile::Builder::new().prefix("pp-ci-").tempdir_in(dir)
            }
            None => tempfile::Builder::new().prefix("pp-ci-").tempdir(),
        }
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
        // The checkout took some of the time the claim allowed; the command
        // gets its full timeout, so the deadline moves. No row means another
        // runner decided this one was lost.
        if !self.refresh_deadline(forge, job.id).await? {
            tracing::warn!("local CI: the run was taken from this runner");
            return Ok(None);
        }
        if stop.is_cancelled() {
            return Ok(Some(Outcome {
                conclusion: "cancelled",
                summary: RUNNER_LOST.to_owned(),
                log: format!("{RUNNER_LOST}: the runner shut down before the command started\n"),
            }));
        }
        Ok(Some(self.run_command(&command, &src, &home, job.attempt, stop).await))
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

    async fn complete(&self, forge: &LocalForge, id: i64, outcome: &Outcome) -> Result<(), Error> {
        let done = sqlx::query(
            "UPDATE local_forge_check_runs
             SET status = 'completed', conclusion = $3, summary = $4, log = $5, finished_at = now()
             WHERE id = $1 AND status = 'in_progress' AND runner = $2",
        )
        .bind(id)
        .bind(&self.runner)
        .bind(outcome.conclusion)
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

    /// Runs `command` in `dir` with the minimal environment, the timeout
    /// and the log cap.
    async fn run_command(
        &self,
        command: &[String],
        dir: &Path,
        home: &Path,
        attempt: i32,
        stop: CancellationToken,
    ) -> Outcome {
        let log = Arc::new(Mutex::new(TailLog::new(self.config.log_cap)));
        let mut cmd = Command::new(&command[0]);
        cmd.args(&command[1..]).env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd.env("HOME", home).env("PP_CI_ATTEMPT", attempt.to_string());
        // Its own process group, so a timeout kills what the command
        // started too (a `sh -c` and its children), not only the shell.
        cmd.current_dir(dir)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                return Outcome {
                    conclusion: "failure",
                    summary: format!("attempt {attempt}: cannot start {}", command[0]),
                    log: format!("[patchpilot local CI] cannot start {:?}: {e}\n", command[0]),
                };
            }
        };
        let pid = child.id();
        let mut readers = JoinSet::new();
        if let Some(out) = child.stdout.take() {
            readers.spawn(collect(out, log.clone()));
        }
        if let Some(err) = child.stderr.take() {
            readers.spawn(collect(err, log.clone()));
        }
        enum End {
            Exited(std::io::Result<ExitStatus>),
            TimedOut,
            Stopped,
        }
        let end = tokio::select! {
            status = child.wait() => End::Exited(status),
            _ = tokio::time::sleep(self.config.timeout) => End::TimedOut,
            _ = stop.cancelled() => End::Stopped,
        };
        // Always, even after a clean exit: a background process left behind
        // would hold the output pipes open and outlive the run.
        kill_group(pid);
        let _ = child.wait().await;
        // A process that left the group can still hold the pipes; do not
        // wait for it forever.
        let drained = tokio::time::timeout(Duration::from_secs(5), async {
            while readers.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            readers.abort_all();
        }
        let (conclusion, summary, note) = match end {
            End::Exited(Ok(status)) if status.success() => {
                ("success", format!("attempt {attempt}: passed"), None)
            }
            End::Exited(Ok(status)) => {
                let how = describe(status);
                ("failure", format!("attempt {attempt}: {how}"), Some(format!("the check failed: {how}")))
            }
            End::Exited(Err(e)) => (
                "failure",
                format!("attempt {attempt}: lost track of the command"),
                Some(format!("waiting for the command failed: {e}")),
            ),
            End::TimedOut => {
                let secs = self.config.timeout.as_secs_f64();
                (
                    "timed_out",
                    format!("attempt {attempt}: timed out after {secs}s"),
                    Some(format!("timed out after {secs}s; the command and its processes were killed")),
                )
            }
            End::Stopped => (
                "cancelled",
                RUNNER_LOST.to_owned(),
                Some(format!("{RUNNER_LOST}: the runner shut down during the run; the command was killed")),
            ),
        };
        let mut text = log.lock().map(|mut l| l.render()).unwrap_or_default();
        if let Some(note) = note {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("[patchpilot local CI] ");
            text.push_str(&note);
            text.push('\n');
        }
        Outcome { conclusion, summary, log: text }
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

/// Kills the process group led by `pid`; a group already gone is fine.
fn kill_group(pid: Option<u32>) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else { return };
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
}

async fn collect(mut stream: impl AsyncRead + Unpin, log: Arc<Mutex<TailLog>>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Ok(mut log) = log.lock() {
                    log.push(&buf[..n]);
                }
            }
        }
    }
}

/// The last `cap` bytes of a stream, and how many came before them.
#[derive(Debug)]
struct TailLog {
    buf: Vec<u8>,
    cap: usize,
    dropped: u64,
}

impl TailLog {
    fn new(cap: usize) -> Self {
        TailLog { buf: Vec::new(), cap: cap.max(1), dropped: 0 }
    }

    fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
        // Trimmed in batches, not per write, to keep this linear.
        if self.buf.len() > self.cap * 2 {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.buf.len() > self.cap {
            let excess = self.buf.len() - self.cap;
            self.buf.drain(..excess);
            self.dropped += excess as u64;
        }
    }

    fn render(&mut self) -> String {
        self.trim();
        let mut text = String::new();
        if self.dropped > 0 {
            text.push_str(&format!(
                "[patchpilot local CI] {} earlier bytes of output dropped\n",
                self.dropped
            ));
        }
        // Postgres text cannot hold NUL; the log is for reading anyway.
        text.push_str(&String::from_utf8_lossy(&self.buf).replace('\0', "\u{fffd}"));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_its_tail() {
        let mut log = TailLog::new(10);
        for i in 0..100u8 {
            log.push(&[b'a' + (i % 26)]);
        }
        let text = log.render();
        assert!(text.starts_with("[patchpilot local CI] 90 earlier bytes"), "{text}");
        assert!(text.ends_with("opqrstuv"), "{text}");
        let mut nul = TailLog::new(10);
        nul.push(b"a\0b");
        assert_eq!(nul.render(), "a\u{fffd}b");
    }
}
