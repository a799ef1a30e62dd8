//! The provider-neutral loop: ask the model, run the tools it calls, hand
//! back the results, until `finish` passes its gates or something ends the
//! session (a limit, stuck detection, the model failing).
//!
//! Parallel tool calls are run one after another in the model's order:
//! they share one working tree, so running them at once could interleave
//! edits. Every call gets exactly one result, so the pairing both wires
//! require always holds. Malformed arguments go back as an error result.
//! Old tool outputs are cut down (their sha256 kept) so a long session
//! still fits the context; when the provider says the context is full
//! anyway, everything but the latest results is cut and the call retried
//! once.

use std::time::Instant;

use patchpilot_llm::{Arguments, Message, Model, ModelError, ModelRequest, ToolResult, Usage};
use patchpilot_model::{AgentLimits, ErrorKind, GateRecord, SessionEnd};
use serde_json::json;

use super::gates;
use super::limits::{Budget, StuckDetector};
use super::tools::{self, Called, FinishArgs, FinishOutcome, Toolbox};
use super::transcript::{Transcript, cut};
use super::workspace::Snapshot;

/// Bytes of an old tool result kept once it is cut.
const OLD_RESULT_KEPT: usize = 300;
/// Tool results at most this long are never cut.
const SMALL_RESULT: usize = 1_024;

/// How a session runs.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The system prompt.
    pub system: String,
    /// Its version, for the transcript.
    pub prompt_version: String,
    /// The limits.
    pub limits: AgentLimits,
    /// Most tokens per answer.
    pub max_output_tokens: u32,
    /// Tool-result messages kept whole; older ones are cut.
    pub keep_recent_results: usize,
}

/// How a session ended, and what it cost.
#[derive(Debug, Clone)]
pub struct SessionReport {
    /// How it ended.
    pub end: SessionEnd,
    /// Why, in a sentence.
    pub reason: String,
    /// The accepted `finish` (or the `gave_up` one).
    pub finish: Option<FinishArgs>,
    /// The gates of the last `finish` checked.
    pub gates: Vec<GateRecord>,
    /// Model calls.
    pub model_calls: u32,
    /// Tokens.
    pub usage: Usage,
    /// Tool calls.
    pub tool_calls: u32,
    /// Milliseconds waiting for the model.
    pub model_ms: u64,
    /// Milliseconds in tools.
    pub tool_ms: u64,
    /// Whether the model error was transient (an infrastructure failure the
    /// controller may retry) rather than permanent.
    pub transient_failure: bool,
}

/// Cuts tool results older than the latest `keep` result messages, in
/// place; results already cut stay cut. `keep == 0` cuts all of them.
pub fn compact(messages: &mut [Message], keep: usize) {
    let positions: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, Message::ToolResults { .. }))
        .map(|(i, _)| i)
        .collect();
    let old = positions.len().saturating_sub(keep);
    for &i in &positions[..old] {
        if let Message::ToolResults { results } = &mut messages[i] {
            for r in results
                .iter_mut()
                .filter(|r| r.content.len() > SMALL_RESULT && !r.content.starts_with("[cut"))
            {
                let digest = patchpilot_llm::sha256_hex(r.content.as_bytes());
                let (head, _) = cut(&r.content, OLD_RESULT_KEPT);
                r.content = format!(
                    "[cut: an earlier result of {} bytes, sha256 {digest}; call the tool again to see it whole]\n{head}…",
                    r.content.len()
                );
            }
        }
    }
}

struct Ended {
    end: SessionEnd,
    reason: String,
}

/// Runs one session from `brief` (the first user message). `start` is the
/// tree the gates diff against.
pub async fn run<M: Model>(
    model: &M,
    tools: &mut Toolbox,
    start: &Snapshot,
    brief: String,
    config: &SessionConfig,
    transcript: &mut Transcript,
) -> SessionReport {
    let specs = tools::specs();
    let (wire, model_name) = model.describe();
    transcript.event(
        "session",
        json!({
            "mode": tools.mode.as_str(), "provider": wire.as_str(), "model": model_name,
            "prompt_version": config.prompt_version, "limits": config.limits,
            "tools": specs.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            "brief_sha256": patchpilot_llm::sha256_hex(brief.as_bytes()),
        }),
    );
    let mut budget = Budget::new(config.limits.clone());
    let mut stuck = StuckDetector::new(config.limits.stuck_repeats);
    let mut report = SessionReport {
        end: SessionEnd::ModelError,
        reason: String::new(),
        finish: None,
        gates: Vec::new(),
        model_calls: 0,
        usage: Usage::default(),
        tool_calls: 0,
        model_ms: 0,
        tool_ms: 0,
        transient_failure: false,
    };
    let mut messages = vec![Message::User { text: brief }];
    let mut nudges = 0;
    let mut gate_failures = 0;
    let mut cut_all = false;
    let ended = 'session: loop {
        if let Some(limit) = budget.exhausted() {
            break Ended { end: SessionEnd::Limit, reason: limit };
        }
        compact(&mut messages, if cut_all { 1 } else { config.keep_recent_results });
        let request = ModelRequest {
            system: config.system.clone(),
            messages: messages.clone(),
            tools: specs.clone(),
            max_output_tokens: config.max_output_tokens,
        };
        let turn = budget.turns + 1;
        let asked = Instant::now();
        let answer = tokio::time::timeout(budget.time_left(), model.complete(&request)).await;
        report.model_ms += asked.elapsed().as_millis() as u64;
        let exchange = match answer {
            Err(_) => {
                break Ended {
                    end: SessionEnd::Limit,
                    reason: format!("the wall-time limit ({} s) was reached", config.limits.wall_time_secs),
                };
            }
            Ok(Err(ModelError::ContextLength { message })) if !cut_all => {
                transcript.event("context_full", json!({"turn": turn, "message": message}));
                cut_all = true;
                budget.turns += 1;
                continue;
            }
            Ok(Err(e)) => {
                report.transient_failure = e.kind() == ErrorKind::Transient;
                transcript.event(
                    "model_error",
                    json!({"turn": turn, "error": patchpilot_model::error_chain(&e), "transient": report.transient_failure}),
                );
                break Ended {
                    end: SessionEnd::ModelError,
                    reason: format!("the model call failed: {}", patchpilot_model::error_chain(&e)),
                };
            }
            Ok(Ok(x)) => x,
        };
        budget.turns += 1;
        budget.usage += exchange.response.usage;
        let response = &exchange.response;
        let (text, text_cut) = cut(response.text.as_deref().unwrap_or_default(), 2_048);
        transcript.event(
            "model",
            json!({
                "turn": turn, "request_sha256": exchange.request_sha256, "request_bytes": exchange.request_bytes,
                "response_sha256": exchange.response_sha256, "response_bytes": exchange.response_bytes,
                "response_id": response.id, "latency_ms": exchange.latency.as_millis() as u64,
                "attempts": exchange.attempts, "retried": exchange.retried,
                "input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens,
                "stop": response.stop, "text": text, "text_truncated": text_cut,
                "tool_calls": response.tool_calls.iter().map(|c| json!({"id": c.id, "name": c.name})).collect::<Vec<_>>(),
            }),
        );
        messages.push(response.message());
        if response.tool_calls.is_empty() {
            nudges += 1;
            if nudges > 2 {
                break Ended {
                    end: SessionEnd::GaveUp,
                    reason: "the model stopped answering with tool calls and never called finish".into(),
                };
            }
            messages.push(Message::User {
                text: "Continue with a tool call. When you are done, or cannot go on safely, call `finish`."
                    .into(),
            });
            continue;
        }
        let mut results = Vec::with_capacity(response.tool_calls.len());
        let mut pending: Option<Ended> = None;
        for call in &response.tool_calls {
            if pending.is_some() {
                results.push(ToolResult {
                    id: call.id.clone(),
                    content: "not run: the session ended".into(),
                    is_error: true,
                });
                continue;
            }
            if budget.tool_calls >= config.limits.max_tool_calls {
                results.push(ToolResult {
                    id: call.id.clone(),
                    content: "not run: the tool-call limit was reached".into(),
                    is_error: true,
                });
                pending = Some(Ended {
                    end: SessionEnd::Limit,
                    reason: format!("the tool-call limit ({}) was reached", config.limits.max_tool_calls),
                });
                continue;
            }
            budget.tool_calls += 1;
            let args_text = match &call.args {
                Arguments::Parsed { value } => value.to_string(),
                Arguments::Malformed { raw, .. } => raw.clone(),
            };
            transcript.event(
                "tool_call",
                json!({"id": call.id, "name": call.name, "args": cut(&args_text, 2_048).0,
                       "malformed": matches!(call.args, Arguments::Malformed { .. })}),
            );
            let began = Instant::now();
            let output = match &call.args {
                Arguments::Malformed { raw, error } => tools::ToolOutput::error(format!(
                    "the arguments are not a JSON object ({error}); you sent: {}",
                    cut(raw, 500).0
                )),
                Arguments::Parsed { value } => match tools.call(&call.name, value).await {
                    Called::Output(out) => out,
                    Called::Finish(finish) => {
                        let (out, end) =
                            finish_call(tools, start, config, finish, &mut report, transcript).await;
                        if out.is_error {
                            gate_failures += 1;
                            if gate_failures >= config.limits.max_gate_failures {
                                pending = Some(Ended {
                                    end: SessionEnd::GatesFailed,
                                    reason: format!(
                                        "finish was refused by the gates {gate_failures} times: {}",
                                        failed_gates(&report.gates)
                                    ),
                                });
                            }
                        }
                        if let Some(e) = end {
                            pending = Some(e);
                        }
                        out
                    }
                },
            };
            let ms = began.elapsed().as_millis() as u64;
            report.tool_ms += ms;
            transcript.tool_result(&call.id, &call.name, &output.content, output.is_error, ms);
            if pending.is_none()
                && let Some(reason) = stuck.observe(&call.name, &call.args.wire_value(), &output.content)
            {
                pending = Some(Ended { end: SessionEnd::Stuck, reason });
            }
            results.push(ToolResult {
                id: call.id.clone(),
                content: output.content,
                is_error: output.is_error,
            });
        }
        messages.push(Message::ToolResults { results });
        if let Some(e) = pending {
            break 'session e;
        }
    };
    report.end = ended.end;
    report.reason = ended.reason;
    report.model_calls = budget.turns;
    report.usage = budget.usage;
    report.tool_calls = budget.tool_calls;
    transcript.event(
        "outcome",
        json!({
            "end": report.end, "reason": report.reason, "model_calls": report.model_calls,
            "input_tokens": report.usage.input_tokens, "output_tokens": report.usage.output_tokens,
            "tool_calls": report.tool_calls, "model_ms": report.model_ms, "tool_ms": report.tool_ms,
            "summary": report.finish.as_ref().map(|f| f.summary.clone()),
        }),
    );
    report
}

fn failed_gates(gates: &[GateRecord]) -> String {
    gates.iter().filter(|g| !g.passed).map(|g| g.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// Checks a `finish`: the result for the model and, when the session ends
/// with it, how.
async fn finish_call(
    tools: &mut Toolbox,
    start: &Snapshot,
    config: &SessionConfig,
    finish: FinishArgs,
    report: &mut SessionReport,
    transcript: &mut Transcript,
) -> (tools::ToolOutput, Option<Ended>) {
    if finish.outcome == FinishOutcome::GaveUp {
        let reason = format!("the model gave up: {}", finish.summary);
        report.finish = Some(finish);
        return (
            tools::ToolOutput::ok("accepted: the session ends; the tree is put back"),
            Some(Ended { end: SessionEnd::GaveUp, reason }),
        );
    }
    let gates = gates::check(tools, start, config.limits.max_diff_lines, finish.outcome).await;
    for g in &gates {
        transcript
            .event("gate", json!({"name": g.name, "passed": g.passed, "detail": cut(&g.detail, 2_048).0}));
    }
    report.gates = gates.clone();
    if gates.iter().all(|g| g.passed) {
        let reason = format!("finished: {}", finish.summary);
        report.finish = Some(finish);
        return (tools::ToolOutput::ok("accepted"), Some(Ended { end: SessionEnd::Finished, reason }));
    }
    let mut text = String::from("finish refused; fix these and call finish again:\n");
    for g in gates.iter().filter(|g| !g.passed) {
        text.push_str(&format!("- {}: {}\n", g.name, g.detail));
    }
    (tools::ToolOutput::error(text), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_long_results_are_cut_with_their_digest_and_recent_ones_kept() {
        let long = "x".repeat(5_000);
        let results = |id: &str| Message::ToolResults {
            results: vec![ToolResult { id: id.into(), content: long.clone(), is_error: false }],
        };
        let mut messages = vec![results("a"), Message::User { text: "u".into() }, results("b"), results("c")];
        compact(&mut messages, 2);
        let content = |m: &Message| match m {
            Message::ToolResults { results } => results[0].content.clone(),
            _ => String::new(),
        };
        assert!(content(&messages[0]).contains(&patchpilot_llm::sha256_hex(long.as_bytes())));
        assert!(content(&messages[0]).len() < 600);
        assert_eq!(content(&messages[2]), long);
        let once = content(&messages[0]);
        compact(&mut messages, 0);
        assert_eq!(content(&messages[0]), once, "a cut result is not cut again");
    }
}
