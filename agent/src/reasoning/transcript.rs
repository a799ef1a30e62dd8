//! The session's transcript: append-only JSONL, one event per line,
//! flushed as it goes so a run that dies mid-session still leaves what
//! happened up to then.
//!
//! Model requests and answers are recorded by digest, size, tokens and
//! latency (the full conversation is rebuilt from the tool events); tool
//! results are kept up to [`KEPT`] bytes with the sha256 of the whole text.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};

/// Bytes of a tool result or model text kept in the transcript.
pub const KEPT: usize = 4 * 1024;

/// An open transcript.
#[derive(Debug)]
pub struct Transcript {
    path: PathBuf,
    file: Option<std::fs::File>,
    started: Instant,
    problems: Vec<String>,
}

/// `text` cut to `max` bytes on a character boundary, and whether it was.
pub fn cut(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

impl Transcript {
    /// Creates (or appends to) the transcript at `path`. A transcript that
    /// cannot be written is a problem to report, not a reason to stop.
    pub fn open(path: &Path) -> Transcript {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path);
        let (file, problems) = match file {
            Ok(f) => (Some(f), Vec::new()),
            Err(e) => (None, vec![format!("cannot write the transcript {}: {e}", path.display())]),
        };
        Transcript { path: path.to_owned(), file, started: Instant::now(), problems }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Problems writing it.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Appends one event of `kind` with `fields`.
    pub fn event(&mut self, kind: &str, fields: Value) {
        let mut line = json!({"type": kind, "at_ms": self.started.elapsed().as_millis() as u64});
        if let (Some(obj), Value::Object(extra)) = (line.as_object_mut(), fields) {
            obj.extend(extra);
        }
        let Some(file) = self.file.as_mut() else { return };
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        if let Err(e) = file.write_all(&bytes).and_then(|()| file.flush()) {
            self.problems.push(format!("cannot append to the transcript: {e}"));
            self.file = None;
        }
    }

    /// A tool result: kept up to [`KEPT`] bytes, with the digest of all.
    pub fn tool_result(&mut self, id: &str, name: &str, content: &str, is_error: bool, ms: u64) {
        let (kept, truncated) = cut(content, KEPT);
        self.event(
            "tool_result",
            json!({
                "id": id, "name": name, "is_error": is_error, "ms": ms,
                "bytes": content.len(), "sha256": patchpilot_llm::sha256_hex(content.as_bytes()),
                "content": kept, "truncated": truncated,
            }),
        );
    }
}

/// Reads a transcript back: every line that is a JSON object.
pub fn read(path: &Path) -> std::io::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(Value::is_object).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_append_as_lines_and_long_results_keep_their_digest() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.jsonl");
        let mut t = Transcript::open(&path);
        t.event("session", json!({"mode": "repair"}));
        let long = "é".repeat(KEPT);
        t.tool_result("c1", "read_file", &long, false, 3);
        let events = read(&path).expect("read");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0]["type"], "session");
        assert_eq!(events[1]["truncated"], true);
        assert_eq!(events[1]["bytes"], long.len());
        assert_eq!(events[1]["sha256"], patchpilot_llm::sha256_hex(long.as_bytes()));
        assert!(events[1]["content"].as_str().expect("text").len() <= KEPT);
    }
}
