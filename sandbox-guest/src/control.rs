//! The guest agent's gRPC service: receive the workspace, run the task,
//! stream what happens, hand back the results, power off.
//!
//! It must never read anything from the host but the RPCs themselves, and
//! never pass the agent more environment than the RunSpec names (plus PATH
//! and friends). Results are files on the scratch disc, named and hashed in
//! RunFinished so the host can check what it fetches.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use patchpilot_proto::v1::guest_control_server::GuestControl;
use patchpilot_proto::v1::{
    ArtifactInfo, ArtifactRequest, Chunk, HelloReply, HelloRequest, Output, OutputStream, Phase,
    PrepareReply, PrepareRequest, PutWorkspaceReply, RunEvent, RunFinished, RunSpec, ShutdownReply,
    ShutdownRequest, run_event,
};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Mutex, mpsc};
use tonic::{Request, Response, Status, Streaming};

/// Chunk size for artifacts on the wire.
const CHUNK: usize = 1 << 20;
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where the service keeps things; the real guest uses [`Paths::guest`],
/// tests point it at a temporary folder.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The workspace the task runs in.
    pub workspace: PathBuf,
    /// Scratch space for uploads and results.
    pub scratch: PathBuf,
}

impl Paths {
    /// The layout inside the VM.
    pub fn guest() -> Self {
        Paths { workspace: PathBuf::from("/workspace"), scratch: PathBuf::from("/mnt/scratch") }
    }
}

#[derive(Debug, Default)]
struct State {
    base_commit: Option<String>,
    running: bool,
    artifacts: HashMap<String, PathBuf>,
    /// Prepare was called (once only).
    prepared: bool,
    /// dockerd started by Prepare, and the registries it was given.
    prepared_docker: Option<(tokio::process::Child, Vec<String>)>,
}

/// The service.
#[derive(Debug, Clone)]
pub struct Control {
    paths: Paths,
    egress: crate::serve::EgressState,
    state: Arc<Mutex<State>>,
    /// Told when Shutdown is called.
    shutdown: mpsc::Sender<()>,
}

impl Control {
    /// A service working in `paths`; `egress` says whether in-guest
    /// egress is up (Hello reports a failure, Run waits for it).
    pub fn new(paths: Paths, egress: crate::serve::EgressState, shutdown: mpsc::Sender<()>) -> Self {
        Control { paths, egress, state: Arc::default(), shutdown }
    }
}

fn uptime_ms() -> u64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()))
        .map(|secs| (secs * 1000.0) as u64)
        .unwrap_or(0)
}

/// Runs git with hooks, pagers and user config out of the picture: the
/// workspace is untrusted and its config must not run code. Automatic
/// maintenance is off too: after a commit git would start a detached
/// `git maintenance run` (two more processes, about 250 ms under TCG),
/// which then competes with the task for the VM's CPUs and repacks the
/// repository under it.
async fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = tokio::process::Command::new("git")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "safe.directory=*",
            "-c",
            "user.name=PatchPilot",
            "-c",
            "user.email=sandbox@patchpilot.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "maintenance.auto=false",
            "-c",
            "gc.auto=0",
        ])
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // Not trimmed: a binary patch ends in a blank line git apply needs.
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Records the workspace as received, so the patch is exactly what the
/// task changed, uncommitted changes the host shipped included in the base.
async fn snapshot_base(workspace: &Path) -> Result<String, String> {
    if !workspace.join(".git").exists() {
        git(workspace, &["init", "-q"]).await?;
    }
    git(workspace, &["add", "-A", "--", "."]).await?;
    git(
        workspace,
        &["commit", "-q", "--allow-empty", "--no-verify", "-m", "patchpilot: workspace as received"],
    )
    .await?;
    // The commit's id from the files git has just written: a process start
    // is the dearest thing in a TCG guest (about 120 ms), and this sits
    // between a warm VM's take and the command.
    match head_from_files(&workspace.join(".git")) {
        Some(id) => Ok(id),
        None => Ok(git(workspace, &["rev-parse", "HEAD"]).await?.trim().to_owned()),
    }
}

/// HEAD's commit id read from `git_dir`, or `None` where it is not a
/// plain loose ref or detached id (a `.git` file, a packed ref, a symlink):
/// the caller then asks git.
fn head_from_files(git_dir: &Path) -> Option<String> {
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let id = match head.trim().strip_prefix("ref: ") {
        Some(name) => {
            let name = Path::new(name);
            // Only refs/…, with no way out of the git folder.
            if !name.starts_with("refs") || !name.components().all(|c| matches!(c, Component::Normal(_))) {
                return None;
            }
            std::fs::read_to_string(git_dir.join(name)).ok()?
        }
        None => head,
    };
    let id = id.trim();
    let hex = matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then(|| id.to_owned())
}

fn safe_relative(dir: &str) -> Option<PathBuf> {
    let path = Path::new(dir);
    path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)).then(|| path.to_owned())
}

async fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = tokio::fs::File::open(path).await?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((size, hex::encode(h.finalize())))
}

fn event(e: run_event::Event) -> Result<RunEvent, Status> {
    Ok(RunEvent { event: Some(e) })
}

fn phase(name: &str, state: &str, detail: impl Into<String>) -> Result<RunEvent, Status> {
    event(run_event::Event::Phase(Phase {
        name: name.into(),
        state: state.into(),
        detail: detail.into(),
        uptime_ms: uptime_ms(),
    }))
}

type EventStream = Pin<Box<dyn Stream<Item = Result<RunEvent, Status>> + Send>>;
type ChunkStream = Pin<Box<dyn Stream<Item = Result<Chunk, Status>> + Send>>;

fn receiver_stream<T: Send + 'static>(rx: mpsc::Receiver<T>) -> Pin<Box<dyn Stream<Item = T> + Send>> {
    Box::pin(futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) }))
}

async fn pump(
    mut reader: impl AsyncRead + Unpin,
    stream: OutputStream,
    tx: mpsc::Sender<Result<RunEvent, Status>>,
    transcript: Arc<Mutex<(tokio::fs::File, u64, u64)>>,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        {
            let mut t = transcript.lock().await;
            let (file, written, cap) = &mut *t;
            let room = cap.saturating_sub(*written) as usize;
            let take = room.min(n);
            if take > 0 && file.write_all(&buf[..take]).await.is_ok() {
                *written += take as u64;
            }
        }
        let out = Output { stream: stream.into(), data: buf[..n].to_vec() };
        // A host that stopped listening does not stop the command: the
        // transcript still records it.
        let _ = tx.send(event(run_event::Event::Output(out))).await;
    }
}

/// Sends a heartbeat every [`HEARTBEAT_INTERVAL`](crate::liveness::HEARTBEAT_INTERVAL)
/// until aborted or the host stops listening.
async fn heartbeat(tx: mpsc::Sender<Result<RunEvent, Status>>) {
    let mut tick = tokio::time::interval(crate::liveness::HEARTBEAT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let beat = crate::liveness::sample(uptime_ms());
        if tx.send(event(run_event::Event::Heartbeat(beat))).await.is_err() {
            return;
        }
    }
}

impl Control {
    /// Runs the task, streaming its events on `tx`, and returns its
    /// RunFinished, which the caller sends last.
    async fn run_task(
        &self,
        spec: RunSpec,
        tx: mpsc::Sender<Result<RunEvent, Status>>,
    ) -> Result<RunEvent, Status> {
        let finished = |exit_code: i32, signal: i32, error: String, artifacts: Vec<ArtifactInfo>| {
            event(run_event::Event::Finished(RunFinished { exit_code, signal, error, artifacts }))
        };
        let base = self.state.lock().await.base_commit.clone();
        let Some(base) = base else {
            return finished(-1, 0, "no workspace was uploaded".into(), vec![]);
        };
        let Some(context) = safe_relative(&spec.context_dir) else {
            return finished(
                -1,
                0,
                format!("context_dir {:?} leaves the workspace", spec.context_dir),
                vec![],
            );
        };
        let Some((program, args)) = spec.command.split_first() else {
            return finished(-1, 0, "empty command".into(), vec![]);
        };

        // The network must be in place before anything runs; whether a run
        // may go on without it is the host's call.
        let mut egress = self.egress.clone();
        let state = egress.wait_for(Option::is_some).await.map(|s| s.clone()).unwrap_or(None);
        match state {
            Some(Ok(())) => {
                let _ = tx.send(phase("egress", "ready", "")).await;
            }
            Some(Err(e)) => {
                let _ = tx.send(phase("egress", "failed", e)).await;
            }
            None => {
                let _ = tx.send(phase("egress", "failed", "egress set-up ended without a result")).await;
            }
        }

        // A dockerd that Prepare started serves the run when it was given
        // the same registries and still answers; otherwise it goes, so the
        // command never finds a daemon it did not ask for.
        let mut _dockerd = None;
        if let Some((mut child, registries)) = self.state.lock().await.prepared_docker.take() {
            if spec.docker && registries == spec.insecure_registries && crate::docker::ping().await {
                _dockerd = Some(child);
                let _ = tx.send(phase("docker", "ready", "started before the run")).await;
            } else {
                let _ = child.kill().await;
            }
        }
        if spec.docker && _dockerd.is_none() {
            let _ = tx.send(phase("docker", "started", "")).await;
            match crate::docker::start(&spec.insecure_registries, Duration::from_secs(120)).await {
                Ok(child) => {
                    _dockerd = Some(child);
                    let _ = tx.send(phase("docker", "ready", "")).await;
                }
                Err(e) => {
                    let _ = tx.send(phase("docker", "failed", e.clone())).await;
                    return finished(-1, 0, format!("docker: {e}"), vec![]);
                }
            }
        }

        let artifacts_dir = self.paths.scratch.join("artifacts");
        if let Err(e) = tokio::fs::create_dir_all(&artifacts_dir).await {
            return finished(-1, 0, format!("creating {}: {e}", artifacts_dir.display()), vec![]);
        }
        let transcript_path = artifacts_dir.join("transcript");
        let transcript = match tokio::fs::File::create(&transcript_path).await {
            Ok(f) => Arc::new(Mutex::new((f, 0u64, spec.output_bytes.max(1)))),
            Err(e) => {
                return finished(-1, 0, format!("creating the transcript: {e}"), vec![]);
            }
        };

        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .current_dir(self.paths.workspace.join(context))
            .env_clear()
            .env("PATH", PATH)
            .env("HOME", "/root")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if spec.docker {
            cmd.env("DOCKER_HOST", format!("unix://{}", crate::docker::SOCKET));
        }
        cmd.envs(&spec.env);
        let _ = tx.send(phase("command", "started", spec.command.join(" "))).await;
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                return finished(127, 0, format!("starting {program}: {e}"), vec![]);
            }
        };
        let mut pumps = Vec::new();
        if let Some(out) = child.stdout.take() {
            pumps.push(tokio::spawn(pump(out, OutputStream::Stdout, tx.clone(), transcript.clone())));
        }
        if let Some(err) = child.stderr.take() {
            pumps.push(tokio::spawn(pump(err, OutputStream::Stderr, tx.clone(), transcript.clone())));
        }
        let status = child.wait().await;
        for p in pumps {
            let _ = p.await;
        }
        let _ = transcript.lock().await.0.flush().await;
        let (exit_code, signal) = match &status {
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt;
                (s.code().unwrap_or(-1), s.signal().unwrap_or(0))
            }
            Err(_) => (-1, 0),
        };
        let _ = tx.send(phase("command", "finished", format!("exit {exit_code}"))).await;

        let _ = tx.send(phase("artifacts", "started", "")).await;
        let mut error = String::new();
        let patch_path = artifacts_dir.join("patch");
        // Everything but the task's own inputs and outputs under .patchpilot/.
        let patch = async {
            git(&self.paths.workspace, &["add", "-A", "--", ".", ":(exclude).patchpilot"]).await?;
            git(
                &self.paths.workspace,
                &["diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--no-renames", &base],
            )
            .await
        }
        .await;
        match patch {
            Ok(text) => {
                if let Err(e) = tokio::fs::write(&patch_path, text).await {
                    error = format!("writing the patch: {e}");
                }
            }
            Err(e) => error = e,
        }
        let mut files = vec![("patch", patch_path), ("transcript", transcript_path)];
        // The agent's report, retrospective and model session from
        // `.patchpilot/` (the contracts are `patchpilot-model`'s; the host
        // parses and clips them), copied without following links.
        let (workspace, dir, cap) = (self.paths.workspace.clone(), artifacts_dir.clone(), spec.output_bytes);
        match tokio::task::spawn_blocking(move || crate::artifacts::collect(&workspace, &dir, cap)).await {
            Ok((offered, refused)) => {
                files.extend(offered);
                for reason in refused {
                    let _ = tx.send(phase("artifacts", "skipped", reason)).await;
                }
            }
            Err(e) => error = format!("copying the artifacts of .patchpilot/: {e}"),
        }
        let mut infos = Vec::new();
        let mut state = self.state.lock().await;
        for (name, path) in files {
            if !path.exists() {
                continue;
            }
            match hash_file(&path).await {
                Ok((size, sha256)) => {
                    infos.push(ArtifactInfo { name: name.into(), size, sha256 });
                    state.artifacts.insert(name.into(), path);
                }
                Err(e) => error = format!("hashing {name}: {e}"),
            }
        }
        state.running = false;
        drop(state);
        let _ = tx.send(phase("artifacts", "finished", "")).await;
        finished(exit_code, signal, error, infos)
    }
}

#[tonic::async_trait]
impl GuestControl for Control {
    async fn hello(&self, _: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        let kernel = nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Response::new(HelloReply {
            agent_version: env!("CARGO_PKG_VERSION").into(),
            kernel,
            uptime_ms: uptime_ms(),
            egress_error: match &*self.egress.borrow() {
                Some(Err(e)) => e.clone(),
                _ => String::new(),
            },
        }))
    }

    async fn prepare(&self, request: Request<PrepareRequest>) -> Result<Response<PrepareReply>, Status> {
        let request = request.into_inner();
        {
            let mut state = self.state.lock().await;
            if state.prepared || state.base_commit.is_some() || state.running {
                return Err(Status::failed_precondition("Prepare comes once, before the workspace"));
            }
            state.prepared = true;
        }
        if !request.docker {
            return Ok(Response::new(PrepareReply { docker_ms: 0 }));
        }
        let started = std::time::Instant::now();
        let child = crate::docker::start(&request.insecure_registries, Duration::from_secs(120))
            .await
            .map_err(|e| Status::unavailable(format!("docker: {e}")))?;
        let docker_ms = started.elapsed().as_millis() as u64;
        self.state.lock().await.prepared_docker = Some((child, request.insecure_registries));
        Ok(Response::new(PrepareReply { docker_ms }))
    }

    async fn put_workspace(
        &self,
        request: Request<Streaming<Chunk>>,
    ) -> Result<Response<PutWorkspaceReply>, Status> {
        if self.state.lock().await.base_commit.is_some() {
            return Err(Status::failed_precondition("the workspace was already uploaded"));
        }
        let mut stream = request.into_inner();
        tokio::fs::create_dir_all(&self.paths.scratch)
            .await
            .map_err(|e| Status::internal(format!("scratch: {e}")))?;
        let tar_path = self.paths.scratch.join("workspace.tar");
        let mut file = tokio::fs::File::create(&tar_path)
            .await
            .map_err(|e| Status::internal(format!("{}: {e}", tar_path.display())))?;
        let mut bytes = 0u64;
        while let Some(chunk) = stream.message().await? {
            bytes += chunk.data.len() as u64;
            file.write_all(&chunk.data)
                .await
                .map_err(|e| Status::internal(format!("writing the workspace: {e}")))?;
        }
        file.flush().await.map_err(|e| Status::internal(format!("writing the workspace: {e}")))?;
        drop(file);
        let workspace = self.paths.workspace.clone();
        let tar_for_unpack = tar_path.clone();
        tokio::task::spawn_blocking(move || -> Result<(), String> {
            std::fs::create_dir_all(&workspace).map_err(|e| format!("{}: {e}", workspace.display()))?;
            let file = std::fs::File::open(&tar_for_unpack).map_err(|e| e.to_string())?;
            let mut archive = tar::Archive::new(file);
            archive.set_preserve_permissions(true);
            archive.set_overwrite(true);
            // `unpack` refuses entries that would land outside the folder.
            archive.unpack(&workspace).map_err(|e| format!("unpacking the workspace: {e}"))
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(Status::invalid_argument)?;
        let _ = tokio::fs::remove_file(&tar_path).await;
        let base = snapshot_base(&self.paths.workspace).await.map_err(Status::internal)?;
        self.state.lock().await.base_commit = Some(base.clone());
        Ok(Response::new(PutWorkspaceReply { bytes, base_commit: base }))
    }

    type RunStream = EventStream;

    async fn run(&self, request: Request<RunSpec>) -> Result<Response<Self::RunStream>, Status> {
        {
            let mut state = self.state.lock().await;
            if state.running || !state.artifacts.is_empty() {
                return Err(Status::failed_precondition("a run already happened in this VM"));
            }
            state.running = true;
        }
        let spec = request.into_inner();
        let (tx, rx) = mpsc::channel(256);
        let this = self.clone();
        tokio::spawn(async move {
            let beats = tokio::spawn(heartbeat(tx.clone()));
            let finished = this.run_task(spec, tx.clone()).await;
            // RunFinished is the stream's last event: no heartbeat after it.
            beats.abort();
            let _ = beats.await;
            let _ = tx.send(finished).await;
        });
        Ok(Response::new(receiver_stream(rx)))
    }

    type GetArtifactStream = ChunkStream;

    async fn get_artifact(
        &self,
        request: Request<ArtifactRequest>,
    ) -> Result<Response<Self::GetArtifactStream>, Status> {
        let name = request.into_inner().name;
        let path = self
            .state
            .lock()
            .await
            .artifacts
            .get(&name)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("no artifact named {name:?}")))?;
        let mut file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| Status::internal(format!("{}: {e}", path.display())))?;
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(async move {
            let mut buf = vec![0u8; CHUNK];
            loop {
                match file.read(&mut buf).await {
                    Ok(0) => return,
                    Ok(n) => {
                        if tx.send(Ok(Chunk { data: buf[..n].to_vec() })).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(Status::internal(e.to_string()))).await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(receiver_stream(rx)))
    }

    async fn shutdown(&self, _: Request<ShutdownRequest>) -> Result<Response<ShutdownReply>, Status> {
        let _ = self.shutdown.try_send(());
        Ok(Response::new(ShutdownReply {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt as _;

    /// A service on a temporary workspace holding `files`, with the
    /// workspace already received (as PutWorkspace leaves it) and egress up.
    async fn service(dir: &Path, files: &[(&str, &str)]) -> Control {
        let paths = Paths { workspace: dir.join("workspace"), scratch: dir.join("scratch") };
        for (name, text) in files {
            let path = paths.workspace.join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
            std::fs::write(path, text).expect("write");
        }
        std::fs::create_dir_all(&paths.workspace).expect("workspace");
        let base = snapshot_base(&paths.workspace).await.expect("snapshot");
        let (_egress_tx, egress) = tokio::sync::watch::channel(Some(Ok(())));
        let (shutdown, _) = mpsc::channel(1);
        let control = Control::new(paths, egress, shutdown);
        control.state.lock().await.base_commit = Some(base);
        control
    }

    /// Runs `sh -c script` and returns the phases and the RunFinished.
    async fn run(control: &Control, script: &str) -> (Vec<Phase>, RunFinished) {
        let spec = RunSpec {
            command: vec!["sh".into(), "-c".into(), script.into()],
            output_bytes: 1 << 20,
            ..RunSpec::default()
        };
        let mut events = control.run(Request::new(spec)).await.expect("run").into_inner();
        let mut phases = Vec::new();
        while let Some(event) = events.next().await {
            match event.expect("event").event {
                Some(run_event::Event::Phase(p)) => phases.push(p),
                Some(run_event::Event::Finished(done)) => return (phases, done),
                _ => {}
            }
        }
        panic!("the run stream ended without RunFinished");
    }

    async fn fetch(control: &Control, name: &str) -> Vec<u8> {
        let request = Request::new(ArtifactRequest { name: name.into() });
        let mut chunks = control.get_artifact(request).await.expect("artifact").into_inner();
        let mut bytes = Vec::new();
        while let Some(chunk) = chunks.next().await {
            bytes.extend(chunk.expect("chunk").data);
        }
        bytes
    }

    #[tokio::test]
    async fn the_session_transcript_is_offered_hashed_and_kept_out_of_the_patch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let control = service(dir.path(), &[("README.md", "hello\n")]).await;
        let script = "mkdir -p .patchpilot && printf '{\"type\":\"session\"}\\n' > .patchpilot/transcript.jsonl \
                      && echo bye > README.md";
        let (_, done) = run(&control, script).await;
        assert_eq!((done.exit_code, done.error.as_str()), (0, ""), "{done:?}");
        let session = done.artifacts.iter().find(|a| a.name == "session").expect("a session artifact");
        let bytes = fetch(&control, "session").await;
        assert_eq!(bytes, b"{\"type\":\"session\"}\n");
        assert_eq!(
            (session.size, session.sha256.as_str()),
            (bytes.len() as u64, hex::encode(Sha256::digest(&bytes)).as_str())
        );
        let patch = String::from_utf8(fetch(&control, "patch").await).expect("text");
        assert!(patch.contains("+bye") && !patch.contains("transcript.jsonl"), "{patch}");
    }

    #[tokio::test]
    async fn a_run_without_a_session_offers_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let control = service(dir.path(), &[("README.md", "hello\n")]).await;
        let (_, done) = run(&control, "mkdir -p .patchpilot && : > .patchpilot/transcript.jsonl").await;
        let names: Vec<&str> = done.artifacts.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["patch", "transcript"], "an empty transcript is no artifact");
    }

    #[tokio::test]
    async fn a_run_sends_heartbeats_and_ends_with_run_finished() {
        let dir = tempfile::tempdir().expect("tempdir");
        let control = service(dir.path(), &[("README.md", "hello\n")]).await;
        let spec = RunSpec { command: vec!["true".into()], output_bytes: 1 << 20, ..RunSpec::default() };
        let events: Vec<_> = control
            .run(Request::new(spec))
            .await
            .expect("run")
            .into_inner()
            .map(|e| e.expect("event").event)
            .collect()
            .await;
        // The first beat goes out as the run starts, however short it is.
        let beats: Vec<_> = events
            .iter()
            .filter_map(|e| if let Some(run_event::Event::Heartbeat(b)) = e { Some(b) } else { None })
            .collect();
        assert!(!beats.is_empty(), "{events:?}");
        assert!(beats.iter().all(|b| b.processes_started > 0), "{beats:?}");
        assert!(matches!(events.last(), Some(Some(run_event::Event::Finished(_)))), "{events:?}");
    }

    #[tokio::test]
    async fn a_symlinked_session_is_not_read_and_the_run_says_why() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "not the workspace's").expect("write");
        let control = service(dir.path(), &[("README.md", "hello\n")]).await;
        let script =
            format!("mkdir -p .patchpilot && ln -s {} .patchpilot/transcript.jsonl", outside.display());
        let (phases, done) = run(&control, &script).await;
        assert!(done.artifacts.iter().all(|a| a.name != "session"), "{:?}", done.artifacts);
        assert_eq!(done.error, "", "a refused artifact does not fail the run");
        let skipped: Vec<&Phase> = phases.iter().filter(|p| p.state == "skipped").collect();
        assert_eq!(skipped.len(), 1, "{phases:?}");
        assert!(
            skipped[0].detail.contains("session") && skipped[0].detail.contains("symbolic link"),
            "{skipped:?}"
        );
        let refused = control.get_artifact(Request::new(ArtifactRequest { name: "session".into() })).await;
        assert_eq!(refused.err().map(|s| s.code()), Some(tonic::Code::NotFound));
    }

    /// The base commit read from the files is git's own HEAD, on a fresh
    /// repository and on one the host shipped with a detached HEAD; a
    /// packed ref (no loose file) and a ref leaving the folder are left to
    /// git.
    #[tokio::test]
    async fn the_base_commit_read_from_files_is_heads_and_packed_refs_go_to_git() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fresh = dir.path().join("fresh");
        std::fs::create_dir_all(&fresh).expect("folder");
        std::fs::write(fresh.join("a.txt"), "a\n").expect("write");
        let base = snapshot_base(&fresh).await.expect("snapshot");
        assert_eq!(base, git(&fresh, &["rev-parse", "HEAD"]).await.expect("rev-parse").trim());

        git(&fresh, &["checkout", "-q", "--detach"]).await.expect("detach");
        assert_eq!(head_from_files(&fresh.join(".git")).as_deref(), Some(base.as_str()));

        git(&fresh, &["switch", "-q", "-c", "packed"]).await.expect("branch");
        git(&fresh, &["pack-refs", "--all"]).await.expect("pack");
        assert!(!fresh.join(".git/refs/heads/packed").exists());
        assert_eq!(head_from_files(&fresh.join(".git")), None);
        let again = snapshot_base(&fresh).await.expect("snapshot of a packed ref");
        assert_eq!(again, git(&fresh, &["rev-parse", "HEAD"]).await.expect("rev-parse").trim());

        std::fs::write(fresh.join(".git/HEAD"), "ref: refs/../../outside\n").expect("write");
        assert_eq!(head_from_files(&fresh.join(".git")), None);
    }

    #[test]
    fn context_dirs_stay_inside_the_workspace() {
        assert!(safe_relative("").is_some());
        assert!(safe_relative("app/sub").is_some());
        assert!(safe_relative("../etc").is_none());
        assert!(safe_relative("/etc").is_none());
        assert!(safe_relative("a/../../b").is_none());
    }
}
