//! The in-memory git credential helper: how the controller's own git gets a
//! forge token for one fetch or push without the token touching disk, a
//! command line, or any process environment.
//!
//! Two halves:
//! - [`with_credential`] (in the controller) creates a private folder
//!   (0700), binds a Unix socket in it and serves the credential from
//!   memory to processes of the controller's own uid (`SO_PEERCRED`), and
//!   only for the remote it was made for (`credential.useHttpPath=true`
//!   makes git name the path). It hands back the `-c` options that make git
//!   use the helper and nothing else, and the one environment variable that
//!   names the socket (a path, not a secret). Dropping the
//!   [`CredentialGuard`] stops serving and removes the folder.
//! - [`credential_helper_main`] (the controller binary's hidden
//!   `git-credential` subcommand, which git runs as its helper) implements
//!   git's helper protocol: for `get` it forwards git's request over the
//!   socket and prints the answer; `store` and `erase` do nothing, as there
//!   is nothing to store.
//!
//! It must never write the token to a file, log it, put it in an argument
//! list or environment, or answer for a host or path other than the one
//! remote.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::process::Command;

use crate::{Error, GitCredential};
use patchpilot_git::Git;

/// The hidden subcommand of the controller binary that runs the helper.
pub const SUBCOMMAND: &str = "git-credential";
/// The environment variable naming the socket, set on git only.
pub const SOCKET_ENV: &str = "PP_GIT_CREDENTIAL_SOCKET";

/// The largest request or answer exchanged; git's are a few hundred bytes.
const MESSAGE_LIMIT: u64 = 64 * 1024;
/// How long one exchange may take before the helper or the server gives up.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// `sockaddr_un.sun_path` holds 108 bytes with the terminating NUL.
const SOCKET_PATH_LIMIT: usize = 107;

/// Serving a credential; dropping it stops serving and removes the folder.
#[derive(Debug)]
pub struct CredentialGuard {
    socket: PathBuf,
    args: Vec<String>,
    task: tokio::task::JoinHandle<()>,
    // Last: dropped after the task is aborted (see `Drop`).
    dir: tempfile::TempDir,
}

impl CredentialGuard {
    /// The `-c` options for git, in order: reset any configured helper
    /// (global, system or the repository's own), use ours, send the path,
    /// and use no askpass program. They go before git's subcommand.
    pub fn git_args(&self) -> &[String] {
        &self.args
    }

    /// The environment variable git (and so the helper) needs.
    pub fn env(&self) -> (&'static str, &Path) {
        (SOCKET_ENV, &self.socket)
    }

    /// The private folder holding the socket.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A hardened git command for `args` (e.g. `["push", "origin", …]`)
    /// that uses this credential: [`Git::command`] with
    /// [`git_args`](Self::git_args) first and [`env`](Self::env) set. Run it
    /// with [`Git::finish`]; keep the guard alive until it has finished.
    pub fn command(&self, git: &Git, args: &[&str]) -> Command {
        let mut all: Vec<&str> = self.args.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        let mut cmd = git.command(&all);
        cmd.env(SOCKET_ENV, &self.socket);
        cmd
    }
}

impl Drop for CredentialGuard {
    fn drop(&mut self) {
        // The task holds the only copy of the token this guard made; the
        // folder (with the socket) is removed when `dir` drops next.
        self.task.abort();
    }
}

/// Serves `credential` for `remote_url` to git runs configured by the
/// returned guard, with the controller binary itself as the helper
/// (`<current exe> git-credential`).
pub async fn with_credential(remote_url: &str, credential: &GitCredential) -> Result<CredentialGuard, Error> {
    let exe = std::env::current_exe().map_err(|e| Error::Local {
        context: "finding the controller binary".into(),
        message: e.to_string(),
    })?;
    with_credential_helper(remote_url, credential, &helper_command(&exe, &[SUBCOMMAND])).await
}

/// [`with_credential`] with another helper command line (as git runs it
/// through `sh -c`, followed by the operation); for tests and embedders
/// whose binary has no `git-credential` subcommand. Build it with
/// [`helper_command`].
pub async fn with_credential_helper(
    remote_url: &str,
    credential: &GitCredential,
    helper: &str,
) -> Result<CredentialGuard, Error> {
    let target = Target::from_url(remote_url)?;
    let bad = |s: &str| s.contains(['\n', '\0']);
    if bad(&credential.username) || bad(credential.password.expose()) {
        // git's protocol is line based; such a value could inject keys.
        return Err(Error::Invalid("a git credential must not contain newlines or NUL".into()));
    }
    let local = |message: String| Error::Local { context: "git credential helper".into(), message };
    let dir = tempfile::Builder::new()
        .prefix("pp-git-cred-")
        .tempdir()
        .map_err(|e| local(format!("creating a private folder: {e}")))?;
    // tempfile already makes it 0700; said again because the socket's
    // safety rests on it.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .map_err(|e| local(format!("restricting {}: {e}", dir.path().display())))?;
    let socket = dir.path().join("socket");
    if socket.as_os_str().len() > SOCKET_PATH_LIMIT {
        return Err(local(format!("socket path {} is too long; set TMPDIR shorter", socket.display())));
    }
    let listener =
        UnixListener::bind(&socket).map_err(|e| local(format!("binding {}: {e}", socket.display())))?;
    let answer = format!("username={}\npassword={}\n", credential.username, credential.password.expose());
    let uid = nix::unistd::getuid().as_raw();
    let task = tokio::spawn(serve(listener, target, answer, uid));
    let args = vec![
        "-c".to_owned(),
        "credential.helper=".to_owned(),
        "-c".to_owned(),
        format!("credential.helper=!{helper}"),
        "-c".to_owned(),
        "credential.useHttpPath=true".to_owned(),
        "-c".to_owned(),
        "core.askPass=".to_owned(),
    ];
    Ok(CredentialGuard { socket, args, task, dir })
}

/// A shell command line running `program` with `args`, quoted for `sh`.
pub fn helper_command(program: &Path, args: &[&str]) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let mut line = quote(&program.to_string_lossy());
    for arg in args {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    line
}

/// The one remote a guard answers for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    protocol: String,
    host: String,
    path: String,
}

impl Target {
    fn from_url(url: &str) -> Result<Target, Error> {
        let invalid = || Error::Invalid(format!("{url:?} is not an http(s) remote URL"));
        let (protocol, rest) = url.split_once("://").ok_or_else(invalid)?;
        if protocol != "https" && protocol != "http" {
            return Err(invalid());
        }
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        if host.is_empty() || host.contains('@') {
            // Credentials never go in the URL.
            return Err(invalid());
        }
        Ok(Target { protocol: protocol.to_owned(), host: host.to_ascii_lowercase(), path: normal_path(path) })
    }

    /// Whether git's request (`key=value` lines) is for this remote.
    fn matches(&self, request: &str) -> bool {
        let mut protocol = None;
        let mut host = None;
        let mut path = None;
        for line in request.lines() {
            match line.split_once('=') {
                Some(("protocol", v)) => protocol = Some(v),
                Some(("host", v)) => host = Some(v.to_ascii_lowercase()),
                Some(("path", v)) => path = Some(normal_path(v)),
                _ => {}
            }
        }
        protocol == Some(self.protocol.as_str())
            && host.as_deref() == Some(self.host.as_str())
            && path.as_deref() == Some(self.path.as_str())
    }
}

fn normal_path(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or("");
    path.trim_matches('/').trim_end_matches(".git").trim_end_matches('/').to_owned()
}

/// Answers requests one connection at a time until aborted.
async fn serve(listener: UnixListener, target: Target, answer: String, uid: u32) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "git credential socket: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        match tokio::time::timeout(EXCHANGE_TIMEOUT, answer_one(stream, &target, &answer, uid)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "git credential socket: exchange failed"),
            Err(_) => tracing::warn!("git credential socket: a request timed out"),
        }
    }
}

async fn answer_one(mut stream: UnixStream, target: &Target, answer: &str, uid: u32) -> std::io::Result<()> {
    let peer = stream.peer_cred()?.uid();
    if peer != uid {
        // Another user on the host reached the socket despite the 0700
        // folder; say nothing.
        tracing::warn!(peer_uid = peer, "git credential socket: refused a request from another user");
        return Ok(());
    }
    let mut request = Vec::new();
    (&mut stream).take(MESSAGE_LIMIT).read_to_end(&mut request).await?;
    let request = String::from_utf8_lossy(&request);
    if target.matches(&request) {
        stream.write_all(answer.as_bytes()).await?;
    } else {
        // Tell git to stop: no other helper, no prompt.
        let asked: Vec<&str> =
            request.lines().filter(|l| l.starts_with("host=") || l.starts_with("protocol=")).collect();
        tracing::warn!(?asked, "git credential socket: refused a request for another remote");
        stream.write_all(b"quit=1\n").await?;
    }
    stream.shutdown().await
}

/// A failure of the helper process.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HelperError(String);

/// The `git-credential` subcommand: `args` are what follows it (git passes
/// the operation: `get`, `store` or `erase`). Reads git's request from stdin
/// and, for `get`, prints the answer from the socket named in
/// `PP_GIT_CREDENTIAL_SOCKET`.
pub fn credential_helper_main<I, S>(args: I) -> ExitCode
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let operation = args.into_iter().next().map(|a| a.as_ref().to_string_lossy().into_owned());
    let socket = std::env::var_os(SOCKET_ENV).map(PathBuf::from);
    let result = run_helper(
        operation.as_deref(),
        socket.as_deref(),
        std::io::stdin().lock(),
        std::io::stdout().lock(),
    );
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // stderr reaches git's stderr; the message never holds the answer.
            eprintln!("patchpilot git-credential: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The helper protocol itself, over any input and output.
pub fn run_helper(
    operation: Option<&str>,
    socket: Option<&Path>,
    input: impl Read,
    mut output: impl Write,
) -> Result<(), HelperError> {
    let mut request = Vec::new();
    input
        .take(MESSAGE_LIMIT)
        .read_to_end(&mut request)
        .map_err(|e| HelperError(format!("reading git's request: {e}")))?;
    if operation != Some("get") {
        // store, erase, and operations git may add: nothing to do.
        return Ok(());
    }
    let socket = socket.ok_or_else(|| HelperError(format!("{SOCKET_ENV} is not set")))?;
    let mut stream = StdUnixStream::connect(socket)
        .map_err(|e| HelperError(format!("connecting to {}: {e}", socket.display())))?;
    let io = |e: std::io::Error| HelperError(format!("talking to the controller: {e}"));
    stream.set_read_timeout(Some(EXCHANGE_TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(EXCHANGE_TIMEOUT)).map_err(io)?;
    // Only the lines git's protocol defines are forwarded.
    let request = String::from_utf8_lossy(&request);
    let mut forwarded = String::new();
    for line in request.lines().take_while(|l| !l.is_empty()) {
        if line.split_once('=').is_some() {
            forwarded.push_str(line);
            forwarded.push('\n');
        }
    }
    stream.write_all(forwarded.as_bytes()).map_err(io)?;
    stream.shutdown(std::net::Shutdown::Write).map_err(io)?;
    let mut answer = Vec::new();
    (&mut stream).take(MESSAGE_LIMIT).read_to_end(&mut answer).map_err(io)?;
    output
        .write_all(&answer)
        .and_then(|()| output.flush())
        .map_err(|e| HelperError(format!("answering git: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_must_name_the_remote() {
        let t = Target::from_url("https://github.com/acme/api.git").expect("target");
        assert!(t.matches("protocol=https\nhost=github.com\npath=acme/api.git\n"));
        assert!(t.matches("protocol=https\nhost=GitHub.com\npath=acme/api\n"));
        assert!(!t.matches("protocol=https\nhost=github.com\npath=acme/other.git\n"));
        assert!(!t.matches("protocol=https\nhost=evil.example\npath=acme/api.git\n"));
        assert!(!t.matches("protocol=http\nhost=github.com\npath=acme/api.git\n"));
        // Without useHttpPath git sends no path: refused rather than guessed.
        assert!(!t.matches("protocol=https\nhost=github.com\n"));
        assert!(Target::from_url("https://x-access-token:t@github.com/a/b").is_err());
        assert!(Target::from_url("git@github.com:a/b.git").is_err());
    }

    #[test]
    fn store_and_erase_do_nothing() {
        let mut out = Vec::new();
        run_helper(Some("store"), None, &b"protocol=https\nhost=x\npassword=p\n\n"[..], &mut out)
            .expect("store");
        run_helper(Some("erase"), None, &b""[..], &mut out).expect("erase");
        assert!(out.is_empty());
        assert!(run_helper(Some("get"), None, &b"protocol=https\n"[..], &mut out).is_err());
    }

    #[test]
    fn helper_commands_are_shell_quoted() {
        assert_eq!(
            helper_command(Path::new("/opt/p p/it's"), &["git-credential"]),
            r"'/opt/p p/it'\''s' 'git-credential'"
        );
    }
}

/// Runs `git args` (a clone, fetch or push of `remote`) with the remote's
/// credential served from memory for the duration of the call, or plainly
/// when the remote needs none.
pub async fn run_git_remote(
    git: &patchpilot_git::Git,
    remote: &crate::GitRemote,
    args: &[&str],
) -> Result<patchpilot_git::GitOutput, RemoteGitError> {
    match &remote.credential {
        Some(cred) => {
            let guard = with_credential(&remote.url, cred)
                .await
                .map_err(|e| RemoteGitError::Credential(e.to_string()))?;
            let cmd = guard.command(git, args);
            Ok(git.finish(cmd, args, None).await?)
        }
        None => Ok(git.run(args).await?),
    }
}

/// Why a git call against a remote failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteGitError {
    /// git failed.
    #[error(transparent)]
    Git(#[from] patchpilot_git::GitError),
    /// The credential helper could not be set up.
    #[error("git credential helper: {0}")]
    Credential(String),
}
