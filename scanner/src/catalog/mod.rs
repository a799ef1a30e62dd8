//! Catalogers: from files in an image to installed packages.
//!
//! The scan pipeline streams each layer once and keeps only the files some
//! cataloger [`wants`](Cataloger::wants); after whiteouts are applied it hands
//! each surviving file to the cataloger that wanted it. Catalogers see bytes
//! and an image-relative path (no leading `/`), never the host filesystem.
//!
//! Executables are the exception, because they are many and large while
//! only a few of their sections say anything: catalogers that
//! [`read ranges`](Cataloger::reads_ranges) get each wanted file as it is
//! found, through a [`FileReader`] on the file (a root filesystem's own, or
//! a layer entry spooled to a temporary file), and the view keeps what they
//! found instead of the bytes. Memory then follows the largest section read,
//! not the sum of the image's executables.
//!
//! Every cataloger treats file contents as untrusted input: malformed data
//! is an [`Error`] naming the file, never a panic.

use object::ReadRef as _;

use crate::package::Package;

pub mod apk;
pub mod cargo_auditable;
pub mod dpkg;
pub(crate) mod elf;
pub mod gobinary;
pub mod java;
pub mod linux_kernel;
pub mod node;
pub mod os_release;
pub mod python;
pub mod rpm;

/// A file a cataloger could not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{cataloger}: {path}: {reason}")]
pub struct Error {
    /// The cataloger.
    pub cataloger: &'static str,
    /// Image-relative path of the file.
    pub path: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Error {
    /// Builds an error for `path`.
    pub fn new(cataloger: &'static str, path: &str, reason: impl Into<String>) -> Error {
        Error { cataloger, path: path.to_owned(), reason: reason.into() }
    }
}

/// Finds packages in files of one kind.
pub trait Cataloger: Send + Sync + std::fmt::Debug {
    /// Short name, for errors and logs: `apk`, `dpkg`, `go-binary`…
    fn name(&self) -> &'static str;

    /// Whether the file at `path` (image-relative, normalised, no leading
    /// `/`) should be read. `executable` is true when any execute bit is set.
    /// Must be cheap: it is asked for every file of every layer.
    fn wants(&self, path: &str, executable: bool) -> bool;

    /// The packages recorded in one wanted file. `Package::layer` and, for OS
    /// packages, `Package::ecosystem` are filled in by the pipeline.
    fn parse(&self, path: &str, data: &[u8]) -> Result<Vec<Package>, Error>;

    /// Whether this cataloger reads only parts of the files it wants, so the
    /// pipeline should hand them over through [`Cataloger::parse_file`] as
    /// they are found instead of keeping their bytes.
    fn reads_ranges(&self) -> bool {
        false
    }

    /// [`Cataloger::parse`] for a file read through `file`. The default
    /// reads the whole file; catalogers that [`read
    /// ranges`](Cataloger::reads_ranges) read only what they need.
    fn parse_file(&self, path: &str, file: &FileReader<'_>) -> Result<Vec<Package>, Error> {
        let data = file
            .len()
            .and_then(|len| file.read_bytes_at(0, len))
            .map_err(|()| Error::new(self.name(), path, "the file cannot be read"))?;
        self.parse(path, data)
    }
}

/// An open file read in ranges: each range read is kept until the reader is
/// dropped (after the one file), so a cataloger holds only what it asked for.
pub type FileReader<'file> = object::ReadCache<&'file std::fs::File>;

/// Adds a finished database stanza's package, or skips an incomplete
/// stanza with a warning: one damaged entry must not hide every other
/// package in the database (and so every vulnerability in them). Damage to
/// the file's structure is still an error, returned by the cataloger.
pub(crate) fn keep_stanza(packages: &mut Vec<Package>, finished: Result<Option<Package>, Error>) {
    match finished {
        Ok(found) => packages.extend(found),
        Err(e) => tracing::warn!(error = %e, "skipping an incomplete stanza"),
    }
}

/// Every cataloger, in the order their results are reported.
pub fn all() -> Vec<Box<dyn Cataloger>> {
    vec![
        Box::new(apk::ApkCataloger),
        Box::new(dpkg::DpkgCataloger),
        Box::new(rpm::RpmCataloger),
        Box::new(gobinary::GoBinaryCataloger),
        Box::new(cargo_auditable::CargoAuditableCataloger),
        Box::new(python::PythonCataloger),
        Box::new(node::NodeCataloger),
        Box::new(java::JavaCataloger),
        Box::new(linux_kernel::LinuxKernelCataloger),
    ]
}
