//! Compiles `proto/patchpilot/v1/*.proto` with protox, a protobuf compiler
//! written in Rust, so building PatchPilot needs no system `protoc` and the
//! compiler version is pinned by Cargo.lock like every other dependency.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from("proto");
    let files = [
        "patchpilot/v1/findings.proto",
        "patchpilot/v1/remediation.proto",
        "patchpilot/v1/sandbox.proto",
        "patchpilot/v1/events.proto",
        "patchpilot/v1/guest.proto",
    ];
    for file in &files {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let descriptors = protox::compile(files, [&root])?;
    // Messages and the GuestControl client and server stubs. Transport is
    // left out: the sandbox dials vsock itself and hands tonic the stream.
    let mut config = prost_build::Config::new();
    config.compile_well_known_types().extern_path(".google.protobuf", "::prost_types");
    tonic_prost_build::configure().build_transport(false).compile_fds_with_config(descriptors, config)?;
    Ok(())
}
