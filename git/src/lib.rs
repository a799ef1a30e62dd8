//! git, run the one way PatchPilot may run it on a repository: with the
//! repository's own hooks, filters, attributes and config kept from running
//! code, a clean environment, and no prompts.
//!
//! Repositories are untrusted input. A checkout's `.git/config` can name a
//! filter driver, an fsmonitor or a hook, and `.gitattributes` can route
//! files through them; any of those would run code of the repository's
//! choosing with the controller's authority. Every git call goes through
//! [`Git`], which turns them off; nothing in the controller, its vetting or
//! its forges spawns git any other way.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// The environment every git call gets, besides PATH.
const ENV: &[(&str, &str)] = &[
    ("HOME", "/nonexistent"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_ATTR_NOSYSTEM", "1"),
    ("GIT_AUTHOR_NAME", "PatchPilot"),
    ("GIT_AUTHOR_EMAIL", "patchpilot@users.noreply.github.com"),
    ("GIT_COMMITTER_NAME", "PatchPilot"),
    ("GIT_COMMITTER_EMAIL", "patchpilot@users.noreply.github.com"),
    ("LC_ALL", "C"),
];

/// Settings that keep repository-chosen code from running.
const HARDENING: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "core.symlinks=true",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "tag.gpgsign=false",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "submodule.recurse=false",
    "-c",
    "advice.detachedHead=false",
];

/// A failed git call.
#[derive(Debug, thiserror::Error)]
#[error("git {args} in {dir}: {detail}")]
pub struct GitError {
    /// The arguments, as run.
    pub args: String,
    /// The working folder.
    pub dir: String,
    /// Exit status and stderr, or the spawn error.
    pub detail: String,
}

/// What a successful git call printed.
#[derive(Debug, Clone)]
pub struct GitOutput {
    /// Standard output, as bytes (patches may be binary).
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: String,
}

impl GitOutput {
    /// Standard output as trimmed text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim().to_owned()
    }
}

/// git in one working folder.
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
}

impl Git {
    /// git working in `dir` (which need not exist yet for `clone`/`init`).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Git { dir: dir.into() }
    }

    /// The working folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A hardened `git` command with `args`, for callers that need to add
    /// something (a credential helper); run it with [`Git::finish`].
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        cmd.args(HARDENING).args(args).env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd.envs(ENV.iter().copied());
        if self.dir.is_dir() {
            cmd.current_dir(&self.dir);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        cmd
    }

    /// Runs `git args`; a non-zero exit is an error with git's stderr.
    pub async fn run(&self, args: &[&str]) -> Result<GitOutput, GitError> {
        let cmd = self.command(args);
        self.finish(cmd, args, None).await
    }

    /// Runs `git args` with `input` on stdin.
    pub async fn run_with_input(&self, args: &[&str], input: &[u8]) -> Result<GitOutput, GitError> {
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::piped());
        self.finish(cmd, args, Some(input)).await
    }

    /// Runs a command made by [`Git::command`].
    pub async fn finish(
        &self,
        mut cmd: Command,
        args: &[&str],
        input: Option<&[u8]>,
    ) -> Result<GitOutput, GitError> {
        let err =
            |detail: String| GitError { args: args.join(" "), dir: self.dir.display().to_string(), detail };
        let mut child = cmd.spawn().map_err(|e| err(format!("cannot start git: {e}")))?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            // Written while git reads: large patches exceed the pipe buffer.
            let data = input.to_vec();
            let writer = tokio::spawn(async move {
                let _ = stdin.write_all(&data).await;
            });
            let out = child.wait_with_output().await.map_err(|e| err(e.to_string()))?;
            let _ = writer.await;
            return check(out).map_err(err);
        }
        let out = child.wait_with_output().await.map_err(|e| err(e.to_string()))?;
        check(out).map_err(err)
    }
}

fn check(out: std::process::Output) -> Result<GitOutput, String> {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(format!("{}: {}", out.status, stderr.trim()));
    }
    Ok(GitOutput { stdout: out.stdout, stderr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn repository_hooks_do_not_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let git = Git::new(dir.path());
        git.run(&["init", "-q"]).await.expect("init");
        // A hook the repository carries.
        let marker = dir.path().join("ran");
        let hook = dir.path().join(".git/hooks/pre-commit");
        std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).expect("hook");
        std::process::Command::new("chmod").arg("+x").arg(&hook).status().expect("chmod");
        std::fs::write(dir.path().join("a.txt"), "a\n").expect("file");
        git.run(&["add", "-A"]).await.expect("add");
        git.run(&["commit", "-qm", "x"]).await.expect("commit");
        assert!(!marker.exists(), "the pre-commit hook ran");
        let log = git.run(&["log", "--format=%an <%ae>"]).await.expect("log").text();
        assert_eq!(log, "PatchPilot <patchpilot@users.noreply.github.com>");
    }
}
