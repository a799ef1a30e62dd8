//! The runner's half of one check: what the `patchpilot-local-ci` process
//! does with a [`CheckRequest`]. It is the only process that runs a
//! repository's code.
//!
//! In order: [`close_inherited_files`], [`drop_privileges`] to the check's
//! user before anything of the repository is touched, then [`run`] the command in the checkout with a
//! minimal environment, in its own process group, with the timeout and the
//! output cap, and kill the group when it ends.

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::unistd::{Gid, Uid};
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::process::Command;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::check::{
    CheckReport, CheckRequest, CheckUser, Conclusion, describe_exit, process_is_root, push_note,
};

/// How long to wait for the output of a killed command: a process that
/// left its group can hold the pipes open forever.
const DRAIN_WAIT: Duration = Duration::from_secs(5);

/// Why the runner would not run a check.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    /// The check would run as root, or with root's group.
    #[error("checks never run as root (uid {uid}, gid {gid})")]
    Root {
        /// The uid it would run as.
        uid: u32,
        /// The gid it would run as.
        gid: u32,
    },
    /// A step of switching users failed.
    #[error("{step}")]
    Switch {
        /// What was being done.
        step: String,
        /// The system's answer.
        #[source]
        source: nix::Error,
    },
    /// After switching, the process is not who it should be.
    #[error("after switching, {0}")]
    Unexpected(String),
}

/// Becomes `user` for good: with [`CheckUser::Switch`], drops the
/// supplementary groups, then sets the gid, then the uid (in that order:
/// once the uid is dropped, the groups and gid can no longer be), and
/// checks that root cannot be had back. Refuses to leave the process as
/// root either way. Then sets no-new-privileges, so no set-uid program the
/// check starts gains anything.
pub fn drop_privileges(user: CheckUser) -> Result<(), PrivilegeError> {
    let step = |step: &str| {
        let step = step.to_owned();
        move |source| PrivilegeError::Switch { step, source }
    };
    if let CheckUser::Switch { uid, gid } = user {
        if user.is_root() {
            return Err(PrivilegeError::Root { uid, gid });
        }
        nix::unistd::setgroups(&[]).map_err(step("dropping the supplementary groups"))?;
        nix::unistd::setgid(Gid::from_raw(gid)).map_err(step(&format!("setting the gid to {gid}")))?;
        nix::unistd::setuid(Uid::from_raw(uid)).map_err(step(&format!("setting the uid to {uid}")))?;
        if nix::unistd::setuid(Uid::from_raw(0)).is_ok() {
            return Err(PrivilegeError::Unexpected("root could be had back".into()));
        }
        let now =
            (nix::unistd::getuid(), nix::unistd::geteuid(), nix::unistd::getgid(), nix::unistd::getegid());
        if now != (Uid::from_raw(uid), Uid::from_raw(uid), Gid::from_raw(gid), Gid::from_raw(gid)) {
            return Err(PrivilegeError::Unexpected(format!("uid, euid, gid, egid are {now:?}")));
        }
        let groups = nix::unistd::getgroups().map_err(step("reading the supplementary groups"))?;
        if groups.iter().any(|g| g.as_raw() != gid) {
            return Err(PrivilegeError::Unexpected(format!("supplementary groups {groups:?} are left")));
        }
    }
    // Whatever was asked for, the process itself must not be root now.
    if process_is_root() {
        return Err(PrivilegeError::Root {
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
        });
    }
    nix::sys::prctl::set_no_new_privs().map_err(step("setting no-new-privileges"))?;
    Ok(())
}

/// Closes every file this process inherited beyond stdin, stdout and
/// stderr. The controller opens its own files close-on-exec, but what its
/// parent left open without the flag (a supervisor's pipe, a socket) would
/// pass through to the check.
pub fn close_inherited_files() -> std::io::Result<()> {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for fd in fds.into_iter().filter(|fd| *fd > 2) {
        // One of them is the folder just read, closed already: EBADF.
        let _ = nix::unistd::close(fd);
    }
    Ok(())
}

/// Runs the request's command in its checkout: an environment of `PATH`
/// (the runner's own), `HOME` and `PP_CI_ATTEMPT` only, the timeout and the
/// log cap. `stop` kills it early; the report then says the runner shut
/// down. Conclusions are kept simple on purpose: exit 0 is success, past
/// the timeout is timed out, anything else is a failure.
pub async fn run(request: &CheckRequest, stop: CancellationToken) -> CheckReport {
    let (command, attempt) = (&request.command, request.attempt);
    let Some(program) = command.first() else {
        return CheckReport {
            conclusion: Conclusion::Failure,
            summary: format!("attempt {attempt}: no command"),
            log: String::new(),
        };
    };
    let log = Arc::new(Mutex::new(TailLog::new(request.log_cap)));
    let mut cmd = Command::new(program);
    cmd.args(&command[1..]).env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    cmd.env("HOME", &request.home).env("PP_CI_ATTEMPT", attempt.to_string());
    // Its own process group, so a timeout kills what the command
    // started too (a `sh -c` and its children), not only the shell.
    cmd.current_dir(&request.dir)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            return CheckReport {
                conclusion: Conclusion::Failure,
                summary: format!("attempt {attempt}: cannot start {program}"),
                log: format!("[patchpilot local CI] cannot start {program:?}: {e}\n"),
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
        _ = tokio::time::sleep(request.timeout) => End::TimedOut,
        _ = stop.cancelled() => End::Stopped,
    };
    // Always, even after a clean exit: a background process left behind
    // would hold the output pipes open and outlive the run.
    kill_group(pid);
    let _ = child.wait().await;
    let drained =
        tokio::time::timeout(DRAIN_WAIT, async { while readers.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        readers.abort_all();
    }
    let mut text = log.lock().map(|mut l| l.render()).unwrap_or_default();
    let (conclusion, summary, note) = match end {
        End::Exited(Ok(status)) if status.success() => {
            (Conclusion::Success, format!("attempt {attempt}: passed"), None)
        }
        End::Exited(Ok(status)) => {
            let how = describe_exit(status);
            (
                Conclusion::Failure,
                format!("attempt {attempt}: {how}"),
                Some(format!("the check failed: {how}")),
            )
        }
        End::Exited(Err(e)) => (
            Conclusion::Failure,
            format!("attempt {attempt}: lost track of the command"),
            Some(format!("waiting for the command failed: {e}")),
        ),
        End::TimedOut => {
            let secs = request.timeout.as_secs_f64();
            (
                Conclusion::TimedOut,
                format!("attempt {attempt}: timed out after {secs}s"),
                Some(format!("timed out after {secs}s; the command and its processes were killed")),
            )
        }
        End::Stopped => return CheckReport::stopped(text),
    };
    if let Some(note) = note {
        push_note(&mut text, &note);
    }
    CheckReport { conclusion, summary, log: text }
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
