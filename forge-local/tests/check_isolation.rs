//! What a check's code can reach, tried from inside checks: the local
//! forge's CI with a real database and real git, its checks run by the
//! `patchpilot-local-ci` binary cargo builds for these tests. The test
//! process plays the controller: it holds the database URLs in its
//! environment, and it is the process a check must not read.
//!
//! Run as root (as here), checks run as `nobody`; run as another user, as
//! that user, and then only the controller being non-dumpable keeps them
//! out. Both are tried: the same-uid case by starting this test executable
//! again as a non-root "controller" (see [`same_uid_controller`]).

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use patchpilot_e2e::TestDatabase;
use patchpilot_fleet::config::DatabaseConfig;
use patchpilot_forge::{Access, CheckSource, CheckState, Forge, NewPullRequest, Repo};
use patchpilot_forge_local::check::{self, CheckReport, CheckRequest, Conclusion};
use patchpilot_forge_local::{CheckUser, LocalCi, LocalCiConfig, LocalForge, SetupError};
use patchpilot_git::Git;
use tokio_util::sync::CancellationToken;

/// The runner cargo built for this test run.
fn runner_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_patchpilot-local-ci"))
}

/// A secret this process holds in its environment, as the controller holds
/// its database URL: the shared harness needs it, so it is always there.
fn controller_secret() -> String {
    let secret = std::env::var("PATCHPILOT_TEST_DATABASE_URL").expect("PATCHPILOT_TEST_DATABASE_URL is set");
    let environ = std::fs::read(format!("/proc/{}/environ", std::process::id())).expect("own environ");
    assert!(
        String::from_utf8_lossy(&environ).contains(&secret),
        "the secret is in this process's /proc environ, so a check that read it would show it"
    );
    secret
}

/// The text between `--- name` and `--- end` in a check's log.
fn section<'a>(log: &'a str, name: &str) -> &'a str {
    let start = log.find(&format!("--- {name}\n")).unwrap_or_else(|| panic!("no {name} section: {log}"));
    let rest = &log[start + name.len() + 5..];
    &rest[..rest.find("--- end").unwrap_or_else(|| panic!("{name} section unended: {log}"))]
}

/// Waits until a check run on `sha` has completed, and returns it with
/// its log.
async fn completed(forge: &LocalForge, repo: &Repo, sha: &str) -> (patchpilot_forge::Check, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let checks = forge.checks(repo, sha).await.expect("checks");
        if let Some(check) =
            checks.into_iter().find(|c| c.source == CheckSource::CheckRun && c.state != CheckState::Pending)
        {
            let log = forge.check_log(repo, &check).await.expect("log");
            return (check, log);
        }
        assert!(Instant::now() < deadline, "the check on {sha} did not complete");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_check_runs_as_its_own_user_and_reaches_nothing_of_the_controller() {
    let secret = controller_secret();
    let db = TestDatabase::create().await.expect("a test database");
    let config = DatabaseConfig { url: db.url.clone(), max_connections: 4, ..DatabaseConfig::default() };
    let pool = patchpilot_fleet::store::connect(&config).await.expect("connect to the test database");
    // A root the forge creates, as a fresh deployment's.
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path().join("forge");
    let forge = LocalForge::new(&root, pool.clone());
    let ci = LocalCi::new(LocalCiConfig {
        poll_interval: Duration::from_millis(50),
        runner: Some(runner_binary()),
        ..LocalCiConfig::default()
    })
    .expect("the local CI runner");
    assert_eq!(
        nix::sys::prctl::get_dumpable().ok(),
        Some(false),
        "setting up the runner makes its process non-dumpable"
    );

    let me = std::process::id();
    let script = format!(
        r#"echo "--- id"; echo "$(id -u) $(id -g) $(id -G)"; echo "--- end"
echo "--- reach"
if cat /proc/{me}/environ >/dev/null 2>&1; then echo "environ read"; else echo "environ refused"; fi
if ls {root} >/dev/null 2>&1; then echo "forge listed"; else echo "forge refused"; fi
if cat {root}/acme/api.git/HEAD >/dev/null 2>&1; then echo "repository read"; else echo "repository refused"; fi
touch "$HOME/x" && echo "home written"
touch ./x && echo "checkout written"
echo "--- end"
echo "--- fds"; ls -l /proc/self/fd; echo "--- end"
echo "--- env"; env; echo "--- end"
"#,
        root = root.display()
    );
    let api = Repo { owner: "acme".into(), name: "api".into() };
    let seed = tempfile::tempdir().expect("seed");
    std::fs::write(seed.path().join("README.md"), "hello\n").expect("seed");
    forge.create_repository(&api, "main", Some(seed.path())).await.expect("create");
    forge.set_check(&api, "probe", vec!["sh".into(), "-c".into(), script]).await.expect("set check");
    let sha = {
        let remote = forge.remote(&api, Access::Write).await.expect("remote");
        let work = tempfile::tempdir().expect("tempdir");
        Git::new(work.path()).run(&["clone", "-q", &remote.url, "c"]).await.expect("clone");
        let git = Git::new(work.path().join("c"));
        git.run(&["checkout", "-q", "-b", "probe"]).await.expect("branch");
        std::fs::write(work.path().join("c/README.md"), "probe\n").expect("write");
        git.run(&["commit", "-qam", "probe"]).await.expect("commit");
        git.run(&["push", "-q", "origin", "probe"]).await.expect("push");
        git.run(&["rev-parse", "HEAD"]).await.expect("rev-parse").text()
    };
    let new =
        NewPullRequest { head: "probe".into(), base: "main".into(), title: "t".into(), body: "b".into() };
    forge.open_pull_request(&api, &new).await.expect("open");

    let stop = CancellationToken::new();
    let running = tokio::spawn({
        let (ci, forge, stop) = (ci.clone(), forge.clone(), stop.clone());
        async move { ci.run(&forge, stop).await }
    });
    let (probe, log) = completed(&forge, &api, &sha).await;
    stop.cancel();
    running.await.expect("the runner stops");
    assert_eq!(probe.state, CheckState::Passed, "{log}");

    // Who it ran as: a uid of its own with no other group when this
    // process is root, this process's uid otherwise.
    let expected_id = match ci.check_user() {
        CheckUser::Switch { uid, gid } => format!("{uid} {gid} {gid}"),
        CheckUser::Inherit => {
            let out =
                Command::new("sh").args(["-c", "echo $(id -u) $(id -g) $(id -G)"]).output().expect("id");
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        }
    };
    if nix::unistd::geteuid().is_root() {
        assert_eq!(ci.check_user(), CheckUser::NOBODY);
    }
    assert_eq!(section(&log, "id").trim(), expected_id, "{log}");

    // What it could reach. The forge's repositories are out of reach only
    // with a uid of its own; under the controller's uid they are not (the
    // documented limit of that mode).
    let forge_reach = match ci.check_user() {
        CheckUser::Switch { .. } => ["forge refused", "repository refused"],
        CheckUser::Inherit => ["forge listed", "repository read"],
    };
    assert_eq!(
        section(&log, "reach").lines().collect::<Vec<_>>(),
        ["environ refused", forge_reach[0], forge_reach[1], "home written", "checkout written"],
        "{log}"
    );

    // No open file but its standard streams (stdin /dev/null, output to
    // the runner) and the folder `ls` itself opens.
    for line in section(&log, "fds").lines().filter(|l| l.contains(" -> ")) {
        let target = line.rsplit(" -> ").next().unwrap_or_default();
        let expected = target == "/dev/null"
            || target.starts_with("pipe:[")
            || (target.starts_with("/proc/") && target.ends_with("/fd"));
        assert!(expected, "the check holds an unexpected file: {line}\n{log}");
    }

    // Its environment: what the runner sets, and what the shell adds.
    let env = section(&log, "env");
    assert!(
        !env.contains(&secret) && !env.contains("PATCHPILOT_"),
        "the controller's environment leaked: {env}"
    );
    for line in env.lines() {
        let name = line.split('=').next().unwrap_or_default();
        assert!(
            ["PATH", "HOME", "PP_CI_ATTEMPT", "PWD", "OLDPWD", "SHLVL", "_"].contains(&name),
            "unexpected variable {name} in the check's environment: {env}"
        );
    }
    assert!(env.contains("PP_CI_ATTEMPT=1\n"), "{env}");
    assert!(!log.contains(&secret), "{log}");
}

#[tokio::test]
async fn checks_as_root_are_refused() {
    let root_user = CheckUser::Switch { uid: 0, gid: 0 };
    let refused = LocalCi::new(LocalCiConfig {
        check_user: Some(root_user),
        runner: Some(runner_binary()),
        ..LocalCiConfig::default()
    });
    assert!(matches!(refused, Err(SetupError::RootCheckUser(_))), "{refused:?}");

    // The runner refuses on its own too, whatever it is asked.
    let work = tempfile::tempdir().expect("tempdir");
    let mut asks =
        vec![CheckUser::Switch { uid: 0, gid: check::NOBODY }, CheckUser::Switch { uid: 1, gid: 0 }];
    if nix::unistd::geteuid().is_root() {
        // Inheriting a root runner's uid would be root.
        asks.push(CheckUser::Inherit);
    }
    for user in asks {
        let request = CheckRequest {
            command: vec!["sh".into(), "-c".into(), "echo the check ran".into()],
            dir: work.path().to_owned(),
            home: work.path().to_owned(),
            attempt: 1,
            timeout: Duration::from_secs(10),
            log_cap: 4096,
            user,
        };
        let report = check::run_in_runner(&runner_binary(), &request, &CancellationToken::new()).await;
        assert_eq!(
            (report.conclusion, report.summary.as_str()),
            (Conclusion::Cancelled, "runner failed"),
            "{user:?}: {report:?}"
        );
        assert!(report.log.contains("checks never run as root"), "{user:?}: {}", report.log);
        assert!(!report.log.contains("the check ran"), "{user:?}: {}", report.log);
    }
}

// A controller that is not root: checks under its own uid.

/// Marks the report line in the output of [`same_uid_controller`].
const REPORT_MARK: &str = "same-uid controller report: ";

/// Plays a controller that is not root, when this test executable is
/// started by [`a_same_uid_check_cannot_read_a_non_dumpable_controller`]
/// (`PP_TEST_CONTROLLER_WORK` set); a no-op in a normal test run. It holds
/// a secret in its environment, is made non-dumpable unless told not to
/// (the control), and runs one check under its own uid that tries to read
/// its `/proc/<pid>/environ`; it prints the report.
#[test]
fn same_uid_controller() {
    let Some(work) = std::env::var_os("PP_TEST_CONTROLLER_WORK").map(PathBuf::from) else { return };
    if std::env::var("PP_TEST_CONTROLLER_DUMPABLE").as_deref() != Ok("1") {
        nix::sys::prctl::set_dumpable(false).expect("non-dumpable");
    }
    let (dir, home) = (work.join("src"), work.join("home"));
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::create_dir_all(&home).expect("mkdir");
    let request = CheckRequest {
        command: vec![
            "sh".into(),
            "-c".into(),
            format!("tr '\\0' '\\n' < /proc/{}/environ", std::process::id()),
        ],
        dir,
        home,
        attempt: 1,
        timeout: Duration::from_secs(30),
        log_cap: 64 * 1024,
        user: CheckUser::Inherit,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let report =
        runtime.block_on(check::run_in_runner(&runner_binary(), &request, &CancellationToken::new()));
    println!("{REPORT_MARK}{}", serde_json::to_string(&report).expect("json"));
}

/// Runs [`same_uid_controller`] as a non-root process (`nobody` when this
/// one is root) and returns its check's report.
fn run_same_uid_controller(work: &Path, secret: &str, dumpable: bool) -> CheckReport {
    let mut cmd = Command::new(std::env::current_exe().expect("own executable"));
    cmd.args(["--exact", "same_uid_controller", "--nocapture", "--test-threads=1"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PP_TEST_CONTROLLER_WORK", work)
        .env("PP_TEST_CONTROLLER_SECRET", secret)
        .env("PP_TEST_CONTROLLER_DUMPABLE", if dumpable { "1" } else { "0" });
    if nix::unistd::geteuid().is_root() {
        cmd.uid(check::NOBODY).gid(check::NOBODY);
    }
    let out = cmd.output().expect("start the same-uid controller");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout
        .lines()
        .find_map(|l| l.split_once(REPORT_MARK).map(|(_, report)| report))
        .unwrap_or_else(|| panic!("no report: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    serde_json::from_str(line).expect("report")
}

#[test]
fn a_same_uid_check_cannot_read_a_non_dumpable_controller() {
    let secret = format!("pp-secret-{}", uuid::Uuid::new_v4().simple());
    let work = tempfile::tempdir().expect("tempdir");
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::chown(work.path(), Some(check::NOBODY), Some(check::NOBODY)).expect("chown");
    }

    let guarded = run_same_uid_controller(work.path(), &secret, false);
    assert_eq!(guarded.conclusion, Conclusion::Failure, "{guarded:?}");
    assert!(guarded.log.contains("Permission denied"), "{}", guarded.log);
    assert!(
        !guarded.log.contains(&secret),
        "a same-uid check read the controller's environ: {}",
        guarded.log
    );

    // The control: the same controller, dumpable, is read. Without it this
    // test could pass for a reason other than the flag.
    let open = run_same_uid_controller(work.path(), &secret, true);
    assert!(
        open.conclusion == Conclusion::Success && open.log.contains(&secret),
        "a same-uid check should read a dumpable controller's environ: {open:?}"
    );
}
