//! The guest's console, as the host reads it: the kernel's own words
//! that a run (or a warm VM waiting for one) cannot be trusted to go on.
//! Reading the file is all the host does with this guest text, which is
//! evidence for a run's reason only.

use std::path::Path;
use std::time::Duration;

/// Bytes read per look at the console.
const CHUNK: u64 = 1 << 20;
/// How often the console is read for [`CONSOLE_FAULTS`]: it is a file the
/// VMM appends to, with no change notification that works on every backend.
const CONSOLE_POLL: Duration = Duration::from_millis(500);
/// Guest kernel messages after which a run cannot be trusted to progress:
/// a wedged CPU, a stuck task, a panic, the OOM killer, RCU stalls. Under
/// TCG a soft lockup during a Docker build was seen holding a run for its
/// whole wall time; it is the host's problem, so the run ends as an
/// infrastructure failure and the controller retries it on a fresh VM.
pub const CONSOLE_FAULTS: [&str; 6] = [
    "soft lockup",
    "blocked for more than",
    "Kernel panic",
    "Out of memory",
    "rcu_sched detected stall",
    "rcu_preempt detected stall",
];

/// Returns the first console line that names one of [`CONSOLE_FAULTS`],
/// reading only what was appended since the last look; pends forever when
/// none comes (the run's own end or wall time decides then).
pub(crate) async fn watch_console(path: &Path) -> String {
    let mut offset = 0u64;
    let mut partial = Vec::new();
    loop {
        if let Some(line) = read_console_faults(path, &mut offset, &mut partial) {
            return line;
        }
        tokio::time::sleep(CONSOLE_POLL).await;
    }
}

/// One look at the console from `offset`; `partial` keeps an unfinished
/// last line for the next look.
fn read_console_faults(path: &Path, offset: &mut u64, partial: &mut Vec<u8>) -> Option<String> {
    use std::io::{Read as _, Seek as _};
    let mut file = std::fs::File::open(path).ok()?;
    file.seek(std::io::SeekFrom::Start(*offset)).ok()?;
    let mut fresh = Vec::new();
    // Bounded per look, so a flooding guest cannot make one read unbounded.
    let read = file.take(CHUNK).read_to_end(&mut fresh).ok()?;
    *offset += read as u64;
    partial.extend_from_slice(&fresh);
    let complete = partial.iter().rposition(|b| *b == b'\n').map(|i| i + 1).unwrap_or(0);
    let lines: Vec<u8> = partial.drain(..complete).collect();
    if partial.len() > 4096 {
        partial.clear();
    }
    first_console_fault(&String::from_utf8_lossy(&lines))
}

/// The first line of `console` that names one of [`CONSOLE_FAULTS`],
/// trimmed and cut to 300 characters.
pub(crate) fn first_console_fault(console: &str) -> Option<String> {
    console
        .lines()
        .find(|line| CONSOLE_FAULTS.iter().any(|f| line.contains(f)))
        .map(|line| line.trim().chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn console_faults_are_found_in_complete_new_lines_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("console.log");
        let mut console = std::fs::File::create(&path).expect("create");
        let (mut offset, mut partial) = (0, Vec::new());
        assert_eq!(read_console_faults(&path, &mut offset, &mut partial), None);
        console
            .write_all(b"[    1.0] Run /init as init process\n[  336.1] watchdog: BUG: soft lo")
            .expect("write");
        assert_eq!(
            read_console_faults(&path, &mut offset, &mut partial),
            None,
            "half a line is not a verdict"
        );
        console.write_all(b"ckup - CPU#0 stuck for 336s! [exe:324]\n").expect("write");
        assert_eq!(
            read_console_faults(&path, &mut offset, &mut partial).as_deref(),
            Some("[  336.1] watchdog: BUG: soft lockup - CPU#0 stuck for 336s! [exe:324]")
        );
        assert_eq!(read_console_faults(&path, &mut offset, &mut partial), None, "each line is read once");
        console.write_all(b"INFO: task dockerd:312 blocked for more than 120 seconds.\n").expect("write");
        let hung = read_console_faults(&path, &mut offset, &mut partial).expect("a hung task");
        assert!(hung.contains("blocked for more than 120 seconds"), "{hung}");
        console.write_all(b"Step 3/5 : RUN make\nok\n").expect("write");
        assert_eq!(read_console_faults(&path, &mut offset, &mut partial), None);
    }
}
