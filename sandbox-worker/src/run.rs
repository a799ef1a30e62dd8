//! One sandbox run, start to finish: scratch disc, egress forwarder, VM,
//! workspace upload, the task, results, teardown. The worker and
//! `patchpilot sandbox run` both call [`Sandbox::execute`]; there is no
//! second path.
//!
//! Whatever happens (timeout, a guest that never answers, a host error) the
//! run's processes are killed, its sockets closed and its folder removed
//! before `execute` returns. Limits are enforced here, on the host, because
//! the guest is not trusted to enforce them on itself.

use patchpilot_model::io;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use patchpilot_model::RunOutcome;
use patchpilot_proto::v1::guest_control_client::GuestControlClient;
use patchpilot_proto::v1::{
    ArtifactRequest, Chunk, HelloReply, OutputStream, Phase, RunSpec, ShutdownRequest, run_event,
};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tonic::transport::Channel;

use crate::boot::{Booter, GUEST_CID};
use crate::config::{Backend, SandboxConfig};
pub use crate::console::CONSOLE_FAULTS;
use crate::console::{first_console_fault, watch_console};
use crate::egress::forwarder::{self, ForwarderConfig};
pub use crate::error::Error;
use crate::image::{Image, ImageBuilder};
use crate::liveness::Liveness;
use crate::pool::{WarmPool, WarmShape, WarmVm};
use crate::vmm::qemu::{Qemu, Resolved};
use crate::vmm::{Vm, VmSpec, Vmm};

const CHUNK: usize = 1 << 20;
/// Resource limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall time for everything from VM start to the last result byte.
    pub wall_time: Duration,
    /// Virtual CPUs.
    pub vcpus: u32,
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// Scratch disc in MiB.
    pub disk_mib: u32,
    /// Cap on output plus artifacts, in bytes.
    pub output_bytes: u64,
}

/// Where the workspace comes from.
#[derive(Debug, Clone)]
pub enum Workspace {
    /// A folder on the host; sent as a tar stream, symlinks as links.
    Dir(PathBuf),
    /// A plain tar file on the host (the worker gunzips compressed ones first).
    Tar(PathBuf),
}

/// The egress a run gets.
#[derive(Debug, Clone)]
pub struct EgressSetup {
    /// Policy, resolver, dialer and recorder for the forwarder.
    pub config: ForwarderConfig,
}

/// Everything one run needs.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Unique id; names the run folder and the VM.
    pub run_id: String,
    /// The workspace.
    pub workspace: Workspace,
    /// The command and its arguments.
    pub command: Vec<String>,
    /// Folder inside the workspace to run in.
    pub context_dir: String,
    /// The command's environment: per-run capabilities only.
    pub env: BTreeMap<String, String>,
    /// Start dockerd in the guest.
    pub docker: bool,
    /// Registries the guest's dockerd may use over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Limits.
    pub limits: Limits,
    /// Egress; `None` means the guest has no way out at all.
    pub egress: Option<EgressSetup>,
    /// The path to the capability broker: a terminator on the VM's broker
    /// port stamping this run's id. `None`: the port is closed.
    pub broker: Option<patchpilot_broker::terminator::BrokerLink>,
    /// Where the results are written on the host.
    pub out_dir: PathBuf,
}

/// Milestones of a run, for the benchmark and the result.
#[derive(Debug, Clone, Default)]
pub struct Timings {
    /// The run took a booted VM from the warm pool.
    pub warm: bool,
    /// VMs the run booted: 0 for a warm VM, more than 1 when a boot
    /// stopped early under TCG and was retried.
    pub boot_attempts: u32,
    /// From `execute` being called to the VMM process running (a warm VM:
    /// to the VM being taken from the pool and checked).
    pub to_vm_start: Duration,
    /// From the VMM process running to the guest agent answering Hello (a
    /// warm VM answered before it was taken: zero).
    pub boot_to_agent: Duration,
    /// From `execute` being called to the guest reporting the command
    /// started.
    pub to_command: Option<Duration>,
    /// From `execute` being called to the guest reporting dockerd ready,
    /// when the run asked for Docker.
    pub to_docker: Option<Duration>,
    /// The guest kernel's uptime when the agent answered Hello: the part of
    /// `boot_to_agent` after the kernel started.
    pub guest_uptime_at_hello: Duration,
    /// Whole run.
    pub total: Duration,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// How it ended.
    pub outcome: RunOutcome,
    /// Why, in words.
    pub reason: String,
    /// The command's exit code (-1 if it did not exit normally).
    pub exit_code: i32,
    /// The guest hung: no progress for the hang timeout, or a kernel fault
    /// on its console.
    pub hung: bool,
    /// Result files on the host, by name (one of [`ARTIFACTS`]).
    pub artifacts: BTreeMap<String, PathBuf>,
    /// Egress denials.
    pub egress_denied: u32,
    /// Milestones.
    pub timings: Timings,
    /// When the VM started and the run ended.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// When the run ended.
    pub finished_at: chrono::DateTime<chrono::Utc>,
    /// The backend (`qemu-tcg`…).
    pub vmm: String,
}

/// Hears about a run while it happens.
pub trait RunObserver: Send {
    /// The VMM runs, with these host processes.
    fn vm_started(&mut self, _pids: &[u32]) {}
    /// A step of the run in the guest.
    fn phase(&mut self, _phase: &Phase) {}
    /// Output of the command.
    fn output(&mut self, _stream: OutputStream, _data: &[u8]) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct Quiet;
impl RunObserver for Quiet {}

/// The artifacts a guest may offer: the patch, the command's output
/// (`transcript`), and from the workspace's `.patchpilot/` the agent's
/// report (`result`), its retrospective and the model session's transcript
/// (`session`). Anything else fails the run.
pub const ARTIFACTS: [&str; 5] = ["patch", "transcript", "result", "retrospective", "session"];

/// Boots guests for runs.
#[derive(Debug)]
pub struct Sandbox {
    booter: Booter,
    runs_dir: PathBuf,
    hang_timeout: Duration,
    /// Booted VMs waiting for runs; `None` until [`Sandbox::start_warm_pool`].
    pool: Option<WarmPool>,
}

impl Sandbox {
    /// Checks the backend, builds or finds the guest image, and (QEMU with
    /// `accel = auto`) decides between KVM and TCG by booting a probe guest
    /// once per image; the verdict is remembered in the state folder.
    pub async fn prepare(
        config: &SandboxConfig,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Sandbox, Error> {
        std::fs::create_dir_all(config.state_dir.join("runs"))
            .map_err(io(format!("creating {}", config.state_dir.display())))?;
        let builder = ImageBuilder::new(&config.image, &config.state_dir)?;
        let image = match builder.cached()? {
            Some(image) => image,
            None => {
                let (tx, mut rx) = mpsc::unbounded_channel::<String>();
                let build = tokio::task::spawn_blocking(move || {
                    builder.ensure(&mut |m: &str| drop(tx.send(m.to_owned())))
                });
                while let Some(message) = rx.recv().await {
                    progress(&message);
                }
                build.await.map_err(|e| Error::Invalid(format!("image build panicked: {e}")))??
            }
        };
        let vmm: Arc<dyn Vmm> = match config.backend {
            Backend::Qemu => {
                let qemu = Qemu::new(config.qemu.clone());
                qemu.check()?;
                if qemu.kvm_candidate() {
                    let verdict = config.state_dir.join(format!("accel-{}", &image.key[..16]));
                    let accel = match std::fs::read_to_string(&verdict).ok().as_deref().map(str::trim) {
                        Some("kvm") => Resolved::Kvm,
                        Some("tcg") => Resolved::Tcg,
                        _ => {
                            progress("probing whether guests boot under KVM");
                            let accel = probe_kvm(&qemu, &image, &config.state_dir).await;
                            let _ =
                                std::fs::write(&verdict, if accel == Resolved::Kvm { "kvm" } else { "tcg" });
                            accel
                        }
                    };
                    qemu.set_accel(accel);
                }
                Arc::new(qemu)
            }
            Backend::Firecracker => {
                let fc = crate::vmm::firecracker::Firecracker::new(config.firecracker.clone());
                fc.check()?;
                Arc::new(fc)
            }
        };
        Ok(Sandbox {
            booter: Booter { vmm, image, boot_timeout: Duration::from_secs(config.boot_timeout_secs) },
            runs_dir: config.state_dir.join("runs"),
            hang_timeout: Duration::from_secs(config.hang_timeout_secs),
            pool: None,
        })
    }

    /// Keeps `size` VMs of `shape` booted (and their dockerd started, when
    /// the shape asks) in the background, each in a `warm-…` folder of the
    /// runs folder. A run whose limits match takes one instead of booting;
    /// none is used twice. Dropping the sandbox stops the refill and kills
    /// the VMs waiting. Needs a Tokio runtime; a second call replaces the
    /// pool.
    pub fn start_warm_pool(&mut self, size: usize, shape: WarmShape) {
        self.pool =
            (size > 0).then(|| WarmPool::start(self.booter.clone(), self.runs_dir.clone(), size, shape));
    }

    /// The warm pool, when one was started.
    pub fn warm_pool(&self) -> Option<&WarmPool> {
        self.pool.as_ref()
    }

    /// Whether guests boot under hardware virtualisation (KVM, or
    /// Firecracker, which needs it): where a warm pool is cheap to keep.
    pub fn accelerated(&self) -> bool {
        self.booter.vmm.name() != "qemu-tcg"
    }

    /// Keeps run folders in `dir` instead of `<state_dir>/runs`, which
    /// belongs to the worker that holds the state folder's lock (its
    /// start-up sweep empties it). `patchpilot sandbox run` uses this so an
    /// operator's debugging VM survives a worker restarting beside it.
    pub fn with_runs_dir(mut self, dir: PathBuf) -> Self {
        self.runs_dir = dir;
        self
    }

    /// The backend's name.
    pub fn vmm_name(&self) -> String {
        self.booter.vmm.name()
    }

    /// The guest image in use.
    pub fn image(&self) -> &Image {
        &self.booter.image
    }

    /// The folder a run keeps its sockets, disc and logs in.
    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.runs_dir.join(run_id)
    }

    /// Runs `request`. Returns an error only when the run could not be
    /// attempted; everything else is in the report.
    pub async fn execute(
        &self,
        request: RunRequest,
        observer: &mut dyn RunObserver,
    ) -> Result<RunReport, Error> {
        let received = Instant::now();
        if request.run_id.is_empty()
            || !request.run_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::Invalid(format!(
                "run id {:?} must be letters, digits, '-' or '_'",
                request.run_id
            )));
        }
        if request.command.is_empty() {
            return Err(Error::Invalid("the command is empty".into()));
        }
        std::fs::create_dir_all(&request.out_dir)
            .map_err(io(format!("creating {}", request.out_dir.display())))?;
        // A warm VM brings its folder (its sockets are bound there); a cold
        // run gets one named after it.
        let warm = self.take_warm(request.run_id.as_str(), &request.limits).await;
        let run_dir = match &warm {
            Some((vm, _)) => vm.dir().to_owned(),
            None => {
                let run_dir = self.run_dir(&request.run_id);
                if run_dir.exists() {
                    std::fs::remove_dir_all(&run_dir)
                        .map_err(io(format!("removing the stale {}", run_dir.display())))?;
                }
                std::fs::create_dir_all(&run_dir).map_err(io(format!("creating {}", run_dir.display())))?;
                run_dir
            }
        };
        let mut cleanup =
            RunCleanup { run_dir: run_dir.clone(), vm: None, forwarder: None, terminator: None };
        let report = self.execute_in(&request, &run_dir, received, warm, observer, &mut cleanup).await;
        cleanup.finish().await;
        report
    }

    /// A checked VM from the warm pool when the run fits its shape; VMs that
    /// fail the check are killed, and the pool boots their replacements.
    async fn take_warm(&self, run_id: &str, limits: &Limits) -> Option<(WarmVm, HelloReply)> {
        // vCPUs, memory and disc are fixed when a VM boots.
        let pool = self.pool.as_ref().filter(|pool| {
            let shape = pool.shape();
            (limits.vcpus, limits.memory_mib, limits.disk_mib)
                == (shape.vcpus, shape.memory_mib, shape.disk_mib)
        })?;
        while let Some(mut vm) = pool.take() {
            match vm.check().await {
                Ok(hello) => {
                    tracing::info!(run_id, vm = %vm.name(), "took a warm VM");
                    return Some((vm, hello));
                }
                Err(reason) => {
                    tracing::warn!(run_id, vm = %vm.name(), %reason, "a warm VM failed its check; discarding it")
                }
            }
        }
        None
    }

    async fn execute_in(
        &self,
        request: &RunRequest,
        run_dir: &Path,
        received: Instant,
        warm: Option<(WarmVm, HelloReply)>,
        observer: &mut dyn RunObserver,
        cleanup: &mut RunCleanup,
    ) -> Result<RunReport, Error> {
        // The egress forwarder and the broker's terminator bind in the VM's
        // folder, so a warm VM gets them at take time, like its workspace
        // and capability: nothing of the run exists in it before.
        if let Some(egress) = &request.egress {
            let handle = forwarder::start(&run_dir.join("vm.vsock"), egress.config.clone())
                .await
                .map_err(|e| Error::Invalid(format!("starting the egress forwarder: {e}")))?;
            cleanup.forwarder = Some(handle);
        }
        if let Some(link) = &request.broker {
            // The VMM delivers the guest's connections to BROKER_PORT on
            // this socket, which belongs to this VM alone: it is the run's
            // identity.
            let socket = patchpilot_sandbox_wire::protocol::port_socket_path(
                &run_dir.join("vm.vsock"),
                patchpilot_sandbox_wire::protocol::BROKER_PORT,
            );
            let listener = tokio::net::UnixListener::bind(&socket)
                .map_err(io(format!("listening on the broker port {}", socket.display())))?;
            let stop = tokio_util::sync::CancellationToken::new();
            tokio::spawn(patchpilot_broker::terminator::serve(
                listener,
                request.run_id.clone(),
                link.clone(),
                stop.clone(),
            ));
            cleanup.terminator = Some(stop.drop_guard());
        }
        let (started, started_at, vsock_path, booted, connected, boot_attempts) = match warm {
            Some((vm, hello)) => {
                let (vm, client) = vm.into_run();
                let started = Instant::now();
                observer.vm_started(&vm.pids());
                let vsock_path = vm.vsock_path().to_owned();
                cleanup.vm = Some(vm);
                (started, chrono::Utc::now(), vsock_path, Ok(Ok(())), Some((client, hello)), 0)
            }
            None => {
                let spec = self.booter.spec(
                    &request.run_id,
                    run_dir,
                    request.limits.vcpus,
                    request.limits.memory_mib,
                );
                let booted = self
                    .booter
                    .boot(
                        &spec,
                        request.limits.disk_mib,
                        &mut cleanup.vm,
                        request.limits.wall_time,
                        &mut |pids| observer.vm_started(pids),
                    )
                    .await?;
                (booted.started, booted.started_at, booted.vsock_path, booted.agent, None, booted.attempts)
            }
        };
        let deadline = tokio::time::Instant::from_std(started + request.limits.wall_time);
        let mut timings = Timings {
            warm: connected.is_some(),
            boot_attempts,
            to_vm_start: started - received,
            ..Timings::default()
        };
        let mut progress = Progress { step: "boot", ..Progress::default() };
        let guest = match booted {
            Ok(Ok(())) => {
                let console = run_dir.join("console.log");
                tokio::time::timeout_at(deadline, async {
                    tokio::select! {
                        done = self.drive(request, &vsock_path, connected, received, started, observer, &mut timings, &mut progress) => done,
                        line = watch_console(&console) => Err(format!("{CONSOLE_FAULT_REASON}: {line}")),
                    }
                })
                .await
            }
            Ok(Err(e)) => Ok(Err(e)),
            Err(elapsed) => Err(elapsed),
        };
        let (outcome, reason, exit_code) = match guest {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => (RunOutcome::InfraError, e, -1),
            Err(_) => (
                RunOutcome::TimedOut,
                format!(
                    "wall time {}s exceeded during {}; the VM was killed",
                    request.limits.wall_time.as_secs(),
                    progress.step
                ),
                -1,
            ),
        };
        if outcome == RunOutcome::Completed || outcome == RunOutcome::AgentFailed {
            // A clean power-off lets the guest flush; a guest that does not
            // go within seconds is killed like any other.
            if let Some(vm) = cleanup.vm.as_mut() {
                let _ = vm.wait_exit(Duration::from_secs(5)).await;
            }
        }
        if let Some(vm) = cleanup.vm.as_mut() {
            let _ = vm.kill().await;
        }
        let egress_denied = match cleanup.forwarder.take() {
            Some(handle) => {
                let denied = handle.denied();
                handle.shutdown().await;
                denied
            }
            None => 0,
        };
        timings.total = received.elapsed();
        let mut reason = reason;
        if outcome == RunOutcome::InfraError {
            let console = std::fs::read_to_string(run_dir.join("console.log")).unwrap_or_default();
            // A crash dump's tail is registers; the line that names the
            // fault is what an operator needs, wherever it is.
            if let Some(fault) = first_console_fault(&console).filter(|f| !reason.contains(f.as_str())) {
                reason = format!("{reason}; the guest kernel reported: {fault}");
            }
            let tail: Vec<&str> = console.lines().rev().take(8).collect();
            if !tail.is_empty() {
                reason = format!(
                    "{reason}; guest console ends: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                );
            }
        }
        let hung =
            outcome == RunOutcome::InfraError && (progress.hung || reason.starts_with(CONSOLE_FAULT_REASON));
        Ok(RunReport {
            outcome,
            reason,
            exit_code,
            hung,
            artifacts: progress.artifacts,
            egress_denied,
            timings,
            started_at,
            finished_at: chrono::Utc::now(),
            vmm: self.booter.vmm.name(),
        })
    }

    /// Talks to the guest: hello, upload, run, fetch, shutdown.
    #[allow(clippy::too_many_arguments)]
    async fn drive(
        &self,
        request: &RunRequest,
        vsock_path: &Path,
        connected: Option<(GuestControlClient<Channel>, HelloReply)>,
        received: Instant,
        started: Instant,
        observer: &mut dyn RunObserver,
        timings: &mut Timings,
        progress: &mut Progress,
    ) -> Result<(RunOutcome, String, i32), String> {
        let boot_deadline = tokio::time::Instant::from_std(started + self.booter.boot_timeout);
        let (mut client, hello) = match connected {
            Some(connected) => connected,
            None => self.booter.hello(vsock_path, boot_deadline).await?,
        };
        timings.boot_to_agent = started.elapsed();
        timings.guest_uptime_at_hello = Duration::from_millis(hello.uptime_ms);
        if request.egress.is_some() && !hello.egress_error.is_empty() {
            return Err(format!("egress could not be set up in the guest: {}", hello.egress_error));
        }

        progress.step = "workspace upload";
        let (tx, rx) = mpsc::channel::<Chunk>(4);
        let producer = spawn_workspace_stream(request.workspace.clone(), tx);
        let chunks = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
        let upload = client.put_workspace(chunks).await;
        let produced = producer.await.map_err(|e| format!("workspace stream: {e}"))?;
        produced?;
        upload.map_err(|e| format!("workspace upload: {}", e.message()))?;

        progress.step = "the command";
        let spec = RunSpec {
            command: request.command.clone(),
            context_dir: request.context_dir.clone(),
            env: request.env.clone().into_iter().collect(),
            docker: request.docker,
            insecure_registries: request.insecure_registries.clone(),
            output_bytes: request.limits.output_bytes,
        };
        let mut events = client.run(spec).await.map_err(|e| format!("run: {}", e.message()))?.into_inner();
        let mut output_bytes = 0u64;
        let mut finished = None;
        let mut liveness = Liveness::new(self.hang_timeout, tokio::time::Instant::now());
        loop {
            let next = tokio::select! {
                next = events.next() => next,
                () = tokio::time::sleep_until(liveness.deadline()) => {
                    match liveness.check(tokio::time::Instant::now()) {
                        Some(hang) => {
                            progress.hung = true;
                            return Err(hang.to_string());
                        }
                        None => continue,
                    }
                }
            };
            let Some(event) = next else { break };
            let event = event.map_err(|e| format!("run stream: {}", e.message()))?;
            let now = tokio::time::Instant::now();
            match event.event {
                Some(run_event::Event::Heartbeat(beat)) => liveness.heartbeat(beat, now),
                Some(run_event::Event::Output(out)) => {
                    liveness.progressed(now);
                    output_bytes += out.data.len() as u64;
                    if output_bytes > request.limits.output_bytes {
                        return Ok((
                            RunOutcome::LimitExceeded,
                            format!(
                                "output exceeded {} bytes; the VM was killed",
                                request.limits.output_bytes
                            ),
                            -1,
                        ));
                    }
                    observer.output(out.stream(), &out.data);
                }
                Some(run_event::Event::Phase(phase)) => {
                    liveness.progressed(now);
                    match (phase.name.as_str(), phase.state.as_str()) {
                        ("command", "started") => timings.to_command = Some(received.elapsed()),
                        ("docker", "ready") => timings.to_docker = Some(received.elapsed()),
                        _ => {}
                    }
                    if phase.name == "egress" && phase.state == "failed" && request.egress.is_some() {
                        return Err(format!("egress could not be set up in the guest: {}", phase.detail));
                    }
                    observer.phase(&phase);
                }
                Some(run_event::Event::Finished(done)) => {
                    finished = Some(done);
                    break;
                }
                None => {}
            }
        }
        let finished = finished.ok_or("the guest ended the run stream without a result")?;

        progress.step = "fetching results";
        let mut budget = request.limits.output_bytes.saturating_sub(output_bytes);
        for info in &finished.artifacts {
            if !ARTIFACTS.contains(&info.name.as_str()) {
                return Err(format!("the guest offered an unknown artifact {:?}", info.name));
            }
            if info.size > budget {
                return Ok((
                    RunOutcome::LimitExceeded,
                    format!(
                        "artifact {} ({} bytes) exceeds the output limit of {} bytes",
                        info.name, info.size, request.limits.output_bytes
                    ),
                    finished.exit_code,
                ));
            }
            let path = request.out_dir.join(&info.name);
            let mut file =
                tokio::fs::File::create(&path).await.map_err(|e| format!("{}: {e}", path.display()))?;
            let mut stream = client
                .get_artifact(ArtifactRequest { name: info.name.clone() })
                .await
                .map_err(|e| format!("artifact {}: {}", info.name, e.message()))?
                .into_inner();
            let mut hasher = Sha256::new();
            let mut size = 0u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| format!("artifact {}: {}", info.name, e.message()))?;
                size += chunk.data.len() as u64;
                // The size was announced; a guest that sends more is cut off.
                if size > info.size {
                    return Err(format!(
                        "artifact {} is longer than the {} bytes announced",
                        info.name, info.size
                    ));
                }
                hasher.update(&chunk.data);
                file.write_all(&chunk.data).await.map_err(|e| format!("{}: {e}", path.display()))?;
            }
            file.flush().await.map_err(|e| format!("{}: {e}", path.display()))?;
            if size != info.size || hex::encode(hasher.finalize()) != info.sha256 {
                return Err(format!("artifact {} does not match its announced size and SHA-256", info.name));
            }
            budget -= size;
            progress.artifacts.insert(info.name.clone(), path);
        }
        progress.step = "shutdown";
        let _ = client.shutdown(ShutdownRequest {}).await;

        let (outcome, reason) = if !finished.error.is_empty() {
            (RunOutcome::AgentFailed, finished.error.clone())
        } else if finished.signal != 0 {
            (RunOutcome::AgentFailed, format!("the command was killed by signal {}", finished.signal))
        } else if finished.exit_code != 0 {
            (RunOutcome::AgentFailed, format!("the command exited with {}", finished.exit_code))
        } else {
            (RunOutcome::Completed, "the command exited with 0".into())
        };
        Ok((outcome, reason, finished.exit_code))
    }
}

#[derive(Debug, Default)]
struct Progress {
    step: &'static str,
    artifacts: BTreeMap<String, PathBuf>,
    /// The guest stopped making progress or its kernel reported a fault.
    hung: bool,
}

/// The start of the reason of a run ended by a fault on the guest's console.
const CONSOLE_FAULT_REASON: &str = "the guest kernel reported a fault, so the run ended at once";

/// Releases a run's host resources whatever path `execute` took.
struct RunCleanup {
    run_dir: PathBuf,
    vm: Option<Box<dyn Vm>>,
    forwarder: Option<forwarder::ForwarderHandle>,
    /// Stops the run's terminator when dropped.
    terminator: Option<tokio_util::sync::DropGuard>,
}

impl RunCleanup {
    async fn finish(mut self) {
        if let Some(mut vm) = self.vm.take() {
            let _ = vm.kill().await;
        }
        drop(self.terminator.take());
        if let Some(handle) = self.forwarder.take() {
            handle.shutdown().await;
        }
        self.remove_run_dir();
    }

    fn remove_run_dir(&self) {
        match std::fs::remove_dir_all(&self.run_dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %self.run_dir.display(), error = %e, "could not remove the run folder")
            }
        }
    }
}

/// A run whose `execute` future is dropped (the CLI interrupted, a worker
/// shutting down) never reaches `finish`: the VM's processes are killed as
/// their handles drop (`kill_on_drop`), first, and the run folder goes
/// after them, so nothing of the run outlives its caller.
impl Drop for RunCleanup {
    fn drop(&mut self) {
        // After `finish` there is nothing left, and the folder is gone.
        drop(self.vm.take());
        drop(self.forwarder.take());
        drop(self.terminator.take());
        self.remove_run_dir();
    }
}

/// Streams the workspace as tar chunks from a blocking thread.
fn spawn_workspace_stream(
    workspace: Workspace,
    tx: mpsc::Sender<Chunk>,
) -> tokio::task::JoinHandle<Result<(), String>> {
    tokio::task::spawn_blocking(move || {
        let writer = ChunkWriter { tx, buf: Vec::with_capacity(CHUNK) };
        match workspace {
            Workspace::Dir(dir) => {
                let mut builder = tar::Builder::new(writer);
                builder.follow_symlinks(false);
                builder.mode(tar::HeaderMode::Complete);
                builder.append_dir_all(".", &dir).map_err(|e| format!("packing {}: {e}", dir.display()))?;
                let mut writer =
                    builder.into_inner().map_err(|e| format!("packing {}: {e}", dir.display()))?;
                std::io::Write::flush(&mut writer).map_err(|e| e.to_string())
            }
            Workspace::Tar(path) => {
                let mut file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let mut writer = writer;
                std::io::copy(&mut file, &mut writer).map_err(|e| format!("{}: {e}", path.display()))?;
                std::io::Write::flush(&mut writer).map_err(|e| e.to_string())
            }
        }
    })
}

struct ChunkWriter {
    tx: mpsc::Sender<Chunk>,
    buf: Vec<u8>,
}

impl std::io::Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let data = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.tx.blocking_send(Chunk { data }).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the guest stopped receiving the workspace")
        })
    }
}

/// Boots a probe guest under KVM: if it prints its marker and powers off
/// within 20 s, KVM works for our kernel.
async fn probe_kvm(qemu: &Qemu, image: &Image, state_dir: &Path) -> Resolved {
    let run_dir = state_dir.join("runs").join("probe");
    let _ = std::fs::remove_dir_all(&run_dir);
    if std::fs::create_dir_all(&run_dir).is_err() {
        return Resolved::Tcg;
    }
    let scratch = run_dir.join("scratch.img");
    let _ = std::fs::File::create(&scratch).and_then(|f| f.set_len(1 << 20));
    let spec = VmSpec {
        name: "probe".into(),
        run_dir: run_dir.clone(),
        kernel: image.kernel.clone(),
        initrd: image.initrd.clone(),
        rootfs: image.rootfs.clone(),
        scratch,
        vcpus: 1,
        memory_mib: 256,
        kernel_args: vec!["patchpilot.probe=1".into()],
        guest_cid: GUEST_CID,
    };
    qemu.set_accel(Resolved::Kvm);
    let verdict = match qemu.start(&spec).await {
        Ok(mut vm) => {
            let exited = vm.wait_exit(Duration::from_secs(20)).await.unwrap_or(false);
            let _ = vm.kill().await;
            let console = tokio::fs::read(spec.console_path()).await.unwrap_or_default();
            if exited && console.windows(19).any(|w| w == b"patchpilot-probe-ok") {
                Resolved::Kvm
            } else {
                Resolved::Tcg
            }
        }
        Err(_) => Resolved::Tcg,
    };
    qemu.set_accel(verdict);
    let _ = std::fs::remove_dir_all(&run_dir);
    verdict
}

/// Reads a whole artifact into memory, for callers that want bytes.
pub async fn read_artifact(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    let mut file = tokio::fs::File::open(path).await?;
    let mut out = Vec::new();
    (&mut file).take(cap).read_to_end(&mut out).await?;
    Ok(out)
}
