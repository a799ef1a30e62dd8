//! PatchPilot's controller (being assembled).

pub mod forge;
pub mod git;
pub mod notify;
pub mod publish;
pub mod triage;
pub mod vet;
pub mod workspace;
