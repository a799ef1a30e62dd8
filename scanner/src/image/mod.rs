//! Image input: sources, layers, and the merged file view the catalogers
//! read.

pub mod fs;
pub mod layer;
pub mod source;

pub use fs::{CatalogedRef, FileRef, Findings, ImageFs, Keep, Selector};
pub use layer::{LayerError, LayerReport, Limits};
pub use source::{
    DigestKind, Image, Layer, fetch_registry, fetch_registry_with_progress, open_docker_archive,
    open_oci_layout, read_layers, read_rootfs,
};
