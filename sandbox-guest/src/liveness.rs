//! The run's heartbeat: what the guest sends the host every
//! [`HEARTBEAT_INTERVAL`] while a run is under way, so the host can end a
//! hung guest in seconds instead of at its wall time.
//!
//! A frozen or crashed guest stops sending; a stuck one keeps sending the
//! same counters. The counters are cheap reads of `/proc` and one atomic,
//! and say nothing the host must rely on: the host decides what is
//! progress, and a guest that fakes it keeps only its own run alive, up to
//! the wall time.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use patchpilot_proto::v1::Heartbeat;

/// How often a heartbeat is sent. Far below the host's hang timeout (a
/// minute by default), so a guest slowed down by emulation and load still
/// makes it.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);

/// Connections the guest's relays are carrying to the host. One process
/// (PID 1's child) runs every relay and the control service, so a
/// process-wide counter is the whole truth.
static OPEN_CONNECTIONS: AtomicU32 = AtomicU32::new(0);

/// Counts one relayed connection while it lives.
#[derive(Debug)]
pub struct OpenConnection(());

impl OpenConnection {
    /// Counts a connection until the guard is dropped.
    pub fn count() -> OpenConnection {
        OPEN_CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        OpenConnection(())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        OPEN_CONNECTIONS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Clock ticks per second in `/proc/stat` and `/proc/<pid>/stat`: USER_HZ,
/// which the kernel fixes at 100 for user space on every architecture the
/// guest runs on, whatever its internal HZ.
const USER_HZ: u64 = 100;

/// The heartbeat now.
pub fn sample(uptime_ms: u64) -> Heartbeat {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let own = std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| own_cpu_ticks(&s)).unwrap_or(0);
    let (busy, processes) = system_counters(&stat);
    Heartbeat {
        uptime_ms,
        processes_started: processes,
        busy_cpu_ms: busy.saturating_sub(own) * (1000 / USER_HZ),
        open_connections: OPEN_CONNECTIONS.load(Ordering::Relaxed),
    }
}

/// From `/proc/stat`: the busy ticks of all CPUs (user, nice, system, irq,
/// softirq; not idle, iowait or steal) and the processes started since
/// boot.
fn system_counters(stat: &str) -> (u64, u64) {
    let mut busy = 0;
    let mut processes = 0;
    for line in stat.lines() {
        let mut fields = line.split_ascii_whitespace();
        match fields.next() {
            Some("cpu") => {
                let ticks: Vec<u64> = fields.map(|f| f.parse().unwrap_or(0)).collect();
                // user nice system idle iowait irq softirq …
                busy = [0, 1, 2, 5, 6].iter().filter_map(|i| ticks.get(*i)).sum();
            }
            Some("processes") => processes = fields.next().and_then(|f| f.parse().ok()).unwrap_or(0),
            _ => {}
        }
    }
    (busy, processes)
}

/// utime + stime from a `/proc/<pid>/stat` line. The command name in
/// parentheses may hold spaces and parentheses, so fields are counted from
/// the last `)`: state is the first after it, utime the 12th, stime the
/// 13th.
fn own_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_and_process_count_are_read_from_proc_stat() {
        let stat = "cpu  100 5 40 9000 300 2 3 7 0 0\ncpu0 50 2 20 4500 150 1 1 3 0 0\nintr 1 2\nctxt 99\nprocesses 412\nprocs_running 1\n";
        // user + nice + system + irq + softirq; idle, iowait and steal are not busy.
        assert_eq!(system_counters(stat), (150, 412));
        assert_eq!(system_counters(""), (0, 0));
    }

    #[test]
    fn own_cpu_is_read_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "324 (patch (pilot) x) S 1 324 324 0 -1 4194560 1200 0 3 0 17 4 0 0 20 0 9 0 250 1 2";
        assert_eq!(own_cpu_ticks(stat), Some(21));
        assert_eq!(own_cpu_ticks("garbage"), None);
    }

    #[test]
    fn open_connections_are_counted_while_their_guards_live() {
        let before = OPEN_CONNECTIONS.load(Ordering::Relaxed);
        let a = OpenConnection::count();
        let b = OpenConnection::count();
        assert_eq!(OPEN_CONNECTIONS.load(Ordering::Relaxed), before + 2);
        drop(a);
        drop(b);
        assert_eq!(OPEN_CONNECTIONS.load(Ordering::Relaxed), before);
    }

    #[test]
    fn a_sample_of_this_machine_counts_processes_and_time() {
        let beat = sample(7);
        assert_eq!(beat.uptime_ms, 7);
        assert!(beat.processes_started > 0, "{beat:?}");
    }
}
