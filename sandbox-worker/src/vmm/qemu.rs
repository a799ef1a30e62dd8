//! The QEMU `microvm` backend: the guest kernel and initramfs booted
//! directly, virtio-mmio disks, and vsock through the userspace
//! `vhost-device-vsock` backend, which speaks the same hybrid-vsock Unix
//! socket protocol as Firecracker.
//!
//! It uses KVM only when a guest has actually been seen to boot under it
//! ([`Qemu::set_accel`], decided by the sandbox's probe boot): some hosts
//! expose a `/dev/kvm` that cannot run a stock kernel. Otherwise it runs
//! under TCG, slower but everywhere.
//!
//! This module must never give the guest a host network device, a shared
//! folder or a host socket other than the vsock backend's: the guest's only
//! way out is vsock.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Deserializer, Serialize};
use tokio::process::{Child, Command};

use super::{Error, Vm, VmSpec, Vmm};

/// How QEMU accelerates the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// KVM if a probe guest boots under it, TCG otherwise.
    Auto,
    /// KVM, without probing.
    Kvm,
    /// Software emulation.
    Tcg,
}

/// `[sandbox.qemu]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QemuConfig {
    /// `qemu-system-x86_64`.
    pub binary: PathBuf,
    /// Folders with QEMU's firmware (`-L`); a colon-separated string is
    /// accepted so one environment variable can set it.
    #[serde(deserialize_with = "paths_or_colon_list")]
    pub firmware_dirs: Vec<PathBuf>,
    /// The `vhost-device-vsock` binary.
    pub vhost_vsock: PathBuf,
    /// Acceleration.
    pub accel: Accel,
    /// Passed to the guest as `tsc_early_khz`: without it a loaded host
    /// often leaves the guest calibrating its clock for seconds.
    pub tsc_early_khz: u32,
    /// More words for the guest kernel's command line, after PatchPilot's
    /// own (`nowatchdog`, `pci=off`…): how candidate fixes for TCG's boot
    /// hangs and lockups are measured. A list, or one space-separated
    /// string so one environment variable can set it.
    #[serde(deserialize_with = "words_or_list")]
    pub kernel_args: Vec<String>,
    /// Under TCG, the size of QEMU's cache of translated guest code
    /// (`-accel tcg,tb-size=`), in MiB of host memory per VM. When it
    /// fills, QEMU throws all of it away and translates again: at 64 MiB
    /// a Docker build does that often enough to take a quarter longer (see
    /// `docs/benchmarks.md`, "The translation cache").
    pub tcg_cache_mib: u32,
}

impl Default for QemuConfig {
    fn default() -> Self {
        QemuConfig {
            binary: PathBuf::from("qemu-system-x86_64"),
            firmware_dirs: Vec::new(),
            vhost_vsock: PathBuf::from("vhost-device-vsock"),
            accel: Accel::Auto,
            tsc_early_khz: 2_100_000,
            kernel_args: Vec::new(),
            tcg_cache_mib: 256,
        }
    }
}

/// A list, or one string `split` into its items, so that one environment
/// variable can set a list.
fn list_or_joined<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
    split: impl Fn(&str) -> Vec<T>,
) -> Result<Vec<T>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either<T> {
        List(Vec<T>),
        Joined(String),
    }
    Ok(match Either::<T>::deserialize(d)? {
        Either::List(list) => list,
        Either::Joined(s) => split(&s),
    })
}

fn paths_or_colon_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
    list_or_joined(d, |s| s.split(':').filter(|p| !p.is_empty()).map(PathBuf::from).collect())
}

fn words_or_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    list_or_joined(d, |s| s.split_whitespace().map(str::to_owned).collect())
}

/// The resolved acceleration a VM runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// Hardware virtualisation.
    Kvm,
    /// Software emulation.
    Tcg,
}

/// QEMU `microvm`.
pub struct Qemu {
    config: QemuConfig,
    accel: Mutex<Resolved>,
}

impl fmt::Debug for Qemu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Qemu").field("binary", &self.config.binary).field("accel", &self.accel()).finish()
    }
}

impl Qemu {
    /// A backend with `config`; TCG until [`Qemu::set_accel`] says otherwise
    /// (or KVM when the config forces it).
    pub fn new(config: QemuConfig) -> Self {
        let accel = if config.accel == Accel::Kvm { Resolved::Kvm } else { Resolved::Tcg };
        Qemu { config, accel: Mutex::new(accel) }
    }

    /// The configuration.
    pub fn config(&self) -> &QemuConfig {
        &self.config
    }

    /// The acceleration new VMs get.
    pub fn accel(&self) -> Resolved {
        *self.accel.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the acceleration new VMs get (after a probe boot).
    pub fn set_accel(&self, accel: Resolved) {
        *self.accel.lock().unwrap_or_else(|e| e.into_inner()) = accel;
    }

    /// Whether a KVM probe makes sense at all.
    pub fn kvm_candidate(&self) -> bool {
        self.config.accel == Accel::Auto && Path::new("/dev/kvm").exists()
    }

    /// QEMU's arguments for `spec` under `accel`.
    pub fn arguments(&self, spec: &VmSpec, accel: Resolved) -> Vec<String> {
        let run = &spec.run_dir;
        let mut args: Vec<String> = Vec::new();
        let mut push = |items: &[&str]| args.extend(items.iter().map(|s| s.to_string()));
        push(&["-no-user-config", "-nodefaults", "-no-reboot", "-display", "none"]);
        push(&["-M", "microvm,memory-backend=mem,rtc=on", "-smp"]);
        args.push(spec.vcpus.to_string());
        match accel {
            Resolved::Kvm => args.extend(["-accel", "kvm", "-cpu", "host"].map(String::from)),
            // QEMU's default cache is up to 1 GiB of host memory per VM,
            // which a Docker build fills; a quarter of that builds as fast.
            Resolved::Tcg => args.extend([
                "-accel".into(),
                format!("tcg,tb-size={}", self.config.tcg_cache_mib),
                "-cpu".into(),
                "max".into(),
            ]),
        }
        args.extend(["-m".into(), format!("{}M", spec.memory_mib)]);
        // vhost-user needs guest memory the backend process can map.
        args.extend([
            "-object".into(),
            format!("memory-backend-memfd,id=mem,size={}M,share=on", spec.memory_mib),
        ]);
        for dir in &self.config.firmware_dirs {
            args.extend(["-L".into(), dir.display().to_string()]);
        }
        args.extend(["-serial".into(), format!("file:{}", spec.console_path().display())]);
        args.extend(["-kernel".into(), spec.kernel.display().to_string()]);
        args.extend(["-initrd".into(), spec.initrd.display().to_string()]);
        let mut cmdline = vec![
            "console=ttyS0".to_string(),
            "panic=-1".into(),
            "quiet".into(),
            format!("tsc_early_khz={}", self.config.tsc_early_khz),
        ];
        cmdline.extend(self.config.kernel_args.iter().cloned());
        cmdline.extend(spec.kernel_args.iter().cloned());
        args.extend(["-append".into(), cmdline.join(" ")]);
        args.extend([
            "-drive".into(),
            format!("id=root,file={},format=raw,if=none,read-only=on", spec.rootfs.display()),
            "-device".into(),
            "virtio-blk-device,drive=root".into(),
            "-drive".into(),
            format!("id=scratch,file={},format=raw,if=none,cache=unsafe", spec.scratch.display()),
            "-device".into(),
            "virtio-blk-device,drive=scratch".into(),
            "-chardev".into(),
            format!("socket,id=vsock,path={}", vhost_socket(run).display()),
            "-device".into(),
            "vhost-user-vsock-device,chardev=vsock".into(),
        ]);
        args
    }

    fn missing(what: &str, path: &Path, hint: &str) -> Error {
        Error::Missing { what: what.into(), path: path.display().to_string(), hint: hint.into() }
    }
}

fn vhost_socket(run_dir: &Path) -> PathBuf {
    run_dir.join("vhost.sock")
}

/// Finds `program` on PATH unless it is a path already.
fn locate(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_owned());
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join(program)).find(|p| p.is_file()))
}

#[async_trait]
impl Vmm for Qemu {
    fn name(&self) -> String {
        match self.accel() {
            Resolved::Kvm => "qemu-kvm".into(),
            Resolved::Tcg => "qemu-tcg".into(),
        }
    }

    fn check(&self) -> Result<(), Error> {
        if locate(&self.config.binary).is_none() {
            return Err(Self::missing(
                "qemu-system-x86_64",
                &self.config.binary,
                "run `scripts/services vm` (unpacks Debian's qemu-system-x86), or install qemu-system-x86 and set sandbox.qemu.binary",
            ));
        }
        if locate(&self.config.vhost_vsock).is_none() {
            return Err(Self::missing(
                "vhost-device-vsock",
                &self.config.vhost_vsock,
                "run `scripts/services vm`, or `cargo install --locked vhost-device-vsock --version 0.3.0` and set sandbox.qemu.vhost_vsock",
            ));
        }
        Ok(())
    }

    async fn start(&self, spec: &VmSpec) -> Result<Box<dyn Vm>, Error> {
        self.check()?;
        let accel = self.accel();
        let backend = self.name();
        let run = &spec.run_dir;
        let vhost_path = vhost_socket(run);
        // A second boot in the same run (after a boot that hung) must not
        // find the first VM's sockets: the wait below would take a stale one
        // for the new backend's.
        let _ = std::fs::remove_file(&vhost_path);
        let _ = std::fs::remove_file(spec.vsock_path());
        let log = |name: &str| -> Result<Stdio, Error> {
            let path = run.join(name);
            std::fs::File::create(&path)
                .map(Stdio::from)
                .map_err(|e| Error::io(format!("creating {}", path.display()), e))
        };

        // Both processes lead their own process group so that a kill takes
        // any helper they spawn with them; the run folder appears in both
        // command lines, which is what the start-up sweep looks for.
        let mut vhost = Command::new(&self.config.vhost_vsock);
        vhost
            .arg("--guest-cid")
            .arg(spec.guest_cid.to_string())
            .arg("--socket")
            .arg(&vhost_path)
            .arg("--uds-path")
            .arg(spec.vsock_path())
            .stdin(Stdio::null())
            .stdout(log("vhost-vsock.log")?)
            .stderr(log("vhost-vsock.err")?)
            .env_clear()
            .process_group(0)
            .kill_on_drop(true);
        super::die_with_spawner(&mut vhost);
        let vhost = vhost
            .spawn()
            .map_err(|e| Error::io(format!("starting {}", self.config.vhost_vsock.display()), e))?;
        let mut vm =
            QemuVm { vsock: spec.vsock_path(), qemu: None, vhost: Some(vhost), run_dir: run.clone() };

        // QEMU connects to the backend's socket at start; wait for it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !vhost_path.exists() {
            if let Some(child) = vm.vhost.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                let err = std::fs::read_to_string(run.join("vhost-vsock.err")).unwrap_or_default();
                return Err(Error::Start {
                    backend,
                    reason: format!("vhost-device-vsock exited ({status}): {}", err.trim()),
                });
            }
            if tokio::time::Instant::now() > deadline {
                vm.kill().await?;
                return Err(Error::Start {
                    backend,
                    reason: "vhost-device-vsock did not create its socket in 10 s".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }

        let mut qemu = Command::new(&self.config.binary);
        qemu.args(self.arguments(spec, accel))
            .stdin(Stdio::null())
            .stdout(log("qemu.log")?)
            .stderr(log("qemu.err")?)
            .env_clear()
            .process_group(0)
            .kill_on_drop(true);
        super::die_with_spawner(&mut qemu);
        match qemu.spawn() {
            Ok(child) => vm.qemu = Some(child),
            Err(e) => {
                vm.kill().await?;
                return Err(Error::io(format!("starting {}", self.config.binary.display()), e));
            }
        }
        // A QEMU that exits at once (a bad argument, missing firmware) is
        // noticed by the boot wait, which polls `wait_exit`: sleeping here
        // to catch it would add to every run's start-up.
        Ok(Box::new(vm))
    }
}

/// A running QEMU guest and its vsock backend.
#[derive(Debug)]
pub struct QemuVm {
    vsock: PathBuf,
    qemu: Option<Child>,
    vhost: Option<Child>,
    run_dir: PathBuf,
}

impl QemuVm {
    /// What QEMU wrote to stderr, for error messages.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.run_dir.join("qemu.err")).unwrap_or_default()
    }
}

#[async_trait]
impl Vm for QemuVm {
    fn vsock_path(&self) -> &Path {
        &self.vsock
    }

    fn pids(&self) -> Vec<u32> {
        [self.qemu.as_ref(), self.vhost.as_ref()].into_iter().flatten().filter_map(|c| c.id()).collect()
    }

    async fn wait_exit(&mut self, timeout: Duration) -> Result<bool, Error> {
        let Some(qemu) = self.qemu.as_mut() else { return Ok(true) };
        match tokio::time::timeout(timeout, qemu.wait()).await {
            Ok(Ok(_)) => {
                self.qemu = None;
                // The backend outlives QEMU otherwise.
                if let Some(mut vhost) = self.vhost.take() {
                    super::kill_process_group(&mut vhost).await;
                }
                Ok(true)
            }
            Ok(Err(e)) => Err(Error::io("waiting for qemu", e)),
            Err(_) => Ok(false),
        }
    }

    async fn kill(&mut self) -> Result<(), Error> {
        if let Some(mut qemu) = self.qemu.take() {
            super::kill_process_group(&mut qemu).await;
        }
        if let Some(mut vhost) = self.vhost.take() {
            super::kill_process_group(&mut vhost).await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> VmSpec {
        VmSpec {
            name: "r1".into(),
            run_dir: "/state/runs/r1".into(),
            kernel: "/img/vmlinux".into(),
            initrd: "/img/initrd.gz".into(),
            rootfs: "/img/rootfs.ext4".into(),
            scratch: "/state/runs/r1/scratch.ext4".into(),
            vcpus: 2,
            memory_mib: 512,
            kernel_args: vec!["patchpilot.probe=1".into()],
            guest_cid: 3,
        }
    }

    #[test]
    fn rootfs_is_read_only_and_no_network_device_is_attached() {
        let args = Qemu::new(QemuConfig::default()).arguments(&spec(), Resolved::Tcg);
        let joined = args.join(" ");
        assert!(joined.contains("file=/img/rootfs.ext4,format=raw,if=none,read-only=on"));
        assert!(joined.contains("-nodefaults"));
        assert!(!joined.contains("-netdev") && !joined.contains("-nic") && !joined.contains("virtfs"));
        assert!(joined.contains("-accel tcg,tb-size=256 -cpu max"));
        assert!(joined.contains("memory-backend-memfd,id=mem,size=512M,share=on"));
        assert!(joined.contains("patchpilot.probe=1"));
    }

    #[test]
    fn configured_kernel_args_follow_patchpilots_own_from_a_list_or_one_string() {
        for config in
            [r#"{"kernel_args": ["pci=off", "nowatchdog"]}"#, r#"{"kernel_args": "pci=off  nowatchdog"}"#]
        {
            let config: QemuConfig = serde_json::from_str(config).expect(config);
            assert_eq!(config.kernel_args, ["pci=off", "nowatchdog"]);
            let args = Qemu::new(config).arguments(&spec(), Resolved::Tcg);
            let at = args.iter().position(|a| a == "-append").expect("-append");
            assert!(
                args[at + 1].ends_with("quiet tsc_early_khz=2100000 pci=off nowatchdog patchpilot.probe=1")
            );
        }
    }

    #[test]
    fn kvm_uses_the_host_cpu() {
        let args = Qemu::new(QemuConfig::default()).arguments(&spec(), Resolved::Kvm);
        assert!(args.join(" ").contains("-accel kvm -cpu host"));
    }

    #[test]
    fn a_missing_binary_says_how_to_install_it() {
        let config = QemuConfig { binary: "/nonexistent/qemu".into(), ..QemuConfig::default() };
        let err = Qemu::new(config).check().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("/nonexistent/qemu") && err.contains("scripts/services vm"), "{err}");
    }
}
