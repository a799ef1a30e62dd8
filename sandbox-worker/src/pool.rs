//! The warm pool: VMs booted before any run asks for one, so a run starts
//! its command within a workspace upload of its receipt instead of after a
//! boot (about 5 s under TCG) and dockerd's start (about 25 s more).
//!
//! A warm VM is booted exactly like a run's (the same `Booter`, image and
//! retries) in a `warm-…` folder of the runs folder, and its dockerd is
//! started by the guest's `Prepare` call with the worker's registries.
//! Nothing of a run is in it until a run takes it: the workspace, the
//! command's environment (its capability), the egress forwarder and the
//! broker's terminator are all attached at take time, the last two as
//! sockets bound in the VM's folder. A VM is used by one run and killed
//! with it, like a cold one; the pool boots a replacement in the
//! background.
//!
//! A VM that waited may have died or wedged (TCG's soft lockups come
//! while idle too), so `WarmVm::check` looks at it before a run gets
//! it: the VMM still running, no kernel fault on its console, and a Hello
//! answered within `CHECK_TIMEOUT`. A VM that fails is killed and the run
//! takes the next one, or boots cold.
//!
//! Dropping the [`WarmPool`] stops the refill and kills the VMs waiting;
//! a worker killed outright leaves them to the next start-up sweep, which
//! empties the runs folder.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use patchpilot_proto::v1::guest_control_client::GuestControlClient;
use patchpilot_proto::v1::{HelloReply, HelloRequest, PrepareRequest};
use tokio::sync::{Notify, watch};
use tokio_util::sync::{CancellationToken, DropGuard};
use tonic::transport::Channel;

use crate::boot::Booter;
use crate::vmm::Vm;

/// How long a warm VM may take to answer Hello when a run takes it: it
/// answered within milliseconds when it was put in the pool.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// How long dockerd may take to answer in a VM being warmed.
const PREPARE_TIMEOUT: Duration = Duration::from_secs(180);
/// The refill's pause after a failed boot, doubled up to [`MAX_BACKOFF`]:
/// a broken image or VMM must not turn the pool into a boot loop.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What the pool's VMs are: a run takes one only when its limits match
/// (vCPUs, memory and scratch disc are fixed at boot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmShape {
    /// Virtual CPUs.
    pub vcpus: u32,
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// Scratch disc in MiB.
    pub disk_mib: u32,
    /// Start dockerd before a run asks; a run that does not ask for Docker
    /// gets it stopped.
    pub docker: bool,
    /// The registries that dockerd speaks plain HTTP to; a run asking for
    /// others gets dockerd restarted with its own.
    pub insecure_registries: Vec<String>,
}

/// Booted VMs waiting for runs, refilled in the background.
#[derive(Debug)]
pub struct WarmPool {
    shared: Arc<Shared>,
    shape: WarmShape,
    /// Stops the refill task when the pool is dropped.
    _refill: DropGuard,
}

#[derive(Debug)]
struct Shared {
    ready: Mutex<VecDeque<WarmVm>>,
    /// Told when a VM is taken, so the refill boots its replacement.
    taken: Notify,
    /// How many VMs are ready, for those who wait on the pool.
    count: watch::Sender<usize>,
}

impl Shared {
    fn ready(&self) -> std::sync::MutexGuard<'_, VecDeque<WarmVm>> {
        self.ready.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl WarmPool {
    /// Starts keeping `size` VMs of `shape` booted, in folders under
    /// `runs_dir`.
    pub(crate) fn start(booter: Booter, runs_dir: PathBuf, size: usize, shape: WarmShape) -> WarmPool {
        let shared = Arc::new(Shared {
            ready: Mutex::new(VecDeque::new()),
            taken: Notify::new(),
            count: watch::channel(0).0,
        });
        let stop = CancellationToken::new();
        tokio::spawn(refill(shared.clone(), booter, runs_dir, size, shape.clone(), stop.clone()));
        WarmPool { shared, shape, _refill: stop.drop_guard() }
    }

    /// What its VMs are.
    pub fn shape(&self) -> &WarmShape {
        &self.shape
    }

    /// VMs ready now.
    pub fn ready(&self) -> usize {
        *self.shared.count.borrow()
    }

    /// Host processes of the VMs ready now, oldest first.
    pub fn ready_pids(&self) -> Vec<Vec<u32>> {
        self.shared.ready().iter().map(|vm| vm.vm.as_ref().map(|vm| vm.pids()).unwrap_or_default()).collect()
    }

    /// Waits until at least `n` VMs are ready.
    pub async fn wait_ready(&self, n: usize) {
        let mut count = self.shared.count.subscribe();
        let _ = count.wait_for(|ready| *ready >= n).await;
    }

    /// The oldest ready VM, if any; the refill is told to replace it.
    pub(crate) fn take(&self) -> Option<WarmVm> {
        let vm = {
            let mut ready = self.shared.ready();
            let vm = ready.pop_front();
            self.shared.count.send_replace(ready.len());
            vm
        };
        if vm.is_some() {
            self.shared.taken.notify_one();
        }
        vm
    }
}

/// One booted VM of the pool. Dropped before a run takes it, it is killed
/// and its folder removed.
#[derive(Debug)]
pub(crate) struct WarmVm {
    name: String,
    dir: PathBuf,
    vm: Option<Box<dyn Vm>>,
    client: Option<GuestControlClient<Channel>>,
}

impl WarmVm {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The VM's folder: its console, scratch disc and vsock sockets.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the VM can take a run: its VMM still runs, its console shows
    /// no kernel fault, and its agent answers Hello in time.
    pub(crate) async fn check(&mut self) -> Result<HelloReply, String> {
        let vm = self.vm.as_mut().ok_or("the VM is gone")?;
        if vm.wait_exit(Duration::ZERO).await.unwrap_or(true) {
            return Err("its VMM exited while it waited".into());
        }
        let console = std::fs::read_to_string(self.dir.join("console.log")).unwrap_or_default();
        if let Some(fault) = crate::console::first_console_fault(&console) {
            return Err(format!("its kernel reported a fault while it waited: {fault}"));
        }
        let client = self.client.as_mut().ok_or("it has no control connection")?;
        match tokio::time::timeout(CHECK_TIMEOUT, client.hello(HelloRequest {})).await {
            Ok(Ok(hello)) => Ok(hello.into_inner()),
            Ok(Err(e)) => Err(format!("hello: {}", e.message())),
            Err(_) => Err(format!("it did not answer hello within {}s", CHECK_TIMEOUT.as_secs())),
        }
    }

    /// Hands the VM and its control connection to a run, whose clean-up
    /// owns the folder from here on.
    pub(crate) fn into_run(mut self) -> (Box<dyn Vm>, GuestControlClient<Channel>) {
        let vm = self.vm.take();
        let client = self.client.take();
        // The folder is the run's to remove now.
        self.dir = PathBuf::new();
        match (vm, client) {
            (Some(vm), Some(client)) => (vm, client),
            // `check` succeeded, so both are there.
            _ => unreachable!("a checked warm VM has its VM and client"),
        }
    }
}

impl Drop for WarmVm {
    fn drop(&mut self) {
        // The VMM's processes are killed as their handles drop
        // (kill_on_drop), before the folder goes.
        drop(self.client.take());
        drop(self.vm.take());
        if self.dir.as_os_str().is_empty() {
            return;
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.dir.display(), error = %e, "could not remove a warm VM's folder");
        }
    }
}

/// Keeps the pool at `size`: boots one VM at a time (on a small host two
/// boots at once slow each other and the runs beside them), then waits for
/// one to be taken.
async fn refill(
    shared: Arc<Shared>,
    booter: Booter,
    runs_dir: PathBuf,
    size: usize,
    shape: WarmShape,
    stop: CancellationToken,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        while shared.ready().len() < size {
            let booted = tokio::select! {
                () = stop.cancelled() => return,
                booted = warm_one(&booter, &runs_dir, &shape) => booted,
            };
            match booted {
                Ok(vm) => {
                    tracing::info!(vm = %vm.name, "a warm VM is ready");
                    let mut ready = shared.ready();
                    ready.push_back(vm);
                    shared.count.send_replace(ready.len());
                    backoff = FIRST_BACKOFF;
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in_secs = backoff.as_secs(), "a warm VM could not be booted");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = shared.taken.notified() => {}
        }
    }
}

/// Boots one VM of `shape`, waits for its agent and, when asked, its
/// dockerd.
async fn warm_one(booter: &Booter, runs_dir: &Path, shape: &WarmShape) -> Result<WarmVm, String> {
    // Short, so the sockets' paths stay well inside the Unix limit.
    let name = format!("warm-{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
    let dir = runs_dir.join(&name);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    // From here the folder and VM go whatever happens.
    let mut warm = WarmVm { name, dir, vm: None, client: None };
    let spec = booter.spec(&warm.name, &warm.dir, shape.vcpus, shape.memory_mib);
    let booted = booter
        .boot(&spec, shape.disk_mib, &mut warm.vm, booter.boot_timeout, &mut |_| {})
        .await
        .map_err(|e| e.to_string())?;
    match booted.agent {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err("the guest agent did not answer in time".into()),
    }
    let deadline = tokio::time::Instant::from_std(booted.started + booter.boot_timeout);
    let (mut client, _) = booter.hello(&booted.vsock_path, deadline).await?;
    if shape.docker {
        let started = Instant::now();
        let prepare = PrepareRequest { docker: true, insecure_registries: shape.insecure_registries.clone() };
        let reply = tokio::time::timeout(PREPARE_TIMEOUT, client.prepare(prepare))
            .await
            .map_err(|_| format!("dockerd did not answer within {}s", PREPARE_TIMEOUT.as_secs()))?
            .map_err(|e| format!("preparing dockerd: {}", e.message()))?
            .into_inner();
        tracing::debug!(
            vm = %warm.name,
            docker_ms = reply.docker_ms,
            prepare_ms = started.elapsed().as_millis() as u64,
            "dockerd is up in a warm VM"
        );
    }
    warm.client = Some(client);
    Ok(warm)
}
