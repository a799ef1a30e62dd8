//! Streaming one layer into the merged view, safely.
//!
//! A layer is a tar stream, gzip- or zstd-compressed or not (detected from
//! its first bytes, whatever the media type claims). It is read once, front
//! to back; only entries some cataloger wants are kept in memory.
//!
//! Executables are not: catalogers read a few sections of each, while an
//! image holds hundreds of megabytes of them, so keeping them until the
//! layers are merged made peak memory grow with their sum. A tar stream
//! cannot seek, and the sections a cataloger needs are found from headers
//! at both ends of the file (program headers at the start, section headers
//! at the end), so each wanted executable is copied to one temporary file,
//! unnamed (unlinked as it is created, so nothing is left behind even on a
//! crash) and reused for the layer's next executable, cataloged from there,
//! and only what was found is kept ([`Keep::Findings`]). Memory is then
//! bounded by the sections read; disk by the largest such file, under
//! [`Limits::max_file`]. Nothing else is written to disk, and nothing of the
//! layer ever lands under its own name. Where no temporary file can be made,
//! executables are kept whole instead, under [`Limits::max_kept`], with a
//! warning: the scan still runs.
//!
//! Hostile layers are refused with an error naming the layer and the entry:
//! names with `..` components and hard links whose target leaves the root.
//! Device nodes, FIFOs and sockets are never materialised (we create no
//! files at all) and are reported as warnings: real base images made with
//! `docker import` carry `/dev` nodes. Limits bound the compressed size, the
//! decompressed size, the decompression ratio (bombs), the size of any kept
//! file and the total kept in memory. A truncated or corrupt stream is an
//! error, and so is a digest that does not match the layer's.

use std::io::{self, BufRead, BufReader, Read, Seek as _, Write as _};
use std::sync::Arc;

use sha2::{Digest as _, Sha256};

use super::fs::{ImageFs, Keep, PathError, Selector, normalize};

/// Resource limits for reading an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest compressed layer, in bytes.
    pub max_layer_compressed: u64,
    /// Largest decompressed layer, in bytes.
    pub max_layer_uncompressed: u64,
    /// Largest decompressed image (all layers), in bytes.
    pub max_total_uncompressed: u64,
    /// Largest decompressed/compressed ratio, checked once a layer has
    /// produced [`Limits::ratio_grace`] bytes.
    pub max_ratio: u64,
    /// Bytes a layer may produce before the ratio is checked (small layers
    /// of zeros compress absurdly well and are harmless).
    pub ratio_grace: u64,
    /// Largest single file kept for a cataloger; larger ones are skipped
    /// with a warning.
    pub max_file: u64,
    /// Most bytes kept in memory for the whole image.
    pub max_kept: u64,
}

impl Default for Limits {
    fn default() -> Self {
        const GIB: u64 = 1 << 30;
        const MIB: u64 = 1 << 20;
        Limits {
            max_layer_compressed: 8 * GIB,
            max_layer_uncompressed: 16 * GIB,
            max_total_uncompressed: 64 * GIB,
            max_ratio: 200,
            ratio_grace: 64 * MIB,
            max_file: 512 * MIB,
            max_kept: 2 * GIB,
        }
    }
}

/// Why a layer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// The layer tries to reach outside the image root.
    #[error("layer {layer}: refused hostile entry `{entry}`: {reason}")]
    Hostile {
        /// Layer digest (or name).
        layer: String,
        /// The entry name.
        entry: String,
        /// Why it is hostile.
        reason: String,
    },
    /// A limit was reached.
    #[error("layer {layer}: {what}")]
    Limit {
        /// Layer digest (or name).
        layer: String,
        /// Which limit, with the numbers.
        what: String,
    },
    /// The compressed stream or the tar inside it is damaged.
    #[error("layer {layer}: {reason}")]
    Corrupt {
        /// Layer digest (or name).
        layer: String,
        /// What is wrong.
        reason: String,
    },
    /// The bytes do not hash to the layer's digest.
    #[error("layer {layer}: content digest is {actual}")]
    DigestMismatch {
        /// Expected digest.
        layer: String,
        /// What the content hashed to.
        actual: String,
    },
    /// The temporary file executables are cataloged from could not be
    /// created or written.
    #[error("layer {layer}: spooling `{entry}` to a temporary file")]
    Spool {
        /// Layer digest (or name).
        layer: String,
        /// The entry being spooled.
        entry: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
}

/// What reading one layer did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LayerReport {
    /// Tar entries seen.
    pub entries: u64,
    /// Compressed bytes read.
    pub compressed_bytes: u64,
    /// Decompressed bytes read.
    pub uncompressed_bytes: u64,
    /// Files kept for catalogers.
    pub kept_files: u64,
    /// Things skipped, with the reason.
    pub warnings: Vec<String>,
}

/// Running totals across the layers of one image.
#[derive(Debug, Clone, Copy, Default)]
pub struct Budget {
    /// Decompressed bytes so far.
    pub uncompressed: u64,
    /// Bytes kept in memory so far.
    pub kept: u64,
}

/// Marker error carried through `io::Error` when a limit trips inside the
/// decompressor's reader chain.
#[derive(Debug)]
struct LimitTripped(String);

impl std::fmt::Display for LimitTripped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LimitTripped {}

/// What the compressed side has seen: shared by the reader chain, read back
/// after the stream is consumed.
#[derive(Default)]
struct Progress {
    compressed: u64,
    hasher: Option<Sha256>,
}

type SharedProgress = std::rc::Rc<std::cell::RefCell<Progress>>;

/// Counts and hashes the compressed bytes.
struct Compressed<R> {
    inner: R,
    limit: u64,
    progress: SharedProgress,
}

impl<R: Read> Read for Compressed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut progress = self.progress.borrow_mut();
        progress.compressed += n as u64;
        if progress.compressed > self.limit {
            return Err(io::Error::other(LimitTripped(format!(
                "compressed size exceeds the limit of {} bytes",
                self.limit
            ))));
        }
        if let Some(h) = progress.hasher.as_mut() {
            h.update(&buf[..n]);
        }
        Ok(n)
    }
}

/// Counts the decompressed bytes and enforces size and ratio limits.
struct Uncompressed<R> {
    inner: R,
    read: u64,
    layer_limit: u64,
    total_before: u64,
    total_limit: u64,
    ratio: u64,
    grace: u64,
    progress: SharedProgress,
}

impl<R: Read> Read for Uncompressed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.layer_limit {
            return Err(io::Error::other(LimitTripped(format!(
                "decompressed size exceeds the layer limit of {} bytes",
                self.layer_limit
            ))));
        }
        if self.total_before + self.read > self.total_limit {
            return Err(io::Error::other(LimitTripped(format!(
                "decompressed image size exceeds the limit of {} bytes",
                self.total_limit
            ))));
        }
        let compressed = self.progress.borrow().compressed.max(1);
        if self.read > self.grace && self.read / compressed > self.ratio {
            return Err(io::Error::other(LimitTripped(format!(
                "decompression ratio exceeds {}:1 ({} bytes from {compressed}): likely a decompression bomb",
                self.ratio, self.read
            ))));
        }
        Ok(n)
    }
}

/// How a layer is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain tar.
    None,
    /// gzip (RFC 1952), possibly multi-member.
    Gzip,
    /// zstd (RFC 8878).
    Zstd,
}

/// Detects the compression from the first bytes.
pub fn detect(prefix: &[u8]) -> Compression {
    if prefix.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if prefix.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// One layer to read.
#[derive(Debug)]
pub struct LayerInput<'a> {
    /// Index in the image, from the bottom.
    pub index: usize,
    /// Its digest (`sha256:…`) when known; checked against the content.
    /// Otherwise a name for messages.
    pub name: &'a str,
    /// Whether `name` is a digest to verify.
    pub verify_digest: bool,
}

/// Reads `reader` as layer `input` into `fs`, keeping of each file what
/// `selector` asks for.
pub fn apply_layer<R: Read>(
    fs: &mut ImageFs,
    reader: R,
    input: &LayerInput<'_>,
    selector: &dyn Selector,
    limits: &Limits,
    budget: &mut Budget,
) -> Result<LayerReport, LayerError> {
    let layer = input.name.to_owned();
    let progress = SharedProgress::default();
    progress.borrow_mut().hasher =
        (input.verify_digest && input.name.starts_with("sha256:")).then(Sha256::new);
    let compressed =
        Compressed { inner: reader, limit: limits.max_layer_compressed, progress: progress.clone() };
    let mut buffered = BufReader::with_capacity(256 * 1024, compressed);
    let compression = detect(buffered.fill_buf().map_err(|e| io_error(&layer, e, None))?);
    let decoder: Box<dyn Read> = match compression {
        Compression::None => Box::new(buffered),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
        Compression::Zstd => Box::new(ruzstd::decoding::StreamingDecoder::new(buffered).map_err(|e| {
            LayerError::Corrupt { layer: layer.clone(), reason: format!("bad zstd frame: {e}") }
        })?),
    };
    let mut uncompressed = Uncompressed {
        inner: decoder,
        read: 0,
        layer_limit: limits.max_layer_uncompressed,
        total_before: budget.uncompressed,
        total_limit: limits.max_total_uncompressed,
        ratio: limits.max_ratio,
        grace: limits.ratio_grace,
        progress: progress.clone(),
    };
    let mut report = LayerReport::default();
    {
        let mut archive = tar::Archive::new(&mut uncompressed);
        let entries = archive.entries().map_err(|e| io_error(&layer, e, Some(compression)))?;
        let mut spool = Spool::Unopened;
        for entry in entries {
            let mut entry = entry.map_err(|e| io_error(&layer, e, Some(compression)))?;
            report.entries += 1;
            let context = EntryContext { input, compression, selector, limits };
            read_entry(fs, &mut entry, &context, &mut spool, budget, &mut report)?;
        }
    }
    // Read to the end: the gzip trailer (CRC, size) and the digest cover the
    // whole stream, and a truncated stream must not pass as complete.
    io::copy(&mut uncompressed, &mut io::sink()).map_err(|e| io_error(&layer, e, Some(compression)))?;
    report.uncompressed_bytes = uncompressed.read;
    budget.uncompressed += uncompressed.read;
    drop(uncompressed);
    let progress = progress.take();
    report.compressed_bytes = progress.compressed;
    if let Some(hasher) = progress.hasher {
        let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
        if actual != input.name {
            return Err(LayerError::DigestMismatch { layer: layer.clone(), actual });
        }
    }
    Ok(report)
}

fn io_error(layer: &str, e: io::Error, compression: Option<Compression>) -> LayerError {
    if let Some(tripped) = e.get_ref().and_then(|inner| inner.downcast_ref::<LimitTripped>()) {
        return LayerError::Limit { layer: layer.to_owned(), what: tripped.0.clone() };
    }
    let stream = match compression {
        Some(Compression::Gzip) => "gzip stream",
        Some(Compression::Zstd) => "zstd stream",
        _ => "tar stream",
    };
    let reason = match e.kind() {
        io::ErrorKind::UnexpectedEof => format!("truncated {stream}"),
        _ => format!("corrupt {stream}: {e}"),
    };
    LayerError::Corrupt { layer: layer.to_owned(), reason }
}

fn hostile(input: &LayerInput<'_>, entry: &str, reason: impl Into<String>) -> LayerError {
    LayerError::Hostile { layer: input.name.to_owned(), entry: entry.to_owned(), reason: reason.into() }
}

/// What stays the same for every entry of a layer.
struct EntryContext<'a> {
    input: &'a LayerInput<'a>,
    compression: Compression,
    selector: &'a dyn Selector,
    limits: &'a Limits,
}

/// The temporary file a layer's executables are cataloged from.
enum Spool {
    /// Not needed yet.
    Unopened,
    /// Created (unnamed), reused for each executable.
    Open(std::fs::File),
    /// It could not be created (no writable temporary folder): executables
    /// are then kept whole in memory, as files catalogers parse whole are,
    /// which bounds memory by [`Limits::max_kept`] again instead of by the
    /// sections read, but still scans.
    Unavailable,
}

impl Spool {
    /// The spool file, created on first use; `None` when it cannot be (the
    /// reason is warned about once).
    fn file(&mut self, report: &mut LayerReport) -> Option<&mut std::fs::File> {
        if let Spool::Unopened = self {
            *self = match tempfile::tempfile() {
                Ok(file) => Spool::Open(file),
                Err(err) => {
                    report.warnings.push(format!(
                        "no temporary file to catalog executables from ({err}); they are held in memory instead"
                    ));
                    Spool::Unavailable
                }
            };
        }
        match self {
            Spool::Open(file) => Some(file),
            Spool::Unopened | Spool::Unavailable => None,
        }
    }
}

/// Copies a wanted executable's bytes to `file` (emptied first) and
/// catalogs it from there.
fn catalog_spooled<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    path: &str,
    mode: u32,
    context: &EntryContext<'_>,
    file: &mut std::fs::File,
) -> Result<super::fs::Findings, LayerError> {
    let input = context.input;
    let spool_error =
        |source| LayerError::Spool { layer: input.name.to_owned(), entry: path.to_owned(), source };
    file.set_len(0).and_then(|()| file.rewind()).map_err(spool_error)?;
    let mut buffer = vec![0u8; 256 * 1024];
    loop {
        let n = entry.read(&mut buffer).map_err(|e| io_error(input.name, e, Some(context.compression)))?;
        if n == 0 {
            break;
        }
        file.write_all(&buffer[..n]).map_err(spool_error)?;
    }
    Ok(context.selector.catalog(path, mode & 0o111 != 0, file))
}

fn read_entry<R: Read>(
    fs: &mut ImageFs,
    entry: &mut tar::Entry<'_, R>,
    context: &EntryContext<'_>,
    spool: &mut Spool,
    budget: &mut Budget,
    report: &mut LayerReport,
) -> Result<(), LayerError> {
    let EntryContext { input, compression, selector, limits } = *context;
    let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
    let path = match normalize(&raw) {
        Ok(p) => p,
        Err(PathError::Traversal(_)) => {
            return Err(hostile(input, &raw, "the name climbs out of the image root"));
        }
        Err(PathError::Invalid(_)) => return Err(hostile(input, &raw, "the name is not a usable path")),
    };
    if path.is_empty() {
        return Ok(());
    }
    let (dir, name) = match path.rsplit_once('/') {
        Some((d, n)) => (d, n),
        None => ("", path.as_str()),
    };
    if name == ".wh..wh..opq" {
        fs.opaque(dir, input.index);
        return Ok(());
    }
    if let Some(hidden) = name.strip_prefix(".wh.") {
        let target = if dir.is_empty() { hidden.to_owned() } else { format!("{dir}/{hidden}") };
        fs.whiteout(&target, input.index);
        return Ok(());
    }
    let header = entry.header();
    let mode = header.mode().unwrap_or(0o644);
    let kind = header.entry_type();
    match kind {
        tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse => {
            let size = entry.size();
            let keep = selector.keep(&path, mode & 0o111 != 0);
            if keep == Keep::Nothing {
                fs.shadow(&path, input.index);
                return Ok(());
            }
            if size > limits.max_file {
                report
                    .warnings
                    .push(format!("{path}: {size} bytes is over the per-file limit; not cataloged"));
                fs.shadow(&path, input.index);
                return Ok(());
            }
            if keep == Keep::Findings
                && let Some(file) = spool.file(report)
            {
                let findings = catalog_spooled(entry, &path, mode, context, file)?;
                report.kept_files += 1;
                fs.insert_cataloged(path, Arc::new(findings), mode, input.index);
                return Ok(());
            }
            if budget.kept + size > limits.max_kept {
                return Err(LayerError::Limit {
                    layer: input.name.to_owned(),
                    what: format!("files kept for cataloging exceed the limit of {} bytes", limits.max_kept),
                });
            }
            let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            entry
                .take(size)
                .read_to_end(&mut data)
                .map_err(|e| io_error(input.name, e, Some(compression)))?;
            budget.kept += data.len() as u64;
            report.kept_files += 1;
            fs.insert_file(path, Arc::from(data), mode, input.index);
        }
        tar::EntryType::Symlink => {
            let target =
                entry.link_name_bytes().map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
            if target.contains('\0') || target.is_empty() {
                report.warnings.push(format!("{path}: symlink with an unusable target skipped"));
                fs.shadow(&path, input.index);
            } else {
                fs.insert_symlink(path, target, input.index);
            }
        }
        tar::EntryType::Link => {
            let raw_target =
                entry.link_name_bytes().map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
            let target = normalize(&raw_target).map_err(|_| {
                hostile(input, &raw, format!("hard link to `{raw_target}` leaves the image root"))
            })?;
            if selector.keep(&path, mode & 0o111 != 0) == Keep::Nothing {
                fs.shadow(&path, input.index);
                return Ok(());
            }
            if fs.link(path.clone(), &target, input.index) {
                report.kept_files += 1;
            } else {
                report
                    .warnings
                    .push(format!("{path}: hard link to {target}, which was not kept; not cataloged"));
                fs.shadow(&path, input.index);
            }
        }
        tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
            report.warnings.push(format!("{path}: device node or FIFO skipped"));
            fs.shadow(&path, input.index);
        }
        tar::EntryType::Directory => fs.shadow(&path, input.index),
        tar::EntryType::XGlobalHeader
        | tar::EntryType::XHeader
        | tar::EntryType::GNULongName
        | tar::EntryType::GNULongLink => {}
        other => {
            report.warnings.push(format!("{path}: unsupported tar entry type {other:?} skipped"));
            fs.shadow(&path, input.index);
        }
    }
    Ok(())
}
