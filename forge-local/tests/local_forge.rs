//! The local forge and its CI runner against a real Postgres (a fresh
//! database per test from the shared harness, migrated with the fleet's
//! migrations) and real git. A missing database fails the test
//! (`scripts/services up && eval "$(scripts/services env)"`).

use std::path::Path;
use std::time::{Duration, Instant};

use patchpilot_e2e::TestDatabase;
use patchpilot_fleet::config::DatabaseConfig;
use patchpilot_forge::{
    Access, Check, CheckSource, CheckState, Error, Forge, NewPullRequest, PrState, Repo, StatusState,
};
use patchpilot_forge_local::{LocalCi, LocalCiConfig, LocalForge};
use patchpilot_git::Git;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// A fresh database, migrated, and a pool on it; dropped with the
/// [`TestDatabase`].
struct TestDb {
    pool: PgPool,
    _db: TestDatabase,
}

impl TestDb {
    async fn create() -> TestDb {
        let db = TestDatabase::create().await.expect("a test database");
        let config = DatabaseConfig { url: db.url.clone(), max_connections: 4, ..DatabaseConfig::default() };
        let pool = patchpilot_fleet::store::connect(&config).await.expect("connect to the test database");
        TestDb { pool, _db: db }
    }
}

fn repo(owner: &str, name: &str) -> Repo {
    Repo { owner: owner.into(), name: name.into() }
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(path, text).expect("write");
}

/// Clones `repo`, commits `files` on a new `branch` and pushes it; returns
/// the commit.
async fn push_branch(forge: &LocalForge, repo: &Repo, branch: &str, files: &[(&str, &str)]) -> String {
    let remote = forge.remote(repo, Access::Write).await.expect("remote");
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("clone");
    Git::new(work.path()).run(&["clone", "-q", &remote.url, "clone"]).await.expect("clone");
    let git = Git::new(&dir);
    git.run(&["checkout", "-q", "-b", branch]).await.expect("branch");
    for (path, text) in files {
        write(&dir.join(path), text);
    }
    git.run(&["add", "-A"]).await.expect("add");
    git.run(&["commit", "-qm", &format!("change on {branch}")]).await.expect("commit");
    git.run(&["push", "-q", "origin", branch]).await.expect("push");
    git.run(&["rev-parse", "HEAD"]).await.expect("rev-parse").text()
}

fn new_pr(head: &str) -> NewPullRequest {
    NewPullRequest {
        head: head.into(),
        base: "main".into(),
        title: format!("Fix {head}"),
        body: "body".into(),
    }
}

#[tokio::test]
async fn pull_requests_comments_labels_and_statuses() {
    let db = TestDb::create().await;
    let root = tempfile::tempdir().expect("tempdir");
    let forge = LocalForge::new(root.path(), db.pool.clone());
    let api = repo("acme", "api");
    let seed = tempfile::tempdir().expect("seed");
    write(&seed.path().join("README.md"), "hello\n");
    write(&seed.path().join("src/main.rs"), "fn main() {}\n");
    forge.create_repository(&api, "main", Some(seed.path())).await.expect("create");
    let main = forge.branch_head(&api, "main").await.expect("head").expect("main exists");
    // Idempotent, and a second seed does not add a commit.
    forge.create_repository(&api, "main", Some(seed.path())).await.expect("create again");
    assert_eq!(forge.branch_head(&api, "main").await.expect("head"), Some(main.clone()));
    assert_eq!(forge.default_branch(&api).await.expect("default branch"), "main");
    assert_eq!(forge.branch_head(&api, "nope").await.expect("head"), None);
    assert!(matches!(forge.branch_head(&api, "--upload-pack=x").await, Err(Error::Invalid(_))));

    let remote = forge.remote(&api, Access::Write).await.expect("remote");
    assert_eq!(remote.url, format!("file://{}/acme/api.git", root.path().display()));
    assert!(remote.credential.is_none());
    assert!(matches!(forge.remote(&repo("acme", "missing"), Access::Read).await, Err(Error::NotFound(_))));

    // The seed is the first commit, with the seed's files.
    let files = Git::new(root.path().join("acme/api.git"))
        .run(&["ls-tree", "-r", "--name-only", &main])
        .await
        .expect("ls-tree")
        .text();
    assert_eq!(files, "README.md\nsrc/main.rs");

    let fix = push_branch(&forge, &api, "patchpilot/fix", &[("README.md", "fixed\n")]).await;
    assert_eq!(forge.branch_head(&api, "patchpilot/fix").await.expect("head"), Some(fix.clone()));
    // for-each-ref matches prefixes; `patchpilot` is not a branch.
    assert_eq!(forge.branch_head(&api, "patchpilot").await.expect("head"), None);

    let first = forge.open_pull_request(&api, &new_pr("patchpilot/fix")).await.expect("open");
    assert_eq!(first.number, 1);
    assert_eq!(first.url, "local://acme/api/pull/1");
    assert_eq!((first.head_sha.as_str(), first.state), (fix.as_str(), PrState::Open));
    let again = forge.open_pull_request(&api, &new_pr("patchpilot/fix")).await.expect("open again");
    assert_eq!(again, first, "opening twice returns the same pull request");
    assert_eq!(
        forge.pull_request_for_branch(&api, "patchpilot/fix").await.expect("for branch"),
        Some(first.clone())
    );
    assert!(matches!(
        forge.open_pull_request(&api, &new_pr("no-such-branch")).await,
        Err(Error::Rejected { .. })
    ));

    push_branch(&forge, &api, "other", &[("other.txt", "x\n")]).await;
    assert_eq!(forge.open_pull_request(&api, &new_pr("other")).await.expect("open").number, 2);
    // Numbers are per repository.
    let web = repo("acme", "web");
    forge.create_repository(&web, "main", Some(seed.path())).await.expect("create web");
    push_branch(&forge, &web, "other", &[("x", "y\n")]).await;
    assert_eq!(forge.open_pull_request(&web, &new_pr("other")).await.expect("open").number, 1);

    let updated = forge.update_pull_request(&api, 1, "New title", "New body").await.expect("update");
    assert_eq!((updated.title.as_str(), updated.body.as_str()), ("New title", "New body"));
    assert!(matches!(forge.update_pull_request(&api, 99, "t", "b").await, Err(Error::NotFound(_))));

    forge.comment(&api, 1, "first").await.expect("comment");
    forge.comment(&api, 1, "second").await.expect("comment");
    let comments = forge.comments(&api, 1).await.expect("comments");
    assert_eq!(comments.iter().map(|c| c.body.as_str()).collect::<Vec<_>>(), ["first", "second"]);
    assert!(comments[0].id < comments[1].id);
    assert!(forge.comments(&api, 2).await.expect("comments").is_empty());
    assert!(matches!(forge.comment(&api, 99, "x").await, Err(Error::NotFound(_))));

    forge.add_labels(&api, 1, &["security".into(), "patchpilot".into()]).await.expect("labels");
    forge
        .add_labels(&api, 1, &["patchpilot".into(), "needs-human".into(), "needs-human".into()])
        .await
        .expect("labels");
    assert_eq!(
        forge.pull_request(&api, 1).await.expect("pr").labels,
        ["security", "patchpilot", "needs-human"]
    );

    forge.set_status(&api, &fix, "patchpilot/vet", StatusState::Pending, "vetting").await.expect("status");
    forge.set_status(&api, &fix, "patchpilot/vet", StatusState::Success, "vetted").await.expect("status");
    let checks = forge.checks(&api, &fix).await.expect("checks");
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(
        (checks[0].name.as_str(), checks[0].source, checks[0].state, checks[0].summary.as_str()),
        ("patchpilot/vet", CheckSource::CommitStatus, CheckState::Passed, "vetted")
    );
    assert!(matches!(
        forge.set_status(&api, &"0".repeat(40), "x", StatusState::Success, "").await,
        Err(Error::Rejected { .. })
    ));

    // Closing is idempotent; a closed pull request frees its branch.
    forge.close_pull_request(&api, 1).await.expect("close");
    forge.close_pull_request(&api, 1).await.expect("close again");
    assert_eq!(forge.pull_request(&api, 1).await.expect("pr").state, PrState::Closed);
    assert_eq!(forge.pull_request_for_branch(&api, "patchpilot/fix").await.expect("for branch"), None);
    assert_eq!(forge.open_pull_request(&api, &new_pr("patchpilot/fix")).await.expect("reopen").number, 3);

    // Deleting a head branch closes its pull request, as on GitHub.
    forge.delete_branch(&api, "patchpilot/fix").await.expect("delete");
    forge.delete_branch(&api, "patchpilot/fix").await.expect("delete again");
    assert_eq!(forge.branch_head(&api, "patchpilot/fix").await.expect("head"), None);
    let closed = forge.pull_request(&api, 3).await.expect("pr");
    assert_eq!((closed.state, closed.head_sha.as_str()), (PrState::Closed, fix.as_str()));
}

const CI_SCRIPT: &str = r#"#!/bin/sh
echo "attempt $PP_CI_ATTEMPT"
env | sort
mode=$(cat mode)
case "$mode" in
  pass) echo "all tests passed" ;;
  fail) echo "error: test parse::dates failed" >&2; exit 1 ;;
  hang) sleep 30 & wait ;;
  flaky)
    if [ "$PP_CI_ATTEMPT" = 1 ]; then
      echo "dial tcp: lookup registry.example.com: no such host" >&2
      exit 1
    fi
    echo "passed on retry" ;;
esac
"#;

/// A runner with the runner binary cargo built for these tests.
fn local_ci(timeout: Duration) -> LocalCi {
    LocalCi::new(LocalCiConfig {
        timeout,
        grace: Duration::from_millis(500),
        poll_interval: Duration::from_millis(100),
        parallel: 2,
        runner: Some(env!("CARGO_BIN_EXE_patchpilot-local-ci").into()),
        ..LocalCiConfig::default()
    })
    .expect("the local CI runner")
}

/// Waits until the check `name` on `sha` has completed attempt `attempt`.
async fn completed(
    forge: &LocalForge,
    pool: &PgPool,
    repo: &Repo,
    sha: &str,
    attempt: i32,
    within: Duration,
) -> Check {
    let deadline = Instant::now() + within;
    loop {
        let done: Option<(i64,)> = sqlx::query_as(
            "SELECT id FROM local_forge_check_runs WHERE owner = $1 AND repo = $2 AND sha = $3 AND attempt = $4
             AND status = 'completed'",
        )
        .bind(&repo.owner)
        .bind(&repo.name)
        .bind(sha)
        .bind(attempt)
        .fetch_optional(pool)
        .await
        .expect("poll");
        if let Some((id,)) = done {
            let checks = forge.checks(repo, sha).await.expect("checks");
            let check = checks.into_iter().find(|c| c.source == CheckSource::CheckRun).expect("a check run");
            assert_eq!(check.id, id.to_string(), "checks() shows the latest attempt");
            return check;
        }
        assert!(
            Instant::now() < deadline,
            "attempt {attempt} of the check on {sha} did not complete in {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn ci_runs_the_check_command_and_records_outcomes() {
    let db = TestDb::create().await;
    let root = tempfile::tempdir().expect("tempdir");
    let forge = LocalForge::new(root.path(), db.pool.clone());
    let api = repo("acme", "api");
    let seed = tempfile::tempdir().expect("seed");
    write(&seed.path().join("ci.sh"), CI_SCRIPT);
    // Executable, as committed in a real repository.
    std::fs::set_permissions(seed.path().join("ci.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    write(&seed.path().join("mode"), "seed\n");
    forge.create_repository(&api, "main", Some(seed.path())).await.expect("create");
    forge.set_check(&api, "ci", vec!["sh".into(), "-c".into(), "./ci.sh".into()]).await.expect("set check");
    assert!(matches!(
        forge.set_check(&repo("acme", "nope"), "ci", vec!["true".into()]).await,
        Err(Error::NotFound(_))
    ));

    let mut shas = std::collections::HashMap::new();
    for mode in ["pass", "fail", "hang", "flaky"] {
        let sha = push_branch(&forge, &api, mode, &[("mode", &format!("{mode}\n"))]).await;
        forge.open_pull_request(&api, &new_pr(mode)).await.expect("open");
        shas.insert(mode, sha);
    }

    let ci = local_ci(Duration::from_secs(2));
    let stop = CancellationToken::new();
    let runner = tokio::spawn({
        let (ci, forge, stop) = (ci.clone(), forge.clone(), stop.clone());
        async move { ci.run(&forge, stop).await }
    });
    let within = Duration::from_secs(60);

    let pass = completed(&forge, &db.pool, &api, &shas["pass"], 1, within).await;
    let log = forge.check_log(&api, &pass).await.expect("log");
    assert_eq!(
        (pass.state, pass.conclusion.as_str(), pass.name.as_str()),
        (CheckState::Passed, "success", "ci"),
        "{log}"
    );
    assert!(log.contains("attempt 1") && log.contains("all tests passed"), "{log}");
    // Only PATH, HOME and PP_CI_ATTEMPT reach the command (plus what the
    // shell itself sets, like PWD).
    assert!(!log.contains("PATCHPILOT_TEST_DATABASE_URL"), "the runner's environment leaked: {log}");
    assert!(log.contains("PP_CI_ATTEMPT=1") && log.contains("HOME=/"), "{log}");

    let fail = completed(&forge, &db.pool, &api, &shas["fail"], 1, within).await;
    assert_eq!((fail.state, fail.conclusion.as_str()), (CheckState::Failed, "failure"));
    assert!(fail.summary.contains("exit status 1"), "{}", fail.summary);
    let log = forge.check_log(&api, &fail).await.expect("log");
    assert!(log.contains("error: test parse::dates failed") && log.contains("exit status 1"), "{log}");

    let started = Instant::now();
    let hang = completed(&forge, &db.pool, &api, &shas["hang"], 1, within).await;
    assert_eq!((hang.state, hang.conclusion.as_str()), (CheckState::TimedOut, "timed_out"));
    assert!(forge.check_log(&api, &hang).await.expect("log").contains("timed out after 2s"));
    assert!(started.elapsed() < Duration::from_secs(20), "the timed-out command's children held the run");

    let flaky = completed(&forge, &db.pool, &api, &shas["flaky"], 1, within).await;
    assert_eq!(flaky.state, CheckState::Failed);
    assert!(forge.check_log(&api, &flaky).await.expect("log").contains("no such host"));
    forge.rerun(&api, &flaky).await.expect("rerun");
    // Asking again for the same attempt (a controller that crashed after
    // asking) queues nothing more.
    forge.rerun(&api, &flaky).await.expect("rerun again");
    let second = completed(&forge, &db.pool, &api, &shas["flaky"], 2, within).await;
    assert_eq!((second.state, second.conclusion.as_str()), (CheckState::Passed, "success"));
    assert_ne!(second.id, flaky.id);
    let log = forge.check_log(&api, &second).await.expect("log");
    assert!(log.contains("attempt 2") && log.contains("passed on retry"), "{log}");
    // The first attempt's log is still there.
    assert!(forge.check_log(&api, &flaky).await.expect("log").contains("attempt 1"));
    let attempts: i64 = sqlx::query_scalar("SELECT count(*) FROM local_forge_check_runs WHERE sha = $1")
        .bind(&shas["flaky"])
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(attempts, 2);

    // A new push to a pull request's branch gets its own run.
    let remote = forge.remote(&api, Access::Write).await.expect("remote");
    let work = tempfile::tempdir().expect("tempdir");
    Git::new(work.path()).run(&["clone", "-q", "-b", "fail", &remote.url, "c"]).await.expect("clone");
    let git = Git::new(work.path().join("c"));
    write(&work.path().join("c/mode"), "pass\n");
    git.run(&["commit", "-qam", "fix the test"]).await.expect("commit");
    git.run(&["push", "-q", "origin", "fail"]).await.expect("push");
    let fixed_sha = git.run(&["rev-parse", "HEAD"]).await.expect("rev-parse").text();
    let pr = forge.pull_request_for_branch(&api, "fail").await.expect("pr").expect("open");
    assert_eq!(pr.head_sha, fixed_sha);
    assert_eq!(completed(&forge, &db.pool, &api, &fixed_sha, 1, within).await.state, CheckState::Passed);

    // A re-run of a check still running is refused; a status cannot be re-run.
    let status = Check {
        id: "ctx".into(),
        name: "ctx".into(),
        source: CheckSource::CommitStatus,
        state: CheckState::Failed,
        conclusion: "failure".into(),
        details_url: None,
        summary: String::new(),
    };
    assert!(matches!(forge.rerun(&api, &status).await, Err(Error::Rejected { .. })));

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(20), runner)
        .await
        .expect("the runner stops")
        .expect("runner task");
}

#[tokio::test]
async fn a_lost_runner_s_run_is_cancelled_and_a_stopped_runner_says_so() {
    let db = TestDb::create().await;
    let root = tempfile::tempdir().expect("tempdir");
    let forge = LocalForge::new(root.path(), db.pool.clone());
    let api = repo("acme", "api");
    let seed = tempfile::tempdir().expect("seed");
    write(&seed.path().join("README.md"), "slow\n");
    forge.create_repository(&api, "main", Some(seed.path())).await.expect("create");
    forge
        .set_check(&api, "ci", vec!["sh".into(), "-c".into(), "exec sleep 30".into()])
        .await
        .expect("set check");
    let sha = push_branch(&forge, &api, "slow", &[("x", "1\n")]).await;
    forge.open_pull_request(&api, &new_pr("slow")).await.expect("open");

    let in_progress = || async {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let checks = forge.checks(&api, &sha).await.expect("checks");
            if checks.iter().any(|c| c.summary == "in progress") {
                return;
            }
            assert!(Instant::now() < deadline, "the run never started: {checks:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };

    // Runner A takes the run and dies (its task is dropped mid-run, as a
    // killed process would leave it).
    let a = local_ci(Duration::from_secs(2));
    let dying = tokio::spawn({
        let forge = forge.clone();
        async move { a.run(&forge, CancellationToken::new()).await }
    });
    in_progress().await;
    dying.abort();
    let _ = dying.await;

    // Runner B notices once A's deadline (timeout + grace) has passed.
    let b = local_ci(Duration::from_secs(2));
    let stop = CancellationToken::new();
    let watcher = tokio::spawn({
        let (forge, stop) = (forge.clone(), stop.clone());
        async move { b.run(&forge, stop).await }
    });
    let lost = completed(&forge, &db.pool, &api, &sha, 1, Duration::from_secs(30)).await;
    assert_eq!(
        (lost.state, lost.conclusion.as_str(), lost.summary.as_str()),
        (CheckState::Cancelled, "cancelled", "runner lost")
    );
    assert!(forge.check_log(&api, &lost).await.expect("log").starts_with("runner lost"));
    stop.cancel();
    watcher.await.expect("runner B");

    // A runner that is shut down mid-run records it as lost at once.
    forge.rerun(&api, &lost).await.expect("rerun");
    let c = local_ci(Duration::from_secs(60));
    let stop = CancellationToken::new();
    let stopping = tokio::spawn({
        let (forge, stop) = (forge.clone(), stop.clone());
        async move { c.run(&forge, stop).await }
    });
    in_progress().await;
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(20), stopping).await.expect("runner C stops").expect("runner C");
    let stopped = completed(&forge, &db.pool, &api, &sha, 2, Duration::from_secs(1)).await;
    assert_eq!((stopped.state, stopped.summary.as_str()), (CheckState::Cancelled, "runner lost"));
    assert!(
        forge.check_log(&api, &stopped).await.expect("log").contains("runner lost: the runner shut down")
    );
}
