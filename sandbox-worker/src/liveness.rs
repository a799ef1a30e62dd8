//! Telling a hung guest from a long build, from what the guest streams
//! during a run: its output, its phases and a [`Heartbeat`] every few
//! seconds (`patchpilot_sandbox_guest::liveness`).
//!
//! A run is hung when, for `sandbox.hang_timeout_secs`, either the guest
//! sent nothing at all (frozen, crashed, or its vCPUs locked up) or nothing
//! it sent showed progress: no output, no phase, no new process, no CPU use
//! above [`CPU_FLOOR`], and no connection open to the host. A hung run ends
//! at once as an infrastructure failure, which the controller retries on a
//! fresh VM; a long build that keeps showing progress is never cut short
//! here (its wall time still bounds it).
//!
//! The guest is untrusted, so what it reports can only keep its own run
//! alive, and never past the wall time the host enforces.

use std::fmt;
use std::time::Duration;

use patchpilot_proto::v1::Heartbeat;
use tokio::time::Instant;

/// CPU use that counts as progress: 5% of one CPU between two heartbeats.
/// Below it is the background a stuck guest still shows (kernel threads,
/// an idle dockerd).
pub const CPU_FLOOR_PERCENT: u64 = 5;

/// Why a run was found hung.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hang {
    /// Nothing at all arrived from the guest.
    Silent { for_secs: u64 },
    /// Heartbeats arrived but showed no progress.
    NoProgress { for_secs: u64 },
}

impl fmt::Display for Hang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hang::Silent { for_secs } => write!(
                f,
                "the guest sent nothing for {for_secs}s (sandbox.hang_timeout_secs): it froze or crashed, so the run ended at once"
            ),
            Hang::NoProgress { for_secs } => write!(
                f,
                "the guest made no progress for {for_secs}s (sandbox.hang_timeout_secs): no output, no new process, no CPU use and no open connection, so the run ended at once"
            ),
        }
    }
}

/// What the host has heard of one run so far.
#[derive(Debug)]
pub struct Liveness {
    timeout: Duration,
    last_heard: Instant,
    last_progress: Instant,
    last_beat: Option<(Instant, Heartbeat)>,
}

impl Liveness {
    /// A run that started at `now`, with `timeout` allowed without news.
    pub fn new(timeout: Duration, now: Instant) -> Liveness {
        Liveness { timeout, last_heard: now, last_progress: now, last_beat: None }
    }

    /// Output or a phase: the guest is alive and getting on.
    pub fn progressed(&mut self, now: Instant) {
        self.last_heard = now;
        self.last_progress = now;
    }

    /// A heartbeat: the guest is alive; whether it got on is read from its
    /// counters against the previous beat's.
    pub fn heartbeat(&mut self, beat: Heartbeat, now: Instant) {
        self.last_heard = now;
        let moved = match &self.last_beat {
            // The first beat is the baseline; the run has only just begun.
            None => true,
            Some((then, before)) => {
                let elapsed_ms = u64::try_from(now.duration_since(*then).as_millis()).unwrap_or(u64::MAX);
                let cpu_ms = beat.busy_cpu_ms.saturating_sub(before.busy_cpu_ms);
                beat.processes_started > before.processes_started
                    || cpu_ms.saturating_mul(100) >= elapsed_ms.saturating_mul(CPU_FLOOR_PERCENT).max(1)
                    || beat.open_connections > 0
            }
        };
        if moved {
            self.last_progress = now;
        }
        self.last_beat = Some((now, beat));
    }

    /// When the run will be hung if nothing more arrives.
    pub fn deadline(&self) -> Instant {
        self.last_heard.min(self.last_progress) + self.timeout
    }

    /// Whether the run is hung at `now`.
    pub fn check(&self, now: Instant) -> Option<Hang> {
        if now.duration_since(self.last_heard) >= self.timeout {
            return Some(Hang::Silent { for_secs: now.duration_since(self.last_heard).as_secs() });
        }
        if now.duration_since(self.last_progress) >= self.timeout {
            return Some(Hang::NoProgress { for_secs: now.duration_since(self.last_progress).as_secs() });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(60);

    fn beat(processes: u64, cpu_ms: u64, open: u32) -> Heartbeat {
        Heartbeat { uptime_ms: 0, processes_started: processes, busy_cpu_ms: cpu_ms, open_connections: open }
    }

    /// Heartbeats every 2 s for `secs` seconds from `t`, each made by `f`.
    fn beats(l: &mut Liveness, t: &mut Instant, secs: u64, mut f: impl FnMut(u64) -> Heartbeat) {
        for i in 0..secs / 2 {
            *t += Duration::from_secs(2);
            l.heartbeat(f(i), *t);
        }
    }

    #[test]
    fn a_guest_that_goes_silent_is_hung_at_the_timeout() {
        let start = Instant::now();
        let mut l = Liveness::new(TIMEOUT, start);
        l.progressed(start + Duration::from_secs(5));
        assert_eq!(l.deadline(), start + Duration::from_secs(65));
        assert_eq!(l.check(start + Duration::from_secs(64)), None);
        assert_eq!(l.check(start + Duration::from_secs(65)), Some(Hang::Silent { for_secs: 60 }));
    }

    #[test]
    fn identical_heartbeats_are_alive_but_not_progress() {
        let mut t = Instant::now();
        let mut l = Liveness::new(TIMEOUT, t);
        beats(&mut l, &mut t, 58, |_| beat(300, 1_000, 0));
        assert_eq!(l.check(t), None);
        beats(&mut l, &mut t, 4, |_| beat(300, 1_000, 0));
        assert!(
            matches!(l.check(t), Some(Hang::NoProgress { for_secs }) if for_secs >= 60),
            "{:?}",
            l.check(t)
        );
    }

    #[test]
    fn new_processes_cpu_use_or_an_open_connection_each_keep_a_long_run_going() {
        for (name, f) in [
            ("processes", Box::new(|i: u64| beat(300 + i, 1_000, 0)) as Box<dyn FnMut(u64) -> Heartbeat>),
            // 2 s between beats, 400 ms busy: 20% of one CPU.
            ("cpu", Box::new(|i| beat(300, 1_000 + 400 * i, 0))),
            ("connection", Box::new(|_| beat(300, 1_000, 1))),
        ] {
            let mut t = Instant::now();
            let mut l = Liveness::new(TIMEOUT, t);
            beats(&mut l, &mut t, 600, f);
            assert_eq!(l.check(t), None, "{name}");
        }
    }

    #[test]
    fn background_cpu_below_the_floor_is_not_progress() {
        let mut t = Instant::now();
        let mut l = Liveness::new(TIMEOUT, t);
        // 40 ms every 2 s: 2% of one CPU.
        beats(&mut l, &mut t, 70, |i| beat(300, 1_000 + 40 * i, 0));
        assert!(matches!(l.check(t), Some(Hang::NoProgress { .. })), "{:?}", l.check(t));
    }

    #[test]
    fn output_resets_the_clock_between_still_heartbeats() {
        let mut t = Instant::now();
        let mut l = Liveness::new(TIMEOUT, t);
        for _ in 0..10 {
            beats(&mut l, &mut t, 40, |_| beat(300, 1_000, 0));
            l.progressed(t);
        }
        assert_eq!(l.check(t), None);
    }

    #[test]
    fn the_reasons_name_the_setting() {
        assert!(Hang::Silent { for_secs: 60 }.to_string().contains("sandbox.hang_timeout_secs"));
        assert!(Hang::NoProgress { for_secs: 61 }.to_string().contains("no progress for 61s"));
    }
}
