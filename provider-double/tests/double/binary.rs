//! The `patchpilot-provider-double` binary, as a person or an eval runs it.

use std::process::Stdio;
use std::time::Duration;

use patchpilot_provider_double::Wire;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::process::Command;

use crate::support::*;

const BINARY: &str = env!("CARGO_BIN_EXE_patchpilot-provider-double");

const SCRIPT: &str = r#"
[[turns]]
text = "Reading it."
tool_calls = [{ name = "read_file", args = { path = "Dockerfile" } }]

[[turns]]
fault = "rate_limited"
retry_after_secs = 1
"#;

#[tokio::test]
async fn serves_a_script_file_and_reports_violations_on_sigterm() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).expect("write the script");
    let mut child = Command::new(BINARY)
        .arg("--script")
        .arg(&script)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the binary");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut base = String::new();
    tokio::time::timeout(Duration::from_secs(30), stdout.read_line(&mut base))
        .await
        .expect("the base URL within 30 s")
        .expect("read stdout");
    let base = base.trim();
    assert!(base.starts_with("http://127.0.0.1:"), "{base:?}");

    let url = format!("{base}{}", Wire::OpenAi.path());
    let sent = post(&url, &openai_headers(), &openai_body()).await;
    assert_eq!(sent.body["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "read_file");
    // No authorization: a violation, and the next turn, the 429.
    let sent = post(&url, &[], &openai_body()).await;
    assert_eq!(sent.status, 429);
    assert_eq!(sent.header("retry-after"), Some("1"));

    let pid = child.id().expect("a pid").to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("run kill");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits on SIGTERM")
        .expect("wait");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).await.expect("read stdout");
    assert!(rest.contains("calls: 2\n"), "{rest}");
    assert!(rest.contains("violations: 1\n"), "{rest}");
    assert!(rest.contains("openai request 1 at header authorization: missing"), "{rest}");
    assert_eq!(status.code(), Some(3), "violations found: {rest}");
}

#[tokio::test]
async fn a_bad_script_fails_before_listening() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"{"turns": [{"fault": "rate_limited"}]}"#).expect("write the script");
    let out = Command::new(BINARY).arg("--script").arg(&script).output().await.expect("run the binary");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing listened, so no base URL");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("turn 0 (from 0): `rate_limited` needs `retry_after_secs`"), "{stderr}");
}
