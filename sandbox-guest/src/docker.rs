//! dockerd inside the guest, started when a run asks for it (or, in a
//! warm-pool VM, when the host prepares it before any run). Its data lives
//! on the scratch disc (overlay2 cannot sit on the overlay root) and its
//! socket stays inside the guest: the host's Docker is never reachable.
//!
//! dockerd runs with `--iptables=false`. The guest's NAT table belongs to
//! the egress set-up (`egress.rs`): its PREROUTING rules redirect every
//! container's DNS and TCP to the guest's responder and redirector, so
//! containers need no masquerading, and dockerd's own chains (about 6 s of
//! iptables processes under software emulation, a third of its start-up)
//! would only add rules that nothing uses.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// Modules dockerd needs for overlay2 and the default bridge; loaded by
/// name so modprobe resolves their dependencies from the image's
/// modules.dep. NAT and conntrack come with the egress set-up.
const MODULES: &[&str] = &["overlay", "bridge", "veth"];

/// The socket clients in the guest use.
pub const SOCKET: &str = "/run/docker.sock";

/// Starts dockerd and waits until it answers `/_ping`.
pub async fn start(insecure_registries: &[String], timeout: Duration) -> Result<Child, String> {
    // One process for all of them: under software emulation each process
    // start costs about a tenth of a second.
    let _ = Command::new("modprobe").arg("-a").args(MODULES).status().await;
    let data = Path::new("/mnt/scratch/docker");
    std::fs::create_dir_all(data).map_err(|e| format!("creating {}: {e}", data.display()))?;
    let log = std::fs::File::create("/mnt/scratch/dockerd.log")
        .map_err(|e| format!("creating dockerd.log: {e}"))?;
    let log_err = log.try_clone().map_err(|e| format!("dockerd.log: {e}"))?;
    let mut cmd = Command::new("dockerd");
    cmd.arg("--data-root")
        .arg(data)
        .arg("-H")
        .arg(format!("unix://{SOCKET}"))
        .arg("--storage-driver=overlay2")
        .arg("--iptables=false")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .kill_on_drop(true);
    for registry in insecure_registries {
        cmd.arg("--insecure-registry").arg(registry);
    }
    let mut child = cmd.spawn().map_err(|e| format!("starting dockerd: {e}"))?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if ping().await {
            return Ok(child);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string("/mnt/scratch/dockerd.log").unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(10).collect();
            return Err(format!(
                "dockerd exited ({status}): {}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
        if tokio::time::Instant::now() > deadline {
            let _ = child.kill().await;
            return Err(format!("dockerd did not answer within {}s", timeout.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether dockerd answers `/_ping` on [`SOCKET`].
pub(crate) async fn ping() -> bool {
    let Ok(mut s) = tokio::net::UnixStream::connect(SOCKET).await else { return false };
    if s.write_all(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n").await.is_err() {
        return false;
    }
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut buf)).await;
    buf.starts_with(b"HTTP/1.0 200") || buf.starts_with(b"HTTP/1.1 200")
}
