//! The model session end to end over real HTTP, with the provider double
//! playing the model on both wires: limits, stuck detection, faults,
//! deviations and gates each end a session the documented way, the
//! transcript records it, and the tree is put back when nothing is kept.
//!
//! No Docker here: the rescan gate fails for want of a scanner, which is
//! what the gate tests rely on (a change is never accepted unverified).
//! The accepted path, with real builds and rescans in the VM, is in the
//! end-to-end suite.

use std::path::Path;
use std::time::Duration;

use patchpilot_agent::reasoning::tools::ToolEnv;
use patchpilot_agent::reasoning::workspace::Workspace;
use patchpilot_agent::reasoning::{self, transcript};
use patchpilot_agent::report::{Outcome, RunResult};
use patchpilot_llm::{ClientConfig, ModelClient, RetryPolicy};
use patchpilot_model::{
    AgentLimits, Finding, Package, ProviderWire, RunPurpose, SessionEnd, Severity, Task, TaskModel, context,
};
use patchpilot_provider_double::{Deviation, Fault, ProviderDouble, Scripted, Turn};
use serde_json::json;

const WIRES: [ProviderWire; 2] = [ProviderWire::OpenAi, ProviderWire::Anthropic];

struct Case {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    task: Task,
}

fn case(limits: AgentLimits) -> Case {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("repo");
    std::fs::create_dir_all(root.join(context::CONTEXT_DIR)).expect("mkdir");
    std::fs::write(root.join("Dockerfile"), "FROM golang:1.21-alpine\nCOPY . .\nRUN go build ./...\n")
        .expect("write");
    std::fs::write(root.join("main.go"), "package main\n\nfunc main() {}\n").expect("write");
    std::fs::write(root.join("main_test.go"), "package main\n").expect("write");
    std::fs::write(root.join("big.txt"), "word ".repeat(2_000)).expect("write");
    std::fs::write(root.join(context::CONTEXT_DIR).join(context::CI_FAILURE), "lint failed").expect("write");
    let mut task = Task::new(
        "Dockerfile",
        vec![Finding::new("CVE-2024-24790", Package::new("stdlib", "1.21.0", "Go"), Severity::Critical)],
    );
    task.model = Some(TaskModel {
        provider: ProviderWire::OpenAi,
        base_url: None,
        model: "double".into(),
        max_output_tokens: 1024,
        limits,
    });
    Case { _dir: dir, root, task }
}

fn client(double: &ProviderDouble, wire: ProviderWire) -> ModelClient {
    ModelClient::new(ClientConfig {
        wire,
        base_url: double.base_url(),
        model: "double".into(),
        credential: Some("pp-cap-test".into()),
        timeout: Duration::from_secs(20),
        retry: RetryPolicy {
            attempts: 4,
            base_delay: Duration::from_millis(20),
            max_delay: Duration::from_secs(2),
        },
    })
    .expect("client")
}

fn env(root: &Path) -> ToolEnv {
    ToolEnv {
        scans: None,
        cache_dir: root.parent().expect("parent").join("cache"),
        image_prefix: "patchpilot-test/reasoning".into(),
        db_dir: root.parent().expect("parent").join("db"),
        http: reqwest::Client::new(),
    }
}

async fn session(c: &Case, double: &ProviderDouble, wire: ProviderWire, mode: RunPurpose) -> RunResult {
    let ws = Workspace::new(&c.root).expect("workspace");
    let start = ws.snapshot();
    let mut rules = RunResult::new(&c.task);
    rules.outcome = Outcome::NotFixed;
    let (result, _) =
        reasoning::continue_with_model(&client(double, wire), &ws, &c.task, mode, rules, env(&c.root), start)
            .await;
    result
}

fn transcript_kinds(root: &Path) -> Vec<String> {
    transcript::read(&root.join(context::CONTEXT_DIR).join(context::TRANSCRIPT))
        .expect("transcript")
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Whether a tool result the double received is an error: Anthropic
/// carries `is_error`; OpenAI's tool message has no flag, so the agent
/// says it in the text.
fn errored(content: &str, is_error: bool) -> bool {
    is_error || content.starts_with("ERROR: ")
}

fn no_violations(double: &ProviderDouble) {
    let v = double.violations();
    assert!(v.is_empty(), "the double saw malformed requests: {v:#?}");
}

#[tokio::test]
async fn a_stuck_session_ends_with_its_reason_and_the_tree_put_back() {
    for wire in WIRES {
        let c = case(AgentLimits::default());
        let read = json!({"path": "main.go"});
        let double = ProviderDouble::start(Scripted::new(vec![
            Turn::tool_call("edit_file", json!({"path": "main.go", "old_string": "func main() {}", "new_string": "func main() { println() }"})),
            Turn::tool_call("read_file", read.clone()),
            Turn::tool_call("read_file", read.clone()),
            Turn::tool_call("read_file", read),
        ]))
        .await
        .expect("double");
        let result = session(&c, &double, wire, RunPurpose::Remediate).await;
        assert_eq!(result.agent.end, Some(SessionEnd::Stuck), "{wire}: {:?}", result.agent);
        assert!(
            result.agent.end_reason.contains("read_file was called 3 times"),
            "{}",
            result.agent.end_reason
        );
        assert_eq!(result.agent.model_calls, 4);
        assert_eq!(result.outcome, Outcome::NotFixed);
        assert!(!result.patch && result.diff.is_empty());
        assert_eq!(
            std::fs::read_to_string(c.root.join("main.go")).expect("read"),
            "package main\n\nfunc main() {}\n"
        );
        assert!(result.problems.iter().any(|p| p.contains("stuck")), "{:?}", result.problems);
        let kinds = transcript_kinds(&c.root);
        assert_eq!(kinds.first().map(String::as_str), Some("session"));
        assert_eq!(kinds.last().map(String::as_str), Some("outcome"));
        assert_eq!(kinds.iter().filter(|k| *k == "model").count(), 4);
        assert_eq!(kinds.iter().filter(|k| *k == "tool_result").count(), 4);
        no_violations(&double);
        // The capability went as the wire's credential header.
        let first = &double.requests()[0];
        match wire {
            ProviderWire::OpenAi => assert_eq!(first.header("authorization"), Some("Bearer pp-cap-test")),
            ProviderWire::Anthropic => assert_eq!(first.header("x-api-key"), Some("pp-cap-test")),
        }
    }
}

#[tokio::test]
async fn the_turn_limit_ends_a_session_and_is_named() {
    for wire in WIRES {
        let c = case(AgentLimits { max_turns: 2, ..AgentLimits::default() });
        let double = ProviderDouble::start(Scripted::new(vec![
            Turn::tool_call("read_file", json!({"path": "main.go", "start_line": 1})),
            Turn::tool_call("read_file", json!({"path": "main.go", "start_line": 2})),
            Turn::tool_call("read_file", json!({"path": "main.go", "start_line": 3})),
        ]))
        .await
        .expect("double");
        let result = session(&c, &double, wire, RunPurpose::Remediate).await;
        assert_eq!(result.agent.end, Some(SessionEnd::Limit), "{wire}");
        assert!(result.agent.end_reason.contains("turn limit (2"), "{}", result.agent.end_reason);
        assert_eq!(double.calls(), 2, "no call past the limit");
        no_violations(&double);
    }
}

#[tokio::test]
async fn the_token_limit_counts_what_the_provider_reported() {
    let c = case(AgentLimits { max_tokens: 150, ..AgentLimits::default() });
    let turn = |line: usize| Turn::Reply {
        text: None,
        tool_calls: vec![("read_file".into(), json!({"path": "main.go", "start_line": line}))],
        usage: Some(patchpilot_provider_double::Usage { input_tokens: 60, output_tokens: 20 }),
    };
    let double = ProviderDouble::start(Scripted::new(vec![turn(1), turn(2), turn(3)])).await.expect("double");
    let result = session(&c, &double, ProviderWire::Anthropic, RunPurpose::Remediate).await;
    assert_eq!(result.agent.end, Some(SessionEnd::Limit));
    assert!(result.agent.end_reason.contains("token limit (150)"), "{}", result.agent.end_reason);
    assert_eq!((result.agent.input_tokens, result.agent.output_tokens), (120, 40));
    assert_eq!(double.calls(), 2);
}

#[tokio::test]
async fn faults_are_retried_and_deviations_tolerated() {
    for wire in WIRES {
        let c = case(AgentLimits::default());
        let double = ProviderDouble::start(Scripted::new(vec![
            Turn::Fault(Fault::RateLimited { retry_after_secs: 1 }),
            Turn::Fault(Fault::ServerError),
            Turn::Fault(Fault::TruncatedBody),
            Turn::Fault(Fault::MalformedToolArguments { name: "read_file".into() }),
            Turn::tool_call("list_files", json!({})).deviant(Deviation::MissingCallId),
            Turn::tool_call("read_file", json!({"path": "main.go"})).deviant(Deviation::ArgumentsAsObject),
            Turn::tool_call(
                "finish",
                json!({"outcome": "gave_up", "summary": "nothing to do", "retrospective": {"went_well": ["read it"]}}),
            ),
        ]))
        .await
        .expect("double");
        let result = session(&c, &double, wire, RunPurpose::Remediate).await;
        assert_eq!(result.agent.end, Some(SessionEnd::GaveUp), "{wire}: {}", result.agent.end_reason);
        assert!(result.agent.end_reason.contains("nothing to do"));
        // The retrospective names the model the session used, for the fleet.
        let retro = patchpilot_agent::report::retrospective(&result);
        assert_eq!(retro.model.as_deref(), Some("double"), "{wire}");
        // Three faults retried inside the first model call, then four calls.
        assert_eq!(double.calls(), 7);
        assert_eq!(result.agent.model_calls, 4);
        let requests = double.requests();
        // The malformed arguments came back to the model as an error result.
        let after_malformed = requests[4].conversation.as_ref().expect("conversation");
        let (_, content, is_error) = after_malformed.tool_results().last().expect("a tool result");
        assert!(errored(content, is_error) && content.contains("not a JSON object"), "{content}");
        // The call without an id was answered under an id the agent made up,
        // and the arguments sent as an object were read.
        let after_deviant = requests[6].conversation.as_ref().expect("conversation");
        let results: Vec<_> = after_deviant.tool_results().collect();
        assert!(results.iter().any(|(_, c, e)| !errored(c, *e) && c.contains("main.go")), "{results:?}");
        assert!(results.iter().any(|(_, c, e)| !errored(c, *e) && c.contains("package main")), "{results:?}");
        no_violations(&double);
        let model_events: Vec<_> = transcript::read(&c.root.join(".patchpilot/transcript.jsonl"))
            .expect("transcript")
            .into_iter()
            .filter(|e| e["type"] == "model")
            .collect();
        assert_eq!(model_events[0]["attempts"], 4, "{}", model_events[0]);
    }
}

#[tokio::test]
async fn a_provider_that_keeps_failing_is_an_infrastructure_failure() {
    let c = case(AgentLimits::default());
    let double =
        ProviderDouble::start(Scripted::new(vec![Turn::Fault(Fault::Overloaded); 4])).await.expect("double");
    let result = session(&c, &double, ProviderWire::Anthropic, RunPurpose::Remediate).await;
    assert_eq!(result.agent.end, Some(SessionEnd::ModelError));
    assert_eq!(result.outcome, Outcome::Failed);
    assert!(result.problems.iter().any(|p| p.starts_with("infrastructure:")), "{:?}", result.problems);
    assert_eq!(double.calls(), 4);
}

#[tokio::test]
async fn a_full_context_cuts_old_results_once_then_hands_off() {
    for wire in WIRES {
        let c = case(AgentLimits::default());
        let double = ProviderDouble::start(Scripted::new(vec![
            Turn::tool_call("read_file", json!({"path": "big.txt"})),
            Turn::tool_call("read_file", json!({"path": "main.go"})),
            Turn::Fault(Fault::ContextLength),
            Turn::Fault(Fault::ContextLength),
        ]))
        .await
        .expect("double");
        let result = session(&c, &double, wire, RunPurpose::Remediate).await;
        assert_eq!(result.agent.end, Some(SessionEnd::ModelError), "{wire}");
        assert!(result.agent.end_reason.contains("context"), "{}", result.agent.end_reason);
        assert_eq!(result.outcome, Outcome::NotFixed, "a full context is not an outage");
        let retried = double.requests()[3].body.clone();
        assert!(retried.contains("[cut: an earlier result of"), "the retry carried the cut result");
        assert!(!double.requests()[2].body.contains("[cut:"), "results are cut only when needed");
        no_violations(&double);
    }
}

#[tokio::test]
async fn finish_is_refused_by_the_gates_and_the_refusal_explains() {
    for wire in WIRES {
        let c = case(AgentLimits { max_gate_failures: 2, ..AgentLimits::default() });
        let finish = json!({"outcome": "fixed", "summary": "done"});
        let double = ProviderDouble::start(Scripted::new(vec![
            Turn::tool_call(
                "write_file",
                json!({"path": "main_test.go", "content": "package main // gone\n"}),
            ),
            Turn::tool_call("finish", finish.clone()),
            Turn::tool_call(
                "write_file",
                json!({"path": "main_test.go", "content": "package main // still\n"}),
            ),
            Turn::tool_call("finish", finish),
        ]))
        .await
        .expect("double");
        let result = session(&c, &double, wire, RunPurpose::Remediate).await;
        assert_eq!(result.agent.end, Some(SessionEnd::GatesFailed), "{wire}: {}", result.agent.end_reason);
        let gate = |name: &str| result.agent.gates.iter().find(|g| g.name == name).expect(name).clone();
        assert!(gate("diff_budget").passed);
        assert!(!gate("protected_files").passed && gate("protected_files").detail.contains("main_test.go"));
        assert!(!gate("rescan").passed, "never accepted without a rescan");
        let refusal = double.requests()[2].conversation.clone().expect("conversation");
        let (_, text, is_error) = refusal.tool_results().last().expect("result");
        assert!(errored(text, is_error) && text.contains("protected_files"), "{text}");
        assert_eq!(std::fs::read_to_string(c.root.join("main_test.go")).expect("read"), "package main\n");
        no_violations(&double);
    }
}

#[tokio::test]
async fn tools_refuse_paths_outside_the_tree_and_the_task_folder() {
    let c = case(AgentLimits::default());
    let double = ProviderDouble::start(Scripted::new(vec![
        Turn::tool_call("read_file", json!({"path": "../../etc/passwd"})),
        Turn::tool_call("write_file", json!({"path": ".patchpilot/task.json", "content": "{}"})),
        Turn::tool_call("read_file", json!({"path": ".git/config"})),
        Turn::tool_call("finish", json!({"outcome": "gave_up", "summary": "refused"})),
    ]))
    .await
    .expect("double");
    let result = session(&c, &double, ProviderWire::OpenAi, RunPurpose::Repair).await;
    assert_eq!(result.agent.end, Some(SessionEnd::GaveUp));
    let last = double.requests()[3].conversation.clone().expect("conversation");
    let errors: Vec<_> =
        last.tool_results().filter(|(_, c, e)| errored(c, *e)).map(|(_, c, _)| c.to_owned()).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(!c.root.join(".patchpilot/task.json").exists());
    // The repair prompt went as the system prompt, and no git or forge tool was offered.
    assert!(last.system.as_deref().unwrap_or_default().contains("repair agent"));
    let names: Vec<&str> = last.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"finish") && names.contains(&"scan_image"));
    assert!(
        !names.iter().any(|n| n.contains("git") || n.contains("push") || n.contains("pull")),
        "{names:?}"
    );
}

/// The capability broker's whole answer to a model call while the
/// credential gateway is down, as its end-to-end test pins it
/// (`broker::the_gateway_signs_upstream_calls_and_its_key_never_reaches_the_guest`).
const BROKER_GATEWAY_DOWN: &str = r#"{"error":{"message":"upstream failed","type":"upstream_failed"}}"#;

/// A loopback server that answers every request as the broker does with
/// the gateway down; counts the requests.
async fn broker_with_the_gateway_down()
-> (std::net::SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                // Read the head and the declared body, then answer.
                let mut request = Vec::new();
                let mut buf = [0u8; 8192];
                loop {
                    let Ok(n) = stream.read(&mut buf).await else { return };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().to_owned())
                            })
                            .and_then(|v| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let answer = format!(
                    "HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{BROKER_GATEWAY_DOWN}",
                    BROKER_GATEWAY_DOWN.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    (addr, seen)
}

/// With the gateway down the model is out of reach, and the run goes on
/// with its non-model work: the rules' verified change stays in the tree
/// and in the result (partly fixed), and the model's failure is named
/// among the problems. Retried first, as a 5xx is transient.
#[tokio::test]
async fn with_the_gateway_down_the_rules_verified_change_is_kept_and_the_model_failure_named() {
    let c = case(AgentLimits::default());
    let ws = Workspace::new(&c.root).expect("workspace");
    let start = ws.snapshot();
    // What the rules changed, built and rescanned: the base bumped.
    let bumped = "FROM golang:1.22-alpine\nCOPY . .\nRUN go build ./...\n";
    std::fs::write(c.root.join("Dockerfile"), bumped).expect("write");
    let mut rules = RunResult::new(&c.task);
    rules.outcome = Outcome::PartlyFixed;
    rules.patch = true;
    let (addr, requests) = broker_with_the_gateway_down().await;
    let model = ModelClient::new(ClientConfig {
        wire: ProviderWire::OpenAi,
        base_url: format!("http://{addr}").parse().expect("url"),
        model: "double".into(),
        credential: Some("pp-cap-test".into()),
        timeout: Duration::from_secs(20),
        retry: RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(20),
            max_delay: Duration::from_secs(1),
        },
    })
    .expect("client");
    let (result, _) = reasoning::continue_with_model(
        &model,
        &ws,
        &c.task,
        RunPurpose::Remediate,
        rules,
        env(&c.root),
        start,
    )
    .await;
    assert_eq!(result.agent.end, Some(SessionEnd::ModelError));
    assert_eq!(result.outcome, Outcome::PartlyFixed, "{:?}", result.problems);
    assert!(result.patch, "the rules' change is still the run's patch");
    assert_eq!(std::fs::read_to_string(c.root.join("Dockerfile")).expect("read"), bumped);
    assert!(
        result.problems.iter().any(|p| p.starts_with("model session (") && p.contains("upstream failed")),
        "{:?}",
        result.problems
    );
    // Not an infrastructure failure of the run: its work is kept. (This
    // test has no Docker, so the session's own baseline build is reported
    // as one; that is not the model.)
    assert!(
        !result.problems.iter().any(|p| p.contains("the model could not be reached")),
        "{:?}",
        result.problems
    );
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 3, "retried as transient");
}

/// A repair's `finish` runs each failing check the forge named again in
/// the workspace: while it fails, `finish` is refused with the check's own
/// output; once the model's edit makes it pass, that gate passes. A check
/// whose command the VM lacks is let through, saying so: CI judges it.
#[tokio::test]
async fn a_repair_runs_the_failing_check_again_before_it_may_finish() {
    let mut c = case(AgentLimits { max_gate_failures: 2, ..AgentLimits::default() });
    c.task.failing_checks = vec![
        patchpilot_model::FailingCheck {
            name: "lint".into(),
            command: vec![
                "sh".into(),
                "-c".into(),
                "grep -q 'lint: ok' main.go || { echo 'main.go:1: lint: not ok'; exit 2; }".into(),
            ],
        },
        patchpilot_model::FailingCheck {
            name: "vendor-tool".into(),
            command: vec!["pp-no-such-linter-xyz".into()],
        },
    ];
    let finish = json!({"outcome": "fixed", "summary": "done"});
    let double = ProviderDouble::start(Scripted::new(vec![
        Turn::tool_call("finish", finish.clone()),
        Turn::tool_call(
            "write_file",
            json!({"path": "main.go", "content": "package main\n\n// lint: ok\nfunc main() {}\n"}),
        ),
        Turn::tool_call("finish", finish),
    ]))
    .await
    .expect("double");
    let result = session(&c, &double, ProviderWire::OpenAi, RunPurpose::Repair).await;
    // The rescan gate cannot pass here (no scanner), so the session ends on
    // the gates either way; what matters is each check's verdict.
    assert_eq!(result.agent.end, Some(SessionEnd::GatesFailed), "{}", result.agent.end_reason);
    let first = double.requests()[1].conversation.clone().expect("conversation");
    let (_, refusal, is_error) = first.tool_results().last().expect("result");
    assert!(errored(refusal, is_error), "{refusal}");
    assert!(refusal.contains("lint: still fails in the VM (exit status 2)"), "{refusal}");
    assert!(refusal.contains("main.go:1: lint: not ok"), "the check's own output: {refusal}");
    let checks: Vec<_> = result.agent.gates.iter().filter(|g| g.name == "failing_check").collect();
    assert_eq!(checks.len(), 2, "{:?}", result.agent.gates);
    assert!(checks[0].passed && checks[0].detail.starts_with("lint: passes in the VM"), "{:?}", checks[0]);
    assert!(checks[1].passed && checks[1].detail.contains("exit 127"), "{:?}", checks[1]);
    assert!(
        result
            .commands
            .iter()
            .any(|r| r.command.contains("(the failing check lint)") && r.exit_code == Some(0)),
        "each run of a check is in the report's commands: {:?}",
        result.commands
    );
    no_violations(&double);
}
