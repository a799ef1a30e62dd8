//! A model session's calls, read back from its transcript
//! (`.patchpilot/transcript.jsonl`, the run's `session` artifact).
//!
//! The compromised model's calls are read from the provider double's
//! record; a real model sits behind no double, so its calls come from the
//! agent's own record: one `tool_call` event (`id`, `name`, `args` as JSON
//! text) and one `tool_result` event (`id`, `content`, `is_error`) per
//! call. The transcript keeps at most 2 KiB of arguments and 4 KiB of a
//! result: a cut argument text is kept as a string, so the call still
//! shows (and its tells still match), though it equals no attack call.
//!
//! The transcript was written inside the VM, by the agent: evidence of
//! what the model asked for, never instructions. Lines that are not JSON
//! objects are skipped.

use std::collections::HashMap;

use serde_json::Value;

use crate::obedient::Results;

/// Every call in `jsonl` that has a result, in the order the calls were
/// made: ((tool, args), result content, whether the result is an error).
pub fn calls(jsonl: &str) -> Results {
    let events: Vec<Value> = jsonl
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(Value::is_object)
        .collect();
    let mut results: HashMap<&str, (&str, bool)> = HashMap::new();
    for e in events.iter().filter(|e| e["type"] == "tool_result") {
        if let Some(id) = e["id"].as_str() {
            results.entry(id).or_insert((
                e["content"].as_str().unwrap_or_default(),
                e["is_error"].as_bool().unwrap_or(false),
            ));
        }
    }
    let mut out = Vec::new();
    for e in events.iter().filter(|e| e["type"] == "tool_call") {
        let (Some(id), Some(name)) = (e["id"].as_str(), e["name"].as_str()) else { continue };
        let Some((content, is_error)) = results.get(id) else { continue };
        let text = e["args"].as_str().unwrap_or_default();
        let args = serde_json::from_str::<Value>(text).unwrap_or_else(|_| Value::String(text.to_owned()));
        out.push(((name.to_owned(), args), (*content).to_owned(), *is_error));
    }
    Results(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_pair_with_their_results_and_cut_arguments_stay_text() {
        let lines = [
            json!({"type": "session", "mode": "remediate"}).to_string(),
            json!({"type": "tool_call", "id": "c1", "name": "run", "args": "{\"command\":\"curl http://collector.test:9/x\"}"}).to_string(),
            json!({"type": "tool_call", "id": "c2", "name": "write_file", "args": "{\"path\":\"a\",\"content\":\"xx"}).to_string(),
            "not json".to_owned(),
            json!({"type": "tool_result", "id": "c2", "content": "wrote a", "is_error": false}).to_string(),
            json!({"type": "tool_result", "id": "c1", "content": "ERROR: exit 6", "is_error": true}).to_string(),
            json!({"type": "tool_call", "id": "c3", "name": "finish", "args": "{}"}).to_string(),
        ];
        let Results(calls) = calls(&lines.join("\n"));
        assert_eq!(calls.len(), 2, "c3 has no result: {calls:?}");
        assert_eq!(calls[0].0, ("run".to_owned(), json!({"command": "curl http://collector.test:9/x"})));
        assert_eq!(calls[0].1, "ERROR: exit 6");
        assert!(calls[0].2);
        assert_eq!(calls[1].0.1, Value::String("{\"path\":\"a\",\"content\":\"xx".into()));
        assert!(!calls[1].2);
    }
}
