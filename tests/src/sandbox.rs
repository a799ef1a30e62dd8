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
use patchpilot_sandbox::run::Sandbox;

/// The sandbox section as the services would load it.
pub fn config() -> anyhow::Result<SandboxConfig> {
    let config: Config = patchpilot_fleet::config::load(None)?;
    Ok(config.sandbox)
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

fn why_unavailable() -> Option<String> {
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
    if let Some(reason) = unavailable() {
        eprintln!("SKIPPED {test}: {reason}");
        return Ok(None);
    }
    let config = config()?;
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
