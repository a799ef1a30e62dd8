//! The binaries the image builder puts into the guest carry none of the
//! host's service stack.
//!
//! `cargo tree` (sandbox-guest/tests/dependencies.rs) checks what the guest
//! crates declare; this checks what was linked. A workspace build unifies
//! features across every crate it builds, so an agent built with the CLI and
//! the tests links the scanner's service, sqlx and async-nats. The guest
//! profile (`cargo build --profile guest …`, which `scripts/test` runs)
//! builds them on their own, and the image builder takes them from there.
//! Rust's symbol names carry their crate's name, so a linked crate shows in
//! the binary's bytes.

use patchpilot_sandbox::config::ImageConfig;
use patchpilot_sandbox::image::ImageBuilder;

/// Crates of the host's stack, as they appear in mangled symbol names.
const HOST_STACK: &[&str] =
    &["async_nats", "sqlx_core", "patchpilot_fleet", "firepilot", "opentelemetry_otlp", "octocrab"];

fn host_crates_in(path: &std::path::Path) -> Vec<&'static str> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    // Through str, whose search std ships optimised even in a debug build.
    let text = String::from_utf8_lossy(&bytes);
    HOST_STACK.iter().copied().filter(|name| text.contains(name)).collect()
}

#[test]
fn guest_image_binaries_link_none_of_the_host_stack() {
    let state = tempfile::tempdir().expect("tempdir");
    let builder = ImageBuilder::new(&ImageConfig::default(), state.path()).expect(
        "find the guest binaries (build them with `cargo build --profile guest -p patchpilot-sandbox-guest -p patchpilot-agent`)",
    );
    let agent = builder.agent_binary().expect("the built-in agent next to the test binaries").to_path_buf();
    for binary in [builder.guest_binary().to_path_buf(), agent] {
        let found = host_crates_in(&binary);
        assert!(
            found.is_empty(),
            "{} links {found:?}; build the guest's binaries with `cargo build --profile guest -p patchpilot-sandbox-guest -p patchpilot-agent`",
            binary.display()
        );
    }
}

/// The check above can fail: this test binary links the sandbox worker's
/// service, and with it the bus and the database.
#[test]
fn the_host_worker_shows_the_host_stack() {
    let exe = std::env::current_exe().expect("current exe");
    let found = host_crates_in(&exe);
    assert!(
        found.contains(&"async_nats") && found.contains(&"sqlx_core"),
        "{} shows only {found:?}",
        exe.display()
    );
}
