//! `run`: a command in the workspace, with a timeout and an output cap.
//!
//! It runs with the sandbox's network, which is the run's egress and
//! nothing else, and without the run's capabilities (`PP_CAP_*` are taken
//! out of its environment), so model-written commands cannot reach the
//! broker in the agent's name. The whole process group is killed at the
//! timeout.

use std::process::Stdio;
use std::time::{Duration, Instant};

use patchpilot_model::CommandRun;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::AsyncReadExt as _;

use super::{ToolOutput, Toolbox, parse};

/// The longest timeout a call may ask for.
pub const MAX_TIMEOUT_SECS: u64 = 900;
const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// Bytes of output kept from the start and from the end.
const OUTPUT_HALF: usize = 12 * 1024;

pub(super) const RUN: &str = "Run a shell command (sh -c) in the workspace, e.g. `go vet ./...`, `make lint`, \
                              `go test ./...`. Network is the run's egress only. Output is capped; the exit \
                              status is reported. No git push, no forge: changes leave as a diff.";

/// `run`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Run {
    /// The command line.
    pub command: String,
    /// Folder to run in, relative to the workspace root.
    #[serde(default)]
    pub dir: Option<String>,
    /// Seconds before it is killed (default 120, at most 900).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// Environment names never passed to a command the model chose.
fn withheld(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("PP_CAP_")
        || upper.contains("TOKEN")
        || upper.contains("SECRET")
        || upper.ends_with("_KEY")
}

pub(super) async fn run(tools: &mut Toolbox, args: &Value) -> Result<ToolOutput, String> {
    let a: Run = parse(args)?;
    if a.command.trim().is_empty() {
        return Err("command is empty".into());
    }
    let dir = tools.workspace.check(a.dir.as_deref().unwrap_or("."), false)?;
    let timeout =
        Duration::from_secs(a.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS).clamp(1, MAX_TIMEOUT_SECS));
    let started = Instant::now();
    let (status, output) = run_shell(&a.command, &dir.abs, timeout).await?;
    tools.touched();
    let exit_code = status;
    tools.commands.push(CommandRun {
        command: a.command.clone(),
        dir: if dir.rel.is_empty() { ".".into() } else { dir.rel.clone() },
        exit_code,
        duration: started.elapsed(),
        error_excerpt: if exit_code == Some(0) {
            String::new()
        } else {
            crate::remediate::first_lines(&output, 20)
        },
    });
    let head = match exit_code {
        Some(0) => "exit status 0".to_owned(),
        Some(c) => format!("exit status {c}"),
        None => format!("killed after {} s", timeout.as_secs()),
    };
    let out = ToolOutput { content: format!("{head}\n{output}"), is_error: exit_code != Some(0) };
    Ok(out)
}

/// Runs `command` with `sh -c` in `dir`; the exit code (`None` when killed
/// at the timeout) and the capped, merged output.
pub(crate) async fn run_shell(
    command: &str,
    dir: &std::path::Path,
    timeout: Duration,
) -> Result<(Option<i32>, String), String> {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, _) in std::env::vars_os() {
        if withheld(&name.to_string_lossy()) {
            cmd.env_remove(&name);
        }
    }
    cmd.process_group(0).kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start sh: {e}"))?;
    let pid = child.id();
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let collect = async {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let read_out = async {
            if let Some(o) = out.as_mut() {
                let _ = o.read_to_end(&mut a).await;
            }
        };
        let read_err = async {
            if let Some(e) = err.as_mut() {
                let _ = e.read_to_end(&mut b).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (a, b, status)
    };
    match tokio::time::timeout(timeout, collect).await {
        Ok((a, b, status)) => {
            let code = status.map_err(|e| format!("cannot wait for sh: {e}"))?.code();
            let mut text = String::from_utf8_lossy(&a).into_owned();
            if !b.is_empty() {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&String::from_utf8_lossy(&b));
            }
            Ok((code.or(Some(-1)), cap(&text)))
        }
        Err(_) => {
            // The group: `sh` and whatever it started. Signalled directly,
            // never through the `kill` program: procps-ng 4.0's `kill -KILL
            // -PGID` signalled far more than the group here (it took down
            // every process of the session that ran the tests).
            if let Some(pgid) = pid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 1) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            Ok((None, String::new()))
        }
    }
}

/// The first and last [`OUTPUT_HALF`] bytes, with what was cut said.
fn cap(text: &str) -> String {
    if text.len() <= 2 * OUTPUT_HALF {
        return text.to_owned();
    }
    let mut head_end = OUTPUT_HALF;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - OUTPUT_HALF;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    format!("{}\n… {} bytes cut …\n{}", &text[..head_end], tail_start - head_end, &text[tail_start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn output_exit_status_and_timeout() {
        let dir = tempfile::tempdir().expect("dir");
        let (code, out) = run_shell("echo hi; echo err >&2; exit 3", dir.path(), Duration::from_secs(10))
            .await
            .expect("ran");
        assert_eq!(code, Some(3));
        assert!(out.contains("hi") && out.contains("err"), "{out}");
        let (code, _) = run_shell("sleep 30", dir.path(), Duration::from_millis(300)).await.expect("ran");
        assert_eq!(code, None);
        // What the command started in the background dies with it.
        let pidfile = dir.path().join("pid");
        let (code, _) = run_shell("sleep 30 & echo $! > pid; wait", dir.path(), Duration::from_millis(500))
            .await
            .expect("ran");
        assert_eq!(code, None);
        let pid = std::fs::read_to_string(&pidfile).expect("pid").trim().to_owned();
        let alive = |pid: &str| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.split_whitespace().nth(2).is_none_or(|state| state != "Z"))
                .unwrap_or(false)
        };
        let mut gone = false;
        for _ in 0..100 {
            if !alive(&pid) {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gone, "the background sleep {pid} outlived the timeout");
    }

    #[tokio::test]
    async fn capabilities_are_not_in_the_environment() {
        let dir = tempfile::tempdir().expect("dir");
        // The test's own environment may not have one; the rule is what is checked.
        assert!(withheld("PP_CAP_MODEL") && withheld("GITHUB_TOKEN") && !withheld("PATH"));
        let (_, out) = run_shell("env", dir.path(), Duration::from_secs(10)).await.expect("ran");
        assert!(!out.contains("PP_CAP_"), "{out}");
    }

    #[test]
    fn long_output_keeps_both_ends() {
        let text = format!("START{}END", "x".repeat(100_000));
        let c = cap(&text);
        assert!(c.starts_with("START") && c.ends_with("END") && c.len() < 30_000);
    }
}
