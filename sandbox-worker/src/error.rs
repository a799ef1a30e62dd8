//! What can stop a sandbox run from being attempted at all; shared by
//! [`crate::run`] (as `run::Error`) and the boot path beneath it.

use patchpilot_model::IoError;

/// What can stop a run from being attempted at all. Problems during a run
/// are outcomes, not errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The VMM is missing or broken.
    #[error(transparent)]
    Vmm(#[from] crate::vmm::Error),
    /// The guest image could not be built.
    #[error("guest image")]
    Image(#[from] crate::image::Error),
    /// Host file-system trouble.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The request is not valid.
    #[error("{0}")]
    Invalid(String),
}
