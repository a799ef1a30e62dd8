//! What ends a session besides `finish`: the limits, and stuck detection.
//!
//! Stuck is judged on what happened, not on what the model says: the same
//! call (name and canonical arguments) coming back with the same result
//! several times in a row, or two calls alternating A-B-A-B with the same
//! results each time. Either way nothing is being learned, and every
//! further turn only spends the budget.

use std::time::{Duration, Instant};

use patchpilot_llm::Usage;
use patchpilot_model::AgentLimits;
use serde_json::Value;

/// Counters of one session, checked against its limits.
#[derive(Debug)]
pub struct Budget {
    limits: AgentLimits,
    started: Instant,
    /// Model calls made.
    pub turns: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tokens used.
    pub usage: Usage,
}

impl Budget {
    /// A fresh budget.
    pub fn new(limits: AgentLimits) -> Budget {
        Budget { limits, started: Instant::now(), turns: 0, tool_calls: 0, usage: Usage::default() }
    }

    /// The limits.
    pub fn limits(&self) -> &AgentLimits {
        &self.limits
    }

    /// Time left before the wall-time limit.
    pub fn time_left(&self) -> Duration {
        Duration::from_secs(self.limits.wall_time_secs).saturating_sub(self.started.elapsed())
    }

    /// Which limit, if any, stops another model call.
    pub fn exhausted(&self) -> Option<String> {
        let l = &self.limits;
        if self.turns >= l.max_turns {
            return Some(format!("the turn limit ({} model calls) was reached", l.max_turns));
        }
        if self.tool_calls >= l.max_tool_calls {
            return Some(format!("the tool-call limit ({}) was reached", l.max_tool_calls));
        }
        if self.usage.total() >= l.max_tokens {
            return Some(format!(
                "the token limit ({}) was reached: {} used",
                l.max_tokens,
                self.usage.total()
            ));
        }
        if self.time_left().is_zero() {
            return Some(format!("the wall-time limit ({} s) was reached", l.wall_time_secs));
        }
        None
    }
}

/// One observed call: a digest of what was asked and of what came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    call: [u8; 32],
    result: [u8; 32],
}

/// Watches the calls for repetition.
#[derive(Debug)]
pub struct StuckDetector {
    repeats: u32,
    history: Vec<(Seen, String)>,
}

fn digest(parts: &[&[u8]]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().into()
}

impl StuckDetector {
    /// A detector that calls `repeats` identical calls in a row stuck.
    pub fn new(repeats: u32) -> StuckDetector {
        StuckDetector { repeats: repeats.max(2), history: Vec::new() }
    }

    /// Records a call and its result; the reason when the session is stuck.
    pub fn observe(&mut self, name: &str, args: &Value, result: &str) -> Option<String> {
        // serde_json's maps are ordered, so equal objects print alike.
        let args = args.to_string();
        let seen =
            Seen { call: digest(&[name.as_bytes(), args.as_bytes()]), result: digest(&[result.as_bytes()]) };
        self.history.push((seen, name.to_owned()));
        let n = self.history.len();
        let repeats = self.repeats as usize;
        if n >= repeats && self.history[n - repeats..].iter().all(|(s, _)| *s == seen) {
            return Some(format!(
                "stuck: {name} was called {repeats} times in a row with the same arguments and the same result"
            ));
        }
        if n >= 4 {
            let (a, b, c, d) =
                (&self.history[n - 4], &self.history[n - 3], &self.history[n - 2], &self.history[n - 1]);
            if a.0 == c.0 && b.0 == d.0 && a.0 != b.0 {
                return Some(format!(
                    "stuck: oscillating between {} and {} with the same results (A-B-A-B)",
                    a.1, b.1
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn repeats_and_oscillation_are_stuck_progress_is_not() {
        let mut d = StuckDetector::new(3);
        assert!(d.observe("read_file", &json!({"path": "a"}), "x").is_none());
        assert!(d.observe("read_file", &json!({"path": "a"}), "x").is_none());
        assert!(d.observe("read_file", &json!({"path": "a"}), "x").expect("stuck").contains("3 times"));

        let mut d = StuckDetector::new(3);
        for (i, (name, result)) in
            [("edit_file", "ok"), ("docker_build", "fail"), ("edit_file", "ok")].iter().enumerate()
        {
            assert!(d.observe(name, &json!({"n": 1}), result).is_none(), "step {i}");
        }
        assert!(d.observe("docker_build", &json!({"n": 1}), "fail").expect("stuck").contains("A-B-A-B"));

        // The same call with a new result each time is progress.
        let mut d = StuckDetector::new(2);
        assert!(d.observe("docker_build", &json!({}), "fail 1").is_none());
        assert!(d.observe("docker_build", &json!({}), "fail 2").is_none());
        assert!(d.observe("docker_build", &json!({}), "ok").is_none());
    }

    #[test]
    fn limits_name_themselves() {
        let mut b = Budget::new(AgentLimits { max_turns: 2, ..AgentLimits::default() });
        assert!(b.exhausted().is_none());
        b.turns = 2;
        assert!(b.exhausted().expect("limit").contains("turn limit"));
        let mut b = Budget::new(AgentLimits { max_tokens: 10, ..AgentLimits::default() });
        b.usage = Usage { input_tokens: 8, output_tokens: 3 };
        assert!(b.exhausted().expect("limit").contains("token limit"));
    }
}
