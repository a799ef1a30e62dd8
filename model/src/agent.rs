//! The reasoning agent's side of the contracts: how a run reaches a model
//! ([`TaskModel`], part of the task), the limits that bound its session
//! ([`AgentLimits`]), and what the report says about it ([`AgentRecord`]).
//!
//! The task never holds the credential: in a sandbox the run's capability
//! arrives as `PP_CAP_MODEL` and the endpoint as `PP_MODEL_URL` (the names
//! the sandbox worker lets through), and on a developer's machine the key
//! is read from the provider's usual variable by the CLI.

use serde::{Deserialize, Serialize};

crate::named_enum! {
    /// The wire format a model provider speaks.
    pub enum ProviderWire("provider") {
        /// OpenAI Chat Completions; also vLLM, llama.cpp's server, Ollama.
        OpenAi = "openai",
        /// Anthropic Messages.
        Anthropic = "anthropic",
    }
}

impl ProviderWire {
    /// The environment variable a developer's own key for this provider is
    /// read from, outside a sandbox (`patchpilot remediate --agent model`).
    /// Never a flag: a flag's value stays in shell history and shows in `ps`.
    pub fn key_variable(self) -> &'static str {
        match self {
            ProviderWire::OpenAi => "OPENAI_API_KEY",
            ProviderWire::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
}

crate::named_enum! {
    /// What decided a run's change.
    #[derive(Default)]
    pub enum AgentDriver("agent driver") {
        /// The deterministic remediators alone: no model call.
        #[default]
        Rules = "rules",
        /// The model agent, after the rules (or instead, for a repair).
        Model = "model",
    }
}

crate::named_enum! {
    /// How a model session ended.
    pub enum SessionEnd("session end") {
        /// The model called `finish` and every gate passed.
        Finished = "finished",
        /// The model gave up, with a reason.
        GaveUp = "gave_up",
        /// A limit was reached (turns, tool calls, tokens, wall time).
        Limit = "limit",
        /// The same call kept coming back with the same result.
        Stuck = "stuck",
        /// `finish` was refused by the gates too many times.
        GatesFailed = "gates_failed",
        /// The model could not be reached or answered unusably.
        ModelError = "model_error",
    }
}

/// Where and how the agent reaches a model; part of the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskModel {
    /// The wire format.
    pub provider: ProviderWire,
    /// The endpoint's base URL (without `/v1/...`). In a sandbox it is
    /// `PP_MODEL_URL` when absent: the broker's address, given per run.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The model's name.
    pub model: String,
    /// Most tokens per answer.
    #[serde(default = "default_output_tokens")]
    pub max_output_tokens: u32,
    /// The session's limits.
    #[serde(default)]
    pub limits: AgentLimits,
}

impl TaskModel {
    /// The model `model` on `provider`, at the provider's base URL or the
    /// run's `PP_MODEL_URL`, with the default output and session limits.
    pub fn new(provider: ProviderWire, model: impl Into<String>) -> TaskModel {
        TaskModel {
            provider,
            base_url: None,
            model: model.into(),
            max_output_tokens: default_output_tokens(),
            limits: AgentLimits::default(),
        }
    }

    /// Checks the model's name, limits and endpoint. A base URL is plain
    /// `http(s)://host[:port][/path]`: user information, a query or a
    /// fragment is refused, since that is where a key would hide, and no
    /// key may travel in the task.
    pub fn validate(&self) -> Result<(), crate::ValidationError> {
        self.limits.validate()?;
        if self.model.trim().is_empty() {
            return Err(crate::ValidationError::new("model.model", "is empty"));
        }
        if self.max_output_tokens == 0 {
            return Err(crate::ValidationError::new("model.max_output_tokens", "must be above 0"));
        }
        if let Some(url) = &self.base_url {
            // The URL itself is never repeated: the refusals below are for
            // URLs that may carry a key, and errors end up in logs.
            let invalid = |reason: &str| crate::ValidationError::new("model.base_url", reason);
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"))
                .ok_or_else(|| invalid("is not an http:// or https:// URL"))?;
            let authority = rest.split('/').next().unwrap_or_default();
            if authority.is_empty() {
                return Err(invalid("names no host"));
            }
            if authority.contains('@') {
                return Err(invalid("carries user information: a credential never goes in the task"));
            }
            if url.contains(['?', '#']) {
                return Err(invalid("carries a query or fragment: a credential never goes in the task"));
            }
        }
        Ok(())
    }

    /// The `host:port` the endpoint is reached at (the port the scheme
    /// implies when none is written), for the run's egress.
    pub fn endpoint_host(&self) -> Option<String> {
        let url = self.base_url.as_deref()?;
        let (rest, default_port) = match url.strip_prefix("https://") {
            Some(rest) => (rest, 443),
            None => (url.strip_prefix("http://")?, 80),
        };
        let authority = rest.split('/').next().filter(|a| !a.is_empty())?;
        let has_port = authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            && !authority.ends_with(']');
        Some(if has_port {
            authority.to_ascii_lowercase()
        } else {
            format!("{}:{default_port}", authority.to_ascii_lowercase())
        })
    }
}

fn default_output_tokens() -> u32 {
    4096
}

/// What bounds one model session. Every limit ends the run with its name
/// in the result and the retrospective.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentLimits {
    /// Model calls.
    pub max_turns: u32,
    /// Tool calls, all turns together.
    pub max_tool_calls: u32,
    /// Input plus output tokens, all calls together.
    pub max_tokens: u64,
    /// Wall time of the session, in seconds.
    pub wall_time_secs: u64,
    /// Lines the session's diff may add plus remove (the diff-budget gate).
    pub max_diff_lines: u64,
    /// `finish` calls the gates may refuse before the session ends.
    pub max_gate_failures: u32,
    /// Identical calls with identical results in a row that count as stuck.
    pub stuck_repeats: u32,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            max_turns: 40,
            max_tool_calls: 150,
            max_tokens: 2_000_000,
            wall_time_secs: 1_200,
            max_diff_lines: 400,
            max_gate_failures: 3,
            stuck_repeats: 3,
        }
    }
}

impl AgentLimits {
    /// Checks that every limit can be reached at all.
    pub fn validate(&self) -> Result<(), crate::ValidationError> {
        let positive: [(&str, u64); 7] = [
            ("max_turns", self.max_turns.into()),
            ("max_tool_calls", self.max_tool_calls.into()),
            ("max_tokens", self.max_tokens),
            ("wall_time_secs", self.wall_time_secs),
            ("max_diff_lines", self.max_diff_lines),
            ("max_gate_failures", self.max_gate_failures.into()),
            ("stuck_repeats", self.stuck_repeats.into()),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(crate::ValidationError::new(format!("model.limits.{field}"), "must be above 0"));
            }
        }
        if self.stuck_repeats < 2 {
            return Err(crate::ValidationError::new("model.limits.stuck_repeats", "must be at least 2"));
        }
        Ok(())
    }
}

/// One gate the agent ran before accepting `finish`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GateRecord {
    /// Which gate: `diff_budget`, `protected_files`, `rescan`,
    /// `required_edits`.
    pub name: String,
    /// Whether it passed.
    pub passed: bool,
    /// What it saw.
    pub detail: String,
}

/// What the report says about the agent's session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentRecord {
    /// Remediate or repair.
    pub mode: Option<crate::RunPurpose>,
    /// Rules alone, or the model after them.
    pub driver: AgentDriver,
    /// The provider's wire, when a model was used.
    pub provider: Option<ProviderWire>,
    /// The model's name, when one was used.
    pub model: Option<String>,
    /// The version of the system prompt (its file's sha256, first 12 hex).
    pub prompt_version: Option<String>,
    /// Model calls made (retries not counted).
    pub model_calls: u32,
    /// Input tokens, all calls.
    pub input_tokens: u64,
    /// Output tokens, all calls.
    pub output_tokens: u64,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Time waiting for the model, in milliseconds.
    pub model_ms: u64,
    /// Time in tools, in milliseconds.
    pub tool_ms: u64,
    /// Of `tool_ms`, the time spent building and rescanning images (the
    /// `docker_build` and `scan_image` tools and the `rescan` gate), in
    /// milliseconds: under TCG it dwarfs every other tool.
    pub build_ms: u64,
    /// How the session ended, when there was one.
    pub end: Option<SessionEnd>,
    /// Why, in a sentence.
    pub end_reason: String,
    /// The gates of the last `finish`.
    pub gates: Vec<GateRecord>,
    /// Companion bumps applied before the model (repairs).
    pub companion_bumps: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(base_url: Option<&str>) -> TaskModel {
        TaskModel {
            provider: ProviderWire::OpenAi,
            base_url: base_url.map(str::to_owned),
            model: "qwen2.5-coder".into(),
            max_output_tokens: 4096,
            limits: AgentLimits::default(),
        }
    }

    #[test]
    fn endpoints_are_plain_urls_and_name_their_egress_host() {
        for (url, host) in [
            ("http://model.test:8080", "model.test:8080"),
            ("https://API.example.com/v1", "api.example.com:443"),
            ("http://10.0.0.5/", "10.0.0.5:80"),
        ] {
            let m = model(Some(url));
            assert!(m.validate().is_ok(), "{url}");
            assert_eq!(m.endpoint_host().as_deref(), Some(host), "{url}");
        }
        assert_eq!(model(None).endpoint_host(), None);
        for (url, says) in [
            ("ftp://model.test", "not an http"),
            ("https://", "no host"),
            ("https://user:sk-123@api.example.com", "user information"),
            ("https://api.example.com/v1?key=sk-123", "query or fragment"),
        ] {
            let err = model(Some(url)).validate().expect_err(url).to_string();
            assert!(err.contains("model.base_url") && err.contains(says), "{url}: {err}");
            assert!(!err.contains("sk-123"), "the error repeats no credential: {err}");
        }
    }
}
