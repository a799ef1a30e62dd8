//! The start-up sweep: what a crashed worker left on the host.
//!
//! A worker killed with SIGKILL cannot tear its runs down: its QEMU and
//! `vhost-device-vsock` processes run on in their own process groups, and
//! its run folders (sockets, scratch discs, consoles) stay under
//! `<state_dir>/runs/`. Before taking work, the next worker on the same state
//! folder kills every process whose command line names that folder and
//! removes what is in it (and in `<state_dir>/work/`, where the worker
//! stages downloads).
//!
//! Owns the state folder's lock: [`StateLock`] holds an exclusive `flock` on
//! `<state_dir>/worker.lock` for the worker's lifetime, and the sweep runs
//! only under it. It must never sweep a state folder another live worker
//! holds (that would kill its VMs), never kill a process whose command line
//! does not name this state folder's `runs/`, and never touch anything
//! outside the state folder.
//!
//! `patchpilot sandbox run` keeps its VMs in `<state_dir>/cli-runs/`, out of
//! the worker's sweep, in folders named after their owner
//! ([`cli_run_prefix`]); [`sweep_cli_runs`] removes those whose owner is
//! gone, and never one whose owner still runs.

use patchpilot_model::{IoError, io};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The lock file's name inside the state folder.
pub const LOCK_FILE: &str = "worker.lock";
/// How long the sweep waits for killed processes to disappear.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// Why the state folder could not be locked or swept.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another process holds the lock.
    #[error(
        "another sandbox worker (pid {holder}) holds {path}; two workers on one machine must use different \
         sandbox.state_dir folders"
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// The pid recorded by the holder, or "unknown".
        holder: String,
    },
    /// File-system trouble.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A leftover process would not die.
    #[error("leftover process {pid} ({cmdline}) is still alive {secs}s after SIGKILL")]
    Unkillable {
        /// Its pid.
        pid: u32,
        /// Its command line, shortened.
        cmdline: String,
        /// How long the sweep waited.
        secs: u64,
    },
}

/// The exclusive lock on a state folder; released when dropped (or when the
/// process dies, which is what lets the next worker in after a crash).
#[derive(Debug)]
pub struct StateLock {
    _lock: Flock<File>,
    path: PathBuf,
}

impl StateLock {
    /// Takes the lock without waiting, and records this pid in the file for
    /// the error another worker gets.
    pub fn acquire(state_dir: &Path) -> Result<StateLock, Error> {
        std::fs::create_dir_all(state_dir).map_err(io(format!("creating {}", state_dir.display())))?;
        let path = state_dir.join(LOCK_FILE);
        // Rust opens files close-on-exec, so VMs the worker starts do not
        // inherit the lock and cannot keep it alive after the worker dies.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(format!("opening {}", path.display())))?;
        let lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((_, Errno::EWOULDBLOCK)) => {
                let holder = std::fs::read_to_string(&path)
                    .ok()
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "unknown".into());
                return Err(Error::Locked { path, holder });
            }
            Err((_, errno)) => {
                return Err(Error::Io(patchpilot_model::IoError::new(
                    format!("locking {}", path.display()),
                    errno.into(),
                )));
            }
        };
        // Only the holder writes the pid, so truncating here races no one.
        let write_pid = || -> std::io::Result<()> {
            use std::io::{Seek as _, Write as _};
            let mut f: &File = &lock;
            f.set_len(0)?;
            f.seek(std::io::SeekFrom::Start(0))?;
            writeln!(f, "{}", std::process::id())
        };
        write_pid().map_err(io(format!("writing {}", path.display())))?;
        Ok(StateLock { _lock: lock, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A process the sweep found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// Its pid.
    pub pid: u32,
    /// Its command line, arguments joined by spaces.
    pub cmdline: String,
}

/// What the sweep did.
#[derive(Debug, Default)]
pub struct SweepReport {
    /// Processes killed.
    pub killed: Vec<Leftover>,
    /// Entries removed from `runs/` and `work/`.
    pub removed: Vec<PathBuf>,
}

/// Kills the leftovers of earlier workers on `state_dir` and empties its
/// `runs/` and `work/` folders. Takes the lock as proof that no live worker
/// uses the folder.
pub fn sweep(lock: &StateLock, state_dir: &Path) -> Result<SweepReport, Error> {
    debug_assert_eq!(lock.path().parent(), Some(state_dir));
    sweep_with_proc(Path::new("/proc"), state_dir)
}

/// [`sweep`] against a `/proc`-like folder, for tests.
fn sweep_with_proc(proc_root: &Path, state_dir: &Path) -> Result<SweepReport, Error> {
    let mut report = SweepReport::default();
    let needles = needles(state_dir);
    let own = std::process::id();
    let leftovers: Vec<Leftover> =
        find_leftovers(proc_root, &needles).into_iter().filter(|l| l.pid != own).collect();
    kill_and_wait(proc_root, &leftovers, "killing a leftover of a crashed worker")?;
    report.killed = leftovers;
    for folder in ["runs", "work"] {
        let dir = state_dir.join(folder);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(format!("reading {}", dir.display()))(e).into()),
        };
        for entry in entries {
            let entry = entry.map_err(io(format!("reading {}", dir.display())))?;
            let path = entry.path();
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            let removed = if is_dir { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            removed.map_err(io(format!("removing {}", path.display())))?;
            report.removed.push(path);
        }
    }
    Ok(report)
}

/// SIGKILLs `leftovers` and waits, by watching `proc_root`, until each is
/// gone (they are not our children: a crashed owner's orphans were
/// re-parented, so waitpid cannot see them).
fn kill_and_wait(proc_root: &Path, leftovers: &[Leftover], why: &str) -> Result<(), Error> {
    for leftover in leftovers {
        tracing::warn!(pid = leftover.pid, cmdline = %leftover.cmdline, "{why}");
        match kill(Pid::from_raw(leftover.pid as i32), Signal::SIGKILL) {
            // Gone already: nothing to do.
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => {
                return Err(Error::Io(patchpilot_model::IoError::new(
                    format!("killing leftover process {} ({})", leftover.pid, leftover.cmdline),
                    e.into(),
                )));
            }
        }
    }
    let deadline = Instant::now() + KILL_WAIT;
    for leftover in leftovers {
        while is_alive(proc_root, leftover.pid) {
            if Instant::now() >= deadline {
                return Err(Error::Unkillable {
                    pid: leftover.pid,
                    cmdline: shorten(&leftover.cmdline),
                    secs: KILL_WAIT.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(())
}

/// The prefix of a `patchpilot sandbox run` run id that names its owner:
/// `cli-<pid>-<start time>-`, the start time (clock ticks after boot, from
/// `/proc/<pid>/stat`) telling the owner from a later process that reuses
/// its pid.
pub fn cli_run_prefix(owner: u32) -> String {
    format!("cli-{owner}-{}-", start_time(Path::new("/proc"), owner).unwrap_or(0))
}

/// Kills the VMs and removes the folders of `sandbox run` invocations in
/// `cli_runs` whose owner is gone (killed with SIGKILL, so it could not
/// clean up). Runs of live owners are left alone, and so are folders whose
/// name says no owner (they are named in a warning).
pub fn sweep_cli_runs(cli_runs: &Path) -> Result<SweepReport, Error> {
    sweep_cli_runs_with_proc(Path::new("/proc"), cli_runs)
}

fn sweep_cli_runs_with_proc(proc_root: &Path, cli_runs: &Path) -> Result<SweepReport, Error> {
    let mut report = SweepReport::default();
    let entries = match std::fs::read_dir(cli_runs) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(io(format!("reading {}", cli_runs.display()))(e).into()),
    };
    let own = std::process::id();
    for entry in entries {
        let entry = entry.map_err(io(format!("reading {}", cli_runs.display())))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let mut parts = name.strip_prefix("cli-").unwrap_or_default().splitn(3, '-');
        let owner = (
            parts.next().and_then(|p| p.parse::<u32>().ok()),
            parts.next().and_then(|t| t.parse::<u64>().ok()),
        );
        let (Some(pid), Some(started)) = owner else {
            tracing::warn!(dir = %path.display(), "a sandbox run folder that names no owner; left alone");
            continue;
        };
        if is_alive(proc_root, pid) && start_time(proc_root, pid) == Some(started) {
            continue;
        }
        let mut needle = path.clone().into_os_string().into_encoded_bytes();
        needle.push(b'/');
        let leftovers: Vec<Leftover> =
            find_leftovers(proc_root, &[needle]).into_iter().filter(|l| l.pid != own).collect();
        kill_and_wait(proc_root, &leftovers, "killing a VM process of a sandbox run whose owner is gone")?;
        report.killed.extend(leftovers);
        std::fs::remove_dir_all(&path).map_err(io(format!("removing {}", path.display())))?;
        report.removed.push(path);
    }
    Ok(report)
}

/// Field 22 of `/proc/<pid>/stat`: when the process started.
fn start_time(proc_root: &Path, pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    // Fields after the parenthesised name, which may itself hold ") ".
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Live processes (zombies excluded) whose command line names `path`
/// anywhere in an argument: what the sweep would find for a folder. Tests
/// and operators use it to check that nothing of a run is left.
pub fn live_processes_mentioning(path: &Path) -> Vec<Leftover> {
    let proc_root = Path::new("/proc");
    let needle = vec![path.as_os_str().as_encoded_bytes().to_vec()];
    let own = std::process::id();
    find_leftovers(proc_root, &needle)
        .into_iter()
        .filter(|l| l.pid != own && is_alive(proc_root, l.pid))
        .collect()
}

/// Whether `pid` is present and not a zombie.
pub fn process_alive(pid: u32) -> bool {
    is_alive(Path::new("/proc"), pid)
}

/// The strings that mark a process as one of this state folder's runs: its
/// `runs/` path as configured and as resolved (the VMM was given the
/// configured one, but a symlinked state folder may appear either way).
fn needles(state_dir: &Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut push = |dir: &Path| {
        let mut needle = dir.join("runs").into_os_string().into_encoded_bytes();
        needle.push(b'/');
        if !out.contains(&needle) {
            out.push(needle);
        }
    };
    push(state_dir);
    if let Ok(real) = std::fs::canonicalize(state_dir) {
        push(&real);
    }
    out
}

/// Processes under `proc_root` whose command line contains one of
/// `needles`. Processes that vanish while being read are skipped.
fn find_leftovers(proc_root: &Path, needles: &[Vec<u8>]) -> Vec<Leftover> {
    let Ok(entries) = std::fs::read_dir(proc_root) else { return Vec::new() };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if cmdline_matches(&cmdline, needles) {
            let text = cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ");
            out.push(Leftover { pid, cmdline: text });
        }
    }
    out.sort_by_key(|l| l.pid);
    out
}

/// Whether a NUL-separated command line names one of `needles` in any
/// argument (QEMU gets paths inside options such as `file:<run>/console.log`,
/// so a prefix match on whole arguments would miss them).
fn cmdline_matches(cmdline: &[u8], needles: &[Vec<u8>]) -> bool {
    cmdline.split(|b| *b == 0).any(|arg| needles.iter().any(|n| !n.is_empty() && contains(arg, n)))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Alive means present and not a zombie: a zombie holds no resources and
/// only waits for its parent to reap it.
fn is_alive(proc_root: &Path, pid: u32) -> bool {
    match std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")) {
        // The state follows the parenthesised command name, which may itself
        // contain ") ", so split at the last one.
        Ok(stat) => {
            stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next()).is_some_and(|s| s != 'Z')
        }
        Err(_) => false,
    }
}

fn shorten(text: &str) -> String {
    if text.len() <= 200 {
        return text.to_owned();
    }
    let mut end = 200;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt as _;

    use super::*;

    fn fake_proc(dir: &Path, pid: u32, args: &[&str], state: char) {
        let p = dir.join(pid.to_string());
        std::fs::create_dir_all(&p).expect("mkdir");
        let mut cmdline = Vec::new();
        for a in args {
            cmdline.extend_from_slice(a.as_bytes());
            cmdline.push(0);
        }
        std::fs::write(p.join("cmdline"), cmdline).expect("cmdline");
        std::fs::write(p.join("stat"), format!("{pid} (we ird) name) {state} 1 2 3")).expect("stat");
    }

    #[test]
    fn matches_paths_inside_arguments_only_for_this_state_dir() {
        let proc_root = tempfile::tempdir().expect("tempdir");
        let state = Path::new("/srv/pp/state");
        fake_proc(
            proc_root.path(),
            10,
            &["qemu-system-x86_64", "-serial", "file:/srv/pp/state/runs/r1/console.log"],
            'S',
        );
        fake_proc(
            proc_root.path(),
            11,
            &["vhost-device-vsock", "--uds-path", "/srv/pp/state/runs/r1/vm.vsock"],
            'S',
        );
        // Another state folder, a prefix of ours without runs/, and a name
        // that merely starts the same: none of these are ours.
        fake_proc(proc_root.path(), 12, &["qemu", "file:/srv/pp/state2/runs/r1/console.log"], 'S');
        fake_proc(proc_root.path(), 13, &["ls", "/srv/pp/state/runs"], 'S');
        fake_proc(proc_root.path(), 14, &["ls", "/srv/pp/state/runsx/a"], 'S');
        std::fs::create_dir_all(proc_root.path().join("self")).expect("self");
        let found = find_leftovers(proc_root.path(), &needles(state));
        let pids: Vec<u32> = found.iter().map(|l| l.pid).collect();
        assert_eq!(pids, vec![10, 11]);
        assert_eq!(found[1].cmdline, "vhost-device-vsock --uds-path /srv/pp/state/runs/r1/vm.vsock");
    }

    #[test]
    fn zombies_and_vanished_processes_are_not_alive() {
        let proc_root = tempfile::tempdir().expect("tempdir");
        fake_proc(proc_root.path(), 20, &["x"], 'S');
        fake_proc(proc_root.path(), 21, &["x"], 'Z');
        assert!(is_alive(proc_root.path(), 20));
        assert!(!is_alive(proc_root.path(), 21));
        assert!(!is_alive(proc_root.path(), 22));
    }

    #[test]
    fn sweep_kills_a_real_leftover_and_empties_runs() {
        let state = tempfile::tempdir().expect("tempdir");
        let run_dir = state.path().join("runs").join("r-crashed");
        std::fs::create_dir_all(&run_dir).expect("run dir");
        std::fs::write(run_dir.join("scratch.ext4"), b"x").expect("scratch");
        std::fs::create_dir_all(state.path().join("work").join("r-crashed")).expect("work dir");
        // Keep: the image and the lock live beside runs/.
        std::fs::write(state.path().join("keep.img"), b"image").expect("image");
        // A real process whose argv names the run folder, as QEMU's does.
        let mut leftover = std::process::Command::new("sleep")
            .arg0(run_dir.join("qemu-system-x86_64"))
            .arg("300")
            .spawn()
            .expect("spawn sleep");
        // spawn() returns while the child is still inside execve: the kernel
        // wakes a vfork parent before the new program's arguments are in
        // place, and until then /proc/<pid>/cmdline reads empty. A crashed
        // worker's orphans are long past that; wait until this one is too.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !live_processes_mentioning(&run_dir).iter().any(|l| l.pid == leftover.id()) {
            assert!(Instant::now() < deadline, "the leftover never showed its command line");
            std::thread::sleep(Duration::from_millis(1));
        }
        // An unrelated process that must survive.
        let mut bystander = std::process::Command::new("sleep").arg("300").spawn().expect("spawn sleep");

        let lock = StateLock::acquire(state.path()).expect("lock");
        let report = sweep(&lock, state.path()).expect("sweep");
        let killed: Vec<u32> = report.killed.iter().map(|l| l.pid).collect();
        assert_eq!(killed, vec![leftover.id()]);
        let status = leftover.wait().expect("wait");
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9));
        assert!(bystander.try_wait().expect("try_wait").is_none(), "the bystander was killed");
        let _ = bystander.kill();
        let _ = bystander.wait();
        assert_eq!(std::fs::read_dir(state.path().join("runs")).expect("runs").count(), 0);
        assert_eq!(std::fs::read_dir(state.path().join("work")).expect("work").count(), 0);
        assert!(state.path().join("keep.img").exists());
        assert_eq!(report.removed.len(), 2);
    }

    #[test]
    fn a_second_worker_on_the_same_state_dir_is_refused() {
        let state = tempfile::tempdir().expect("tempdir");
        let first = StateLock::acquire(state.path()).expect("first lock");
        let err = StateLock::acquire(state.path()).expect_err("second lock");
        let text = err.to_string();
        assert!(text.contains(&std::process::id().to_string()), "{text}");
        assert!(text.contains("different sandbox.state_dir"), "{text}");
        drop(first);
        StateLock::acquire(state.path()).expect("lock after release");
    }
}
