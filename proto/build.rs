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
    ];
    for file in &files {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let descriptors = protox::compile(files, [&root])?;
    prost_build::Config::new()
        .compile_well_known_types()
        .extern_path(".google.protobuf", "::prost_types")
        .compile_fds(descriptors)?;
    Ok(())
}
