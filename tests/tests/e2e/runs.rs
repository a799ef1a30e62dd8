//! `patchpilot runs` against a real Postgres and NATS: runs the controller
//! recorded (through its own store, as its result intake does), with their
//! artifacts in the real object store, shown one by one, with the agent's
//! record and the model session's transcript.

use patchpilot_controller::store::Store;
use patchpilot_e2e::Stack;
use patchpilot_fleet::artifacts::ArtifactStore;
use patchpilot_model::{
    AgentDriver, AgentRecord, GateRecord, ProviderWire, RunOutcome, RunPurpose, RunReport, SandboxResult,
    SessionEnd,
};

/// A session transcript as the agent writes it, with a hostile byte in the
/// model's text and one line that is not JSON.
const SESSION: &str = concat!(
    r#"{"type":"session","at_ms":0,"mode":"remediate","provider":"openai","model":"gpt-test","prompt_version":"abc123","tools":["read_file","finish"]}"#,
    "\n",
    r#"{"type":"model","at_ms":850,"turn":1,"input_tokens":1200,"output_tokens":80,"latency_ms":850,"attempts":1,"stop":"tool_use","text":"look\u001b[2J","tool_calls":[{"id":"c1","name":"read_file"}]}"#,
    "\n",
    r#"{"type":"tool_call","at_ms":851,"id":"c1","name":"read_file","args":"{\"path\":\"Dockerfile\"}","malformed":false}"#,
    "\n",
    r#"{"type":"tool_result","at_ms":860,"id":"c1","name":"read_file","is_error":false,"ms":9,"bytes":321,"content":"FROM x","truncated":false}"#,
    "\n",
    "not json\n",
    r#"{"type":"gate","at_ms":2000,"name":"rescan","passed":true,"detail":"CVE-2024-2511 fixed"}"#,
    "\n",
    r#"{"type":"outcome","at_ms":2100,"end":"finished","reason":"finished: bumped the base","model_calls":2,"input_tokens":2400,"output_tokens":160,"tool_calls":3}"#,
    "\n",
);

fn report() -> RunReport {
    RunReport {
        summary: "bumped the base".into(),
        agent: AgentRecord {
            mode: Some(RunPurpose::Remediate),
            driver: AgentDriver::Model,
            provider: Some(ProviderWire::OpenAi),
            model: Some("gpt-test".into()),
            prompt_version: Some("abc123".into()),
            model_calls: 2,
            input_tokens: 2400,
            output_tokens: 160,
            tool_calls: 3,
            model_ms: 1700,
            tool_ms: 40,
            build_ms: 30,
            end: Some(SessionEnd::Finished),
            end_reason: "finished: bumped the base".into(),
            gates: vec![GateRecord {
                name: "rescan".into(),
                passed: true,
                detail: "CVE-2024-2511 fixed".into(),
            }],
            companion_bumps: vec![],
        },
        ..RunReport::default()
    }
}

/// Records a run as the executor and the result intake would, its
/// artifacts stored under `runs/<run>/`.
async fn record(
    stack: &Stack,
    store: &ArtifactStore,
    run_id: &str,
    report: Option<&RunReport>,
    session: Option<&str>,
) -> anyhow::Result<()> {
    let controller = Store::new(stack.pool.clone());
    controller.record_run_request(run_id, "rem-cli", 1, RunPurpose::Remediate, "0123abcd").await?;
    let mut result = SandboxResult::without_artifacts(run_id, "rem-cli", RunOutcome::Completed, "exit 0");
    result.exit_code = Some(0);
    result.started_at = Some(chrono::Utc::now());
    result.finished_at = result.started_at;
    if let Some(report) = report {
        let key = format!("runs/{run_id}/result");
        store.put_bytes(&key, &serde_json::to_vec(report)?).await?;
        result.result_object = Some(key);
    }
    if let Some(session) = session {
        let key = format!("runs/{run_id}/session");
        store.put_bytes(&key, session.as_bytes()).await?;
        result.session_object = Some(key);
    }
    anyhow::ensure!(controller.record_run_result(&result).await?, "the run was not recorded");
    Ok(())
}

#[tokio::test]
async fn runs_show_a_run_its_agent_and_its_session() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let store = ArtifactStore::open(&stack.bus).await?;
    record(&stack, &store, "rem-cli-r1-1", Some(&report()), Some(SESSION)).await?;
    let rules = RunReport { summary: "rules alone".into(), ..RunReport::default() };
    record(&stack, &store, "rem-cli-r1-2", Some(&rules), None).await?;

    let out = stack.cli(&["runs", "show", "rem-cli-r1-1"]).await?;
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    for expected in [
        "rem-cli (revision 1)",
        "completed: exit 0",
        "session     runs/rem-cli-r1-1/session",
        "driver model, openai gpt-test (prompt abc123)",
        "2 model call(s), 2400 in / 160 out tokens, 3 tool call(s); 1.7 s in the model, 40 ms in tools (30 ms of it building and rescanning)",
        "finished: finished: bumped the base",
        "rescan passed: CVE-2024-2511 fixed",
    ] {
        assert!(out.stdout.contains(expected), "{expected:?} missing from:\n{}", out.stdout);
    }

    let out = stack.cli(&["runs", "show", "rem-cli-r1-1", "--json"]).await?;
    let shown: serde_json::Value = serde_json::from_str(&out.stdout)
        .map_err(|e| anyhow::anyhow!("{e}: {}{}", out.stdout, out.stderr))?;
    assert_eq!(shown["outcome"], "completed");
    assert_eq!(shown["agent"]["driver"], "model");
    assert_eq!(shown["agent"]["end"], "finished");
    assert_eq!(shown["agent"]["input_tokens"], 2400);
    assert!(shown["started_at"].is_string() && shown["requested_at"].is_string(), "{shown}");

    let out = stack.cli(&["runs", "show", "rem-cli-r1-1", "--transcript"]).await?;
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 6, "one line per event:\n{}", out.stdout);
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| l.split_once("] ").and_then(|(_, rest)| rest.split_whitespace().next()).unwrap_or_default())
        .collect();
    assert_eq!(kinds, ["session", "model", "tool", "result", "gate", "end"]);
    assert!(lines[1].contains("turn 1: 1200 in / 80 out tokens, 850 ms -> read_file"), "{}", lines[1]);
    assert!(lines[2].ends_with("read_file path=Dockerfile"), "{}", lines[2]);
    assert!(lines[3].contains("read_file 321 bytes, 9 ms") && !lines[3].contains("is_error"), "{}", lines[3]);
    assert!(!out.stdout.contains('\u{1b}'), "the escape byte reached the terminal");
    assert!(lines[1].contains("\\u{1b}[2J"), "{}", lines[1]);
    assert!(out.stderr.contains("1 line(s)"), "{}", out.stderr);

    let out = stack.cli(&["runs", "show", "rem-cli-r1-1", "--transcript", "--json"]).await?;
    let events: Vec<serde_json::Value> = serde_json::from_str(&out.stdout)
        .map_err(|e| anyhow::anyhow!("{e}: {}{}", out.stdout, out.stderr))?;
    assert_eq!(events.len(), 6);
    assert_eq!(events[2]["args"], "{\"path\":\"Dockerfile\"}");

    // A run without a model session says so and fails.
    let out = stack.cli(&["runs", "show", "rem-cli-r1-2", "--transcript"]).await?;
    assert_ne!(out.code, Some(0), "{}", out.stdout);
    assert!(out.stderr.contains("rem-cli-r1-2: no session transcript"), "{}", out.stderr);
    let out = stack.cli(&["runs", "show", "rem-cli-r1-2"]).await?;
    assert!(out.stdout.contains("driver rules") && !out.stdout.contains("session "), "{}", out.stdout);

    let out = stack.cli(&["runs", "show", "rem-nope-r1-1"]).await?;
    assert_ne!(out.code, Some(0), "{}", out.stdout);
    assert!(out.stderr.contains("\"rem-nope-r1-1\"") && out.stderr.contains("no run"), "{}", out.stderr);

    let out = stack.cli(&["runs", "list", "--remediation", "rem-cli"]).await?;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let listed: Vec<&str> = out.stdout.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(listed, ["rem-cli-r1-2", "rem-cli-r1-1"], "{}", out.stdout);
    let out = stack.cli(&["runs", "list", "--remediation", "rem-other"]).await?;
    assert_eq!(out.stdout.trim(), "no runs of remediation rem-other");
    Ok(())
}
