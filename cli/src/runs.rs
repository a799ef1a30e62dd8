//! `patchpilot runs …`: the sandbox runs the controller requested, as it
//! stored them (`controller_runs`, through `patchpilot_controller::store`).
//!
//! - `list [--remediation ID]`: the newest runs, one line each;
//! - `show RUN`: one run: purpose, outcome, reason, times, artifacts, and
//!   the agent's record from the run's `result.json` (driver, model,
//!   calls, tokens, how the session ended, gates);
//! - `show RUN --transcript`: the model session's transcript
//!   (`.patchpilot/transcript.jsonl`, the run's `session` artifact), one
//!   line per event;
//! - `show RUN --calls`: the calls the run made through the capability
//!   broker, from the broker's own record (`broker_calls`).
//!
//! Everything read from the object store came out of a sandbox and is
//! untrusted: it is read with a size cap, and every text taken from it is
//! printed with control and bidirectional-formatting characters escaped, so
//! a transcript cannot move the cursor, recolour or reorder the terminal.

use std::fmt::Write as _;
use std::io::BufRead as _;
use std::process::ExitCode;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use patchpilot_controller::store::{RunRecord, Store};
use patchpilot_fleet::artifacts::ArtifactStore;
use patchpilot_model::{AgentRecord, RunReport};
use serde::Serialize;
use serde_json::Value;

use crate::config::CliConfig;

/// Most bytes of `result.json` read (the agent's report is kilobytes).
const MAX_REPORT_BYTES: u64 = 16 << 20;
/// Most bytes of a session transcript read: the sandbox's largest output
/// cap (`sandbox.limits.max_output_bytes`' default); it is streamed from a
/// temporary file, never held whole.
const MAX_SESSION_BYTES: u64 = 1 << 30;
/// Characters of one argument value, or of a text, in a transcript line.
const SHORT: usize = 60;

/// `patchpilot runs …`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The newest runs, of all remediations or one.
    List(ListArgs),
    /// One run as the controller stored it, or its model session.
    Show(ShowArgs),
}

/// Arguments of `runs list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only the runs of this remediation.
    #[arg(long)]
    remediation: Option<String>,
    /// Most runs to list, newest first.
    #[arg(long, default_value_t = 50)]
    limit: i64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `runs show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The run id (`<remediation>-r<revision>-<n>`, as `runs list` shows).
    run: String,
    /// Print the model session's transcript instead, one line per event.
    #[arg(long)]
    transcript: bool,
    /// Print the calls the run made through the capability broker instead,
    /// as the broker recorded them at the boundary (any run id: controller
    /// runs and `sandbox run` alike).
    #[arg(long, conflicts_with = "transcript")]
    calls: bool,
    /// Print JSON (with `--transcript`: the transcript's events; with
    /// `--calls`: the calls).
    #[arg(long)]
    json: bool,
}

/// A run as `list` and `show` print it.
#[derive(Debug, Serialize)]
struct RunView {
    run_id: String,
    remediation_id: String,
    revision: u32,
    purpose: String,
    base_sha: String,
    requested_at: DateTime<Utc>,
    /// `None` while the run is out.
    outcome: Option<String>,
    reason: Option<String>,
    exit_code: Option<i32>,
    egress_denied: Option<u32>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    /// Artifact name → object key.
    artifacts: Vec<(String, String)>,
}

impl From<&RunRecord> for RunView {
    fn from(r: &RunRecord) -> RunView {
        let result = r.result.as_ref();
        let artifacts = result
            .map(|res| {
                [
                    ("patch", &res.patch_object),
                    ("result", &res.result_object),
                    ("transcript", &res.transcript_object),
                    ("session", &res.session_object),
                ]
                .into_iter()
                .filter_map(|(name, key)| Some((name.to_owned(), key.clone()?)))
                .collect()
            })
            .unwrap_or_default();
        RunView {
            run_id: r.run_id.clone(),
            remediation_id: r.remediation_id.clone(),
            revision: r.revision,
            purpose: r.purpose.to_string(),
            base_sha: r.base_sha.clone(),
            requested_at: r.requested_at,
            outcome: result.map(|res| res.outcome.to_string()),
            reason: result.map(|res| res.reason.clone()),
            exit_code: result.and_then(|res| res.exit_code),
            egress_denied: result.map(|res| res.egress_denied),
            started_at: result.and_then(|res| res.started_at),
            finished_at: result.and_then(|res| res.finished_at),
            artifacts,
        }
    }
}

/// `show`'s JSON: the run and what its report says of the agent.
#[derive(Debug, Serialize)]
struct ShowView {
    #[serde(flatten)]
    run: RunView,
    /// The agent record of `result.json`, when the run has a readable one.
    agent: Option<AgentRecord>,
    /// Why the report could not be read, when it has one.
    report_error: Option<String>,
}

/// Runs the command.
pub async fn run(config: &CliConfig, command: Command) -> anyhow::Result<ExitCode> {
    let pool = crate::connect_db(config).await?;
    let schema_ready: bool = sqlx::query_scalar("SELECT to_regclass('public.controller_runs') IS NOT NULL")
        .fetch_one(&pool)
        .await?;
    let store = Store::new(pool.clone());
    match command {
        Command::List(args) => {
            if !schema_ready {
                println!("no runs (the schema is created when a service first starts)");
                return Ok(ExitCode::SUCCESS);
            }
            let runs = store.recent_runs(args.remediation.as_deref(), args.limit).await?;
            let views: Vec<RunView> = runs.iter().map(RunView::from).collect();
            if args.json {
                println!("{}", serde_json::to_string_pretty(&views)?);
            } else if views.is_empty() {
                match &args.remediation {
                    Some(id) => println!("no runs of remediation {id}"),
                    None => println!("no runs"),
                }
            } else {
                for v in &views {
                    println!(
                        "{}  {:<9} {:<14} {}  {}",
                        v.run_id,
                        v.purpose,
                        v.outcome.as_deref().unwrap_or("(running)"),
                        time(v.requested_at),
                        if v.artifacts.iter().any(|(n, _)| n == "session") { "session" } else { "" }
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Show(args) if args.calls => show_calls(&pool, &args.run, args.json).await,
        Command::Show(args) => {
            let record = match schema_ready {
                true => store.run(&args.run).await?,
                false => None,
            };
            let Some(record) = record else {
                anyhow::bail!(
                    "run {:?}: the controller has no run of that id (`patchpilot runs list` shows the ones it has)",
                    args.run
                );
            };
            if args.transcript {
                return show_transcript(config, &record, args.json).await;
            }
            show_run(config, &record, args.json).await
        }
    }
}

/// `runs show RUN --calls`: the broker's record of the run's calls, oldest
/// first: connection, method, route, what the guest got and why.
async fn show_calls(pool: &sqlx::PgPool, run: &str, json: bool) -> anyhow::Result<ExitCode> {
    let ready: bool =
        sqlx::query_scalar("SELECT to_regclass('public.broker_calls') IS NOT NULL").fetch_one(pool).await?;
    let calls = if ready { patchpilot_broker::store::calls(pool, run).await? } else { Vec::new() };
    if json {
        println!("{}", serde_json::to_string_pretty(&calls)?);
        return Ok(ExitCode::SUCCESS);
    }
    if calls.is_empty() {
        println!("run {}: no calls through the broker", printable(run, 128));
        return Ok(ExitCode::SUCCESS);
    }
    for c in &calls {
        let outcome = match c.refusal {
            Some(refusal) => {
                format!("refused {refusal}: {}", printable(c.reason.as_deref().unwrap_or(""), 120))
            }
            None => format!("upstream {}", c.upstream_status.map_or("-".to_owned(), |s| s.to_string())),
        };
        println!(
            "{}  {:<12} {:<6} {:<28} {}  {} B in, {} B out, {} tokens, {:.1} ms  {}",
            c.at.map(time).unwrap_or_default(),
            printable(&c.connection, 12),
            printable(&c.method, 6),
            printable(c.route.as_deref().unwrap_or("-"), 28),
            c.status,
            c.request_bytes,
            c.response_bytes,
            c.model_tokens,
            c.latency_us as f64 / 1000.0,
            outcome,
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn artifacts(config: &CliConfig) -> anyhow::Result<ArtifactStore> {
    let bus = crate::connect_bus(config).await?;
    Ok(ArtifactStore::open(&bus).await?)
}

async fn show_run(config: &CliConfig, record: &RunRecord, json: bool) -> anyhow::Result<ExitCode> {
    let run = RunView::from(record);
    let (agent, report_error) = match record.result.as_ref().and_then(|r| r.result_object.as_deref()) {
        None => (None, None),
        Some(key) => {
            let report = async {
                let bytes = artifacts(config).await?.get_bytes(key, MAX_REPORT_BYTES).await?;
                anyhow::Ok(RunReport::parse(&bytes).with_context(|| format!("{key} does not parse"))?)
            };
            match report.await {
                Ok(r) => (Some(r.agent), None),
                Err(e) => (None, Some(format!("{e:#}"))),
            }
        }
    };
    let view = ShowView { run, agent, report_error };
    if json {
        println!("{}", serde_json::to_string_pretty(&view)?);
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", render_run(&view));
    Ok(ExitCode::SUCCESS)
}

fn render_run(view: &ShowView) -> String {
    let r = &view.run;
    let mut out = String::new();
    let mut line = |label: &str, text: String| {
        let _ = writeln!(out, "{label:<12}{text}");
    };
    line("run", r.run_id.clone());
    line("remediation", format!("{} (revision {})", r.remediation_id, r.revision));
    line("purpose", r.purpose.clone());
    line("base", r.base_sha.clone());
    line("requested", time(r.requested_at));
    match &r.outcome {
        None => line("outcome", "(no result yet)".into()),
        Some(outcome) => {
            if let Some(started) = r.started_at {
                line("started", time(started));
            }
            if let Some(finished) = r.finished_at {
                let took = r.started_at.map(|s| format!(" ({} in the sandbox)", duration(finished - s)));
                line("finished", format!("{}{}", time(finished), took.unwrap_or_default()));
            }
            line("outcome", format!("{outcome}: {}", printable(r.reason.as_deref().unwrap_or(""), 400)));
            if let Some(code) = r.exit_code {
                line("exit code", code.to_string());
            }
            line("egress", format!("{} denied", r.egress_denied.unwrap_or(0)));
            if r.artifacts.is_empty() {
                line("artifacts", "(none)".into());
            }
            for (i, (name, key)) in r.artifacts.iter().enumerate() {
                line(if i == 0 { "artifacts" } else { "" }, format!("{name:<11} {key}"));
            }
        }
    }
    if let Some(error) = &view.report_error {
        line("agent", format!("(result.json could not be read: {})", printable(error, 400)));
    }
    if let Some(a) = &view.agent {
        let model = match (&a.provider, &a.model) {
            (Some(p), Some(m)) => format!(", {p} {}", printable(m, SHORT)),
            (None, Some(m)) => format!(", {}", printable(m, SHORT)),
            _ => String::new(),
        };
        let prompt = a
            .prompt_version
            .as_deref()
            .map(|v| format!(" (prompt {})", printable(v, SHORT)))
            .unwrap_or_default();
        line("agent", format!("driver {}{model}{prompt}", a.driver));
        if a.model_calls > 0 || a.tool_calls > 0 || a.end.is_some() {
            line(
                "",
                format!(
                    "{} model call(s), {} in / {} out tokens, {} tool call(s); {} in the model, {} in tools ({} of it building and rescanning)",
                    a.model_calls,
                    a.input_tokens,
                    a.output_tokens,
                    a.tool_calls,
                    millis(a.model_ms),
                    millis(a.tool_ms),
                    millis(a.build_ms)
                ),
            );
        }
        if let Some(end) = a.end {
            line("session", format!("{end}: {}", printable(&a.end_reason, 400)));
        }
        for (i, g) in a.gates.iter().enumerate() {
            line(
                if i == 0 { "gates" } else { "" },
                format!(
                    "{} {}: {}",
                    printable(&g.name, SHORT),
                    if g.passed { "passed" } else { "refused" },
                    printable(&g.detail, 200)
                ),
            );
        }
        for (i, bump) in a.companion_bumps.iter().enumerate() {
            line(if i == 0 { "companions" } else { "" }, printable(bump, 200));
        }
    }
    out
}

async fn show_transcript(config: &CliConfig, record: &RunRecord, json: bool) -> anyhow::Result<ExitCode> {
    let Some(result) = &record.result else {
        anyhow::bail!("run {}: no result yet, so no session transcript either", record.run_id);
    };
    let Some(key) = &result.session_object else {
        anyhow::bail!(
            "run {}: no session transcript: the agent ran no model session, or the run ended ({}) before it wrote one",
            record.run_id,
            result.outcome
        );
    };
    let scratch = tempfile::tempdir()?;
    let path = scratch.path().join("session.jsonl");
    artifacts(config).await?.get_to_file(key, &path, MAX_SESSION_BYTES).await?;
    let reader = std::io::BufReader::new(std::fs::File::open(&path)?);
    let mut events = Vec::new();
    let mut unreadable = 0usize;
    for line in reader.split(b'\n') {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(&line) {
            Ok(v @ Value::Object(_)) => {
                if json {
                    events.push(v);
                } else {
                    println!("{}", render_event(&v));
                }
            }
            _ => unreadable += 1,
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&events)?);
    }
    if unreadable > 0 {
        eprintln!("{unreadable} line(s) of {key} are not JSON objects and are not shown");
    }
    Ok(ExitCode::SUCCESS)
}

/// One transcript event as one line: `[  12.3s] kind     what happened`.
fn render_event(e: &Value) -> String {
    let s = |field: &str| e[field].as_str().map(|t| printable(t, SHORT)).unwrap_or_default();
    let n = |field: &str| e[field].as_u64().unwrap_or(0);
    let kind = e["type"].as_str().unwrap_or("?");
    let what = match kind {
        "session" => format!(
            "{} with {}/{} (prompt {}), {} tools",
            s("mode"),
            s("provider"),
            s("model"),
            s("prompt_version"),
            e["tools"].as_array().map_or(0, Vec::len)
        ),
        "model" => {
            let calls: Vec<String> = e["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| c["name"].as_str().map(|t| printable(t, SHORT)).unwrap_or_default())
                .collect();
            let mut text = format!(
                "turn {}: {} in / {} out tokens, {}",
                n("turn"),
                n("input_tokens"),
                n("output_tokens"),
                millis(n("latency_ms"))
            );
            if n("attempts") > 1 {
                let _ = write!(text, " ({} attempts)", n("attempts"));
            }
            if calls.is_empty() {
                let _ = write!(text, ", no tool call, stop {}", s("stop"));
            } else {
                let _ = write!(text, " -> {}", calls.join(", "));
            }
            if let Some(said) = e["text"].as_str().filter(|t| !t.trim().is_empty()) {
                let _ = write!(text, ": \"{}\"", printable(said.trim(), SHORT));
            }
            text
        }
        "tool_call" => {
            let args = if e["malformed"].as_bool() == Some(true) {
                "(malformed arguments)".to_owned()
            } else {
                argument_summary(e["args"].as_str().unwrap_or(""))
            };
            format!("{} {args}", s("name"))
        }
        "tool_result" => format!(
            "{} {} bytes, {}{}{}",
            s("name"),
            n("bytes"),
            millis(n("ms")),
            if e["is_error"].as_bool() == Some(true) { ", is_error" } else { "" },
            if e["truncated"].as_bool() == Some(true) { ", cut in the transcript" } else { "" },
        ),
        "gate" => format!(
            "{} {}: {}",
            s("name"),
            if e["passed"].as_bool() == Some(true) { "passed" } else { "refused" },
            e["detail"].as_str().map(|t| printable(t, 200)).unwrap_or_default()
        ),
        "outcome" => format!(
            "{}: {} ({} model call(s), {} in / {} out tokens, {} tool call(s))",
            s("end"),
            e["reason"].as_str().map(|t| printable(t, 200)).unwrap_or_default(),
            n("model_calls"),
            n("input_tokens"),
            n("output_tokens"),
            n("tool_calls")
        ),
        "model_error" => format!(
            "turn {}: {}{}",
            n("turn"),
            e["error"].as_str().map(|t| printable(t, 200)).unwrap_or_default(),
            if e["transient"].as_bool() == Some(true) { " (transient)" } else { "" }
        ),
        "context_full" => format!("turn {}: the context was full; old results were cut", n("turn")),
        _ => String::new(),
    };
    let label = match kind {
        "tool_call" => "tool".to_owned(),
        "tool_result" => "result".to_owned(),
        "outcome" => "end".to_owned(),
        "model_error" => "error".to_owned(),
        "context_full" => "context".to_owned(),
        other => printable(other, 20),
    };
    format!("[{:>7.1}s] {label:<8} {what}", n("at_ms") as f64 / 1000.0).trim_end().to_owned()
}

/// A tool call's arguments as `key=value …`, each value cut short; the
/// text itself when it is not a JSON object.
fn argument_summary(args: &str) -> String {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(args) else {
        return printable(args, SHORT);
    };
    let parts: Vec<String> = map
        .iter()
        .map(|(k, v)| {
            let value = match v {
                Value::String(t) => t.clone(),
                other => other.to_string(),
            };
            format!("{}={}", printable(k, 20), printable(&value, 40))
        })
        .collect();
    printable(&parts.join(" "), 160)
}

/// `text` safe for a terminal, at most `max` characters (then `…`):
/// control characters, and the formatting characters that reorder text,
/// are written as `\u{..}` escapes; a newline as `\n`.
fn printable(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push(' '),
            c if c.is_control() || is_bidi_format(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// The Unicode formatting characters that change the display order of
/// text (embeddings, overrides, isolates, marks).
fn is_bidi_format(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{061c}')
}

fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

fn duration(d: chrono::TimeDelta) -> String {
    millis(d.num_milliseconds().max(0) as u64)
}

fn millis(ms: u64) -> String {
    match ms {
        ms if ms < 1_000 => format!("{ms} ms"),
        ms if ms < 60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        ms => format!("{}m {:02}s", ms / 60_000, ms / 1000 % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn untrusted_text_cannot_drive_the_terminal() {
        assert_eq!(printable("a\u{1b}[2Jb\r", 80), "a\\u{1b}[2Jb\\u{d}");
        assert_eq!(printable("x\u{202e}gpj.exe", 80), "x\\u{202e}gpj.exe");
        assert_eq!(printable("one\ntwo", 80), "one\\ntwo");
        assert_eq!(printable("abcdef", 3), "abc…");
    }

    #[test]
    fn events_read_as_one_line_each() {
        let call = json!({"type": "tool_call", "at_ms": 1500, "name": "read_file",
            "args": "{\"path\":\"Dockerfile\",\"max_bytes\":4096}", "malformed": false});
        assert_eq!(render_event(&call), "[    1.5s] tool     read_file max_bytes=4096 path=Dockerfile");
        let result = json!({"type": "tool_result", "at_ms": 1512, "name": "read_file", "bytes": 321,
            "ms": 12, "is_error": true, "truncated": false});
        assert_eq!(render_event(&result), "[    1.5s] result   read_file 321 bytes, 12 ms, is_error");
        let model = json!({"type": "model", "at_ms": 900, "turn": 2, "input_tokens": 1200,
            "output_tokens": 80, "latency_ms": 850, "attempts": 1, "stop": "tool_use", "text": "",
            "tool_calls": [{"id": "c1", "name": "read_file"}, {"id": "c2", "name": "search"}]});
        assert_eq!(
            render_event(&model),
            "[    0.9s] model    turn 2: 1200 in / 80 out tokens, 850 ms -> read_file, search"
        );
        let gate =
            json!({"type": "gate", "at_ms": 0, "name": "rescan", "passed": false, "detail": "CVE-1 present"});
        assert_eq!(render_event(&gate), "[    0.0s] gate     rescan refused: CVE-1 present");
        let unknown = json!({"type": "\u{1b}[31mnew", "at_ms": 0});
        assert_eq!(render_event(&unknown), "[    0.0s] \\u{1b}[31mnew");
    }

    #[test]
    fn long_or_odd_arguments_are_summarised() {
        let long = format!("{{\"path\":\"a\",\"content\":\"{}\"}}", "x".repeat(500));
        let summary = argument_summary(&long);
        assert!(summary.starts_with("content=xxx") && summary.contains("… path=a"), "{summary}");
        assert!(summary.chars().count() < 120, "{summary}");
        assert_eq!(argument_summary("not json"), "not json");
    }
}
