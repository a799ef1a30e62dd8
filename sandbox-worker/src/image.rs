//! The guest image: an uncompressed kernel, an initramfs and a read-only
//! ext4 root, built from Debian packages and cached by the hash of their
//! inputs.
//!
//! Layers, so that the common change (a new guest agent or remediation
//! agent binary) costs seconds, not minutes:
//! - the **base** (kernel, kernel modules, debootstrapped root with Docker,
//!   iptables and git): keyed by suite, mirror, kernel package, package and
//!   module lists;
//! - the **initramfs** (busybox, the init script, the early modules and the
//!   `patchpilot-guest` binary): keyed by the base and those files;
//! - the **agent root**, when a built-in agent is configured or found next
//!   to the running binary: a sparse copy of the base root with
//!   `patchpilot-agent` written into `/usr/local/bin` by `debugfs` (no
//!   mount needed): keyed by the initramfs and the agent binary. The agent
//!   is in the root, not the initramfs, so it costs no boot time: its pages
//!   load only when a run starts it.
//!
//! The build never reads the host's environment into the image and never
//! copies host configuration (resolv.conf, credentials, sockets) into it.

use patchpilot_model::{IoError, io};
use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::config::ImageConfig;

const INIT: &str = include_str!("../../deploy/guest/init");
const PACKAGES: &str = include_str!("../../deploy/guest/packages.txt");
const INITRD_MODULES: &str = include_str!("../../deploy/guest/initrd-modules.txt");
const ROOTFS_MODULES: &str = include_str!("../../deploy/guest/rootfs-modules.txt");
/// Bumped when the build steps change in a way the inputs do not show.
const FORMAT: &str = "patchpilot-guest-image/1";

/// A built image, ready to boot.
#[derive(Debug, Clone)]
pub struct Image {
    /// Uncompressed ELF kernel.
    pub kernel: PathBuf,
    /// gzip newc initramfs.
    pub initrd: PathBuf,
    /// Read-only ext4 root (label `ppguest`).
    pub rootfs: PathBuf,
    /// Hash of every input; names the image in logs and results.
    pub key: String,
}

/// Why a build failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A build command failed.
    #[error("{command} failed: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status and the end of its stderr.
        detail: String,
    },
    /// A tool is missing.
    #[error("{tool} not found: {hint}")]
    MissingTool {
        /// The tool.
        tool: String,
        /// How to install it.
        hint: String,
    },
    /// Something in the inputs is wrong.
    #[error("{0}")]
    Input(String),
    /// File-system trouble.
    #[error(transparent)]
    Io(#[from] IoError),
}

fn list(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect()
}

fn run(cmd: &mut Command) -> Result<std::process::Output, Error> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::MissingTool {
                tool: format!("{:?}", cmd.get_program()),
                hint: "run `scripts/services vm`".into(),
            }
        } else {
            Error::Io(IoError::new(shown.clone(), e))
        }
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(Error::Command {
            command: shown,
            detail: format!("{}: {}", out.status, tail.join("\n")),
        });
    }
    Ok(out)
}

/// Builds and caches guest images under `<state_dir>/image`.
#[derive(Debug, Clone)]
pub struct ImageBuilder {
    config: ImageConfig,
    dir: PathBuf,
    guest_binary: PathBuf,
    agent_binary: Option<PathBuf>,
}

impl ImageBuilder {
    /// A builder for `config` keeping its output under `state_dir/image`.
    pub fn new(config: &ImageConfig, state_dir: &Path) -> Result<Self, Error> {
        let guest_binary = match &config.guest_binary {
            Some(path) => path.clone(),
            None => default_guest_binary()?,
        };
        let agent_binary = match &config.agent_binary {
            Some(path) if path.as_os_str().is_empty() => None,
            Some(path) => Some(path.clone()),
            None => next_to_exe("patchpilot-agent"),
        };
        Ok(ImageBuilder { config: config.clone(), dir: state_dir.join("image"), guest_binary, agent_binary })
    }

    /// The built-in agent that goes into the root, if any.
    pub fn agent_binary(&self) -> Option<&Path> {
        self.agent_binary.as_deref()
    }

    /// The `patchpilot-guest` binary that goes into the initramfs.
    pub fn guest_binary(&self) -> &Path {
        &self.guest_binary
    }

    /// The image for the current inputs, if it has been built.
    pub fn cached(&self) -> Result<Option<Image>, Error> {
        let Some(kernel_package) = self.kernel_package_cached() else { return Ok(None) };
        let base_key = self.base_key(&kernel_package);
        let base = self.dir.join(format!("base-{}", &base_key[..16]));
        if !base.join("done").exists() {
            return Ok(None);
        }
        let initrd_key = self.initrd_key(&base_key)?;
        let initrd = self.dir.join(format!("initrd-{}.gz", &initrd_key[..16]));
        if !initrd.exists() {
            return Ok(None);
        }
        let (rootfs, key) = self.root_for(&base, &initrd_key)?;
        if !rootfs.exists() {
            return Ok(None);
        }
        Ok(Some(Image { kernel: base.join("vmlinux"), initrd, rootfs, key }))
    }

    /// The root to boot and the image key: the base root, or the agent
    /// root keyed by the initramfs and the agent.
    fn root_for(&self, base: &Path, initrd_key: &str) -> Result<(PathBuf, String), Error> {
        let Some(agent) = &self.agent_binary else {
            return Ok((base.join("rootfs.ext4"), initrd_key.to_owned()));
        };
        let mut h = Sha256::new();
        h.update(initrd_key.as_bytes());
        h.update([0]);
        hash_file(
            &mut h,
            agent,
            "the built-in agent (build it with `cargo build --profile guest -p patchpilot-sandbox-guest -p patchpilot-agent`)",
        )?;
        let key = hex::encode(h.finalize());
        Ok((self.dir.join(format!("rootfs-{}.ext4", &key[..16])), key))
    }

    /// The base (kernel, modules, debootstrapped root) for the current
    /// inputs, building it when missing; returns its folder and key. It
    /// needs neither the guest binary nor the agent, so a build can make it
    /// while those compile.
    pub fn ensure_base(&self, progress: &mut dyn FnMut(&str)) -> Result<(PathBuf, String), Error> {
        std::fs::create_dir_all(&self.dir).map_err(io(format!("creating {}", self.dir.display())))?;
        let kernel_package = self.kernel_package(progress)?;
        let base_key = self.base_key(&kernel_package);
        let base = self.dir.join(format!("base-{}", &base_key[..16]));
        if !base.join("done").exists() {
            self.build_base(&base, &kernel_package, progress)?;
        }
        Ok((base, base_key))
    }

    /// The image for the current inputs, building what is missing.
    /// `progress` hears about each step.
    pub fn ensure(&self, progress: &mut dyn FnMut(&str)) -> Result<Image, Error> {
        let (base, base_key) = self.ensure_base(progress)?;
        let initrd_key = self.initrd_key(&base_key)?;
        let initrd = self.dir.join(format!("initrd-{}.gz", &initrd_key[..16]));
        if !initrd.exists() {
            progress("building the initramfs");
            self.build_initrd(&base, &initrd)?;
            prune(&self.dir, "initrd-", 4);
        }
        let (rootfs, key) = self.root_for(&base, &initrd_key)?;
        if let Some(agent) = &self.agent_binary
            && !rootfs.exists()
        {
            progress("writing the built-in agent into the root");
            add_agent(&base.join("rootfs.ext4"), agent, &rootfs)?;
            prune(&self.dir, "rootfs-", 2);
        }
        Ok(Image { kernel: base.join("vmlinux"), initrd, rootfs, key })
    }

    fn kernel_package_cached(&self) -> Option<String> {
        if !self.config.kernel_package.is_empty() {
            return Some(self.config.kernel_package.clone());
        }
        std::fs::read_to_string(self.dir.join("kernel-package")).ok().map(|s| s.trim().to_owned())
    }

    /// The configured kernel package, or the newest `linux-image-*-amd64`
    /// apt knows (remembered, so the image does not change under a running
    /// fleet until an operator removes the file or names a package).
    fn kernel_package(&self, progress: &mut dyn FnMut(&str)) -> Result<String, Error> {
        if let Some(package) = self.kernel_package_cached() {
            return Ok(package);
        }
        progress("choosing the kernel package");
        let out = run(Command::new("apt-cache").args([
            "search",
            "--names-only",
            r"^linux-image-[0-9.]+-[0-9]+-amd64$",
        ]))?;
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(String::from))
            .collect();
        names.sort_by_key(|n| version_key(n));
        let chosen = names.pop().ok_or_else(|| {
            Error::Input("apt knows no linux-image-*-amd64 package; run apt-get update".into())
        })?;
        std::fs::write(self.dir.join("kernel-package"), &chosen)
            .map_err(io("remembering the kernel package"))?;
        Ok(chosen)
    }

    fn base_key(&self, kernel_package: &str) -> String {
        let mut h = Sha256::new();
        for part in
            [FORMAT, &self.config.suite, &self.config.mirror, kernel_package, PACKAGES, ROOTFS_MODULES]
        {
            h.update(part.as_bytes());
            h.update([0]);
        }
        h.update(self.config.rootfs_mib.to_le_bytes());
        hex::encode(h.finalize())
    }

    fn initrd_key(&self, base_key: &str) -> Result<String, Error> {
        let mut h = Sha256::new();
        for part in [FORMAT, base_key, INIT, INITRD_MODULES] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        hash_file(
            &mut h,
            &self.guest_binary,
            "the guest agent (build it with `cargo build --profile guest -p patchpilot-sandbox-guest -p patchpilot-agent`)",
        )?;
        Ok(hex::encode(h.finalize()))
    }

    fn build_base(
        &self,
        base: &Path,
        kernel_package: &str,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(), Error> {
        let work =
            self.dir.join(format!("{}.partial", base.file_name().and_then(|n| n.to_str()).unwrap_or("base")));
        if work.exists() {
            std::fs::remove_dir_all(&work).map_err(io(format!("removing {}", work.display())))?;
        }
        std::fs::create_dir_all(&work).map_err(io(format!("creating {}", work.display())))?;

        progress(&format!("downloading {kernel_package}"));
        run(Command::new("apt-get").current_dir(&work).args(["download", kernel_package]))?;
        let deb = std::fs::read_dir(&work)
            .map_err(io("listing the download"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .ok_or_else(|| Error::Input(format!("apt-get download {kernel_package} left no .deb")))?;
        let kroot = work.join("kernel");
        run(Command::new("dpkg").arg("-x").arg(&deb).arg(&kroot))?;
        let _ = std::fs::remove_file(&deb);
        let modules_root = kroot.join("lib/modules");
        let release = std::fs::read_dir(&modules_root)
            .map_err(io(format!("listing {}", modules_root.display())))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .next()
            .ok_or_else(|| Error::Input(format!("{kernel_package} holds no modules")))?;
        run(Command::new("depmod").arg("-b").arg(&kroot).arg(&release))?;

        progress("extracting the uncompressed kernel");
        let bzimage = kroot.join(format!("boot/vmlinuz-{release}"));
        extract_vmlinux(&bzimage, &work.join("vmlinux"))?;

        progress("debootstrap (a few minutes)");
        let root = work.join("root");
        let packages = list(PACKAGES).join(",");
        run(Command::new("debootstrap")
            .args(["--variant=minbase", &format!("--include={packages}"), &self.config.suite])
            .arg(&root)
            .arg(&self.config.mirror))?;

        progress("adding kernel modules to the root");
        let index = ModuleIndex::load(&kroot, &release)?;
        let (wanted, missing) = index.closure(&list(ROOTFS_MODULES));
        if !missing.is_empty() {
            progress(&format!(
                "modules not in {kernel_package} (built in or absent): {}",
                missing.join(", ")
            ));
        }
        let dest_modules = root.join("lib/modules").join(&release);
        for rel in &wanted {
            let to = dest_modules.join(rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
            }
            std::fs::copy(index.dir.join(rel), &to).map_err(io(format!("copying module {rel}")))?;
        }
        for extra in ["modules.builtin", "modules.builtin.modinfo", "modules.order"] {
            let from = index.dir.join(extra);
            if from.exists() {
                std::fs::copy(&from, dest_modules.join(extra)).map_err(io(format!("copying {extra}")))?;
            }
        }
        run(Command::new("depmod").arg("-b").arg(&root).arg(&release))?;

        // Guest-only configuration: nothing from the host.
        let etc = root.join("etc");
        std::fs::write(etc.join("hostname"), "sandbox\n").map_err(io("writing /etc/hostname"))?;
        std::fs::write(etc.join("resolv.conf"), "nameserver 127.0.0.1\n")
            .map_err(io("writing /etc/resolv.conf"))?;
        std::fs::write(etc.join("hosts"), "127.0.0.1 localhost sandbox\n")
            .map_err(io("writing /etc/hosts"))?;
        let _ = std::fs::remove_dir_all(root.join("var/cache/apt/archives"));
        let _ = std::fs::remove_dir_all(root.join("var/lib/apt/lists"));
        std::fs::create_dir_all(root.join("workspace")).map_err(io("creating /workspace"))?;

        progress("making the ext4 root");
        let rootfs = work.join("rootfs.ext4");
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-L", "ppguest", "-E", "root_owner=0:0", "-d"])
            .arg(&root)
            .arg(&rootfs)
            .arg(format!("{}M", self.config.rootfs_mib)))?;
        std::fs::remove_dir_all(&root).map_err(io("removing the build root"))?;
        // The initramfs takes its modules from here.
        std::fs::rename(&index.dir, work.join("modules")).map_err(io("keeping the kernel modules"))?;
        std::fs::write(work.join("release"), &release).map_err(io("writing the kernel release"))?;
        let _ = std::fs::remove_dir_all(&kroot);
        std::fs::write(work.join("done"), kernel_package).map_err(io("marking the base done"))?;
        if base.exists() {
            std::fs::remove_dir_all(base).map_err(io(format!("removing {}", base.display())))?;
        }
        std::fs::rename(&work, base).map_err(io(format!("moving the base to {}", base.display())))?;
        Ok(())
    }

    fn build_initrd(&self, base: &Path, out: &Path) -> Result<(), Error> {
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .ok_or_else(|| Error::MissingTool {
                tool: "busybox".into(),
                hint: "apt-get install busybox-static".into(),
            })?;
        let index = ModuleIndex { dir: base.join("modules"), deps: HashMap::new(), builtin: BTreeSet::new() }
            .reload()?;
        let (wanted, missing) = index.closure(&list(INITRD_MODULES));
        for name in &missing {
            if !index.builtin.contains(name) {
                return Err(Error::Input(format!(
                    "initramfs module {name} is neither a module nor built into the kernel (deploy/guest/initrd-modules.txt)"
                )));
            }
        }
        let mut cpio = Cpio::default();
        for dir in ["bin", "dev", "proc", "sys", "modules", "lower", "scratch", "newroot", "tmp"] {
            cpio.dir(dir);
        }
        cpio.file("bin/busybox", 0o755, &std::fs::read(&busybox).map_err(io("reading busybox"))?);
        cpio.file("init", 0o755, INIT.as_bytes());
        let agent = stripped(&self.guest_binary)?;
        cpio.file("patchpilot-guest", 0o755, &agent);
        let mut order = String::new();
        for rel in &wanted {
            let name = module_name(rel);
            let data = std::fs::read(index.dir.join(rel)).map_err(io(format!("reading module {rel}")))?;
            let data = decompress_module(rel, data)?;
            cpio.file(&format!("modules/{name}.ko"), 0o644, &data);
            order.push_str(&name);
            order.push('\n');
        }
        cpio.file("modules/order", 0o644, order.as_bytes());
        let partial = out.with_extension("partial");
        let file = std::fs::File::create(&partial).map_err(io(format!("creating {}", partial.display())))?;
        let mut gz =
            flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::fast());
        gz.write_all(&cpio.finish()).map_err(io("writing the initramfs"))?;
        gz.finish().and_then(|mut w| w.flush()).map_err(io("writing the initramfs"))?;
        std::fs::rename(&partial, out).map_err(io("moving the initramfs in place"))?;
        Ok(())
    }
}

/// The guest agent without debug sections: the kernel unpacks the
/// initramfs and init copies the agent under emulation, where every
/// megabyte costs boot time. Without `strip` (binutils) it goes in as is.
fn stripped(binary: &Path) -> Result<Vec<u8>, Error> {
    let out = tempfile::NamedTempFile::new().map_err(io("creating a temporary file"))?;
    let status = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(out.path())
        .arg(binary)
        .stderr(std::process::Stdio::null())
        .status();
    let source = if matches!(status, Ok(s) if s.success()) { out.path() } else { binary };
    Ok(std::fs::read(source).map_err(io(format!("reading {}", source.display())))?)
}

/// Feeds the file at `path` to `h`; `what` names it in errors.
fn hash_file(h: &mut Sha256, path: &Path, what: &str) -> Result<(), Error> {
    let mut file = std::fs::File::open(path).map_err(io(format!("reading {what} at {}", path.display())))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io(format!("hashing {}", path.display())))?;
        if n == 0 {
            return Ok(());
        }
        h.update(&buf[..n]);
    }
}

/// Writes a copy of `base` (sparse) with `agent` (debug sections stripped)
/// at `/usr/local/bin/patchpilot-agent` to `out`, through `debugfs`: the
/// image is never mounted.
fn add_agent(base: &Path, agent: &Path, out: &Path) -> Result<(), Error> {
    let partial = out.with_extension("partial");
    run(Command::new("cp").arg("--sparse=always").arg(base).arg(&partial))?;
    let binary = tempfile::NamedTempFile::new().map_err(io("creating a temporary file"))?;
    std::fs::write(binary.path(), stripped(agent)?).map_err(io("writing the stripped agent"))?;
    let commands = tempfile::NamedTempFile::new().map_err(io("creating a temporary file"))?;
    let path = binary.path().to_str().ok_or_else(|| Error::Input("temporary path is not UTF-8".into()))?;
    // `mkdir` fails harmlessly when the folder exists; `write` then puts
    // the file in the current folder.
    let script = format!(
        "mkdir /usr/local/bin\ncd /usr/local/bin\nwrite {path} patchpilot-agent\nset_inode_field patchpilot-agent mode 0100755\n"
    );
    std::fs::write(commands.path(), script).map_err(io("writing the debugfs commands"))?;
    let out_log = run(Command::new("debugfs").arg("-w").arg("-f").arg(commands.path()).arg(&partial))?;
    let log =
        String::from_utf8_lossy(&out_log.stdout).into_owned() + &String::from_utf8_lossy(&out_log.stderr);
    if !log.contains("Allocated inode") {
        let _ = std::fs::remove_file(&partial);
        return Err(Error::Command { command: "debugfs write patchpilot-agent".into(), detail: log });
    }
    Ok(std::fs::rename(&partial, out).map_err(io(format!("moving {} in place", out.display())))?)
}

/// Removes all but the newest `keep` initramfs files: each guest agent
/// build makes one, and old ones are never booted again.
fn prune(dir: &Path, prefix: &str, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut initrds: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    initrds.sort();
    let excess = initrds.len().saturating_sub(keep);
    for (_, path) in initrds.into_iter().take(excess) {
        let _ = std::fs::remove_file(path);
    }
}

/// A guest binary `name`: in cargo's `target/guest/` beside the running
/// executable's profile folder when it was built with the guest profile
/// (see the workspace's `Cargo.toml`: only there does it carry the guest's
/// own feature set), else next to the running executable or one folder up
/// (test binaries in `target/debug/deps`), which is where an installation
/// puts it.
fn next_to_exe(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let up = dir.parent();
    let guest_profile = [
        up.map(|u| u.join("guest").join(name)),
        up.and_then(Path::parent).map(|u| u.join("guest").join(name)),
    ];
    if let Some(built) = guest_profile.into_iter().flatten().find(|p| p.is_file()) {
        return Some(built);
    }
    let beside =
        [Some(dir.join(name)), up.map(|u| u.join(name))].into_iter().flatten().find(|p| p.is_file())?;
    // In a cargo target folder (it holds CACHEDIR.TAG), a binary beside
    // this one came from a workspace build, with every crate's features.
    let in_cargo_target = beside.ancestors().skip(2).take(2).any(|t| t.join("CACHEDIR.TAG").is_file());
    if in_cargo_target {
        tracing::warn!(
            binary = %beside.display(),
            "the guest image takes a workspace build's {name}, which links the host's crates the workspace's features bring; build `cargo build --profile guest -p patchpilot-sandbox-guest -p patchpilot-agent` for the guest's own"
        );
    }
    Some(beside)
}

/// `patchpilot-guest` next to the running executable.
fn default_guest_binary() -> Result<PathBuf, Error> {
    next_to_exe("patchpilot-guest").ok_or_else(|| {
        Error::Input(format!(
            "patchpilot-guest not found next to {} (build it with `cargo build --profile guest -p patchpilot-sandbox-guest -p patchpilot-agent` or set sandbox.image.guest_binary)",
            std::env::current_exe().map(|e| e.display().to_string()).unwrap_or_default()
        ))
    })
}

/// Orders kernel package names by their numeric version parts.
fn version_key(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse().ok()).collect()
}

/// Finds the XZ stream inside a bzImage and decompresses it: an ELF
/// `vmlinux` boots several times faster under TCG than the bzImage, which
/// would decompress itself in emulation.
fn extract_vmlinux(bzimage: &Path, out: &Path) -> Result<(), Error> {
    let data = std::fs::read(bzimage).map_err(io(format!("reading {}", bzimage.display())))?;
    let magic = [0xFD, b'7', b'z', b'X', b'Z', 0x00];
    let start = data
        .windows(magic.len())
        .position(|w| w == magic)
        .ok_or_else(|| Error::Input(format!("{} holds no XZ stream", bzimage.display())))?;
    let file = std::fs::File::create(out).map_err(io(format!("creating {}", out.display())))?;
    let mut child = Command::new("xz")
        .args(["-dc", "--single-stream"])
        .stdin(std::process::Stdio::piped())
        .stdout(file)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(io("starting xz"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // xz stops reading at the end of the stream; the rest of the
        // bzImage is not ours to feed.
        match stdin.write_all(&data[start..]) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => return Err(Error::Io(IoError::new("feeding xz", e))),
        }
    }
    let status = child.wait_with_output().map_err(io("waiting for xz"))?;
    if !status.status.success() {
        return Err(Error::Command {
            command: "xz -dc".into(),
            detail: String::from_utf8_lossy(&status.stderr).into(),
        });
    }
    let head = std::fs::read(out).map_err(io("reading vmlinux"))?;
    if !head.starts_with(b"\x7fELF") {
        return Err(Error::Input(format!(
            "the kernel decompressed from {} is not an ELF file",
            bzimage.display()
        )));
    }
    Ok(())
}

fn module_name(rel: &str) -> String {
    let file = rel.rsplit('/').next().unwrap_or(rel);
    let stem = file.split(".ko").next().unwrap_or(file);
    stem.replace('-', "_")
}

fn decompress_module(rel: &str, data: Vec<u8>) -> Result<Vec<u8>, Error> {
    if rel.ends_with(".ko.xz") {
        let mut child = Command::new("xz")
            .arg("-dc")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(io("starting xz"))?;
        let mut stdin = child.stdin.take().ok_or_else(|| Error::Input("xz stdin".into()))?;
        let writer = std::thread::spawn(move || stdin.write_all(&data));
        let out = child.wait_with_output().map_err(io("decompressing a module"))?;
        let _ = writer.join();
        return Ok(out.stdout);
    }
    Ok(data)
}

/// The kernel's modules.dep, by module name.
#[derive(Debug)]
struct ModuleIndex {
    dir: PathBuf,
    /// name → (relative path, dependency names)
    deps: HashMap<String, (String, Vec<String>)>,
    builtin: BTreeSet<String>,
}

impl ModuleIndex {
    fn load(kernel_root: &Path, release: &str) -> Result<Self, Error> {
        ModuleIndex {
            dir: kernel_root.join("lib/modules").join(release),
            deps: HashMap::new(),
            builtin: BTreeSet::new(),
        }
        .reload()
    }

    fn reload(mut self) -> Result<Self, Error> {
        let dep = std::fs::read_to_string(self.dir.join("modules.dep"))
            .map_err(io(format!("reading {}/modules.dep", self.dir.display())))?;
        for line in dep.lines() {
            let Some((module, rest)) = line.split_once(':') else { continue };
            let deps = rest.split_whitespace().map(module_name).collect();
            self.deps.insert(module_name(module), (module.to_owned(), deps));
        }
        if let Ok(builtin) = std::fs::read_to_string(self.dir.join("modules.builtin")) {
            self.builtin = builtin.lines().map(module_name).collect();
        }
        Ok(self)
    }

    /// Relative paths of `names` and everything they need, dependencies
    /// first; and the names that are not modules.
    fn closure(&self, names: &[String]) -> (Vec<String>, Vec<String>) {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        let mut missing = Vec::new();
        fn visit(
            idx: &ModuleIndex,
            name: &str,
            seen: &mut BTreeSet<String>,
            out: &mut Vec<String>,
            missing: &mut Vec<String>,
        ) {
            if !seen.insert(name.to_owned()) {
                return;
            }
            match idx.deps.get(name) {
                Some((rel, deps)) => {
                    for d in deps {
                        visit(idx, d, seen, out, missing);
                    }
                    out.push(rel.clone());
                }
                None => missing.push(name.to_owned()),
            }
        }
        for name in names {
            visit(self, &name.replace('-', "_"), &mut seen, &mut out, &mut missing);
        }
        (out, missing)
    }
}

/// A newc ("070701") cpio archive, the format the kernel unpacks an
/// initramfs from.
#[derive(Debug, Default)]
struct Cpio {
    out: Vec<u8>,
    ino: u32,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.ino += 1;
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        self.out.extend_from_slice(header.as_bytes());
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }

    fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, &[]);
    }

    fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, 0o100000 | perm, data);
    }

    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpio_entries_are_aligned_newc() {
        let mut c = Cpio::default();
        c.dir("bin");
        c.file("init", 0o755, b"#!/bin/sh\n");
        let out = c.finish();
        assert!(out.starts_with(b"070701"));
        assert_eq!(out.len() % 4, 0);
        assert!(out.windows(10).any(|w| w == b"TRAILER!!!"));
        // The file's size field (7th field) is 10 bytes.
        let second =
            out.windows(6).enumerate().filter(|(_, w)| *w == b"070701").nth(1).map(|(i, _)| i).unwrap_or(0);
        assert_eq!(&out[second + 6 + 6 * 8..second + 6 + 7 * 8], b"0000000a");
    }

    #[test]
    fn kernel_packages_sort_by_version() {
        let mut names =
            ["linux-image-6.1.0-9-amd64", "linux-image-6.1.0-28-amd64", "linux-image-6.1.0-10-amd64"];
        names.sort_by_key(|n| version_key(n));
        assert_eq!(names.last(), Some(&"linux-image-6.1.0-28-amd64"));
    }

    #[test]
    fn module_names_normalise_dashes_and_suffixes() {
        assert_eq!(
            module_name("kernel/net/vmw_vsock/vmw_vsock_virtio_transport.ko"),
            "vmw_vsock_virtio_transport"
        );
        assert_eq!(module_name("kernel/drivers/net/dummy.ko.xz"), "dummy");
        assert_eq!(module_name("kernel/x/nf-nat.ko"), "nf_nat");
    }

    #[test]
    fn closure_puts_dependencies_first_and_reports_unknown_names() {
        let mut deps = HashMap::new();
        deps.insert("a".to_string(), ("k/a.ko".to_string(), vec!["b".to_string()]));
        deps.insert("b".to_string(), ("k/b.ko".to_string(), vec![]));
        let idx = ModuleIndex { dir: PathBuf::new(), deps, builtin: BTreeSet::new() };
        let (out, missing) = idx.closure(&["a".into(), "zz".into()]);
        assert_eq!(out, vec!["k/b.ko", "k/a.ko"]);
        assert_eq!(missing, vec!["zz"]);
    }
}
