//! What runs in the microVM links none of the host's service stack.
//!
//! `patchpilot-guest` runs next to untrusted code inside the microVM, so
//! every crate it links is attack surface there and weight in the
//! initramfs. Database and bus clients, VMM, Docker and forge clients,
//! telemetry exporters and HTTP servers have no business in it, and neither
//! have the host's crates that bring them. The same holds, short of the
//! Docker client it builds images with, for `patchpilot-agent`, the other
//! PatchPilot binary in the VM's root, and for `patchpilot-registry`, the
//! registry client it shares with the host's services, which must not
//! bring in theirs. The controller holds the forge's write access and never
//! drives Docker or a VMM (the sandbox worker does, on the far side of the
//! bus), so it links neither client. Checked on the resolved tree of normal
//! dependencies (what a binary links), so a crate that pulls one in
//! transitively fails here as surely as a direct dependency. What the image's
//! binaries actually link is checked in
//! sandbox-worker/tests/guest_binaries.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates of the host's stack, by package name: nothing in the VM links
/// them.
const HOST_STACK: &[&str] = &[
    "sqlx",
    "sqlx-core",
    "async-nats",
    "firepilot",
    "opentelemetry-otlp",
    "axum",
    "octocrab",
    // The host's own crates: everything above comes in through them.
    "patchpilot-fleet",
    "patchpilot-sandbox",
];

const GUEST: &str = "patchpilot-sandbox-guest";
const AGENT: &str = "patchpilot-agent";
const REGISTRY: &str = "patchpilot-registry";
const CONTROLLER: &str = "patchpilot-controller";

/// The cargo that runs this test (set by cargo and nextest at run time),
/// else the one that built it.
fn cargo() -> PathBuf {
    std::env::var_os("CARGO").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO")))
}

fn workspace_manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("Cargo.toml")
}

/// The host's target triple, from `rustc -vV`: the guest is built for the
/// host's architecture (the VM runs the same binary), and target-specific
/// dependencies must be resolved for it.
fn host_triple() -> String {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(&rustc).arg("-vV").output().expect("run rustc -vV");
    assert!(out.status.success(), "rustc -vV: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .expect("rustc -vV names the host")
}

/// `cargo tree` for `package`'s normal dependencies, with `extra` args.
/// Offline and locked: the lock file has everything, and a test must not
/// rewrite it.
fn cargo_tree(package: &str, extra: &[&str]) -> String {
    let out = Command::new(cargo())
        .arg("tree")
        .arg("--manifest-path")
        .arg(workspace_manifest())
        .args(["--offline", "--locked", "-p", package, "-e", "normal", "--target", &host_triple()])
        .args(extra)
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree {extra:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every package in `package`'s tree, by name.
fn packages_of(package: &str) -> Vec<String> {
    let tree = cargo_tree(package, &["--prefix", "none", "--no-dedupe", "--format", "{p}"]);
    let mut names: Vec<String> =
        tree.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_owned).collect();
    names.sort();
    names.dedup();
    names
}

/// Fails unless `package`'s tree holds every crate of `expected` (so an
/// empty or misparsed tree cannot pass) and none of `forbidden`, naming the
/// path to each one found.
fn assert_tree(package: &str, expected: &[&str], forbidden: &[&str]) {
    let packages = packages_of(package);
    for expected in expected {
        assert!(packages.iter().any(|p| p == expected), "{expected} missing from the tree: {packages:?}");
    }
    let found: Vec<&str> = forbidden.iter().copied().filter(|f| packages.iter().any(|p| p == f)).collect();
    // Why each one is there: the path from the package to it.
    let why: Vec<String> = found.iter().map(|f| cargo_tree(package, &["--invert", f])).collect();
    assert!(
        found.is_empty(),
        "{package}'s dependency tree holds {found:?}, which it must never link:\n{}",
        why.join("\n")
    );
}

#[test]
fn the_guest_links_nothing_of_the_hosts_service_stack() {
    let forbidden = [HOST_STACK, &["bollard"]].concat();
    assert_tree(GUEST, &[GUEST, "patchpilot-sandbox-wire", "patchpilot-proto", "tokio", "tonic"], &forbidden);
}

#[test]
fn the_agent_links_nothing_of_the_hosts_service_stack() {
    // The agent drives the VM's dockerd (bollard), and the contracts it
    // reads bring tonic's generated code; neither is the host's stack.
    assert_tree(AGENT, &[AGENT, REGISTRY, "patchpilot-scanner", "oci-client"], HOST_STACK);
}

#[test]
fn the_registry_client_links_no_service_stack_at_all() {
    // Light for every user: no gRPC either, not even the contracts.
    let forbidden = [HOST_STACK, &["bollard", "tonic", "patchpilot-proto", "patchpilot-model"]].concat();
    assert_tree(REGISTRY, &[REGISTRY, "oci-client", "tokio"], &forbidden);
}

#[test]
fn the_controller_links_no_docker_or_vmm_client() {
    assert_tree(
        CONTROLLER,
        &[CONTROLLER, "patchpilot-fleet", "sqlx", "octocrab"],
        &["bollard", "firepilot", "firepilot_models"],
    );
}
