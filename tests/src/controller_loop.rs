//! The controller's whole loop as real processes on one machine: a
//! [`Stack`] (NATS, a database), the local forge seeded with repositories
//! and its CI runner, a sandbox worker with QEMU microVMs, and controllers
//! started on demand. The end-to-end tests and `patchpilot-eval` use it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use patchpilot_fleet::bus::topics;
use patchpilot_forge::Repo;
use patchpilot_forge_local::{LocalCi, LocalCiConfig, LocalForge};
use patchpilot_model::{Finding, RemediationJob};
use tokio_util::sync::CancellationToken;

use crate::forge::create_seeded_repository;
use crate::jobs::{apk_finding, new_job};
use crate::sandbox::{private_state, spawn_worker_with};
use crate::{Service, Stack, wait_for};

/// The scripted agent. `scenario` (a file of the repository) says which
/// part it plays; `.patchpilot/ci-failure.md` marks a repair run.
pub const AGENT: &str = r##"set -e
mode=$(cat scenario)
if [ -f .patchpilot/ci-failure.md ]; then
  grep -q untrusted-ci-log .patchpilot/ci-failure.md
  case "$mode" in
    repair) echo 1.1 > lint.conf ;;
    stubborn) echo "# tried again" >> app.txt ;;
    revert) sed -i 's/base:1.1/base:1.0/' Dockerfile ;;
  esac
  echo '{"summary":"forward fix"}' > .patchpilot/result.json
else
  sed -i 's/base:1.0/base:1.1/' Dockerfile
  case "$mode" in green|infra) echo 1.1 > lint.conf ;; esac
  printf '%s' '{"summary":"Bump the base image","steps":[{"summary":"base 1.0 to 1.1","reason":"fixes CVE-2024-0001"}]}' > .patchpilot/result.json
fi
"##;

/// The repositories' CI: lint fails while `lint.conf` lags the base; the
/// `infra` repository's first attempt loses its network.
pub const CI: &str = r#"mode=$(cat scenario)
if [ "$mode" = infra ] && [ "$PP_CI_ATTEMPT" = 1 ]; then
  echo "Step 2/5 : RUN apk add curl"; echo "dial tcp 10.0.0.1:443: i/o timeout"; exit 1
fi
base=$(sed -n 's/^FROM .*base:\([0-9.]*\).*/\1/p' Dockerfile)
lint=$(cat lint.conf)
if [ "$base" != "$lint" ]; then echo "lint: linter config $lint does not support base $base"; exit 1; fi
echo "lint ok""#;

pub const TERMINAL: &[&str] = &["succeeded", "needs_human", "failed", "superseded"];

pub struct Loop {
    pub stack: Stack,
    pub forge: LocalForge,
    root: PathBuf,
    ci_stop: CancellationToken,
    ci: tokio::task::JoinHandle<()>,
    /// `None` for tests that play the sandbox side themselves.
    worker: Option<Service>,
    config: PathBuf,
}

impl std::fmt::Debug for Loop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loop").field("root", &self.root).field("config", &self.config).finish_non_exhaustive()
    }
}

impl Loop {
    /// Stack, sandbox worker, local forge with the CI runner (the CI service
    /// is not the controller's: killing the controller must not kill CI),
    /// one repository per scenario, the scripted agent.
    pub async fn start(repos: &[&str]) -> anyhow::Result<Loop> {
        let (seeds, controller) = Loop::scripted(repos);
        Loop::start_with(&seeds, CI, &controller, crate::sandbox::WORKER_TOML).await
    }

    /// [`Loop::start`] without a sandbox worker: run requests stay queued.
    pub async fn start_without_worker(repos: &[&str]) -> anyhow::Result<Loop> {
        let (seeds, controller) = Loop::scripted(repos);
        Loop::start_inner(Stack::start().await?, &seeds, CI, &controller, None).await
    }

    /// One repository per scenario for the scripted agent, and the
    /// controller keys that run it.
    #[allow(clippy::type_complexity)]
    pub fn scripted(repos: &[&str]) -> (Vec<(String, Vec<(&'static str, String)>)>, String) {
        let seeds = repos.iter().map(|name| ((*name).to_owned(), Loop::scripted_files(name))).collect();
        (seeds, Loop::scripted_agent())
    }

    /// The files of a repository where the scripted agent plays `scenario`.
    pub fn scripted_files(scenario: &str) -> Vec<(&'static str, String)> {
        vec![
            ("Dockerfile", "FROM registry.test:5000/base:1.0\nCOPY app.txt /app.txt\n".to_owned()),
            ("lint.conf", "1.0\n".to_owned()),
            ("app.txt", "hello\n".to_owned()),
            ("scenario", format!("{scenario}\n")),
        ]
    }

    /// The `[controller]` keys that run the scripted agent.
    pub fn scripted_agent() -> String {
        format!("agent_command = [\"sh\", \"-c\", '''{AGENT}''']\nagent_docker = false\n")
    }

    /// The same with `seeds` (repository name, files), a CI check command,
    /// extra `[controller]` keys and the worker's config.
    pub async fn start_with(
        seeds: &[(String, Vec<(&str, String)>)],
        ci_check: &str,
        controller_extra: &str,
        worker_toml: &str,
    ) -> anyhow::Result<Loop> {
        Loop::start_on(Stack::start().await?, seeds, ci_check, controller_extra, worker_toml).await
    }

    /// [`Loop::start_with`] on `stack`, a started one the caller has set
    /// up first (extra environment for every service, say).
    pub async fn start_on(
        stack: Stack,
        seeds: &[(String, Vec<(&str, String)>)],
        ci_check: &str,
        controller_extra: &str,
        worker_toml: &str,
    ) -> anyhow::Result<Loop> {
        Loop::start_inner(stack, seeds, ci_check, controller_extra, Some(worker_toml)).await
    }

    pub async fn start_inner(
        stack: Stack,
        seeds: &[(String, Vec<(&str, String)>)],
        ci_check: &str,
        controller_extra: &str,
        worker_toml: Option<&str>,
    ) -> anyhow::Result<Loop> {
        let worker = match worker_toml {
            Some(toml) => Some(spawn_worker_with(&stack, &private_state(&stack)?, "worker", toml)?),
            None => None,
        };
        let root = stack.dir.path().join("forge");
        let forge = LocalForge::new(&root, stack.pool.clone());
        for (name, files) in seeds {
            let repo = Repo { owner: "acme".into(), name: name.clone() };
            create_seeded_repository(&forge, &repo, "main", files).await?;
            forge.set_check(&repo, "lint", vec!["sh".into(), "-c".into(), ci_check.into()]).await?;
        }
        // Checkouts in the system's temporary folder (the default): the
        // stack's own folder is private, out of reach of the check's uid.
        let ci = LocalCi::new(LocalCiConfig {
            timeout: Duration::from_secs(60),
            grace: Duration::from_secs(5),
            poll_interval: Duration::from_millis(200),
            ..LocalCiConfig::default()
        })?;
        let ci_stop = CancellationToken::new();
        let ci = tokio::spawn({
            let (forge, stop) = (forge.clone(), ci_stop.clone());
            async move { ci.run(&forge, stop).await }
        });
        let toml = format!(
            r#"
[controller]
forge = "local"
work_dir = "{work}"
lease_secs = 4
tick_millis = 200
run_timeout_secs = 600
ci_poll_secs = 1
{controller_extra}
[controller.local]
root = "{root}"
run_ci = false
[controller.limits]
max_repairs = 2
max_infra_retries = 2
max_run_retries = 2
[[controller.notifiers]]
kind = "stdout"
"#,
            work = stack.dir.path().join("work").display(),
            root = root.display(),
        );
        let config = stack.write_config("controller.toml", &toml)?;
        Ok(Loop { stack, forge, root, ci_stop, ci, worker, config })
    }

    /// The sandbox worker, when the loop has one.
    pub fn worker(&self) -> Option<&Service> {
        self.worker.as_ref()
    }

    pub fn spawn_controller(&self, n: usize) -> anyhow::Result<Service> {
        self.spawn_controller_with(n, &[])
    }

    /// A controller with `env` on top of the stack's (config overrides).
    pub fn spawn_controller_with(&self, n: usize, env: &[(&str, &str)]) -> anyhow::Result<Service> {
        let mut all = self.stack.env();
        all.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        Service::spawn(
            "patchpilot-controller",
            &self.config,
            &all,
            self.stack.dir.path().join(format!("controller-{n}.log")),
        )
    }

    pub fn logs(&self) -> String {
        let mut text = String::new();
        if let Ok(dir) = std::fs::read_dir(self.stack.dir.path()) {
            let mut names: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
            names.sort();
            for path in names.iter().filter(|p| p.extension().is_some_and(|e| e == "log")) {
                let body = std::fs::read_to_string(path).unwrap_or_default();
                let tail: Vec<&str> = body.lines().rev().take(60).collect();
                text.push_str(&format!("--- {} (tail)\n", path.display()));
                for line in tail.into_iter().rev() {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
        text
    }

    pub async fn submit(&self, name: &str) -> anyhow::Result<String> {
        self.submit_job(job(name)).await
    }

    pub async fn submit_job(&self, job: RemediationJob) -> anyhow::Result<String> {
        self.stack.bus.publish(&topics::REMEDIATIONS, None, &job.job_id, &job).await?;
        Ok(job.remediation_id.to_string())
    }

    /// The planner's row for `job`, as the planner writes it when an
    /// assessment creates the remediation (these tests hand jobs to the
    /// controller directly).
    pub async fn planner_row(&self, job: &RemediationJob) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO remediations (id, repo_url, dockerfile, branch, build_context, finding_set_digest, findings, images) \
             VALUES ($1, $2, $3, $4, $5, $6, '[]', '[]')",
        )
        .bind(job.remediation_id.0)
        .bind(&job.target.repo_url)
        .bind(&job.target.dockerfile)
        .bind(&job.target.branch)
        .bind(&job.target.context)
        .bind(&job.finding_set_digest)
        .execute(&self.stack.pool)
        .await?;
        Ok(())
    }

    /// Waits until the planner's state of every remediation in `ids` is the
    /// controller's.
    pub async fn wait_states_in_step(&self, ids: &[String]) -> anyhow::Result<()> {
        wait_for("the planner's states to follow the controller's", Duration::from_secs(60), || async {
            let differ: Vec<(String, String, String)> = sqlx::query_as(
                "SELECT c.remediation_id, c.state, p.state FROM controller_remediations c \
                 JOIN remediations p ON p.id::text = c.remediation_id \
                 WHERE c.remediation_id = ANY($1) AND c.state <> p.state",
            )
            .bind(ids)
            .fetch_all(&self.stack.pool)
            .await?;
            Ok(differ.is_empty().then_some(()))
        })
        .await
    }

    pub async fn state(&self, id: &str) -> anyhow::Result<Option<(String, String)>> {
        Ok(sqlx::query_as(
            "SELECT state, machine::text FROM controller_remediations WHERE remediation_id = $1",
        )
        .bind(id)
        .fetch_optional(&self.stack.pool)
        .await?)
    }

    pub async fn wait_terminal(
        &self,
        ids: &[String],
        timeout: Duration,
    ) -> anyhow::Result<Vec<(String, String)>> {
        wait_for("every remediation to finish", timeout, || async {
            let mut out = Vec::new();
            for id in ids {
                match self.terminal(id).await? {
                    Some(end) => out.push(end),
                    None => return Ok(None),
                }
            }
            Ok(Some(out))
        })
        .await
        .map_err(|e| e.context(self.logs()))
    }

    /// `(state, machine)` of remediation `id` once it has finished and its
    /// side effects (comments, notifications) are done; `None` before.
    pub async fn terminal(&self, id: &str) -> anyhow::Result<Option<(String, String)>> {
        Ok(self.state(id).await?.filter(|(state, machine)| {
            TERMINAL.contains(&state.as_str()) && machine.contains("\"outbox\":[]")
        }))
    }

    /// `(count of PRs, labels of the one PR)` of `acme/<name>`.
    pub async fn pull_requests(&self, name: &str) -> anyhow::Result<Vec<(i64, String, Vec<String>, String)>> {
        Ok(sqlx::query_as(
            "SELECT number, state, labels, body FROM local_forge_pull_requests WHERE owner = 'acme' AND repo = $1",
        )
        .bind(name)
        .fetch_all(&self.stack.pool)
        .await?)
    }

    /// The remediation's requested runs as (run id, request sequence), in
    /// order.
    pub async fn requested(&self, id: &str) -> anyhow::Result<Vec<(String, Option<i64>)>> {
        Ok(sqlx::query_as(
            "SELECT run_id, request_seq FROM controller_runs WHERE remediation_id = $1 ORDER BY requested_at",
        )
        .bind(id)
        .fetch_all(&self.stack.pool)
        .await?)
    }

    pub async fn comments(&self, name: &str) -> anyhow::Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT body FROM local_forge_comments WHERE owner = 'acme' AND repo = $1 ORDER BY id",
        )
        .bind(name)
        .fetch_all(&self.stack.pool)
        .await?;
        Ok(rows.into_iter().map(|(b,)| b).collect())
    }

    /// The remediation's sandbox runs as (purpose, outcome), leaving out
    /// runs that ended in an infrastructure error: the lifecycle retries
    /// those (a VM that does not boot is the host's problem, not the
    /// patch's), and they are printed so a flaky host shows in the log.
    pub async fn runs(&self, id: &str) -> anyhow::Result<Vec<(String, Option<String>)>> {
        let rows: Vec<(String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT purpose, outcome, reason FROM controller_runs WHERE remediation_id = $1 ORDER BY requested_at",
        )
        .bind(id)
        .fetch_all(&self.stack.pool)
        .await?;
        let mut out = Vec::new();
        for (purpose, outcome, reason) in rows {
            if outcome.as_deref() == Some("infra_error") {
                eprintln!(
                    "retried after an infrastructure error: {purpose} run: {}",
                    reason.unwrap_or_default()
                );
            } else {
                out.push((purpose, outcome));
            }
        }
        Ok(out)
    }

    /// The branches of `acme/<name>` other than `main`.
    pub fn branches(&self, name: &str) -> anyhow::Result<Vec<String>> {
        let out = git_dir(&self.bare(name), &["for-each-ref", "--format=%(refname:short)", "refs/heads/"])?;
        Ok(out.lines().filter(|b| *b != "main").map(str::to_owned).collect())
    }

    pub fn file_on(&self, name: &str, branch: &str, file: &str) -> anyhow::Result<String> {
        git_dir(&self.bare(name), &["show", &format!("{branch}:{file}")])
    }

    pub fn bare(&self, name: &str) -> PathBuf {
        self.root.join("acme").join(format!("{name}.git"))
    }

    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.ci_stop.cancel();
        let _ = self.ci.await;
        if let Some(worker) = self.worker.as_mut() {
            let status = worker.terminate(Duration::from_secs(30)).await?;
            anyhow::ensure!(status.success(), "sandbox worker: {status:?}\n{}", worker.log_text());
        }
        let _ = &self.forge;
        Ok(())
    }
}

pub fn git_dir(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("git").arg("--git-dir").arg(dir).args(args).output()?;
    anyhow::ensure!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn job(name: &str) -> RemediationJob {
    job_with(name, vec![apk_finding("libbase", "1.0-r0", "1.1-r0", "")])
}

pub fn job_with(name: &str, findings: Vec<Finding>) -> RemediationJob {
    new_job(&format!("local://acme/{name}"), findings)
}

/// The worker's config for runs that build with Docker: room for dockerd,
/// the registry `sreg` spoken to over plain HTTP, and `aliases` resolving
/// to the host's loopback.
pub fn docker_worker(sreg: &str, aliases: &[&str]) -> String {
    let mut toml = crate::sandbox::WORKER_TOML
        .replace("memory_mib = 768", "memory_mib = 2048")
        .replace("wall_time_secs = 240", "wall_time_secs = 600")
        .replacen("[sandbox]\n", &format!("[sandbox]\ninsecure_registries = [\"{sreg}\"]\n"), 1);
    toml.push_str("[sandbox.host_aliases]\n");
    for alias in aliases {
        toml.push_str(&format!("\"{alias}\" = [\"127.0.0.1\"]\n"));
    }
    toml
}
