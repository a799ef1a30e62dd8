//! Shared set-up for tests that boot real microVMs: the sandbox config from
//! the environment `scripts/services env` prints, why a VM test cannot run
//! on this machine (it then skips and says so), and host process checks.
//!
//! `scripts/test` installs QEMU and vhost-device-vsock (`scripts/services
//! vm`) and builds the guest image before the tests, so in CI these tests
//! always run; the skip is for a developer's partial set-up.

use std::path::Path;

use patchpilot_sandbox::config::{Config, SandboxConfig};
use patchpilot_sandbox::image::ImageBuilder;
use patchpilot_sandbox::run::{RunObserver, Sandbox};

/// The sandbox section as the services would load it.
pub fn config() -> anyhow::Result<SandboxConfig> {
    let config: Config = patchpilot_fleet::config::load(None)?;
    Ok(config.service)
}

/// Why microVM tests cannot run here, if they cannot. Under `scripts/test`
/// (which sets `PATCHPILOT_REQUIRE_MICROVM=1` after installing QEMU and
/// building the image) a missing piece fails the test instead: CI must
/// never pass by skipping the VMs.
pub fn unavailable() -> Option<String> {
    let reason = why_unavailable()?;
    if std::env::var_os("PATCHPILOT_REQUIRE_MICROVM").is_some_and(|v| v == "1") {
        panic!("microVM tests are required here (PATCHPILOT_REQUIRE_MICROVM=1) but cannot run: {reason}");
    }
    Some(reason)
}

/// Why microVMs cannot run here, if they cannot, whatever the environment
/// requires (`patchpilot eval` reports it as an error).
pub fn why_unavailable() -> Option<String> {
    if std::env::var_os("PATCHPILOT_SANDBOX__QEMU__BINARY").is_none() {
        return Some(
            "PATCHPILOT_SANDBOX__QEMU__BINARY is unset: run `scripts/services vm` and `eval \"$(scripts/services env)\"`".into(),
        );
    }
    let config = match config() {
        Ok(c) => c,
        Err(e) => return Some(format!("sandbox config: {e}")),
    };
    match ImageBuilder::new(&config.image, &config.state_dir).and_then(|b| b.cached()) {
        Ok(Some(_)) => None,
        Ok(None) => Some("the guest image is not built for the current inputs: run `target/debug/patchpilot sandbox image build`".into()),
        Err(e) => Some(format!("guest image: {e}")),
    }
}

/// A ready sandbox, or `None` (with the reason printed) when VM tests
/// cannot run here.
pub async fn sandbox(test: &str) -> anyhow::Result<Option<Sandbox>> {
    sandbox_with(test, |_| {}).await
}

/// [`sandbox`] with the config changed by `tweak` first.
pub async fn sandbox_with(
    test: &str,
    tweak: impl FnOnce(&mut SandboxConfig),
) -> anyhow::Result<Option<Sandbox>> {
    if let Some(reason) = unavailable() {
        eprintln!("SKIPPED {test}: {reason}");
        return Ok(None);
    }
    let mut config = config()?;
    tweak(&mut config);
    let mut progress = |m: &str| eprintln!("sandbox: {m}");
    Ok(Some(Sandbox::prepare(&config, &mut progress).await?))
}

/// Live host processes whose command line mentions `needle` (a run folder,
/// a state folder), as `(pid, command line)`: the worker's own start-up
/// sweep scan.
pub fn processes_mentioning(needle: &Path) -> Vec<(u32, String)> {
    patchpilot_sandbox::sweep::live_processes_mentioning(needle)
        .into_iter()
        .map(|l| (l.pid, l.cmdline))
        .collect()
}

/// Whether `pid` is gone or a zombie.
pub fn is_zombie(pid: u32) -> bool {
    !patchpilot_sandbox::sweep::process_alive(pid)
}

/// One VM test at a time, also under plain `cargo test` (the nextest
/// `microvm` group does the same across processes).
pub static VM_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Run time allowed for one run, boot included, under TCG on a loaded host.
pub const RUN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The sandbox worker's config in tests: one slot, TCG, small VMs.
pub const WORKER_TOML: &str = r#"
[sandbox]
slots = 1
boot_timeout_secs = 120
[sandbox.qemu]
accel = "tcg"
[sandbox.limits]
wall_time_secs = 240
vcpus = 1
memory_mib = 768
disk_mib = 512
"#;

/// The shared guest image folder, or why the VM tests cannot run here.
fn image_dir() -> Result<std::path::PathBuf, String> {
    match unavailable() {
        Some(reason) => Err(reason),
        None => config().map(|c| c.state_dir.join("image")).map_err(|e| e.to_string()),
    }
}

/// Prints why a VM test is skipped; `None` when it can run.
pub fn skip_reason(test: &str) -> Option<String> {
    match image_dir() {
        Ok(_) => None,
        Err(reason) => {
            eprintln!("SKIPPED {test}: {reason}");
            Some(reason)
        }
    }
}

/// A private state folder whose `image` is the shared one: the workers'
/// sweep kills processes naming `<state>/runs/`, so tests must never share a
/// state folder with anyone else's VMs.
pub fn private_state(stack: &crate::Stack) -> anyhow::Result<std::path::PathBuf> {
    private_state_named(stack, "state")
}

/// [`private_state`] under another name: for a second worker of a stack.
pub fn private_state_named(stack: &crate::Stack, name: &str) -> anyhow::Result<std::path::PathBuf> {
    let state = stack.dir.path().join(name);
    std::fs::create_dir_all(&state)?;
    std::os::unix::fs::symlink(image_dir().map_err(anyhow::Error::msg)?, state.join("image"))?;
    Ok(state)
}

/// Starts a sandbox worker named `name` on `state` with [`WORKER_TOML`].
pub fn spawn_worker(stack: &crate::Stack, state: &Path, name: &str) -> anyhow::Result<crate::Service> {
    spawn_worker_with(stack, state, name, WORKER_TOML)
}

/// Starts a sandbox worker named `name` on `state` with config `toml`.
pub fn spawn_worker_with(
    stack: &crate::Stack,
    state: &Path,
    name: &str,
    toml: &str,
) -> anyhow::Result<crate::Service> {
    let config = stack.write_config(&format!("{name}.toml"), toml)?;
    let mut env = stack.env();
    env.push(("PATCHPILOT_SANDBOX__STATE_DIR".into(), state.display().to_string()));
    crate::Service::spawn(
        "patchpilot-sandbox-worker",
        &config,
        &env,
        stack.dir.path().join(format!("{name}.log")),
    )
}

/// A run observer that sends `signal` (if any, e.g. `-STOP`) to the VMM
/// (QEMU, the first of a VM's processes) at the command's first output, and
/// notes when that output came: the liveness tests and the hang-detection
/// benchmark.
#[derive(Debug, Default)]
pub struct SignalAtFirstOutput {
    /// The `kill` option to send, if any.
    pub signal: Option<&'static str>,
    /// The VM's processes.
    pub pids: Vec<u32>,
    /// When the first output arrived (and the signal went).
    pub first_output: Option<std::time::Instant>,
}

impl RunObserver for SignalAtFirstOutput {
    fn vm_started(&mut self, pids: &[u32]) {
        self.pids = pids.to_vec();
    }

    fn output(&mut self, _: patchpilot_proto::v1::OutputStream, _: &[u8]) {
        if self.first_output.is_some() {
            return;
        }
        if let Some(signal) = self.signal {
            let vmm = self.pids.first().expect("the VM's processes").to_string();
            let status = std::process::Command::new("kill").args([signal, &vmm]).status().expect("kill");
            assert!(status.success(), "kill {signal} {vmm}");
        }
        self.first_output = Some(std::time::Instant::now());
    }
}
