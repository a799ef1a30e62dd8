//! PatchPilot's microVM sandbox (being assembled).

pub mod config;
pub mod egress;
pub mod guest;
pub mod image;
pub mod run;
pub mod sweep;
pub mod vmm;
pub mod vsock;
pub mod worker;
