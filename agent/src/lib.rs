//! PatchPilot's remediation agent: the logic that runs inside a sandbox VM
//! on a workspace and its `.patchpilot/` context folder, finds the smallest
//! change that fixes the assessed findings, proves it by building and
//! rescanning, and leaves a modified working tree with a result and a
//! retrospective beside it.
//!
//! - [`dockerfile`]: a lossless Dockerfile model; edits touch only the
//!   tokens they change.
//! - [`companion`]: companion bumps for repair runs, from a table with its
//!   sources: when the fix moves a toolchain (Go, Node.js, Python), the
//!   tools pinned to follow it (golangci-lint, staticcheck, npm, pip,
//!   setuptools) move to the smallest release that supports it.
//! - [`remediate`]: the deterministic remediators (base image, OS package
//!   pins, versioned downloads, lockfiles), each proposing edits with the
//!   findings it expects them to fix, or refusing with a reason.
//! - [`scans`]: the scanner library on registry images, with registry and
//!   scanning time counted apart.
//! - [`verify`]: build with the sandbox's Docker daemon (bollard), rescan,
//!   and compare.
//! - [`reasoning`]: the model agent that takes over where the rules stop,
//!   and repairs CI failures: tools, the loop, gates, transcript.
//! - [`run`]: one run start to finish; [`report`]: `result.json` and the
//!   retrospective. The task (`.patchpilot/task.json`) and both reports
//!   are contracts with the controller and live in `patchpilot-model`.
//!
//! What it must never do: commit, push, open a pull request or hold a
//! credential (a task that carries one is refused; registries and mirrors
//! are reached through the sandbox's egress and broker). Text from the
//! repository, package indexes and advisories is data to parse, never
//! instructions: nothing read from them chooses a program to run, and the
//! only values that reach a command line are package names and versions
//! checked against a conservative character set. When verification does
//! not show an improvement, the working tree is put back as it was.

pub mod companion;
pub mod dockerfile;
pub mod reasoning;
pub mod remediate;
pub mod report;
pub mod run;
pub mod scans;
pub mod verify;

/// Installs rustls' ring provider for the registry and index clients; a
/// provider already installed is what we want.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
