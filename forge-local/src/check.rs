//! One check as the local CI runner hands it to the `patchpilot-local-ci`
//! process and gets it back: the request, the report, who the check runs
//! as, and the controller's half of the exchange ([`run_in_runner`]). The
//! runner's half is [`crate::runner`].
//!
//! The exchange, over the runner's standard streams:
//! - the controller starts the runner with an empty environment but `PATH`,
//!   in a process group of its own, and writes one line of JSON, a
//!   [`CheckRequest`];
//! - it keeps the runner's stdin open while the check runs. Its end (the
//!   controller closed it to stop, dropped the run, or died) tells the
//!   runner to kill the check and report it cancelled ([`RUNNER_LOST`]);
//! - the runner writes one [`CheckReport`] as JSON on stdout and exits 0. A
//!   runner that cannot run the check at all (the request does not parse,
//!   the uid cannot be switched to) says why on stderr and exits non-zero;
//!   the run is then cancelled with that reason.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// The runner's file name, next to the controller's binary by default.
pub const RUNNER_BINARY: &str = "patchpilot-local-ci";

/// The summary of a run whose runner went away, and the start of its log;
/// the controller's triage treats it as infrastructure.
pub const RUNNER_LOST: &str = "runner lost";

/// Linux's overflow uid and gid: `nobody` and `nogroup`, which own nothing.
pub const NOBODY: u32 = 65534;

/// How long a runner told to stop may take to kill its check and report
/// before it is killed itself. Above the runner's own wait for the output
/// of a killed check.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// How long past the check's timeout the runner may take to report: it
/// kills the check at the timeout and then waits for the output to drain.
const REPORT_SLACK: Duration = Duration::from_secs(30);

/// Most bytes of the runner's stderr kept for a runner failure.
const STDERR_CAP: usize = 64 * 1024;

/// Who a check runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckUser {
    /// The runner's own uid, gid and groups, which are the controller's:
    /// for a controller that is not root and cannot switch uid. The check
    /// can then reach every file the controller's uid can; only the
    /// controller being non-dumpable keeps its memory and
    /// `/proc/<pid>/environ` from the check.
    Inherit,
    /// This uid and gid, with no supplementary groups. Switching needs root
    /// (or `CAP_SETUID` and `CAP_SETGID`).
    Switch {
        /// The uid.
        uid: u32,
        /// The gid.
        gid: u32,
    },
}

impl CheckUser {
    /// `nobody:nogroup`.
    pub const NOBODY: CheckUser = CheckUser::Switch { uid: NOBODY, gid: NOBODY };

    /// The default for this process: [`CheckUser::NOBODY`] when it runs as
    /// root, [`CheckUser::Inherit`] otherwise.
    pub fn for_this_process() -> CheckUser {
        if nix::unistd::geteuid().is_root() { CheckUser::NOBODY } else { CheckUser::Inherit }
    }

    /// Whether a check would run as root (uid or gid 0) in this process;
    /// such a check is refused.
    pub fn is_root(self) -> bool {
        match self {
            CheckUser::Inherit => process_is_root(),
            CheckUser::Switch { uid, gid } => uid == 0 || gid == 0,
        }
    }
}

/// Whether this process has root's uid or gid, real or effective.
pub(crate) fn process_is_root() -> bool {
    nix::unistd::geteuid().is_root()
        || nix::unistd::getuid().is_root()
        || nix::unistd::getegid().as_raw() == 0
        || nix::unistd::getgid().as_raw() == 0
}

/// What the runner is asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRequest {
    /// The check's command, as argv.
    pub command: Vec<String>,
    /// The checkout it runs in.
    pub dir: std::path::PathBuf,
    /// Its `HOME`, a folder of its own next to the checkout.
    pub home: std::path::PathBuf,
    /// Which attempt of the check this is (`PP_CI_ATTEMPT`).
    pub attempt: i32,
    /// How long the command may run before it and its processes are killed.
    pub timeout: Duration,
    /// Most bytes of output kept; the tail is kept, where failures are.
    pub log_cap: usize,
    /// Who it runs as.
    pub user: CheckUser,
}

/// How a check ended, in the words check runs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Conclusion {
    /// Exit 0.
    Success,
    /// Any other exit, or a command that could not start.
    Failure,
    /// Ran past its timeout and was killed.
    TimedOut,
    /// Did not run to its end for a reason outside the repository.
    Cancelled,
}

impl Conclusion {
    /// As stored in `local_forge_check_runs.conclusion`.
    pub fn as_str(self) -> &'static str {
        match self {
            Conclusion::Success => "success",
            Conclusion::Failure => "failure",
            Conclusion::TimedOut => "timed_out",
            Conclusion::Cancelled => "cancelled",
        }
    }
}

/// What the runner reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    /// How it ended.
    pub conclusion: Conclusion,
    /// One line for the check run.
    pub summary: String,
    /// The tail of the output, with the runner's notes.
    pub log: String,
}

impl CheckReport {
    /// A run stopped because its runner shut down, with the output so far.
    pub(crate) fn stopped(mut log: String) -> CheckReport {
        push_note(
            &mut log,
            &format!("{RUNNER_LOST}: the runner shut down during the run; the command was killed"),
        );
        CheckReport { conclusion: Conclusion::Cancelled, summary: RUNNER_LOST.to_owned(), log }
    }

    /// A run the runner could not do; cancelled, so triage treats it as
    /// infrastructure.
    fn runner_failed(why: &str) -> CheckReport {
        let mut log = String::new();
        push_note(&mut log, &format!("the runner failed: {why}"));
        CheckReport { conclusion: Conclusion::Cancelled, summary: "runner failed".to_owned(), log }
    }
}

/// Appends `[patchpilot local CI] note` on a line of its own.
pub(crate) fn push_note(log: &mut String, note: &str) {
    if !log.is_empty() && !log.ends_with('\n') {
        log.push('\n');
    }
    log.push_str("[patchpilot local CI] ");
    log.push_str(note);
    log.push('\n');
}

/// Runs `request` in the runner at `program` and returns its report.
/// `stop` ends the run early: the runner kills the check and the report
/// says [`RUNNER_LOST`]. Dropping the returned future stops the run the
/// same way (the runner sees its stdin end), without waiting for it.
pub async fn run_in_runner(program: &Path, request: &CheckRequest, stop: &CancellationToken) -> CheckReport {
    let line = match serde_json::to_string(request) {
        Ok(line) => line + "\n",
        Err(e) => return CheckReport::runner_failed(&format!("cannot encode the request: {e}")),
    };
    let mut cmd = Command::new(program);
    cmd.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    // A group of its own, so a terminal's Ctrl-C to the controller does not
    // kill the runner before it has killed its check; stopping goes through
    // stdin. No kill on drop for the same reason: a dropped run closes
    // stdin, and the runner cleans up.
    cmd.process_group(0).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            return CheckReport::runner_failed(&format!("cannot start {}: {e}", program.display()));
        }
    };
    let pid = child.id();
    let mut stdin = child.stdin.take();
    if let Some(input) = stdin.as_mut()
        && let Err(e) = input.write_all(line.as_bytes()).await
    {
        // The runner is gone already; its stderr says why.
        tracing::warn!(error = %e, "local CI: cannot send the request to the runner");
    }
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    // JSON escapes a control byte in six.
    let report_cap = request.log_cap.saturating_mul(6).saturating_add(64 * 1024);
    let exchange = async {
        let (out, err) = tokio::join!(read_capped(stdout, report_cap), read_capped(stderr, STDERR_CAP));
        (out, err, child.wait().await)
    };
    tokio::pin!(exchange);
    /// Why the run was cut short.
    enum Cut {
        Stopped,
        Overdue,
    }
    let (ended, cut) = tokio::select! {
        ended = &mut exchange => (Some(ended), None),
        _ = stop.cancelled() => (None, Some(Cut::Stopped)),
        _ = tokio::time::sleep(request.timeout + REPORT_SLACK) => (None, Some(Cut::Overdue)),
    };
    let (out, err, status) = match ended {
        Some(ended) => ended,
        None => {
            drop(stdin.take());
            match tokio::time::timeout(STOP_WAIT, &mut exchange).await {
                Ok(ended) => ended,
                Err(_) => {
                    kill(pid);
                    exchange.await
                }
            }
        }
    };
    let report = match status {
        Ok(status) if status.success() => {
            serde_json::from_slice::<CheckReport>(&out).map_err(|e| format!("its report does not parse: {e}"))
        }
        Ok(status) => Err(describe_exit(status)),
        Err(e) => Err(format!("waiting for it failed: {e}")),
    };
    match (cut, report) {
        (Some(Cut::Overdue), _) => CheckReport::runner_failed(&format!(
            "it did not report within {}s of the check's timeout and was stopped",
            REPORT_SLACK.as_secs()
        )),
        (_, Ok(report)) => report,
        (Some(Cut::Stopped), Err(_)) => CheckReport::stopped(String::new()),
        (None, Err(why)) => {
            let err = String::from_utf8_lossy(&err);
            let why = if err.trim().is_empty() { why } else { format!("{why}: {}", err.trim()) };
            CheckReport::runner_failed(&why)
        }
    }
}

/// "exit status 2", "killed by signal 9".
pub(crate) fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

/// SIGKILL to the runner; one already gone is fine.
fn kill(pid: Option<u32>) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else { return };
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
}

/// Up to `cap` bytes of `stream`, then reads on to its end without keeping
/// more, so the writer is never blocked on a full pipe.
async fn read_capped(stream: Option<impl AsyncRead + Unpin>, cap: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut stream) = stream else { return kept };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_as_root_are_recognised() {
        assert!(CheckUser::Switch { uid: 0, gid: NOBODY }.is_root());
        assert!(CheckUser::Switch { uid: NOBODY, gid: 0 }.is_root());
        assert!(!CheckUser::NOBODY.is_root());
        assert_eq!(CheckUser::Inherit.is_root(), nix::unistd::geteuid().is_root());
        assert!(!CheckUser::for_this_process().is_root());
    }

    #[tokio::test]
    async fn a_runner_that_cannot_start_cancels_the_run() {
        let request = CheckRequest {
            command: vec!["true".into()],
            dir: "/".into(),
            home: "/".into(),
            attempt: 1,
            timeout: Duration::from_secs(1),
            log_cap: 1024,
            user: CheckUser::NOBODY,
        };
        let missing = Path::new("/nonexistent/patchpilot-local-ci");
        let report = run_in_runner(missing, &request, &CancellationToken::new()).await;
        assert_eq!((report.conclusion, report.summary.as_str()), (Conclusion::Cancelled, "runner failed"));
        assert!(report.log.contains("cannot start /nonexistent/patchpilot-local-ci"), "{}", report.log);
    }

    #[test]
    fn notes_start_a_line() {
        let mut log = "partial".to_owned();
        push_note(&mut log, "done");
        assert_eq!(log, "partial\n[patchpilot local CI] done\n");
        let report = CheckReport::stopped(String::new());
        assert_eq!((report.conclusion, report.summary.as_str()), (Conclusion::Cancelled, RUNNER_LOST));
        assert!(report.log.contains("runner lost: the runner shut down"), "{}", report.log);
    }
}
