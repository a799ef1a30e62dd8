//! The reasoning agent's own overhead, against baselines measured in the
//! same run:
//!
//! 1. **The loop, per turn.** One session of 40 `read_file` turns and a
//!    `finish` (`gave_up`, so no gate needs Docker), driven by
//!    `session::run` with the real toolbox and transcript. The model is,
//!    in turn: an in-process [`Model`] returning the scripted answers with
//!    no I/O (the baseline); the same with the transcript not written; an
//!    in-process model that also encodes each request and decodes each
//!    answer in a wire's JSON, as the HTTP client does; and
//!    [`ModelClient`] over loopback HTTP to the provider double, on both
//!    wires. The HTTP figure includes the double's own work (parsing,
//!    checking and recording every request).
//! 2. **Per tool call**, through `Toolbox::call`: `read_file`, `search`
//!    (a tree of a few thousand files plus a vendored folder the tool
//!    skips), `edit_file`, `list_files`, `run` (`true`), each against the
//!    plain std code doing the same work. `docker_build` and `scan_image`
//!    need Docker and are left out, as are the tools that need the
//!    advisory DB, a package index or a registry.
//! 3. **The snapshot**: `Workspace::snapshot()` and `Snapshot::changes()`
//!    on trees of 1,000 and 10,000 files, against a plain recursive read of
//!    the same tree.
//!
//! ```text
//! cargo bench -p patchpilot-agent --bench session -- [--sessions 15] [--calls 300] [--snapshots 5]
//! ```
//!
//! Everything is warm (page cache, connections after the first turn).
//! Benchmarks report; they never assert timings. They do check that each
//! session ended as scripted, so a broken setup cannot pass for a fast one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use patchpilot_agent::reasoning::session::{self, SessionConfig, SessionReport};
use patchpilot_agent::reasoning::tools::{Called, ToolEnv, Toolbox};
use patchpilot_agent::reasoning::transcript::Transcript;
use patchpilot_agent::reasoning::workspace::{Snapshot, VENDORED, Workspace};
use patchpilot_agent::reasoning::{self, brief, prompt};
use patchpilot_agent::report::RunResult;
use patchpilot_llm::{
    Arguments, ClientConfig, Exchange, Model, ModelClient, ModelError, ModelRequest, ModelResponse,
    ProviderWire, RetryPolicy, StopReason, ToolCall, Usage, anthropic, openai, sha256_hex,
};
use patchpilot_model::{AgentLimits, Finding, Package, RunPurpose, SessionEnd, Severity, Task, context};
use patchpilot_provider_double::{ProviderDouble, Scripted, Turn};
use serde_json::{Value, json};

/// `read_file` turns per session; one `finish` follows.
const READ_TURNS: usize = 40;
/// Lines of the file the session reads, a few per turn.
const NOTES_LINES: usize = READ_TURNS + 10;
/// Files of the search tree outside the vendored folder, and inside it.
const TREE_FILES: usize = 3_000;
const VENDORED_FILES: usize = 1_000;
/// Snapshot tree sizes.
const SNAPSHOT_SIZES: [usize; 2] = [1_000, 10_000];

struct Args {
    sessions: usize,
    calls: usize,
    snapshots: usize,
}

impl Args {
    fn parse() -> anyhow::Result<Args> {
        let mut args = Args { sessions: 15, calls: 300, snapshots: 5 };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "--bench" {
                continue;
            }
            let mut value = || -> anyhow::Result<usize> {
                let v = it.next().with_context(|| format!("{flag} needs a value"))?;
                let n: usize = v.parse().with_context(|| format!("{flag}: {v:?} is not a count"))?;
                ensure!(n > 0, "{flag} must be at least 1");
                Ok(n)
            };
            match flag.as_str() {
                "--sessions" => args.sessions = value()?,
                "--calls" => args.calls = value()?,
                "--snapshots" => args.snapshots = value()?,
                other => bail!("unknown flag {other} (known: --sessions, --calls, --snapshots)"),
            }
        }
        Ok(args)
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Microseconds below 10 ms, milliseconds above.
fn us(d: Duration) -> String {
    if d < Duration::from_millis(10) {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn write(root: &Path, rel: &str, data: &[u8]) -> anyhow::Result<()> {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().context("a path with a parent")?)?;
    std::fs::write(&path, data).with_context(|| format!("writing {}", path.display()))
}

/// Generated Go-like source of about `bytes` bytes; `marked` files carry
/// one line the search pattern finds.
fn source(i: usize, bytes: usize, marked: bool) -> String {
    let mut text = format!("package pkg{}\n\nimport \"fmt\"\n\n", i % 97);
    if marked {
        text.push_str(&format!(
            "func HandleUpgradeRequest{i}() {{ fmt.Println(\"golang.org/x/net v0.23.0\") }}\n"
        ));
    }
    let mut n = 0;
    while text.len() < bytes {
        text.push_str(&format!("func helper{i}_{n}(x int) int {{ return x*{n} + {} }}\n", i % 13));
        n += 1;
    }
    text
}

fn task(limits: AgentLimits) -> Task {
    let mut task = Task::new(
        "Dockerfile",
        vec![Finding::new("CVE-2024-24790", Package::new("stdlib", "1.21.0", "Go"), Severity::Critical)],
    );
    task.model = Some(patchpilot_model::TaskModel {
        provider: ProviderWire::OpenAi,
        base_url: None,
        model: "bench".into(),
        max_output_tokens: 1024,
        limits,
    });
    task
}

fn env(scratch: &Path) -> ToolEnv {
    ToolEnv {
        scans: None,
        cache_dir: scratch.join("cache"),
        image_prefix: "patchpilot-bench/session".into(),
        db_dir: scratch.join("db"),
        http: reqwest::Client::new(),
    }
}

// ---------------------------------------------------------------------
// 1. The loop
// ---------------------------------------------------------------------

/// The session every model plays: a few lines of `notes.txt` per turn
/// (each turn a different range, so stuck detection stays quiet), then
/// `finish` giving up, which ends the session without a gate.
fn script() -> Vec<(String, Value)> {
    let mut turns: Vec<(String, Value)> = (1..=READ_TURNS)
        .map(|i| ("read_file".to_owned(), json!({"path": "notes.txt", "start_line": i, "end_line": i + 4})))
        .collect();
    turns.push((
        "finish".to_owned(),
        json!({"outcome": "gave_up", "summary": "benchmark session", "retrospective": {"went_well": ["read"]}}),
    ));
    turns
}

/// The in-process baseline: the scripted answers, no I/O, no encoding.
struct InProcess {
    turns: Vec<(String, Value)>,
    next: AtomicUsize,
}

impl InProcess {
    fn new() -> InProcess {
        InProcess { turns: script(), next: AtomicUsize::new(0) }
    }
}

impl Model for InProcess {
    fn describe(&self) -> (ProviderWire, &str) {
        (ProviderWire::OpenAi, "in-process")
    }

    async fn complete(&self, _request: &ModelRequest) -> Result<Exchange, ModelError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let (name, args) = self.turns.get(i).cloned().unwrap_or_else(|| ("finish".into(), Value::Null));
        let response = ModelResponse {
            id: Some(format!("bench-{i}")),
            model: Some("in-process".into()),
            text: None,
            tool_calls: vec![ToolCall { id: format!("call_{i}"), name, args: Arguments::from_value(args) }],
            stop: StopReason::ToolUse,
            usage: Usage { input_tokens: 1_000, output_tokens: 20 },
        };
        Ok(Exchange {
            response,
            attempts: 1,
            retried: Vec::new(),
            latency: Duration::ZERO,
            request_sha256: String::new(),
            request_bytes: 0,
            response_sha256: String::new(),
            response_bytes: 0,
        })
    }
}

/// In process, but each request encoded and each answer decoded in a
/// wire's JSON, with the digests the client takes: what `ModelClient`
/// does around the HTTP exchange.
struct WireEncoded {
    wire: ProviderWire,
    answers: Vec<Vec<u8>>,
    next: AtomicUsize,
}

impl WireEncoded {
    fn new(wire: ProviderWire) -> WireEncoded {
        let answers = script()
            .into_iter()
            .enumerate()
            .map(|(i, (name, args))| {
                let body = match wire {
                    ProviderWire::OpenAi => json!({
                        "id": format!("chatcmpl-{i}"), "object": "chat.completion", "created": 0, "model": "bench",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": null,
                            "tool_calls": [{"id": format!("call_{i}"), "type": "function",
                                "function": {"name": name, "arguments": args.to_string()}}]},
                            "logprobs": null, "finish_reason": "tool_calls"}],
                        "usage": {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020},
                    }),
                    ProviderWire::Anthropic => json!({
                        "id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": "bench",
                        "content": [{"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": args}],
                        "stop_reason": "tool_use", "stop_sequence": null,
                        "usage": {"input_tokens": 1000, "output_tokens": 20},
                    }),
                };
                body.to_string().into_bytes()
            })
            .collect();
        WireEncoded { wire, answers, next: AtomicUsize::new(0) }
    }
}

impl Model for WireEncoded {
    fn describe(&self) -> (ProviderWire, &str) {
        (self.wire, "wire-encoded")
    }

    async fn complete(&self, request: &ModelRequest) -> Result<Exchange, ModelError> {
        let body = match self.wire {
            ProviderWire::OpenAi => openai::request_body(request, "bench"),
            ProviderWire::Anthropic => anthropic::request_body(request, "bench"),
        }
        .to_string()
        .into_bytes();
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .answers
            .get(i)
            .ok_or_else(|| ModelError::Shape { field: "script".into(), reason: format!("no answer {i}") })?;
        let response = match self.wire {
            ProviderWire::OpenAi => openai::parse_response(answer)?,
            ProviderWire::Anthropic => anthropic::parse_response(answer)?,
        };
        Ok(Exchange {
            response,
            attempts: 1,
            retried: Vec::new(),
            latency: Duration::ZERO,
            request_sha256: sha256_hex(&body),
            request_bytes: body.len(),
            response_sha256: sha256_hex(answer),
            response_bytes: answer.len(),
        })
    }
}

/// The session's workspace and what every run of it shares.
struct SessionCase {
    _dir: tempfile::TempDir,
    scratch: PathBuf,
    workspace: Workspace,
    task: Task,
    start: Snapshot,
    brief: String,
    config: SessionConfig,
}

fn session_case() -> anyhow::Result<SessionCase> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("repo");
    std::fs::create_dir_all(root.join(context::CONTEXT_DIR))?;
    write(&root, "Dockerfile", b"FROM golang:1.21-alpine\nCOPY . .\nRUN go build ./...\n")?;
    write(&root, "main.go", b"package main\n\nfunc main() {}\n")?;
    let notes: String =
        (1..=NOTES_LINES).map(|i| format!("note {i}: the base image is pinned here\n")).collect();
    write(&root, "notes.txt", notes.as_bytes())?;
    let workspace = Workspace::new(&root)?;
    let limits = AgentLimits {
        max_turns: 100,
        max_tool_calls: 200,
        max_tokens: u64::MAX / 4,
        ..AgentLimits::default()
    };
    let task = task(limits.clone());
    let mode = RunPurpose::Remediate;
    let brief = brief(workspace.root(), &task, mode, &RunResult::new(&task));
    let (system, prompt_version) = prompt(mode);
    let config = SessionConfig {
        system: system.to_owned(),
        prompt_version,
        limits,
        max_output_tokens: 1024,
        keep_recent_results: 6,
    };
    let start = workspace.snapshot();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir_all(&scratch)?;
    Ok(SessionCase { _dir: dir, scratch, workspace, task, start, brief, config })
}

/// Where a session's transcript goes.
enum TranscriptTo {
    /// A fresh file, as in a run.
    File,
    /// A path that cannot be opened: the transcript records its problem
    /// once and writes nothing, but every event is still built.
    Nowhere,
}

/// Runs one session and returns its wall time; checks it ended as
/// scripted.
async fn one_session<M: Model>(
    case: &SessionCase,
    model: &M,
    to: TranscriptTo,
    n: usize,
) -> anyhow::Result<Duration> {
    let path = match to {
        TranscriptTo::File => case.scratch.join(format!("transcript-{n}.jsonl")),
        TranscriptTo::Nowhere => case.scratch.join("absent").join("transcript.jsonl"),
    };
    let mut transcript = Transcript::open(&path);
    let mut tools = Toolbox::new(
        case.workspace.clone(),
        case.task.clone(),
        RunPurpose::Remediate,
        env(&case.scratch),
        Vec::new(),
    );
    let began = Instant::now();
    let report =
        session::run(model, &mut tools, &case.start, case.brief.clone(), &case.config, &mut transcript).await;
    let took = began.elapsed();
    check_report(&report)?;
    if matches!(to, TranscriptTo::File) {
        let events = reasoning::transcript::read(&path)?;
        ensure!(events.len() > 2 * READ_TURNS, "the transcript has only {} events", events.len());
        std::fs::remove_file(&path)?;
    }
    Ok(took)
}

fn check_report(report: &SessionReport) -> anyhow::Result<()> {
    ensure!(
        report.end == SessionEnd::GaveUp && report.model_calls as usize == READ_TURNS + 1,
        "the session did not run as scripted: {:?} after {} calls: {}",
        report.end,
        report.model_calls,
        report.reason
    );
    ensure!(report.tool_calls as usize == READ_TURNS + 1, "{} tool calls", report.tool_calls);
    Ok(())
}

fn client(double: &ProviderDouble, wire: ProviderWire) -> anyhow::Result<ModelClient> {
    Ok(ModelClient::new(ClientConfig {
        wire,
        base_url: double.base_url(),
        model: "bench".into(),
        credential: Some("pp-cap-bench".into()),
        timeout: Duration::from_secs(20),
        // No faults are scripted: a retry would be a broken setup.
        retry: RetryPolicy {
            attempts: 1,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_secs(1),
        },
    })?)
}

/// A session against a fresh double (its call count starts at zero);
/// also returns the first and last request's body size.
async fn http_session(
    case: &SessionCase,
    wire: ProviderWire,
    n: usize,
) -> anyhow::Result<(Duration, usize, usize)> {
    let turns = script().into_iter().map(|(name, args)| Turn::tool_call(name, args)).collect();
    let double = ProviderDouble::start(Scripted::new(turns)).await?;
    let model = client(&double, wire)?;
    let took = one_session(case, &model, TranscriptTo::File, n).await?;
    let violations = double.violations();
    ensure!(violations.is_empty(), "the double saw malformed requests on {wire}: {violations:#?}");
    let requests = double.requests();
    let first = requests.first().map_or(0, |r| r.body.len());
    let last = requests.last().map_or(0, |r| r.body.len());
    Ok((took, first, last))
}

async fn bench_loop(sessions: usize) -> anyhow::Result<()> {
    let case = session_case()?;
    let turns = (READ_TURNS + 1) as u32;
    let names = [
        "in-process model (baseline)",
        "in-process, transcript not written",
        "in-process, OpenAI JSON encode/decode",
        "in-process, Anthropic JSON encode/decode",
        "ModelClient → double, OpenAI",
        "ModelClient → double, Anthropic",
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); names.len()];
    let mut sizes = Vec::new();
    // One warm-up round, then interleaved so every variant sees the same
    // machine.
    for round in 0..=sessions {
        let mut round_times = vec![
            one_session(&case, &InProcess::new(), TranscriptTo::File, round).await?,
            one_session(&case, &InProcess::new(), TranscriptTo::Nowhere, round).await?,
            one_session(&case, &WireEncoded::new(ProviderWire::OpenAi), TranscriptTo::File, round).await?,
            one_session(&case, &WireEncoded::new(ProviderWire::Anthropic), TranscriptTo::File, round).await?,
        ];
        for wire in [ProviderWire::OpenAi, ProviderWire::Anthropic] {
            let (took, first, last) = http_session(&case, wire, round).await?;
            round_times.push(took);
            sizes.push((wire, first, last));
        }
        if round > 0 {
            for (all, t) in times.iter_mut().zip(round_times) {
                all.push(t / turns);
            }
        }
    }
    println!("\n1. the loop: {READ_TURNS} read_file turns + finish, per turn, median of {sessions} sessions");
    let base = median(times[0].clone());
    for (name, t) in names.iter().zip(times) {
        let m = median(t);
        println!("  {name:<42} {:>10}  ratio {:.2}", us(m), ratio(m, base));
    }
    for wire in [ProviderWire::OpenAi, ProviderWire::Anthropic] {
        if let Some((_, first, last)) = sizes.iter().find(|(w, _, _)| *w == wire) {
            println!("  {wire} request body: {first} bytes on turn 1, {last} bytes on turn {turns}");
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------
// 2. Tools
// ---------------------------------------------------------------------

/// A tree like a mid-sized Go service: `TREE_FILES` files in folders of
/// 50, one in 100 with a match, plus a vendored folder of its own.
fn tool_tree(root: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(root.join(context::CONTEXT_DIR))?;
    for i in 0..TREE_FILES {
        write(
            root,
            &format!("internal/pkg{:03}/file{i}.go", i / 50),
            source(i, 1_500, i % 100 == 0).as_bytes(),
        )?;
    }
    for i in 0..VENDORED_FILES {
        let rel = format!("vendor/golang.org/x/mod{:02}/file{i}.go", i / 50);
        write(root, &rel, source(i, 1_500, i % 100 == 0).as_bytes())?;
    }
    let notes: String =
        (1..=NOTES_LINES).map(|i| format!("note {i}: the base image is pinned here\n")).collect();
    write(root, "notes.txt", notes.as_bytes())?;
    write(root, "Dockerfile", b"FROM golang:1.21-alpine\nCOPY . .\nRUN go build ./...\n")?;
    Ok(())
}

const PATTERN: &str = r"func Handle\w+Request";

/// The files under `dir` a plain walk finds, `.git` left out, vendored
/// folders too unless `vendored`; `levels` folder levels below `dir`.
fn plain_walk(dir: &Path, levels: usize, vendored: bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        let name = entry.file_name();
        if kind.is_dir() {
            let name = name.to_string_lossy();
            if levels > 0 && name != ".git" && (vendored || !VENDORED.contains(&name.as_ref())) {
                plain_walk(&entry.path(), levels - 1, vendored, out);
            }
        } else {
            out.push(entry.path());
        }
    }
}

/// The search baseline: a plain walk, every file read, the regex on every
/// line; the count of matching lines.
fn plain_search(root: &Path, re: &regex::Regex, vendored: bool) -> usize {
    let mut files = Vec::new();
    plain_walk(root, 32, vendored, &mut files);
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .map(|text| text.lines().filter(|l| re.is_match(l)).count())
        .sum()
}

async fn call(tools: &mut Toolbox, name: &str, args: &Value) -> anyhow::Result<(Duration, String)> {
    let began = Instant::now();
    let called = tools.call(name, args).await;
    let took = began.elapsed();
    match called {
        Called::Output(out) if !out.is_error => Ok((took, out.content)),
        Called::Output(out) => bail!("{name} {args} failed: {}", out.content),
        Called::Finish(_) => bail!("{name} is not a tool that returns output"),
    }
}

struct ToolRow {
    name: &'static str,
    baseline: &'static str,
    tool: Vec<Duration>,
    base: Vec<Duration>,
}

impl ToolRow {
    fn new(name: &'static str, baseline: &'static str) -> ToolRow {
        ToolRow { name, baseline, tool: Vec::new(), base: Vec::new() }
    }
}

async fn bench_tools(calls: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("repo");
    tool_tree(&root)?;
    let scratch = dir.path().join("scratch");
    let task = task(AgentLimits::default());
    let mut tools =
        Toolbox::new(Workspace::new(&root)?, task, RunPurpose::Remediate, env(&scratch), Vec::new());
    let re = regex::Regex::new(PATTERN)?;
    let notes = root.join("notes.txt");
    let edited = root.join("Dockerfile");
    // Search walks the whole tree: fewer calls keep the run short.
    let searches = (calls / 20).max(1);
    let lists = (calls / 5).max(1);

    let mut read = ToolRow::new("read_file (50-line file)", "std::fs::read_to_string");
    let mut edit = ToolRow::new("edit_file (3-line file)", "read_to_string + replacen + write");
    let mut list = ToolRow::new("list_files (depth 3, vendored skipped)", "plain walk + sort");
    let mut search = ToolRow::new("search (vendored skipped)", "plain walk + regex per line");
    let mut search_all = ToolRow::new("search (include_vendored)", "plain walk + regex per line, all");
    let mut run = ToolRow::new("run `true`", "std::process::Command sh -c true");

    let (pinned, bumped) = ("FROM golang:1.21-alpine", "FROM golang:1.22-alpine");
    for i in 0..=calls {
        let keep = i > 0; // the first round warms up
        let (t, out) = call(&mut tools, "read_file", &json!({"path": "notes.txt"})).await?;
        ensure!(out.contains("note 50:"), "read_file returned {out}");
        let began = Instant::now();
        let text = std::fs::read_to_string(&notes)?;
        let b = began.elapsed();
        std::hint::black_box(text);
        if keep {
            read.tool.push(t);
            read.base.push(b);
        }

        // The tool bumps, the baseline puts it back the same way, so every
        // call of either makes a real edit.
        let edit_args = json!({"path": "Dockerfile", "old_string": pinned, "new_string": bumped});
        let (t, _) = call(&mut tools, "edit_file", &edit_args).await?;
        let began = Instant::now();
        let text = std::fs::read_to_string(&edited)?;
        ensure!(text.matches(bumped).count() == 1, "the edit did not land");
        std::fs::write(&edited, text.replacen(bumped, pinned, 1))?;
        let b = began.elapsed();
        if keep {
            edit.tool.push(t);
            edit.base.push(b);
        }

        if i % (calls / lists).max(1) == 0 {
            let (t, out) = call(&mut tools, "list_files", &json!({})).await?;
            ensure!(out.contains("… and"), "list_files did not cap its output");
            let began = Instant::now();
            let mut files = Vec::new();
            plain_walk(&root, 3, false, &mut files);
            // Relative names, sorted as strings, as the tool lists them.
            let mut names: Vec<String> = files
                .iter()
                .filter_map(|p| p.strip_prefix(&root).ok())
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            names.sort();
            let shown: String = names.iter().take(1_000).map(|n| format!("{n}\n")).collect();
            let b = began.elapsed();
            std::hint::black_box(shown);
            if keep {
                list.tool.push(t);
                list.base.push(b);
            }
        }

        if i % (calls / searches).max(1) == 0 {
            let (t, out) = call(&mut tools, "search", &json!({"pattern": PATTERN})).await?;
            let hits = out.lines().count();
            let began = Instant::now();
            let plain = plain_search(&root, &re, false);
            let b = began.elapsed();
            ensure!(
                hits == plain && plain == TREE_FILES / 100,
                "search found {hits}, the plain walk {plain}"
            );
            if keep {
                search.tool.push(t);
                search.base.push(b);
            }
            let (t, out) =
                call(&mut tools, "search", &json!({"pattern": PATTERN, "include_vendored": true})).await?;
            let hits = out.lines().count();
            let began = Instant::now();
            let plain = plain_search(&root, &re, true);
            let b = began.elapsed();
            ensure!(hits == plain, "search with vendored found {hits}, the plain walk {plain}");
            if keep {
                search_all.tool.push(t);
                search_all.base.push(b);
            }
        }

        if i % 3 == 0 {
            let (t, out) = call(&mut tools, "run", &json!({"command": "true"})).await?;
            ensure!(out.starts_with("exit status 0"), "run returned {out}");
            let began = Instant::now();
            let status = std::process::Command::new("sh").args(["-c", "true"]).current_dir(&root).status()?;
            let b = began.elapsed();
            ensure!(status.success(), "sh -c true failed");
            if keep {
                run.tool.push(t);
                run.base.push(b);
            }
        }
    }
    println!(
        "\n2. tools, median per call ({TREE_FILES} files + {VENDORED_FILES} vendored, 1.5 KB each, for list_files and search)"
    );
    for row in [read, edit, list, search, search_all, run] {
        let calls = row.tool.len();
        let (t, b) = (median(row.tool), median(row.base));
        println!(
            "  {:<40} {:>11}  vs {:<40} {:>11}  ratio {:>5.2}  ({calls} calls)",
            row.name,
            us(t),
            row.baseline,
            us(b),
            ratio(t, b)
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------
// 3. Snapshots
// ---------------------------------------------------------------------

/// The snapshot baseline: every file of the tree read once.
fn plain_read(root: &Path) -> anyhow::Result<usize> {
    let mut files = Vec::new();
    plain_walk(root, 32, true, &mut files);
    let mut bytes = 0;
    for f in files {
        bytes += std::fs::read(&f)?.len();
    }
    Ok(bytes)
}

fn bench_snapshots(runs: usize) -> anyhow::Result<()> {
    println!(
        "\n3. snapshot, median of {runs} (files of 0.5–3.5 KB, 100 to a folder, one file edited before changes())"
    );
    for n in SNAPSHOT_SIZES {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("repo");
        for i in 0..n {
            write(
                &root,
                &format!("src/d{:03}/f{i}.go", i / 100),
                source(i, 500 + (i * 37) % 3_000, false).as_bytes(),
            )?;
        }
        let ws = Workspace::new(&root)?;
        let touched = root.join("src/d000/f0.go");
        let original = std::fs::read(&touched)?;
        let (mut snaps, mut changes, mut reads) = (Vec::new(), Vec::new(), Vec::new());
        let mut total = 0;
        for run in 0..=runs {
            let began = Instant::now();
            let snap = ws.snapshot();
            let s = began.elapsed();
            ensure!(snap.files.len() == n, "the snapshot has {} files of {n}", snap.files.len());
            std::fs::write(&touched, b"package changed\n")?;
            let began = Instant::now();
            let found = snap.changes(&ws);
            let c = began.elapsed();
            ensure!(found.len() == 1, "{} changes, not 1", found.len());
            std::fs::write(&touched, &original)?;
            let began = Instant::now();
            total = plain_read(&root)?;
            let r = began.elapsed();
            if run > 0 {
                snaps.push(s);
                changes.push(c);
                reads.push(r);
            }
        }
        let (s, c, r) = (median(snaps), median(changes), median(reads));
        println!(
            "  {n:>6} files ({:.1} MiB): snapshot {:>9}, changes {:>9}, together {:>9}; plain read {:>9}; ratios {:.2} / {:.2} / {:.2}",
            total as f64 / (1024.0 * 1024.0),
            ms(s),
            ms(c),
            ms(s + c),
            ms(r),
            ratio(s, r),
            ratio(c, r),
            ratio(s + c, r)
        );
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    // Listed by test runners (`--list`): there are no tests in here.
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let mut args = Args::parse()?;
    // `cargo test --benches` runs this without `--bench`: one short pass
    // shows it still works, timing is not the point.
    if !std::env::args().any(|a| a == "--bench") {
        args = Args { sessions: 1, calls: 20, snapshots: 1 };
    }
    patchpilot_agent::install_crypto_provider();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let began = Instant::now();
    runtime.block_on(async {
        bench_loop(args.sessions).await?;
        bench_tools(args.calls).await
    })?;
    bench_snapshots(args.snapshots)?;
    println!("\nall done in {:.1} s", began.elapsed().as_secs_f64());
    Ok(())
}
