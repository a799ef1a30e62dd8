//! The one interface every virtual machine monitor sits behind.
//!
//! A [`Vmm`] boots a [`VmSpec`] and hands back a running [`Vm`]. Everything
//! backend-specific (QEMU's command line, Firecracker's API socket and
//! jailer) stays inside its module; the rest of the sandbox only sees these
//! types. Both backends expose the guest's vsock the same way, as a
//! Firecracker-style hybrid vsock: a Unix socket on the host at
//! [`Vm::vsock_path`] that accepts `CONNECT <port>\n`, and guest-initiated
//! connections to host port `P` arriving at `<vsock_path>_P`.

pub mod firecracker;
pub mod qemu;

use patchpilot_model::IoError;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;

/// Everything a backend needs to boot one guest.
#[derive(Debug, Clone)]
pub struct VmSpec {
    /// Short identifier (the run id); names processes and files.
    pub name: String,
    /// Per-run folder the backend may create sockets, logs and pid files in.
    /// The sandbox removes it after the run.
    pub run_dir: PathBuf,
    /// Uncompressed kernel (ELF `vmlinux`).
    pub kernel: PathBuf,
    /// Initramfs (gzip-compressed newc cpio).
    pub initrd: PathBuf,
    /// Root filesystem image (ext4), attached read-only.
    pub rootfs: PathBuf,
    /// Scratch disk (ext4), attached read-write; holds the writable overlay,
    /// the workspace and Docker's data.
    pub scratch: PathBuf,
    /// Virtual CPUs.
    pub vcpus: u32,
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// Extra kernel command-line arguments, appended after the backend's own.
    pub kernel_args: Vec<String>,
    /// The guest's vsock context id (3 or above).
    pub guest_cid: u32,
}

impl VmSpec {
    /// Where the host end of the hybrid vsock lives.
    pub fn vsock_path(&self) -> PathBuf {
        self.run_dir.join("vm.vsock")
    }

    /// Where the guest's serial console is written.
    pub fn console_path(&self) -> PathBuf {
        self.run_dir.join("console.log")
    }
}

/// A virtual machine monitor: boots guests.
#[async_trait]
pub trait Vmm: Send + Sync + Debug {
    /// Backend name for logs, metrics and results (`"qemu-tcg"`,
    /// `"qemu-kvm"`, `"firecracker"`).
    fn name(&self) -> String;

    /// Checks that the backend's programs and devices are present, with an
    /// error that says how to install what is missing.
    fn check(&self) -> Result<(), Error>;

    /// Starts a guest. Returns once the VMM process runs; the guest is still
    /// booting.
    async fn start(&self, spec: &VmSpec) -> Result<Box<dyn Vm>, Error>;
}

/// A running guest. Dropping it kills every process it started.
#[async_trait]
pub trait Vm: Send + Sync + Debug {
    /// The host end of the hybrid vsock.
    fn vsock_path(&self) -> &Path;

    /// Host processes that make up this VM (the VMM, its helpers), for
    /// limits accounting, memory measurement and cleanup.
    fn pids(&self) -> Vec<u32>;

    /// Waits for the VMM to exit on its own (the guest powered off) for at
    /// most `timeout`; `Ok(false)` if it is still running.
    async fn wait_exit(&mut self, timeout: Duration) -> Result<bool, Error>;

    /// Kills the VM and everything it started, and waits until they are gone.
    async fn kill(&mut self) -> Result<(), Error>;
}

/// Has the kernel SIGKILL `command`'s process when the thread that spawned
/// it ends: a worker or `patchpilot sandbox run` that dies without running
/// its clean-up (SIGKILL, a crash) then leaves no VM running on. Its run
/// folder stays until the next sweep.
///
/// The signal follows the spawning *thread*, not the process, so VMMs must
/// be spawned from threads that live as long as the runtime (async tasks
/// on its workers, as they are), never from `spawn_blocking`, whose idle
/// threads exit. A process that changes its credentials loses the setting
/// (Firecracker's jailer dropping to its uid): the start-up sweep remains
/// the net there.
pub(crate) fn die_with_spawner(command: &mut tokio::process::Command) {
    let spawner = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: prctl and getppid are plain
    // system calls, and nothing here allocates or takes a lock.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
            // The spawner may have died between fork and prctl, which the
            // signal would then never report.
            if nix::unistd::getppid() != spawner {
                return Err(std::io::Error::from_raw_os_error(nix::libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// SIGKILLs the process group `child` leads (helpers the VMM started go
/// with it) and reaps the child.
pub(crate) async fn kill_process_group(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.kill().await;
    let _ = child.wait().await;
}

/// What can go wrong starting or stopping a VM.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A program or device the backend needs is missing.
    #[error("{what} not found at {path}: {hint}")]
    Missing {
        /// The program or device.
        what: String,
        /// Where it was looked for.
        path: String,
        /// How to install it.
        hint: String,
    },
    /// The VMM refused the configuration or failed while starting.
    #[error("{backend} failed to start the VM: {reason}")]
    Start {
        /// Backend name.
        backend: String,
        /// Why, with the VMM's own words where there are some.
        reason: String,
    },
    /// The VMM's API answered with an error.
    #[error("{backend} API {method} {path} failed ({status}): {body}")]
    Api {
        /// Backend name.
        backend: String,
        /// HTTP method.
        method: String,
        /// Request path.
        path: String,
        /// HTTP status code.
        status: u16,
        /// The fault message.
        body: String,
    },
    /// Input/output on a file, socket or process.
    #[error(transparent)]
    Io(#[from] IoError),
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io(IoError::new(context, source))
    }
}
