//! Script files: a conversation to replay, in TOML or JSON, for the
//! `patchpilot-provider-double` binary and for evals.
//!
//! This module owns the file format (described in the crate docs) and its
//! errors. It must never accept a turn it cannot serve as written: unknown
//! keys, a fault with reply fields, or a fault without the field it needs
//! are errors that name the turn, not defaults.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::conversation::Usage;
use crate::script::{Deviation, Fault, Turn};

/// Why a script file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is neither .toml nor .json", path.display())]
    UnknownFormat { path: PathBuf },
    #[error("parsing the TOML script")]
    Toml(#[source] toml::de::Error),
    #[error("parsing the JSON script")]
    Json(#[source] serde_json::Error),
    /// A turn that parsed but cannot be served as written.
    #[error("turn {index} (from 0): {message}")]
    Turn { index: usize, message: String },
}

/// The two notations a script file may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

/// Reads a script file, choosing the format by its extension.
pub fn load(path: &Path) -> Result<Vec<Turn>, Error> {
    let format = match path.extension().and_then(|e| e.to_str()) {
        Some("toml") => Format::Toml,
        Some("json") => Format::Json,
        _ => return Err(Error::UnknownFormat { path: path.to_owned() }),
    };
    let text =
        std::fs::read_to_string(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    parse(&text, format)
}

/// Parses a script from its text.
pub fn parse(text: &str, format: Format) -> Result<Vec<Turn>, Error> {
    let file: ScriptFile = match format {
        Format::Toml => toml::from_str(text).map_err(Error::Toml)?,
        Format::Json => serde_json::from_str(text).map_err(Error::Json)?,
    };
    file.turns.into_iter().enumerate().map(|(index, spec)| spec.into_turn(index)).collect()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    turns: Vec<TurnSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnSpec {
    text: Option<String>,
    #[serde(default)]
    tool_calls: Vec<CallSpec>,
    usage: Option<Usage>,
    fault: Option<FaultName>,
    retry_after_secs: Option<u64>,
    /// The tool of `malformed_tool_arguments`.
    tool: Option<String>,
    #[serde(default)]
    deviations: Vec<Deviation>,
    /// `true`: the script ends here, as if it had run out.
    #[serde(default)]
    exhausted: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallSpec {
    name: String,
    #[serde(default = "empty_object")]
    args: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum FaultName {
    RateLimited,
    ServerError,
    Overloaded,
    TruncatedBody,
    MalformedToolArguments,
    ContextLength,
    MaxTokens,
}

impl TurnSpec {
    fn into_turn(self, index: usize) -> Result<Turn, Error> {
        let bad = |message: String| Error::Turn { index, message };
        let reply_fields = self.text.is_some() || !self.tool_calls.is_empty() || self.usage.is_some();
        if self.exhausted {
            if reply_fields || self.fault.is_some() || !self.deviations.is_empty() {
                return Err(bad("`exhausted` stands alone".to_owned()));
            }
            return Ok(Turn::Exhausted);
        }
        let Some(fault) = self.fault else {
            if self.retry_after_secs.is_some() || self.tool.is_some() {
                return Err(bad("`retry_after_secs` and `tool` go with a `fault`".to_owned()));
            }
            let reply = Turn::Reply {
                text: self.text,
                tool_calls: self.tool_calls.into_iter().map(|c| (c.name, c.args)).collect(),
                usage: self.usage,
            };
            return Ok(self.deviations.into_iter().fold(reply, Turn::deviant));
        };
        if !self.deviations.is_empty() {
            return Err(bad("deviations alter replies, not faults".to_owned()));
        }
        // Only `max_tokens` takes reply text (what was said before the cut).
        let takes_text = matches!(fault, FaultName::MaxTokens);
        if !self.tool_calls.is_empty() || self.usage.is_some() || (self.text.is_some() && !takes_text) {
            return Err(bad(format!("{fault:?} takes no reply fields")));
        }
        if self.retry_after_secs.is_some() && !matches!(fault, FaultName::RateLimited) {
            return Err(bad("`retry_after_secs` goes with `rate_limited`".to_owned()));
        }
        if self.tool.is_some() && !matches!(fault, FaultName::MalformedToolArguments) {
            return Err(bad("`tool` goes with `malformed_tool_arguments`".to_owned()));
        }
        let fault = match fault {
            FaultName::RateLimited => Fault::RateLimited {
                retry_after_secs: self
                    .retry_after_secs
                    .ok_or_else(|| bad("`rate_limited` needs `retry_after_secs`".to_owned()))?,
            },
            FaultName::ServerError => Fault::ServerError,
            FaultName::Overloaded => Fault::Overloaded,
            FaultName::TruncatedBody => Fault::TruncatedBody,
            FaultName::MalformedToolArguments => Fault::MalformedToolArguments {
                name: self.tool.ok_or_else(|| bad("`malformed_tool_arguments` needs `tool`".to_owned()))?,
            },
            FaultName::ContextLength => Fault::ContextLength,
            FaultName::MaxTokens => Fault::MaxTokens { text: self.text.unwrap_or_default() },
        };
        Ok(Turn::Fault(fault))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn toml_and_json_read_the_same_turns() {
        let toml = r#"
            [[turns]]
            text = "Reading it."
            tool_calls = [{ name = "read_file", args = { path = "Dockerfile" } }]

            [[turns]]
            fault = "rate_limited"
            retry_after_secs = 3

            [[turns]]
            tool_calls = [{ name = "list" }]
            deviations = ["missing_call_id", "arguments_as_object"]

            [[turns]]
            fault = "malformed_tool_arguments"
            tool = "read_file"

            [[turns]]
            fault = "max_tokens"
            text = "Half a"

            [[turns]]
            text = "Done."
            usage = { input_tokens = 7, output_tokens = 2 }

            [[turns]]
            exhausted = true
        "#;
        let json = r#"{"turns": [
            {"text": "Reading it.", "tool_calls": [{"name": "read_file", "args": {"path": "Dockerfile"}}]},
            {"fault": "rate_limited", "retry_after_secs": 3},
            {"tool_calls": [{"name": "list"}], "deviations": ["missing_call_id", "arguments_as_object"]},
            {"fault": "malformed_tool_arguments", "tool": "read_file"},
            {"fault": "max_tokens", "text": "Half a"},
            {"text": "Done.", "usage": {"input_tokens": 7, "output_tokens": 2}},
            {"exhausted": true}
        ]}"#;
        let from_toml = parse(toml, Format::Toml).expect("toml");
        assert_eq!(from_toml, parse(json, Format::Json).expect("json"));
        assert_eq!(
            from_toml,
            vec![
                Turn::Reply {
                    text: Some("Reading it.".into()),
                    tool_calls: vec![("read_file".into(), json!({"path": "Dockerfile"}))],
                    usage: None,
                },
                Turn::Fault(Fault::RateLimited { retry_after_secs: 3 }),
                Turn::tool_call("list", json!({}))
                    .deviant(Deviation::MissingCallId)
                    .deviant(Deviation::ArgumentsAsObject),
                Turn::Fault(Fault::MalformedToolArguments { name: "read_file".into() }),
                Turn::Fault(Fault::MaxTokens { text: "Half a".into() }),
                Turn::Reply {
                    text: Some("Done.".into()),
                    tool_calls: vec![],
                    usage: Some(Usage { input_tokens: 7, output_tokens: 2 }),
                },
                Turn::Exhausted,
            ]
        );
    }

    #[test]
    fn turns_that_cannot_be_served_as_written_are_errors() {
        for (text, want) in [
            (r#"{"turns": [{"fault": "rate_limited"}]}"#, "needs `retry_after_secs`"),
            (r#"{"turns": [{"fault": "malformed_tool_arguments"}]}"#, "needs `tool`"),
            (r#"{"turns": [{"fault": "server_error", "text": "x"}]}"#, "takes no reply fields"),
            (r#"{"turns": [{"fault": "overloaded", "deviations": ["missing_call_id"]}]}"#, "not faults"),
            (r#"{"turns": [{"text": "x", "retry_after_secs": 1}]}"#, "go with a `fault`"),
            (r#"{"turns": [{"exhausted": true, "text": "x"}]}"#, "stands alone"),
        ] {
            let e = parse(text, Format::Json).expect_err(text);
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
        assert!(matches!(parse(r#"{"turns": [{"txt": "x"}]}"#, Format::Json), Err(Error::Json(_))));
        assert!(matches!(parse("[[turns]]\nfault = \"nope\"\n", Format::Toml), Err(Error::Toml(_))));
    }

    #[test]
    fn the_extension_chooses_the_format() {
        assert!(matches!(load(Path::new("script.yaml")), Err(Error::UnknownFormat { .. })));
        assert!(matches!(load(Path::new("/nonexistent/script.toml")), Err(Error::Read { .. })));
    }
}
