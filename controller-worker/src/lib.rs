//! PatchPilot's controller (being assembled).

pub mod forge;
pub mod git;
pub mod vet;
