//! Booting a guest until its agent answers: one path for runs
//! ([`crate::run`]) and for the warm pool ([`crate::pool`]). Retries a boot
//! that stops early, bounds every wait, and keeps the VM where its owner's
//! clean-up can kill it however the boot ends.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use patchpilot_model::io;
use patchpilot_proto::v1::guest_control_client::GuestControlClient;
use patchpilot_proto::v1::{HelloReply, HelloRequest};
use tonic::transport::Channel;

use crate::error::Error;
use crate::image::Image;
use crate::vmm::{Vm, VmSpec, Vmm};
use crate::vsock;

/// The guest's vsock context id. Every VM has its own vsock backend and
/// socket, so they can all use the first free id.
pub(crate) const GUEST_CID: u32 = 3;

/// Boots tried per run before the run is an infrastructure error.
const BOOT_ATTEMPTS: u32 = 3;
/// How long one connection attempt to the booting guest may take.
const CONNECT_ATTEMPT: Duration = Duration::from_secs(3);
/// How long the guest agent's first answer may take on one connection.
pub(crate) const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Boots a guest and waits for its agent: one path for runs and for the
/// warm pool.
#[derive(Debug, Clone)]
pub(crate) struct Booter {
    pub(crate) vmm: Arc<dyn Vmm>,
    pub(crate) image: Image,
    pub(crate) boot_timeout: Duration,
}

/// A VM whose boot ended, one way or the other.
pub(crate) struct Booted {
    /// When its (last) VMM process started.
    pub(crate) started: Instant,
    /// The same, on the wall clock.
    pub(crate) started_at: chrono::DateTime<chrono::Utc>,
    /// Its hybrid-vsock socket.
    pub(crate) vsock_path: PathBuf,
    /// Whether its agent answered; `Err` when the wall time ran out first.
    pub(crate) agent: Result<Result<(), String>, tokio::time::error::Elapsed>,
    /// VMs started, the last included: more than one when a boot stopped
    /// early and was retried.
    pub(crate) attempts: u32,
}

impl Booter {
    /// The VM a run (or a warm-pool slot) boots in `dir`, its scratch disc
    /// in the same folder ([`Booter::boot`] makes it).
    pub(crate) fn spec(&self, name: &str, dir: &Path, vcpus: u32, memory_mib: u32) -> VmSpec {
        VmSpec {
            name: name.to_owned(),
            run_dir: dir.to_owned(),
            kernel: self.image.kernel.clone(),
            initrd: self.image.initrd.clone(),
            rootfs: self.image.rootfs.clone(),
            scratch: dir.join("scratch.ext4"),
            vcpus,
            memory_mib,
            kernel_args: Vec::new(),
            guest_cid: GUEST_CID,
        }
    }

    /// Boots `spec` on a fresh scratch disc of `disk_mib` until its agent
    /// accepts a connection, keeping the VM in `slot` so whoever owns the
    /// slot kills it however this ends.
    ///
    /// A guest kernel occasionally stops early in boot under TCG (its
    /// console ends at "PCI: Fatal: No config space access function
    /// found", about one boot in forty here). Such a boot is retried on a
    /// fresh VM and scratch disc: the boot budget is split over
    /// BOOT_ATTEMPTS, each far above a normal boot (5-7 s under TCG).
    pub(crate) async fn boot(
        &self,
        spec: &VmSpec,
        disk_mib: u32,
        slot: &mut Option<Box<dyn Vm>>,
        wall_time: Duration,
        on_start: &mut (dyn FnMut(&[u32]) + Send),
    ) -> Result<Booted, Error> {
        let mut attempt = 0u32;
        let boot_budget_end = Instant::now() + self.boot_timeout;
        loop {
            attempt += 1;
            make_scratch(&spec.scratch, disk_mib)?;
            let vm = self.vmm.start(spec).await?;
            let started = Instant::now();
            let started_at = chrono::Utc::now();
            on_start(&vm.pids());
            let vsock_path = vm.vsock_path().to_owned();
            let vm = slot.insert(vm);
            let deadline = tokio::time::Instant::from_std(started + wall_time);
            let last = attempt >= BOOT_ATTEMPTS;
            let window_end = if last {
                boot_budget_end.max(started + self.boot_timeout / BOOT_ATTEMPTS)
            } else {
                started + self.boot_timeout / BOOT_ATTEMPTS
            };
            let agent = tokio::time::timeout_at(
                deadline,
                self.wait_for_agent(
                    vm.as_mut(),
                    &vsock_path,
                    &spec.run_dir,
                    tokio::time::Instant::from_std(window_end),
                ),
            )
            .await;
            if last || matches!(agent, Ok(Ok(()))) {
                return Ok(Booted { started, started_at, vsock_path, agent, attempts: attempt });
            }
            let console = std::fs::read_to_string(spec.console_path()).unwrap_or_default();
            tracing::warn!(
                vm = %spec.name,
                attempt,
                console_tail = %console.lines().last().unwrap_or(""),
                "the guest did not boot; booting a fresh VM"
            );
            if let Some(mut vm) = slot.take() {
                let _ = vm.kill().await;
            }
        }
    }

    /// Waits until the guest agent accepts a vsock connection, or the VM
    /// dies trying (then the error carries the VMM's last words).
    async fn wait_for_agent(
        &self,
        vm: &mut dyn Vm,
        vsock_path: &Path,
        run_dir: &Path,
        deadline: tokio::time::Instant,
    ) -> Result<(), String> {
        loop {
            // Each attempt is bounded: a connection request sent before the
            // guest's vsock driver is up can go unanswered by the backend,
            // and an unbounded wait then held the run until its wall time.
            let attempt =
                tokio::time::timeout(CONNECT_ATTEMPT, vsock::connect(vsock_path, vsock::CONTROL_PORT))
                    .await
                    .unwrap_or_else(|_| {
                        Err(vsock::Error::Io {
                            path: vsock_path.to_owned(),
                            source: std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer to CONNECT"),
                        })
                    });
            match attempt {
                Ok(_) => return Ok(()),
                Err(e) => {
                    if vm.wait_exit(Duration::ZERO).await.unwrap_or(false) {
                        let err = std::fs::read_to_string(run_dir.join("qemu.err")).unwrap_or_default();
                        return Err(format!("the VM exited while booting: {}", err.trim()));
                    }
                    if tokio::time::Instant::now() >= deadline {
                        return Err(format!(
                            "the guest agent did not answer within {}s: {e}",
                            self.boot_timeout.as_secs()
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    /// A control client whose Hello the agent answered: each try bounded
    /// and retried on a fresh connection until `boot_deadline`.
    pub(crate) async fn hello(
        &self,
        vsock_path: &Path,
        boot_deadline: tokio::time::Instant,
    ) -> Result<(GuestControlClient<Channel>, HelloReply), String> {
        // The agent answered a connect; its first call is still bounded and
        // retried on a fresh connection until the boot timeout, so a guest
        // that never answers is an infrastructure error at the boot timeout,
        // not a run that times out (and is blamed on the agent) at its wall
        // time.
        loop {
            let attempt = async {
                let mut client = vsock::control_client(vsock_path).await.map_err(|e| e.to_string())?;
                let hello =
                    client.hello(HelloRequest {}).await.map_err(|e| format!("hello: {e}"))?.into_inner();
                Ok::<_, String>((client, hello))
            };
            match tokio::time::timeout(HELLO_TIMEOUT, attempt).await {
                Ok(Ok(done)) => return Ok(done),
                Ok(Err(e)) if tokio::time::Instant::now() >= boot_deadline => return Err(e),
                Err(_) if tokio::time::Instant::now() >= boot_deadline => {
                    return Err(format!(
                        "the guest agent did not answer hello within {}s",
                        self.boot_timeout.as_secs()
                    ));
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "hello failed; retrying on a new connection"),
                Err(_) => tracing::warn!("hello stalled; retrying on a new connection"),
            }
        }
    }
}

/// A sparse file with an empty ext4 file system labelled for the guest's
/// init to find.
fn make_scratch(path: &Path, mib: u32) -> Result<(), Error> {
    let file = std::fs::File::create(path).map_err(io(format!("creating {}", path.display())))?;
    file.set_len(u64::from(mib) << 20).map_err(io(format!("sizing {}", path.display())))?;
    drop(file);
    let out = std::process::Command::new("mkfs.ext4")
        .args([
            "-q",
            "-F",
            "-L",
            "ppscratch",
            "-E",
            "lazy_itable_init=1,lazy_journal_init=1,nodiscard",
            "-O",
            "^has_journal",
        ])
        .arg(path)
        .output()
        .map_err(io("running mkfs.ext4 (install e2fsprogs)"))?;
    if !out.status.success() {
        return Err(Error::Invalid(format!(
            "mkfs.ext4 {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}
