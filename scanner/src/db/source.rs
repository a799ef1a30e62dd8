//! Import sources: the raw bytes of each OSV record in a zip archive as
//! osv.dev publishes per ecosystem (`<Ecosystem>/all.zip`, one `<ID>.json`
//! entry per record), in a directory tree of `*.json` and `*.yaml` files (a
//! checkout of an advisory repository such as golang/vulndb or
//! pypa/advisory-database, or an unpacked export), or in one such file.
//!
//! A source that cannot be opened at all is an [`Error`]; one entry that
//! cannot be read (a corrupt zip member, an oversized file) is handed on as
//! an unreadable entry so the import can report it and go on.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::Error;
use super::codec::MAX_RECORD_BYTES;
use crate::osv::Format;

/// One candidate record.
pub(crate) struct Entry {
    /// Where it came from: the path relative to the source directory, the
    /// zip entry name, or the file name.
    pub(crate) location: String,
    /// How it is written, as its name says.
    pub(crate) format: Format,
    /// Its bytes, or why they could not be read.
    pub(crate) data: Result<Vec<u8>, String>,
}

/// Calls `visit` with every record candidate of the source at `path`, in a
/// stable order (sorted paths; zip entries in archive order).
pub(crate) fn for_each_entry(
    path: &Path,
    mut visit: impl FnMut(Entry) -> Result<(), Error>,
) -> Result<(), Error> {
    let metadata = fs::metadata(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    if metadata.is_dir() {
        let mut files = Vec::new();
        collect_record_files(path, &mut files)?;
        files.sort_by(|a, b| a.0.cmp(&b.0));
        for (file, format) in files {
            let location = file.strip_prefix(path).unwrap_or(&file).display().to_string();
            visit(Entry { location, format, data: read_limited_file(&file) })?;
        }
        return Ok(());
    }
    let mut file = File::open(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    let mut magic = [0u8; 4];
    let magic_len =
        read_up_to(&mut file, &mut magic).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    if magic[..magic_len] == *b"PK\x03\x04" || magic[..magic_len] == *b"PK\x05\x06" {
        return for_each_zip_entry(path, visit);
    }
    let location =
        path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    if let Some(format) = Format::of_name(&location) {
        return visit(Entry { location, format, data: read_limited_file(path) });
    }
    Err(Error::UnknownSource { path: path.to_owned() })
}

fn for_each_zip_entry(path: &Path, mut visit: impl FnMut(Entry) -> Result<(), Error>) -> Result<(), Error> {
    let file = File::open(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    let mut archive = zip::ZipArchive::new(io::BufReader::new(file))
        .map_err(|source| Error::Zip { path: path.to_owned(), source })?;
    for index in 0..archive.len() {
        let mut member = match archive.by_index(index) {
            Ok(member) => member,
            Err(error) => {
                visit(Entry {
                    location: format!("entry #{index}"),
                    format: Format::Json,
                    data: Err(format!("unreadable zip entry: {error}")),
                })?;
                continue;
            }
        };
        let location = match member.name() {
            Ok(name) => name.into_owned(),
            Err(error) => {
                visit(Entry {
                    location: format!("entry #{index}"),
                    format: Format::Json,
                    data: Err(format!("unreadable entry name: {error}")),
                })?;
                continue;
            }
        };
        let Some(format) = Format::of_name(&location).filter(|_| !member.is_dir()) else {
            continue;
        };
        let declared_size = member.size();
        let data = read_limited(&mut member, declared_size);
        drop(member);
        visit(Entry { location, format, data })?;
    }
    Ok(())
}

/// Every record file (`*.json`, `*.yaml`, `*.yml`) under `dir`. Hidden
/// directories (`.git`, `.github`…) are skipped, and so are symbolic links
/// to directories, which could loop.
fn collect_record_files(dir: &Path, files: &mut Vec<(PathBuf, Format)>) -> Result<(), Error> {
    let entries = fs::read_dir(dir).map_err(|source| Error::Read { path: dir.to_owned(), source })?;
    for entry in entries {
        let entry = entry.map_err(|source| Error::Read { path: dir.to_owned(), source })?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(|source| Error::Read { path: path.clone(), source })?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if file_type.is_dir() {
            if !name.starts_with('.') {
                collect_record_files(&path, files)?;
            }
        } else if let Some(format) = Format::of_name(&name)
            && (file_type.is_file() || path.is_file())
        {
            files.push((path, format));
        }
    }
    Ok(())
}

fn read_limited_file(path: &Path) -> Result<Vec<u8>, String> {
    let mut file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let size_hint = file.metadata().map(|m| m.len()).unwrap_or(0);
    read_limited(&mut file, size_hint)
}

/// Reads at most [`MAX_RECORD_BYTES`]; more is an error, so a huge or
/// hostile entry cannot exhaust memory.
fn read_limited(reader: &mut impl Read, size_hint: u64) -> Result<Vec<u8>, String> {
    if size_hint > MAX_RECORD_BYTES {
        return Err(format!("larger than {MAX_RECORD_BYTES} bytes ({size_hint})"));
    }
    let mut data = Vec::with_capacity(usize::try_from(size_hint).unwrap_or(0));
    reader.take(MAX_RECORD_BYTES + 1).read_to_end(&mut data).map_err(|e| format!("cannot read: {e}"))?;
    if data.len() as u64 > MAX_RECORD_BYTES {
        return Err(format!("larger than {MAX_RECORD_BYTES} bytes"));
    }
    Ok(data)
}

fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_input_is_refused() {
        let mut small = &b"{}"[..];
        assert_eq!(read_limited(&mut small, 2).expect("small"), b"{}");
        let mut claimed = &b"{}"[..];
        assert!(read_limited(&mut claimed, MAX_RECORD_BYTES + 1).is_err());
    }

    #[test]
    fn other_files_are_not_sources() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = dir.path().join("notes.txt");
        fs::write(&text, "hello").expect("write");
        assert!(matches!(for_each_entry(&text, |_| Ok(())), Err(Error::UnknownSource { .. })));
        let missing = dir.path().join("missing.zip");
        assert!(matches!(for_each_entry(&missing, |_| Ok(())), Err(Error::Read { .. })));
    }
}
