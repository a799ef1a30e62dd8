//! Firecracker backend: boots a [`VmSpec`] under Firecracker, directly in
//! development and under Firecracker's jailer in production.
//!
//! It owns the Firecracker (or jailer) process of each VM, the files that
//! process creates (API socket, vsock socket, log, and under the jailer the
//! whole jail folder `<chroot_base>/<exec file name>/<id>/` and the cgroup the
//! jailer made), and every request sent to Firecracker's API socket.
//!
//! It must never:
//! - pass host secrets into the VM: the VMM starts with an empty environment,
//!   and the only things it is told are the paths, sizes and kernel arguments
//!   of the [`VmSpec`];
//! - expose the API socket to the guest: it lives in the run folder (or the
//!   jail's `/run`), is never put on a drive and never bridged to a vsock port;
//! - attach a network interface (the guest's only way out is vsock) or attach
//!   the root filesystem writable.
//!
//! # How the work is split with firepilot
//!
//! The request bodies are firepilot's models (`firepilot_models`), and the
//! boot source and drives are built with firepilot's builders. firepilot's
//! own process executor and HTTP calls are not used, because (firepilot 1.2):
//! its executor sends Firecracker's stdout (the guest's serial console) to
//! `/dev/null`, keeps the child process private (no pid for limits or
//! `wait_exit`), has no jailer executor, leaks the child when the socket is
//! not up within 500 ms, and its requests drop Firecracker's
//! `fault_message`. So the process is spawned here and every request,
//! including those firepilot has calls for (boot source, drives, actions,
//! `PATCH /vm`), goes through [`ApiClient`] (hyper over the Unix socket).
//!
//! # Paths under the jailer
//!
//! The jailer chroots Firecracker into `<chroot_base>/<exec>/<id>/root`, so
//! the kernel, initramfs and both discs are hard-linked there (copied when
//! the jail is on another filesystem) and the API gets chroot-relative paths.
//! The vsock socket is `/run/vm.vsock` inside the jail; [`Vm::vsock_path`]
//! returns its real host path (`<root>/run/vm.vsock`), not
//! [`VmSpec::vsock_path`]. That is the one choice that works both ways:
//! Firecracker looks for guest-initiated connections to port `P` at
//! `<uds_path>_P` inside the jail, so host listeners must bind
//! `<Vm::vsock_path()>_P`; a symlink from the run folder could only ever
//! serve host-initiated connections.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use firepilot::builder::Builder as _;
use firepilot::builder::drive::DriveBuilder;
use firepilot::builder::kernel::KernelBuilder;
use firepilot_models::models::instance_action_info::ActionType;
use firepilot_models::models::logger::Level;
use firepilot_models::models::memory_backend::BackendType;
use firepilot_models::models::snapshot_create_params::SnapshotType;
use firepilot_models::models::vm::State;
use firepilot_models::models::{
    InstanceActionInfo, Logger, MachineConfiguration, MemoryBackend, SnapshotCreateParams,
    SnapshotLoadParams, Vsock,
};
use http_body_util::{BodyExt, Full};
use hyper::Method;
use serde::{Deserialize, Serialize};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};
use tracing::{debug, info, warn};

use super::{Error, Vm, VmSpec, Vmm};

/// Backend name in logs, metrics and errors.
pub const BACKEND: &str = "firecracker";

/// Kernel arguments Firecracker guests always get, before [`VmSpec::kernel_args`].
pub const BASE_BOOT_ARGS: &str = "console=ttyS0 reboot=k panic=1 pci=off";

const INSTALL_HINT: &str = "download a release from https://github.com/firecracker-microvm/firecracker/releases \
     (the tarball holds firecracker-<version>-<arch> and jailer-<version>-<arch>), install the binary at the \
     configured path and make it executable; Firecracker also needs /dev/kvm (a KVM host)";

/// Longest Unix socket path (`sun_path` is 108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 107;
/// Room for the `_<port>` suffix of guest-initiated vsock listeners.
const PORT_SUFFIX: usize = 11;

/// Names of the files inside the jail (chroot-relative).
mod jail_names {
    pub const API_SOCKET: &str = "/run/firecracker.socket";
    pub const VSOCK: &str = "/run/vm.vsock";
    pub const KERNEL: &str = "/vmlinux";
    pub const INITRD: &str = "/initrd.img";
    pub const ROOTFS: &str = "/rootfs.ext4";
    pub const SCRATCH: &str = "/scratch.ext4";
    pub const LOG: &str = "/firecracker.log";
    pub const SNAPSHOT: &str = "/snapshot/vm.snap";
    pub const MEMORY: &str = "/snapshot/vm.mem";
}

/// `[sandbox.firecracker]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FirecrackerConfig {
    /// The `firecracker` binary: a path, or a name looked up on PATH.
    pub binary: PathBuf,
    /// Run Firecracker under the jailer (production). Without it Firecracker
    /// runs directly as the worker's user (development only).
    pub jailer: Option<JailerConfig>,
    /// Seconds to wait for the API socket to answer after the process
    /// starts, and for each API call. (The guest's own boot is bounded by
    /// `sandbox.boot_timeout_secs`.)
    pub api_timeout_secs: u64,
}

impl Default for FirecrackerConfig {
    fn default() -> Self {
        FirecrackerConfig { binary: PathBuf::from("firecracker"), jailer: None, api_timeout_secs: 10 }
    }
}

/// `[sandbox.firecracker.jailer]`: how the jailer confines Firecracker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JailerConfig {
    /// The `jailer` binary from the same Firecracker release.
    #[serde(default = "default_jailer_binary")]
    pub binary: PathBuf,
    /// User Firecracker runs as after the jailer drops privileges (not 0).
    pub uid: u32,
    /// Group Firecracker runs as (not 0).
    pub gid: u32,
    /// Where jails are built (`--chroot-base-dir`). Put it on the same
    /// filesystem as the sandbox's state folder so the discs are hard-linked
    /// rather than copied.
    #[serde(default = "default_chroot_base")]
    pub chroot_base: PathBuf,
    /// `--cgroup-version` (1 or 2).
    #[serde(default = "default_cgroup_version")]
    pub cgroup_version: u8,
    /// `--parent-cgroup`; the jailer's default is the exec file's name.
    #[serde(default)]
    pub parent_cgroup: Option<String>,
    /// `--cgroup <file>=<value>` settings, e.g. `cpu.max=200000 100000`.
    #[serde(default)]
    pub cgroups: Vec<String>,
    /// `--netns`: a network namespace handle to join, e.g. `/var/run/netns/fc`.
    #[serde(default)]
    pub netns: Option<PathBuf>,
}

fn default_jailer_binary() -> PathBuf {
    PathBuf::from("jailer")
}

fn default_chroot_base() -> PathBuf {
    PathBuf::from("/srv/jailer")
}

fn default_cgroup_version() -> u8 {
    2
}

/// One request to Firecracker's API.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiCall {
    /// HTTP method.
    pub method: Method,
    /// Request path, e.g. `/drives/rootfs`.
    pub path: String,
    /// JSON body.
    pub body: serde_json::Value,
}

impl ApiCall {
    fn new(method: Method, path: impl Into<String>, body: &impl Serialize) -> Result<Self, Error> {
        let path = path.into();
        let body = serde_json::to_value(body)
            .map_err(|e| start_error(format!("cannot encode the body of {method} {path}: {e}")))?;
        Ok(ApiCall { method, path, body })
    }

    /// `PATCH /vm` to pause the guest's vCPUs.
    pub fn pause() -> Result<Self, Error> {
        ApiCall::new(Method::PATCH, "/vm", &firepilot_models::models::Vm::new(State::Paused))
    }

    /// `PATCH /vm` to resume a paused guest.
    pub fn resume() -> Result<Self, Error> {
        ApiCall::new(Method::PATCH, "/vm", &firepilot_models::models::Vm::new(State::Resumed))
    }

    /// `PUT /snapshot/create` of a full snapshot; paths as Firecracker sees them.
    pub fn create_snapshot(snapshot_path: &str, mem_path: &str) -> Result<Self, Error> {
        let mut params = SnapshotCreateParams::new(mem_path.to_owned(), snapshot_path.to_owned());
        params.snapshot_type = Some(SnapshotType::Full);
        ApiCall::new(Method::PUT, "/snapshot/create", &params)
    }

    /// `PUT /actions` with `InstanceStart`.
    pub fn instance_start() -> Result<Self, Error> {
        ApiCall::new(Method::PUT, "/actions", &InstanceActionInfo::new(ActionType::InstanceStart))
    }
}

impl fmt::Display for ApiCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// `PUT /snapshot/load` body: firepilot's model plus `vsock_override`, which
/// newer Firecracker releases accept and firepilot's models predate.
#[derive(Debug, Serialize)]
struct SnapshotLoad {
    #[serde(flatten)]
    params: SnapshotLoadParams,
    #[serde(skip_serializing_if = "Option::is_none")]
    vsock_override: Option<VsockOverride>,
}

#[derive(Debug, Serialize)]
struct VsockOverride {
    uds_path: String,
}

/// Where one VM's files are, on the host and as Firecracker sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirecrackerPaths {
    /// The API socket, host path.
    pub api_socket: PathBuf,
    /// The hybrid vsock socket, host path (what [`Vm::vsock_path`] returns).
    pub vsock: PathBuf,
    /// Firecracker's log file, host path.
    pub log: PathBuf,
    /// Firecracker's stdout: the guest's serial console.
    pub console: PathBuf,
    /// Firecracker's (and the jailer's) stderr.
    pub stderr: PathBuf,
    /// The jail, when the jailer is used.
    pub jail: Option<JailPaths>,
    /// Paths as Firecracker is told them (chroot-relative under the jailer).
    pub vmm: VmmPaths,
}

/// The jail of one VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JailPaths {
    /// `<chroot_base>/<exec file name>/<id>`: removed when the VM is killed.
    pub dir: PathBuf,
    /// `<dir>/root`: Firecracker's `/`.
    pub root: PathBuf,
    /// The cgroup v2 folder the jailer creates, removed after the VM is gone.
    pub cgroup: Option<PathBuf>,
}

/// Paths as Firecracker sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmmPaths {
    /// `--api-sock`.
    pub api_socket: String,
    /// Kernel image.
    pub kernel: String,
    /// Initramfs.
    pub initrd: String,
    /// Root filesystem (read-only).
    pub rootfs: String,
    /// Scratch disc (read-write).
    pub scratch: String,
    /// vsock `uds_path`.
    pub vsock: String,
    /// Logger `log_path`.
    pub log: String,
}

impl FirecrackerPaths {
    /// The host path of a path Firecracker sees.
    pub fn host_path(&self, vmm_path: &str) -> PathBuf {
        match &self.jail {
            Some(jail) => jail.root.join(vmm_path.trim_start_matches('/')),
            None => PathBuf::from(vmm_path),
        }
    }
}

/// A program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
}

/// The Firecracker VMM.
#[derive(Debug, Clone)]
pub struct Firecracker {
    config: FirecrackerConfig,
}

impl Firecracker {
    /// A backend with these settings.
    pub fn new(config: FirecrackerConfig) -> Self {
        Firecracker { config }
    }

    /// The settings.
    pub fn config(&self) -> &FirecrackerConfig {
        &self.config
    }

    fn api_timeout(&self) -> Duration {
        Duration::from_secs(self.config.api_timeout_secs.max(1))
    }

    /// The firecracker binary, found and made absolute.
    fn firecracker_binary(&self) -> Result<PathBuf, Error> {
        let found = locate(&self.config.binary).ok_or_else(|| missing("firecracker", &self.config.binary))?;
        std::fs::canonicalize(&found).map_err(|e| Error::io(format!("resolving {}", found.display()), e))
    }

    fn jailer_binary(jailer: &JailerConfig) -> Result<PathBuf, Error> {
        locate(&jailer.binary).ok_or_else(|| missing("jailer", &jailer.binary))
    }

    /// Where this VM's files go.
    pub fn paths(&self, spec: &VmSpec) -> Result<FirecrackerPaths, Error> {
        validate_spec(spec)?;
        let console = spec.console_path();
        let stderr = spec.run_dir.join("firecracker.stderr");
        let paths = match &self.config.jailer {
            None => FirecrackerPaths {
                api_socket: spec.run_dir.join("fc.sock"),
                vsock: spec.vsock_path(),
                log: spec.run_dir.join("firecracker.log"),
                console,
                stderr,
                jail: None,
                vmm: VmmPaths {
                    api_socket: utf8(&spec.run_dir.join("fc.sock"))?,
                    kernel: utf8(&spec.kernel)?,
                    initrd: utf8(&spec.initrd)?,
                    rootfs: utf8(&spec.rootfs)?,
                    scratch: utf8(&spec.scratch)?,
                    vsock: utf8(&spec.vsock_path())?,
                    log: utf8(&spec.run_dir.join("firecracker.log"))?,
                },
            },
            Some(jailer) => {
                validate_jailer(jailer)?;
                let exec = self.firecracker_binary()?;
                let exec_name = exec_file_name(&exec)?;
                let dir = jailer.chroot_base.join(&exec_name).join(&spec.name);
                let root = dir.join("root");
                let cgroup = (jailer.cgroup_version == 2).then(|| {
                    let parent = jailer.parent_cgroup.clone().unwrap_or_else(|| exec_name.clone());
                    Path::new("/sys/fs/cgroup").join(parent).join(&spec.name)
                });
                let host = |name: &str| root.join(name.trim_start_matches('/'));
                FirecrackerPaths {
                    api_socket: host(jail_names::API_SOCKET),
                    vsock: host(jail_names::VSOCK),
                    log: host(jail_names::LOG),
                    console,
                    stderr,
                    vmm: VmmPaths {
                        api_socket: jail_names::API_SOCKET.into(),
                        kernel: jail_names::KERNEL.into(),
                        initrd: jail_names::INITRD.into(),
                        rootfs: jail_names::ROOTFS.into(),
                        scratch: jail_names::SCRATCH.into(),
                        vsock: jail_names::VSOCK.into(),
                        log: jail_names::LOG.into(),
                    },
                    jail: Some(JailPaths { dir, root, cgroup }),
                }
            }
        };
        check_socket_path(&paths.api_socket, 0)?;
        check_socket_path(&paths.vsock, PORT_SUFFIX)?;
        Ok(paths)
    }

    /// The process to start: Firecracker itself, or the jailer wrapping it.
    pub fn command_line(&self, spec: &VmSpec) -> Result<CommandLine, Error> {
        let paths = self.paths(spec)?;
        let firecracker = self.firecracker_binary()?;
        match &self.config.jailer {
            None => Ok(CommandLine {
                program: firecracker,
                args: vec!["--api-sock".into(), paths.vmm.api_socket, "--id".into(), spec.name.clone()],
            }),
            Some(jailer) => {
                let mut args = vec![
                    "--id".into(),
                    spec.name.clone(),
                    "--exec-file".into(),
                    utf8(&firecracker)?,
                    "--uid".into(),
                    jailer.uid.to_string(),
                    "--gid".into(),
                    jailer.gid.to_string(),
                    "--chroot-base-dir".into(),
                    utf8(&jailer.chroot_base)?,
                    "--cgroup-version".into(),
                    jailer.cgroup_version.to_string(),
                ];
                if let Some(parent) = &jailer.parent_cgroup {
                    args.extend(["--parent-cgroup".into(), parent.clone()]);
                }
                for cgroup in &jailer.cgroups {
                    args.extend(["--cgroup".into(), cgroup.clone()]);
                }
                if let Some(netns) = &jailer.netns {
                    args.extend(["--netns".into(), utf8(netns)?]);
                }
                // No --daemonize (it would send the console to /dev/null) and
                // no --new-pid-ns (the child's pid is then Firecracker's).
                args.extend(["--".into(), "--api-sock".into(), paths.vmm.api_socket]);
                Ok(CommandLine { program: Self::jailer_binary(jailer)?, args })
            }
        }
    }

    /// The API calls that configure and boot `spec`, in order.
    pub fn plan(&self, spec: &VmSpec) -> Result<Vec<ApiCall>, Error> {
        boot_plan(spec, &self.paths(spec)?)
    }

    /// The API calls that restore `spec` from a snapshot, in order. Paths of
    /// the snapshot files are host paths; under the jailer they are linked
    /// into the jail first.
    pub fn restore_plan(&self, spec: &VmSpec, snapshot: &Path, mem: &Path) -> Result<Vec<ApiCall>, Error> {
        let paths = self.paths(spec)?;
        let (snapshot, mem) = match paths.jail {
            Some(_) => (jail_names::SNAPSHOT.to_owned(), jail_names::MEMORY.to_owned()),
            None => (utf8(snapshot)?, utf8(mem)?),
        };
        restore_plan(&paths, &snapshot, &mem)
    }

    /// Makes the files the VMM needs: the log, and under the jailer the jail
    /// with the kernel, initramfs and discs linked in. Removes stale sockets.
    pub fn prepare_files(&self, spec: &VmSpec) -> Result<FirecrackerPaths, Error> {
        let paths = self.paths(spec)?;
        std::fs::create_dir_all(&spec.run_dir)
            .map_err(|e| Error::io(format!("creating {}", spec.run_dir.display()), e))?;
        match (&paths.jail, &self.config.jailer) {
            (Some(jail), Some(jailer)) => {
                if jail.dir.exists() {
                    warn!(jail = %jail.dir.display(), "removing a jail left behind by an earlier VM of the same name");
                    remove_tree(&jail.dir)?;
                }
                let owner = (jailer.uid, jailer.gid);
                for dir in ["run", "snapshot"] {
                    let dir = jail.root.join(dir);
                    std::fs::create_dir_all(&dir)
                        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
                    chown(&dir, owner)?;
                }
                link_into(&spec.kernel, &paths.host_path(&paths.vmm.kernel))?;
                link_into(&spec.initrd, &paths.host_path(&paths.vmm.initrd))?;
                link_into(&spec.rootfs, &paths.host_path(&paths.vmm.rootfs))?;
                let scratch = paths.host_path(&paths.vmm.scratch);
                link_into(&spec.scratch, &scratch)?;
                // The scratch disc is this run's own; Firecracker opens it read-write.
                chown(&scratch, owner)?;
                create_empty(&paths.log)?;
                chown(&paths.log, owner)?;
            }
            _ => {
                create_empty(&paths.log)?;
                for socket in [&paths.api_socket, &paths.vsock] {
                    remove_file_if_exists(socket)?;
                }
            }
        }
        Ok(paths)
    }

    /// Starts the VMM process and waits until its API socket answers.
    async fn spawn(&self, spec: &VmSpec) -> Result<(FirecrackerVm, FirecrackerPaths), Error> {
        let command = self.command_line(spec)?;
        let paths = self.prepare_files(spec)?;
        let console = std::fs::File::create(&paths.console)
            .map_err(|e| Error::io(format!("creating {}", paths.console.display()), e))?;
        let stderr = std::fs::File::create(&paths.stderr)
            .map_err(|e| Error::io(format!("creating {}", paths.stderr.display()), e))?;
        info!(vm = %spec.name, program = %command.program.display(), args = ?command.args, "starting firecracker");
        let mut firecracker = Command::new(&command.program);
        firecracker
            .args(&command.args)
            .env_clear()
            .current_dir(&spec.run_dir)
            .stdin(Stdio::null())
            .stdout(console)
            .stderr(stderr)
            .process_group(0)
            .kill_on_drop(true);
        super::die_with_spawner(&mut firecracker);
        let child = firecracker.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => missing("firecracker", &command.program),
            _ => Error::io(format!("starting {}", command.program.display()), e),
        })?;
        let mut vm = FirecrackerVm {
            name: spec.name.clone(),
            pid: child.id(),
            child: Some(child),
            api: ApiClient::new(&paths.api_socket, self.api_timeout()),
            paths: paths.clone(),
        };
        if let Err(e) = vm.wait_for_api(self.api_timeout()).await {
            vm.kill_and_clean().await;
            return Err(e);
        }
        Ok((vm, paths))
    }

    /// Boots `spec`, returning the concrete VM (for pause, resume and snapshots).
    pub async fn start_vm(&self, spec: &VmSpec) -> Result<FirecrackerVm, Error> {
        let plan = self.plan(spec)?;
        let (mut vm, _) = self.spawn(spec).await?;
        if let Err(e) = vm.run(&plan).await {
            vm.kill_and_clean().await;
            return Err(e);
        }
        info!(vm = %spec.name, pid = ?vm.pid, "firecracker guest started");
        Ok(vm)
    }

    /// Starts a fresh Firecracker for `spec` and loads a snapshot into it
    /// (resumed). The snapshot must come from a VM with the same drives:
    /// under the jailer the drive paths are the same jail-relative names for
    /// every VM, so `spec`'s discs take their place; without the jailer the
    /// snapshot refers to the original host paths.
    pub async fn restore(&self, spec: &VmSpec, snapshot: &Path, mem: &Path) -> Result<FirecrackerVm, Error> {
        let plan = self.restore_plan(spec, snapshot, mem)?;
        let paths = self.paths(spec)?;
        let (mut vm, _) = self.spawn(spec).await?;
        if paths.jail.is_some() {
            let linked = link_into(snapshot, &paths.host_path(jail_names::SNAPSHOT))
                .and_then(|()| link_into(mem, &paths.host_path(jail_names::MEMORY)));
            if let Err(e) = linked {
                vm.kill_and_clean().await;
                return Err(e);
            }
        }
        if let Err(e) = vm.run(&plan).await {
            vm.kill_and_clean().await;
            return Err(e);
        }
        info!(vm = %spec.name, snapshot = %snapshot.display(), "firecracker guest restored");
        Ok(vm)
    }
}

/// The kernel command line for `spec`.
pub fn boot_args(spec: &VmSpec) -> String {
    let mut args = BASE_BOOT_ARGS.to_owned();
    for arg in &spec.kernel_args {
        args.push(' ');
        args.push_str(arg);
    }
    args
}

fn boot_plan(spec: &VmSpec, paths: &FirecrackerPaths) -> Result<Vec<ApiCall>, Error> {
    let builder_error =
        |what: &str, e: firepilot::builder::BuilderError| start_error(format!("{what}: {e:?}"));
    let boot_source = KernelBuilder::new()
        .with_kernel_image_path(paths.vmm.kernel.clone())
        .with_initrd_path(paths.vmm.initrd.clone())
        .with_boot_args(boot_args(spec))
        .try_build()
        .map_err(|e| builder_error("boot source", e))?;
    // The initramfs finds both discs by their ext4 label, so neither is
    // Firecracker's root device (that would add root=/dev/vda).
    let rootfs = DriveBuilder::new()
        .with_drive_id("rootfs".into())
        .with_path_on_host(PathBuf::from(&paths.vmm.rootfs))
        .as_read_only()
        .try_build()
        .map_err(|e| builder_error("rootfs drive", e))?;
    let scratch = DriveBuilder::new()
        .with_drive_id("scratch".into())
        .with_path_on_host(PathBuf::from(&paths.vmm.scratch))
        .try_build()
        .map_err(|e| builder_error("scratch drive", e))?;
    let machine = MachineConfiguration::new(int(spec.memory_mib, "memory_mib")?, int(spec.vcpus, "vcpus")?);
    let vsock = Vsock::new(int(spec.guest_cid, "guest_cid")?, paths.vmm.vsock.clone());
    Ok(vec![
        logger_call(paths)?,
        ApiCall::new(Method::PUT, "/machine-config", &machine)?,
        ApiCall::new(Method::PUT, "/boot-source", &boot_source)?,
        ApiCall::new(Method::PUT, format!("/drives/{}", rootfs.drive_id), &rootfs)?,
        ApiCall::new(Method::PUT, format!("/drives/{}", scratch.drive_id), &scratch)?,
        ApiCall::new(Method::PUT, "/vsock", &vsock)?,
        ApiCall::instance_start()?,
    ])
}

fn restore_plan(paths: &FirecrackerPaths, snapshot: &str, mem: &str) -> Result<Vec<ApiCall>, Error> {
    let mut params = SnapshotLoadParams::new(snapshot.to_owned());
    params.mem_backend = Some(Box::new(MemoryBackend::new(BackendType::File, mem.to_owned())));
    params.resume_vm = Some(true);
    // In a jail the socket is `/run/vm.vsock` for every VM, as it was when
    // the snapshot was taken; outside one it moves with the run folder.
    let vsock_override = paths.jail.is_none().then(|| VsockOverride { uds_path: paths.vmm.vsock.clone() });
    Ok(vec![
        logger_call(paths)?,
        ApiCall::new(Method::PUT, "/snapshot/load", &SnapshotLoad { params, vsock_override })?,
    ])
}

fn logger_call(paths: &FirecrackerPaths) -> Result<ApiCall, Error> {
    let mut logger = Logger::new(paths.vmm.log.clone());
    logger.level = Some(Level::Info);
    logger.show_level = Some(true);
    logger.show_log_origin = Some(false);
    ApiCall::new(Method::PUT, "/logger", &logger)
}

/// A client for one Firecracker API socket.
#[derive(Debug, Clone)]
pub struct ApiClient {
    socket: PathBuf,
    timeout: Duration,
}

impl ApiClient {
    /// A client for the API socket at `socket`; each call is bounded by `timeout`.
    pub fn new(socket: &Path, timeout: Duration) -> Self {
        ApiClient { socket: socket.to_owned(), timeout }
    }

    /// Sends `call`. A non-2xx answer becomes [`Error::Api`] carrying
    /// Firecracker's `fault_message` (or the raw body if it has none).
    pub async fn send(&self, call: &ApiCall) -> Result<Bytes, Error> {
        debug!(%call, body = %call.body, "firecracker API request");
        match tokio::time::timeout(self.timeout, self.send_unbounded(call)).await {
            Ok(result) => result,
            Err(_) => Err(Error::io(
                format!("firecracker API {call}"),
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {:?}", self.timeout),
                ),
            )),
        }
    }

    async fn send_unbounded(&self, call: &ApiCall) -> Result<Bytes, Error> {
        let context = || format!("firecracker API {call} on {}", self.socket.display());
        let stream = UnixStream::connect(&self.socket).await.map_err(|e| Error::io(context(), e))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| Error::io(context(), std::io::Error::other(e)))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                debug!(error = %e, "firecracker API connection closed");
            }
        });
        let body =
            serde_json::to_vec(&call.body).map_err(|e| Error::io(context(), std::io::Error::other(e)))?;
        let request = hyper::Request::builder()
            .method(call.method.clone())
            .uri(call.path.as_str())
            .header(hyper::header::HOST, "localhost")
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::io(context(), std::io::Error::other(e)))?;
        let response =
            sender.send_request(request).await.map_err(|e| Error::io(context(), std::io::Error::other(e)))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| Error::io(context(), std::io::Error::other(e)))?
            .to_bytes();
        if status.is_success() {
            return Ok(bytes);
        }
        let fault = serde_json::from_slice::<firepilot_models::models::Error>(&bytes)
            .ok()
            .and_then(|e| e.fault_message)
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).trim().to_owned());
        warn!(%call, status = status.as_u16(), fault = %fault, "firecracker API refused a request");
        Err(Error::Api {
            backend: BACKEND.into(),
            method: call.method.to_string(),
            path: call.path.clone(),
            status: status.as_u16(),
            body: fault,
        })
    }
}

/// A running Firecracker guest.
pub struct FirecrackerVm {
    name: String,
    child: Option<Child>,
    pid: Option<u32>,
    api: ApiClient,
    paths: FirecrackerPaths,
}

impl fmt::Debug for FirecrackerVm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FirecrackerVm")
            .field("name", &self.name)
            .field("pid", &self.pid)
            .field("running", &self.child.is_some())
            .field("paths", &self.paths)
            .finish()
    }
}

impl FirecrackerVm {
    /// Where this VM's files are.
    pub fn paths(&self) -> &FirecrackerPaths {
        &self.paths
    }

    /// The client for this VM's API socket.
    pub fn api(&self) -> &ApiClient {
        &self.api
    }

    /// Pauses the guest's vCPUs (`PATCH /vm`).
    pub async fn pause(&self) -> Result<(), Error> {
        self.api.send(&ApiCall::pause()?).await.map(drop)
    }

    /// Resumes a paused guest (`PATCH /vm`).
    pub async fn resume(&self) -> Result<(), Error> {
        self.api.send(&ApiCall::resume()?).await.map(drop)
    }

    /// Writes a full snapshot of a paused guest to the host paths
    /// `snapshot_path` (VM state) and `mem_path` (guest memory). Under the
    /// jailer Firecracker writes inside the jail and the files are moved out.
    pub async fn create_snapshot(&self, snapshot_path: &Path, mem_path: &Path) -> Result<(), Error> {
        match &self.paths.jail {
            None => {
                let call = ApiCall::create_snapshot(&utf8(snapshot_path)?, &utf8(mem_path)?)?;
                self.api.send(&call).await.map(drop)
            }
            Some(_) => {
                let call = ApiCall::create_snapshot(jail_names::SNAPSHOT, jail_names::MEMORY)?;
                self.api.send(&call).await?;
                move_file(&self.paths.host_path(jail_names::SNAPSHOT), snapshot_path)?;
                move_file(&self.paths.host_path(jail_names::MEMORY), mem_path)
            }
        }
    }

    async fn run(&self, plan: &[ApiCall]) -> Result<(), Error> {
        for call in plan {
            self.api.send(call).await?;
        }
        Ok(())
    }

    /// Waits until the API socket accepts a connection, failing early if the
    /// process exits.
    async fn wait_for_api(&mut self, timeout: Duration) -> Result<(), Error> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait().map_err(|e| Error::io("waiting for firecracker", e))?
            {
                self.child = None;
                return Err(start_error(format!(
                    "firecracker exited ({status}) before its API answered{}",
                    self.diagnostics()
                )));
            }
            if UnixStream::connect(&self.paths.api_socket).await.is_ok() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(start_error(format!(
                    "the API socket {} did not answer within {timeout:?}{}",
                    self.paths.api_socket.display(),
                    self.diagnostics()
                )));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The tails of Firecracker's stderr and log, for error messages.
    fn diagnostics(&self) -> String {
        let mut out = String::new();
        for (what, path) in [("stderr", &self.paths.stderr), ("log", &self.paths.log)] {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(10).collect();
            if !tail.is_empty() {
                out.push_str(&format!("; {what}: "));
                out.push_str(&tail.into_iter().rev().collect::<Vec<_>>().join(" | "));
            }
        }
        out
    }

    async fn kill_and_clean(&mut self) {
        if let Some(mut child) = self.child.take() {
            super::kill_process_group(&mut child).await;
        }
        self.clean_files();
    }

    /// Removes what Firecracker (or the jailer) left: sockets, the jail and
    /// its cgroup. Only once the process is gone.
    fn clean_files(&self) {
        for socket in [&self.paths.api_socket, &self.paths.vsock] {
            if let Err(e) = remove_file_if_exists(socket) {
                warn!(error = %e, "removing a firecracker socket");
            }
        }
        if let Some(jail) = &self.paths.jail {
            if let Err(e) = remove_tree(&jail.dir) {
                warn!(error = %e, "removing the firecracker jail");
            }
            if let Some(cgroup) = &jail.cgroup
                && let Err(e) = std::fs::remove_dir(cgroup)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                warn!(cgroup = %cgroup.display(), error = %e, "removing the jailer's cgroup");
            }
        }
    }
}

impl Drop for FirecrackerVm {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let _ = child.start_kill();
            // The cgroup can only go once the process is reaped; the
            // sandbox's sweep removes it if this was the last chance.
            for socket in [&self.paths.api_socket, &self.paths.vsock] {
                let _ = remove_file_if_exists(socket);
            }
            if let Some(jail) = &self.paths.jail {
                let _ = remove_tree(&jail.dir);
            }
        }
    }
}

#[async_trait]
impl Vm for FirecrackerVm {
    fn vsock_path(&self) -> &Path {
        &self.paths.vsock
    }

    fn pids(&self) -> Vec<u32> {
        self.child.as_ref().and_then(|c| c.id()).into_iter().collect()
    }

    async fn wait_exit(&mut self, timeout: Duration) -> Result<bool, Error> {
        let Some(child) = self.child.as_mut() else { return Ok(true) };
        match tokio::time::timeout(timeout, child.wait()).await {
            Ok(Ok(status)) => {
                info!(vm = %self.name, %status, "firecracker exited");
                self.child = None;
                self.clean_files();
                Ok(true)
            }
            Ok(Err(e)) => Err(Error::io("waiting for firecracker", e)),
            Err(_) => Ok(false),
        }
    }

    async fn kill(&mut self) -> Result<(), Error> {
        self.kill_and_clean().await;
        Ok(())
    }
}

#[async_trait]
impl Vmm for Firecracker {
    fn name(&self) -> String {
        BACKEND.into()
    }

    fn check(&self) -> Result<(), Error> {
        self.firecracker_binary()?;
        if let Some(jailer) = &self.config.jailer {
            validate_jailer(jailer)?;
            Self::jailer_binary(jailer)?;
            exec_file_name(&self.firecracker_binary()?)?;
        }
        let kvm = Path::new("/dev/kvm");
        std::fs::OpenOptions::new().read(true).write(true).open(kvm).map_err(|e| Error::Missing {
            what: "/dev/kvm".into(),
            path: kvm.display().to_string(),
            hint: format!(
                "Firecracker needs hardware virtualisation: a KVM host (bare metal, or nested virtualisation \
                 enabled), the kvm_intel or kvm_amd module loaded and read-write access to /dev/kvm ({e}); \
                 use the QEMU backend elsewhere"
            ),
        })?;
        Ok(())
    }

    async fn start(&self, spec: &VmSpec) -> Result<Box<dyn Vm>, Error> {
        Ok(Box::new(self.start_vm(spec).await?))
    }
}

fn start_error(reason: impl Into<String>) -> Error {
    Error::Start { backend: BACKEND.into(), reason: reason.into() }
}

fn missing(what: &str, path: &Path) -> Error {
    Error::Missing { what: what.into(), path: path.display().to_string(), hint: INSTALL_HINT.into() }
}

/// Finds `program` on PATH unless it is a path already.
fn locate(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_owned());
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join(program)).find(|p| p.is_file()))
}

/// The jailer names the jail after the exec file and insists it says "firecracker".
fn exec_file_name(exec: &Path) -> Result<String, Error> {
    let name = exec.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if !name.contains("firecracker") {
        return Err(start_error(format!(
            "the jailer only runs an exec file whose name contains \"firecracker\", not {}",
            exec.display()
        )));
    }
    Ok(name.to_owned())
}

fn validate_spec(spec: &VmSpec) -> Result<(), Error> {
    // Firecracker's and the jailer's --id: alphanumerics and hyphens, at most 64.
    if spec.name.is_empty()
        || spec.name.len() > 64
        || !spec.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(start_error(format!(
            "VM name {:?} must be 1 to 64 ASCII letters, digits or hyphens",
            spec.name
        )));
    }
    if !(1..=32).contains(&spec.vcpus) {
        return Err(start_error(format!("{} vCPUs asked for; Firecracker takes 1 to 32", spec.vcpus)));
    }
    if spec.memory_mib == 0 {
        return Err(start_error("guest memory must be above 0 MiB"));
    }
    if spec.guest_cid < 3 {
        return Err(start_error(format!("guest CID {} is reserved; use 3 or above", spec.guest_cid)));
    }
    Ok(())
}

fn validate_jailer(jailer: &JailerConfig) -> Result<(), Error> {
    if jailer.uid == 0 || jailer.gid == 0 {
        return Err(start_error("the jailer must drop to a non-root uid and gid"));
    }
    if !matches!(jailer.cgroup_version, 1 | 2) {
        return Err(start_error(format!("cgroup_version {} is not 1 or 2", jailer.cgroup_version)));
    }
    if !jailer.chroot_base.is_absolute() {
        return Err(start_error("the jailer's chroot_base must be an absolute path"));
    }
    Ok(())
}

fn check_socket_path(path: &Path, suffix: usize) -> Result<(), Error> {
    let len = path.as_os_str().len() + suffix;
    if len > MAX_SOCKET_PATH {
        return Err(start_error(format!(
            "socket path {} is too long for a Unix socket ({len} > {MAX_SOCKET_PATH} bytes with room for \
             a port suffix); use a shorter run folder or chroot_base",
            path.display()
        )));
    }
    Ok(())
}

fn utf8(path: &Path) -> Result<String, Error> {
    path.to_str().map(str::to_owned).ok_or_else(|| {
        start_error(format!("path {} is not UTF-8, which Firecracker's API needs", path.display()))
    })
}

fn int(value: u32, what: &str) -> Result<i32, Error> {
    i32::try_from(value).map_err(|_| start_error(format!("{what} {value} is out of range")))
}

fn chown(path: &Path, (uid, gid): (u32, u32)) -> Result<(), Error> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .map_err(|e| Error::io(format!("giving {} to {uid}:{gid}", path.display()), e))
}

/// Hard-links `from` to `to`, or copies it when they are on different filesystems.
fn link_into(from: &Path, to: &Path) -> Result<(), Error> {
    remove_file_if_exists(to)?;
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
            warn!(from = %from.display(), to = %to.display(), "copying into the jail (another filesystem)");
            std::fs::copy(from, to)
                .map(drop)
                .map_err(|e| Error::io(format!("copying {} to {}", from.display(), to.display()), e))
        }
        Err(e) => Err(Error::io(format!("linking {} to {}", from.display(), to.display()), e)),
    }
}

fn move_file(from: &Path, to: &Path) -> Result<(), Error> {
    match std::fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
            std::fs::copy(from, to)
                .map_err(|e| Error::io(format!("copying {} to {}", from.display(), to.display()), e))?;
            std::fs::remove_file(from).map_err(|e| Error::io(format!("removing {}", from.display()), e))
        }
        Err(e) => Err(Error::io(format!("moving {} to {}", from.display(), to.display()), e)),
    }
}

fn create_empty(path: &Path) -> Result<(), Error> {
    std::fs::File::create(path).map(drop).map_err(|e| Error::io(format!("creating {}", path.display()), e))
}

fn remove_file_if_exists(path: &Path) -> Result<(), Error> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(format!("removing {}", path.display()), e))
        }
        _ => Ok(()),
    }
}

fn remove_tree(path: &Path) -> Result<(), Error> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(format!("removing {}", path.display()), e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> VmSpec {
        VmSpec {
            name: name.into(),
            run_dir: "/run/pp/r1".into(),
            kernel: "/img/vmlinux".into(),
            initrd: "/img/initrd.img".into(),
            rootfs: "/img/rootfs.ext4".into(),
            scratch: "/run/pp/r1/scratch.ext4".into(),
            vcpus: 2,
            memory_mib: 1024,
            kernel_args: vec!["quiet".into(), "patchpilot.port=1024".into()],
            guest_cid: 3,
        }
    }

    #[test]
    fn boot_args_start_with_firecrackers_own_and_keep_the_specs_in_order() {
        assert_eq!(
            boot_args(&spec("r1")),
            "console=ttyS0 reboot=k panic=1 pci=off quiet patchpilot.port=1024"
        );
    }

    #[test]
    fn names_firecracker_would_refuse_are_refused_before_starting() {
        for name in ["", "has_underscore", "has space", &"x".repeat(65)] {
            assert!(matches!(validate_spec(&spec(name)), Err(Error::Start { .. })), "{name:?}");
        }
        assert!(validate_spec(&spec("0b6c1e9a-2f3d-4c5b-9a8e-7f6d5c4b3a21")).is_ok());
    }

    #[test]
    fn socket_paths_leave_room_for_the_port_suffix() {
        let long = PathBuf::from(format!("/{}", "d".repeat(100)));
        assert!(check_socket_path(&long, PORT_SUFFIX).is_err());
        assert!(check_socket_path(Path::new("/run/pp/r1/vm.vsock"), PORT_SUFFIX).is_ok());
    }

    #[test]
    fn config_defaults_and_jailer_defaults() {
        let config: FirecrackerConfig =
            serde_json::from_str(r#"{"jailer": {"uid": 900, "gid": 900}}"#).expect("config parses");
        let jailer = config.jailer.expect("jailer set");
        assert_eq!(config.binary, PathBuf::from("firecracker"));
        assert_eq!(config.api_timeout_secs, 10);
        assert_eq!(jailer.chroot_base, PathBuf::from("/srv/jailer"));
        assert_eq!(jailer.cgroup_version, 2);
        assert_eq!(jailer.binary, PathBuf::from("jailer"));
        assert!(
            serde_json::from_str::<FirecrackerConfig>(r#"{"jailer": {"uid": 1}}"#).is_err(),
            "gid required"
        );
        assert!(serde_json::from_str::<FirecrackerConfig>(r#"{"bogus": 1}"#).is_err());
    }

    #[test]
    fn a_missing_binary_says_where_to_get_firecracker_and_that_it_needs_kvm() {
        let fc = Firecracker::new(FirecrackerConfig {
            binary: "/nonexistent/firecracker".into(),
            ..FirecrackerConfig::default()
        });
        match fc.check() {
            Err(Error::Missing { what, hint, .. }) => {
                assert_eq!(what, "firecracker");
                assert!(hint.contains("github.com/firecracker-microvm/firecracker/releases"), "{hint}");
                assert!(hint.contains("/dev/kvm"), "{hint}");
            }
            other => panic!("expected Missing, got {other:?}"),
        }
    }

    #[test]
    fn the_jailer_must_not_run_firecracker_as_root() {
        let jailer = JailerConfig {
            binary: "jailer".into(),
            uid: 0,
            gid: 0,
            chroot_base: "/srv/jailer".into(),
            cgroup_version: 2,
            parent_cgroup: None,
            cgroups: vec![],
            netns: None,
        };
        assert!(matches!(validate_jailer(&jailer), Err(Error::Start { .. })));
    }
}
