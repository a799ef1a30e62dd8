//! Go binaries: the modules compiled into an ELF executable and the toolchain
//! that built it, read from the build information the Go linker embeds.
//!
//! Finding and decoding the blob follows Go's `debug/buildinfo` package (its
//! current form, which searches the whole data range where older releases
//! searched only its first 64 KiB): the blob starts with the 14-byte magic
//! `\xff Go buildinf:` at a 16-byte aligned address, inside the
//! `.go.buildinfo` section or, when section headers are gone, the first
//! writable non-executable `PT_LOAD` segment. Byte 14 is the pointer size and
//! byte 15 the flags. With flag bit `0x2` (Go ≥ 1.18) the 32-byte header is
//! followed by the version and module-info strings inline, each prefixed by
//! its length as an unsigned varint. Without it (Go < 1.18) the header holds
//! two pointers, of that size and of the endianness of flag bit `0x1`, to Go
//! string headers (`{data pointer, length}`) elsewhere in the image. The
//! module text is framed by two 16-byte sentinels
//! (`cmd/go/internal/modload.infoStart`/`infoEnd`), stripped only when the
//! byte before the end sentinel is a newline.
//!
//! The module text is parsed by the rules of `runtime/debug.ParseBuildInfo`:
//! tab-separated `path`, `mod`, `dep`, `=>` (replacement of the module on the
//! line before) and `build` lines (with Go-quoted keys and values); unknown
//! lines are ignored and a last line without a newline is dropped, as Go
//! does.
//!
//! Limits, so hostile files cost bounded work: at most
//! [`MAX_SEARCH_BYTES`] of the data range are searched for the magic, and a
//! version or module-info string longer than [`MAX_STRING_BYTES`] is refused.
//! Files that are not ELF, ELF files `object` cannot parse, and ELF files
//! without the magic are not Go binaries: they yield no packages. Once an
//! aligned header is found, anything unreadable after it is an error, except
//! a pre-1.18 module-info pointer that resolves nowhere, which Go reads as
//! "no module info" (binaries built outside module mode).
//!
//! Reported, with ecosystem `Go` and the binary's path: the main module
//! (see below); every `dep` as actually linked, i.e. the replacement's path
//! and version when replaced, left out when that has no version (a
//! replacement by a local directory); and the standard library as `stdlib`
//! at the toolchain version in OSV's form (`go1.22.2` → `v1.22.2`), left
//! out for development toolchains. Each binary reports its own `stdlib`:
//! the catalog keys packages by path too.
//!
//! The main module is the `mod` line's, named by its module path, which is
//! what advisories key (OSV's Go records name `github.com/docker/docker`,
//! never the `…/cmd/dockerd` package inside it). A binary built outside
//! module mode (GOPATH builds, as Debian makes Docker's) has no `mod` line,
//! only the `path` line: the main package's import path. Its module is then
//! the repository that package lives in, when the path's form tells it:
//! `host/owner/repo` on github.com and bitbucket.org, the hosts whose layout
//! `cmd/go` fixes (`cmd/go/internal/vcs`'s `vcsPaths`); elsewhere (vanity
//! paths, gitlab.com with its nested groups) only the host's `go-get` answer
//! tells where the repository ends, so the import path itself names it. syft
//! names such a binary by its import path wherever it is hosted. Its version is the
//! recorded one unless that is `(devel)` (built from a working tree, or no
//! module at all), in which case it is derived from what the build recorded,
//! first rule that applies, and otherwise the main module is not reported:
//! no advisory can name a version nobody knows.
//!
//! 1. A version the build stamped with the linker: `-X pkg.var=value` in
//!    the `-ldflags` build setting (split as `cmd/go` splits flags: blanks
//!    separate, `'` or `"` quote), where `var` is `version`, `gitVersion`,
//!    `buildVersion` or `releaseVersion` (any case), `pkg` is `main` or a
//!    package under the main module's path as named above, and `value` is
//!    a semantic version, `v` prefixed as Go
//!    versions are (`20.10.24+dfsg1` → `v20.10.24+dfsg1`). Stamps of
//!    other packages (a dependency's `version.Version`) say nothing about
//!    the main module; several different stamps are ambiguous and give
//!    nothing. syft matches such stamps by a pattern on the flags text.
//! 2. The commit the build came from: `vcs.revision` and `vcs.time`, as the
//!    pseudo-version Go 1.24's `go build` stamps for an untagged commit,
//!    `vN.0.0-yyyymmddhhmmss-<first 12 characters of the revision>` (N = 0,
//!    or the major version of a `/vN` module path), with `+dirty` when
//!    `vcs.modified` is `true`. It sorts before every release, so an
//!    advisory affecting the module since its start matches it: a tree built
//!    from an unknown position in history cannot be shown fixed. syft makes
//!    the same pseudo-version, with `v0` whatever the module path and never
//!    `+dirty`.
//!
//! syft also guesses a version from the first NUL-delimited semver-like
//! string anywhere in the binary's bytes; that is not done here: any
//! library's version string can come first.

use std::marker::PhantomData;

use object::ReadRef;
use object::elf::{PF_W, PF_X};

use super::{Cataloger, Error, FileReader, elf};
use crate::package::{Package, PackageKind};

/// Name of this cataloger in errors and logs.
const CATALOGER: &str = "go-binary";

/// The section Go's linker writes the blob to.
const BUILD_INFO_SECTION: &[u8] = b".go.buildinfo";

/// Start of the build info blob (`debug/buildinfo.buildInfoMagic`).
const BUILD_INFO_MAGIC: &[u8] = b"\xff Go buildinf:";

/// The linker aligns the blob to 16 bytes; unaligned matches are data that
/// merely contains the magic.
const BUILD_INFO_ALIGN: u64 = 16;

/// Magic (14), pointer size (1), flags (1), two pointer slots (16).
const BUILD_INFO_HEADER_SIZE: usize = 32;

/// Flag bit: version and module info follow the header inline (Go ≥ 1.18).
const FLAG_INLINE_STRINGS: u8 = 0x2;

/// Flag bit: pointers are big-endian (pointer format only).
const FLAG_BIG_ENDIAN: u8 = 0x1;

/// Longest unsigned varint (`encoding/binary.MaxVarintLen64`).
const MAX_VARINT_LEN: usize = 10;

/// Length of each sentinel framing the module text.
const MODINFO_SENTINEL_LEN: usize = 16;

/// Bytes of the `.go.buildinfo` section or data segment searched for the
/// magic. The linker writes the blob first in `.go.buildinfo` and near the
/// start of the data segment, so real binaries match within the first
/// kilobytes; the cap bounds the work on hostile files.
pub const MAX_SEARCH_BYTES: u64 = 16 << 20;

/// Longest version or module-info string read. Module info for even the
/// largest real programs is tens of kilobytes.
pub const MAX_STRING_BYTES: u64 = 16 << 20;

/// The main module's version when built from a working tree, which no
/// advisory can name.
const DEVEL_VERSION: &str = "(devel)";

/// Finds Go modules and the Go standard library in ELF executables.
#[derive(Debug, Clone, Copy, Default)]
pub struct GoBinaryCataloger;

impl Cataloger for GoBinaryCataloger {
    fn name(&self) -> &'static str {
        CATALOGER
    }

    fn wants(&self, _path: &str, executable: bool) -> bool {
        executable
    }

    fn parse(&self, path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
        catalog(path, data)
    }

    fn reads_ranges(&self) -> bool {
        true
    }

    fn parse_file(&self, path: &str, file: &FileReader<'_>) -> Result<Vec<Package>, Error> {
        catalog(path, file)
    }
}

/// The packages of the binary at `path`, whatever holds its bytes.
fn catalog<'data>(path: &str, data: impl ReadRef<'data>) -> Result<Vec<Package>, Error> {
    match read_build_info_from(data) {
        Ok(Some(info)) => Ok(packages(&info, path)),
        Ok(None) => Ok(Vec::new()),
        Err(err) => Err(Error::new(CATALOGER, path, err.to_string())),
    }
}

/// Build information that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildInfoError {
    /// The blob at `address` is truncated or inconsistent.
    #[error("Go build info at {address:#x}: {reason}")]
    Blob {
        /// Virtual address of the blob's header.
        address: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A line of the module text breaks `runtime/debug.ParseBuildInfo`'s
    /// rules.
    #[error("Go module info line {line}: {reason}")]
    ModInfo {
        /// One-based line number, counted as Go counts it.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
}

/// What a Go binary records about its build (`runtime/debug.BuildInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildInfo {
    /// Toolchain version, e.g. `go1.22.2` (may carry a suffix such as
    /// ` X:boringcrypto`).
    pub go_version: String,
    /// Import path of the main package.
    pub path: String,
    /// The module containing the main package, when built in module mode.
    pub main: Option<Module>,
    /// Every other module linked in, in the order recorded.
    pub deps: Vec<Module>,
    /// `build` settings (`-compiler=gc`, `vcs.revision=…`), in order.
    pub settings: Vec<BuildSetting>,
}

/// One module line (`runtime/debug.Module`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Module {
    /// Module path.
    pub path: String,
    /// Module version, `(devel)` for a main module built from a working tree.
    pub version: String,
    /// `go.sum` checksum (`h1:…`), empty when not recorded (vendored builds).
    pub sum: String,
    /// The module this one was replaced by (`=>` line).
    pub replace: Option<Box<Module>>,
}

/// One `build` line (`runtime/debug.BuildSetting`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildSetting {
    /// Setting name, unquoted.
    pub key: String,
    /// Setting value, unquoted. Bytes a `\x` or octal escape produces that
    /// are not UTF-8 are replaced by U+FFFD.
    pub value: String,
}

/// Reads the build information of an ELF executable held in memory.
///
/// `Ok(None)` when `data` is not ELF, not parseable as ELF, or carries no
/// aligned build info magic: it is not a Go binary.
pub fn read_build_info(data: &[u8]) -> Result<Option<BuildInfo>, BuildInfoError> {
    read_build_info_from(data)
}

/// [`read_build_info`] through any [`ReadRef`]: a byte slice, or a
/// [`FileReader`](super::FileReader) over an open file, through which only
/// the ELF headers, the searched range and the strings the blob points at
/// are read. Memory is then bounded by those (at most
/// [`MAX_SEARCH_BYTES`] plus two [`MAX_STRING_BYTES`] strings on hostile
/// input, a few kilobytes on real binaries), not by the file's size.
pub fn read_build_info_from<'data, R: ReadRef<'data>>(data: R) -> Result<Option<BuildInfo>, BuildInfoError> {
    let Some(layout) = elf::read(data, BUILD_INFO_SECTION) else {
        return Ok(None);
    };
    let space = AddressSpace::of_elf(data, &layout);
    let Some((start, size)) = data_start(&layout) else {
        return Ok(None);
    };
    let Some(raw) = read_raw_build_info(&space, start, size)? else {
        return Ok(None);
    };
    let mut info = parse_build_info(&raw.modinfo)?;
    info.go_version = raw.version;
    Ok(Some(info))
}

/// Where Go's `elfExe.DataStart` says the blob lives: the `.go.buildinfo`
/// section, else the first writable, non-executable loaded segment.
fn data_start(layout: &elf::Layout) -> Option<(u64, u64)> {
    if let Some(section) = layout.section {
        return Some((section.address, section.size));
    }
    layout
        .loads
        .iter()
        .find(|load| load.flags & (PF_X.0 | PF_W.0) == PF_W.0)
        .map(|load| (load.address, load.memory_size))
}

/// The file bytes of the loaded segments, by virtual address: what Go's
/// `DataReader` reads from. Bytes are read from `data` only when asked for.
#[derive(Debug)]
struct AddressSpace<'data, R: ReadRef<'data>> {
    data: R,
    /// `(virtual address, file offset, file size)` of each region, in
    /// header order.
    regions: Vec<(u64, u64, u64)>,
    _data: PhantomData<&'data [u8]>,
}

impl<'data, R: ReadRef<'data>> AddressSpace<'data, R> {
    /// The `PT_LOAD` segments of `layout`; segments whose file range lies
    /// outside the file are left out, so addresses in them do not resolve.
    fn of_elf(data: R, layout: &elf::Layout) -> AddressSpace<'data, R> {
        let regions = layout
            .loads
            .iter()
            .filter(|load| elf::in_file(data, load.offset, load.file_size))
            .map(|load| (load.address, load.offset, load.file_size))
            .collect();
        AddressSpace { data, regions, _data: PhantomData }
    }

    /// Up to `max` bytes from `address` to the end of the first region that
    /// contains it; `None` when no region does.
    fn read(&self, address: u64, max: u64) -> Option<&'data [u8]> {
        self.regions.iter().find_map(|&(start, offset, size)| {
            let delta = address.checked_sub(start).filter(|&delta| delta < size)?;
            // In the file: `of_elf` checked `offset + size`, and delta < size.
            self.data.read_bytes_at(offset + delta, max.min(size - delta)).ok()
        })
    }
}

/// The two strings of the blob: toolchain version and module text (sentinels
/// stripped; empty when the binary was built without modules).
#[derive(Debug, Clone, PartialEq, Eq)]
struct RawBuildInfo {
    version: String,
    modinfo: String,
}

/// Finds and decodes the blob in `[start, start + size)`.
fn read_raw_build_info<'data, R: ReadRef<'data>>(
    space: &AddressSpace<'data, R>,
    start: u64,
    size: u64,
) -> Result<Option<RawBuildInfo>, BuildInfoError> {
    let Some(address) = search_magic(space, start, size) else {
        return Ok(None);
    };
    let blob_error = |reason: String| BuildInfoError::Blob { address, reason };
    let header: &[u8; BUILD_INFO_HEADER_SIZE] = space
        .read(address, BUILD_INFO_HEADER_SIZE as u64)
        .and_then(|header| header.try_into().ok())
        .ok_or_else(|| blob_error("the 32-byte header runs past the end of its segment".to_owned()))?;
    let flags = header[15];
    let (version, modinfo) = if flags & FLAG_INLINE_STRINGS != 0 {
        let (version, next) = read_inline_string(space, address + BUILD_INFO_HEADER_SIZE as u64)
            .map_err(|reason| blob_error(format!("version string: {reason}")))?;
        let (modinfo, _) =
            read_inline_string(space, next).map_err(|reason| blob_error(format!("module info: {reason}")))?;
        (version, modinfo)
    } else {
        let pointer_size = header[14];
        let pointers = PointerFormat::new(pointer_size, flags & FLAG_BIG_ENDIAN != 0)
            .ok_or_else(|| blob_error(format!("pointer size {pointer_size} is neither 4 nor 8")))?;
        let (version_slot, modinfo_slot) = header[16..].split_at(pointers.size);
        let version_pointer = pointers.read(version_slot);
        let modinfo_pointer = pointers.read(modinfo_slot);
        let version = read_string_header(space, pointers, version_pointer).ok_or_else(|| {
            blob_error(format!("version string header at {version_pointer:#x} does not resolve"))
        })?;
        // Go reads an unresolvable module-info pointer as the empty string:
        // binaries built outside module mode have nothing there.
        let modinfo = read_string_header(space, pointers, modinfo_pointer).unwrap_or_default();
        (version, modinfo)
    };
    if version.is_empty() {
        return Err(blob_error("empty Go version".to_owned()));
    }
    Ok(Some(RawBuildInfo {
        version: String::from_utf8_lossy(version).into_owned(),
        modinfo: String::from_utf8_lossy(strip_modinfo_sentinels(modinfo)).into_owned(),
    }))
}

/// The first 16-byte aligned address in `[start, start + size)` (at most
/// [`MAX_SEARCH_BYTES`] of it, within one segment) where the magic starts
/// and a whole header fits.
fn search_magic<'data, R: ReadRef<'data>>(
    space: &AddressSpace<'data, R>,
    start: u64,
    size: u64,
) -> Option<u64> {
    let end = start.checked_add(size)?;
    let aligned = start.checked_add(BUILD_INFO_ALIGN - 1)? & !(BUILD_INFO_ALIGN - 1);
    if aligned >= end {
        return None;
    }
    let window = space.read(aligned, (end - aligned).min(MAX_SEARCH_BYTES))?;
    let step = BUILD_INFO_ALIGN as usize;
    let offset = (0..window.len())
        .step_by(step)
        .find(|&offset| window.get(offset..).is_some_and(|rest| rest.starts_with(BUILD_INFO_MAGIC)))?;
    // Go gives up when the first match leaves no room for a header.
    let remaining = end - aligned - offset as u64;
    (remaining >= BUILD_INFO_HEADER_SIZE as u64).then_some(aligned + offset as u64)
}

/// A varint-length-prefixed string at `address` and the address after it.
fn read_inline_string<'data, R: ReadRef<'data>>(
    space: &AddressSpace<'data, R>,
    address: u64,
) -> Result<(&'data [u8], u64), String> {
    let prefix = space
        .read(address, MAX_VARINT_LEN as u64)
        .ok_or_else(|| format!("address {address:#x} is outside the loaded segments"))?;
    let (len, prefix_len) =
        uvarint(prefix).ok_or_else(|| format!("bad varint length prefix at {address:#x}"))?;
    if len > MAX_STRING_BYTES {
        return Err(format!("length {len} exceeds the {MAX_STRING_BYTES}-byte cap"));
    }
    let past_end = || format!("{len}-byte string after {address:#x} runs past the end of the address space");
    let data_address = address.checked_add(prefix_len as u64).ok_or_else(past_end)?;
    let next = data_address.checked_add(len).ok_or_else(past_end)?;
    let data = space.read(data_address, len).unwrap_or_default();
    if (data.len() as u64) < len {
        return Err(format!("{len}-byte string at {data_address:#x} runs past the end of its segment"));
    }
    Ok((data, next))
}

/// Pointer size and byte order of a pre-1.18 blob.
#[derive(Debug, Clone, Copy)]
struct PointerFormat {
    size: usize,
    big_endian: bool,
}

impl PointerFormat {
    fn new(size: u8, big_endian: bool) -> Option<PointerFormat> {
        matches!(size, 4 | 8).then_some(PointerFormat { size: usize::from(size), big_endian })
    }

    /// The pointer at the start of `bytes`; callers pass at least `size`
    /// bytes, a shorter slice reads as address 0, which no segment maps in
    /// practice and which then fails to resolve.
    fn read(self, bytes: &[u8]) -> u64 {
        let Some(bytes) = bytes.get(..self.size) else {
            return 0;
        };
        let mut value = 0u64;
        if self.big_endian {
            for &byte in bytes {
                value = value << 8 | u64::from(byte);
            }
        } else {
            for &byte in bytes.iter().rev() {
                value = value << 8 | u64::from(byte);
            }
        }
        value
    }
}

/// The bytes of the Go string whose header (`{data, len}`) is at `address`;
/// `None` where Go's `readString` returns "".
fn read_string_header<'data, R: ReadRef<'data>>(
    space: &AddressSpace<'data, R>,
    pointers: PointerFormat,
    address: u64,
) -> Option<&'data [u8]> {
    let header_len = 2 * pointers.size;
    let header = space.read(address, header_len as u64).filter(|header| header.len() == header_len)?;
    let data_address = pointers.read(header);
    let len = pointers.read(&header[pointers.size..]);
    if len > MAX_STRING_BYTES {
        return None;
    }
    if len == 0 {
        return Some(&[]);
    }
    space.read(data_address, len).filter(|data| data.len() as u64 == len)
}

/// Go's `encoding/binary.Uvarint`: the value and the bytes it took; `None`
/// for a truncated or overflowing varint.
fn uvarint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    let mut shift = 0u32;
    for (index, &byte) in bytes.iter().enumerate().take(MAX_VARINT_LEN) {
        if byte < 0x80 {
            if index == MAX_VARINT_LEN - 1 && byte > 1 {
                return None;
            }
            return Some((value | u64::from(byte) << shift, index + 1));
        }
        value |= u64::from(byte & 0x7f) << shift;
        shift += 7;
    }
    None
}

/// The module text between the sentinels, or nothing when the framing Go
/// expects is absent.
fn strip_modinfo_sentinels(modinfo: &[u8]) -> &[u8] {
    let framed = modinfo.len() > 2 * MODINFO_SENTINEL_LEN
        && modinfo.get(modinfo.len() - MODINFO_SENTINEL_LEN - 1) == Some(&b'\n');
    if framed { &modinfo[MODINFO_SENTINEL_LEN..modinfo.len() - MODINFO_SENTINEL_LEN] } else { &[] }
}

/// Parses module text by the rules of `runtime/debug.ParseBuildInfo`.
/// `go_version` is left empty: it is stored apart from the text.
pub fn parse_build_info(text: &str) -> Result<BuildInfo, BuildInfoError> {
    /// The module a following `=>` line replaces.
    #[derive(Clone, Copy)]
    enum Last {
        Main,
        Dep(usize),
    }

    let mut info = BuildInfo::default();
    let mut last: Option<Last> = None;
    let mut line_number = 1;
    let mut rest = text;
    // Go stops at a final line without a newline and ignores it.
    while let Some((line, tail)) = rest.split_once('\n') {
        rest = tail;
        let error = |reason: String| BuildInfoError::ModInfo { line: line_number, reason };
        if let Some(path) = line.strip_prefix("path\t") {
            info.path = path.to_owned();
        } else if let Some(columns) = line.strip_prefix("mod\t") {
            info.main = Some(read_module_line(columns).map_err(error)?);
            last = Some(Last::Main);
        } else if let Some(columns) = line.strip_prefix("dep\t") {
            info.deps.push(read_module_line(columns).map_err(error)?);
            last = Some(Last::Dep(info.deps.len() - 1));
        } else if let Some(columns) = line.strip_prefix("=>\t") {
            let columns: Vec<&str> = columns.split('\t').collect();
            let [path, version, sum] = columns[..] else {
                return Err(error(format!("expected 3 columns for replacement; got {}", columns.len())));
            };
            let replaced = match last.take() {
                Some(Last::Main) => info.main.as_mut(),
                Some(Last::Dep(index)) => info.deps.get_mut(index),
                None => None,
            }
            .ok_or_else(|| error("replacement with no module on previous line".to_owned()))?;
            replaced.replace = Some(Box::new(Module {
                path: path.to_owned(),
                version: version.to_owned(),
                sum: sum.to_owned(),
                replace: None,
            }));
        } else if let Some(setting) = line.strip_prefix("build\t") {
            info.settings.push(read_build_line(setting).map_err(error)?);
        }
        line_number += 1;
    }
    Ok(info)
}

/// `path version [sum]`.
fn read_module_line(columns: &str) -> Result<Module, String> {
    let columns: Vec<&str> = columns.split('\t').collect();
    match columns[..] {
        [path, version] => {
            Ok(Module { path: path.to_owned(), version: version.to_owned(), ..Module::default() })
        }
        [path, version, sum] => Ok(Module {
            path: path.to_owned(),
            version: version.to_owned(),
            sum: sum.to_owned(),
            replace: None,
        }),
        _ => Err(format!("expected 2 or 3 columns; got {}", columns.len())),
    }
}

/// `key=value`, either side possibly Go-quoted.
fn read_build_line(setting: &str) -> Result<BuildSetting, String> {
    let (key, raw_value) = match setting.chars().next() {
        None => return Err("build line missing '='".to_owned()),
        Some('=') => return Err("build line with missing key".to_owned()),
        Some('`' | '"') => {
            let (key, consumed) =
                unquote_prefix(setting).ok_or_else(|| "invalid quoted key in build line".to_owned())?;
            match setting[consumed..].chars().next() {
                None => return Err("build line missing '=' after quoted key".to_owned()),
                Some('=') => {}
                Some(other) => return Err(format!("unexpected character after quoted key: {other:?}")),
            }
            (String::from_utf8_lossy(&key).into_owned(), &setting[consumed + 1..])
        }
        Some(_) => {
            let (key, value) =
                setting.split_once('=').ok_or_else(|| "build line missing '=' after key".to_owned())?;
            if key_needs_quotes(key) {
                return Err(format!("unquoted key {key:?} must be quoted"));
            }
            (key.to_owned(), value)
        }
    };
    let value = match raw_value.chars().next() {
        None => String::new(),
        Some('`' | '"') => match unquote_prefix(raw_value) {
            Some((value, consumed)) if consumed == raw_value.len() => {
                String::from_utf8_lossy(&value).into_owned()
            }
            _ => return Err("invalid quoted value in build line".to_owned()),
        },
        Some(_) if value_needs_quotes(raw_value) => {
            return Err(format!("unquoted value {raw_value:?} must be quoted"));
        }
        Some(_) => raw_value.to_owned(),
    };
    Ok(BuildSetting { key, value })
}

/// `runtime/debug.quoteKey`.
fn key_needs_quotes(key: &str) -> bool {
    key.is_empty() || key.contains(['=', ' ', '\t', '\r', '\n', '"', '`'])
}

/// `runtime/debug.quoteValue`.
fn value_needs_quotes(value: &str) -> bool {
    value.contains([' ', '\t', '\r', '\n', '"', '`'])
}

/// The Go string literal (back-quoted or double-quoted) at the start of `s`,
/// unquoted as `strconv.Unquote` does, and how many bytes of `s` it spans.
fn unquote_prefix(s: &str) -> Option<(Vec<u8>, usize)> {
    let mut chars = s.char_indices();
    match chars.next()?.1 {
        '`' => {
            let end = s[1..].find('`')? + 1;
            // Go drops carriage returns inside raw strings.
            let value = s[1..end].bytes().filter(|&byte| byte != b'\r').collect();
            Some((value, end + 1))
        }
        '"' => {
            let mut value = Vec::new();
            while let Some((index, c)) = chars.next() {
                match c {
                    '"' => return Some((value, index + 1)),
                    '\n' => return None,
                    '\\' => unescape(&mut chars, &mut value)?,
                    other => value.extend_from_slice(other.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
            None
        }
        _ => None,
    }
}

/// One escape of a double-quoted Go string, after its backslash
/// (`strconv.UnquoteChar`).
fn unescape(chars: &mut std::str::CharIndices<'_>, value: &mut Vec<u8>) -> Option<()> {
    let simple = |byte: u8, value: &mut Vec<u8>| value.push(byte);
    match chars.next()?.1 {
        'a' => simple(0x07, value),
        'b' => simple(0x08, value),
        'f' => simple(0x0c, value),
        'n' => simple(b'\n', value),
        'r' => simple(b'\r', value),
        't' => simple(b'\t', value),
        'v' => simple(0x0b, value),
        '\\' => simple(b'\\', value),
        '"' => simple(b'"', value),
        'x' => value.push(u8::try_from(hex_digits(chars, 2)?).ok()?),
        escape @ ('u' | 'U') => {
            let code = hex_digits(chars, if escape == 'u' { 4 } else { 8 })?;
            let c = char::from_u32(code)?;
            value.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        }
        first @ '0'..='7' => {
            let mut code = first.to_digit(8)?;
            for _ in 0..2 {
                code = code << 3 | chars.next()?.1.to_digit(8)?;
            }
            value.push(u8::try_from(code).ok()?);
        }
        _ => return None,
    }
    Some(())
}

/// `count` hex digits as a number.
fn hex_digits(chars: &mut std::str::CharIndices<'_>, count: usize) -> Option<u32> {
    let mut code = 0u32;
    for _ in 0..count {
        code = code << 4 | chars.next()?.1.to_digit(16)?;
    }
    Some(code)
}

/// The semantic version OSV's Go ecosystem gives a toolchain tag
/// (`go1.22.2` → `v1.22.2`, `go1.21` → `v1.21.0`, `go1.21rc2` →
/// `v1.21.0-rc.2`), by the rules of `golang.org/x/vuln`'s `GoTagToSemver`.
/// Anything after the first space (` X:boringcrypto`) is ignored; `None`
/// for tags that are not releases (`devel go1.23-…`).
pub fn go_version_to_semver(tag: &str) -> Option<String> {
    let tag = tag.split_whitespace().next()?;
    // `go1` is the first release; `go1.0` names no tag and maps to nothing.
    match tag {
        "go1" => return Some("v1.0.0".to_owned()),
        "go1.0" => return None,
        _ => {}
    }
    let rest = tag.strip_prefix("go")?;
    let (major, rest) = split_digits(rest)?;
    let rest = rest.strip_prefix('.')?;
    let (minor, mut rest) = split_digits(rest)?;
    let mut patch = "0";
    if let Some(after_dot) = rest.strip_prefix('.') {
        (patch, rest) = split_digits(after_dot)?;
    }
    let mut version = format!("v{major}.{minor}.{patch}");
    if !rest.is_empty() {
        let (kind, number) = ["beta", "rc", "-pre"]
            .iter()
            .find_map(|kind| Some((kind.trim_start_matches('-'), rest.strip_prefix(kind)?)))?;
        let (number, rest) = split_digits(number)?;
        if !rest.is_empty() {
            return None;
        }
        version = format!("{version}-{kind}.{number}");
    }
    Some(version)
}

/// A non-empty run of ASCII digits at the start of `s`, and what follows.
fn split_digits(s: &str) -> Option<(&str, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    (end > 0).then(|| s.split_at(end))
}

/// The packages a binary's build info names: the main module (by the rules
/// in the module documentation), every dependency as it was actually linked
/// (the replacement when replaced; left out when that has no version, as a
/// replacement by a local directory has none), and the standard library as
/// `stdlib` at the toolchain's version.
fn packages(info: &BuildInfo, path: &str) -> Vec<Package> {
    let go_module = |name: &str, version: &str| Package {
        name: name.to_owned(),
        version: version.to_owned(),
        kind: PackageKind::GoModule,
        source_name: None,
        source_version: None,
        arch: None,
        path: path.to_owned(),
        layer: None,
        ecosystem: "Go".to_owned(),
    };
    let mut packages = Vec::new();
    match main_module(info) {
        Some((name, version)) => packages.push(go_module(name, &version)),
        None => tracing::debug!(main = %info.path, binary = path,
            "Go main module has no version the build recorded; not reported"),
    }
    for dep in &info.deps {
        let linked = dep.replace.as_deref().unwrap_or(dep);
        if linked.version.is_empty() {
            tracing::debug!(module = %dep.path, replacement = %linked.path, binary = path,
                "Go module replaced by a directory has no version; not reported");
            continue;
        }
        packages.push(go_module(&linked.path, &linked.version));
    }
    match go_version_to_semver(&info.go_version) {
        Some(version) => packages.push(go_module("stdlib", &version)),
        None => tracing::debug!(toolchain = %info.go_version, binary = path,
            "Go toolchain version is not a release tag; stdlib not reported"),
    }
    packages
}

/// The main module's path and version, by the rules in the module
/// documentation; `None` when no version is known.
fn main_module(info: &BuildInfo) -> Option<(&str, String)> {
    let (name, recorded, in_module) = match &info.main {
        Some(main) if !main.path.is_empty() => (main.path.as_str(), main.version.as_str(), true),
        // `go build file.go` names no package; there is nothing to report.
        _ if !info.path.is_empty() && info.path != "command-line-arguments" => {
            (repository_root(&info.path).unwrap_or(&info.path), DEVEL_VERSION, false)
        }
        _ => return None,
    };
    if recorded.is_empty() {
        return None;
    }
    if recorded != DEVEL_VERSION {
        return Some((name, recorded.to_owned()));
    }
    let setting = |key: &str| info.settings.iter().find(|s| s.key == key).map(|s| s.value.as_str());
    if let Some(version) = setting("-ldflags").and_then(|flags| stamped_version(flags, name)) {
        return Some((name, version));
    }
    let major = if in_module { major_version_suffix(name) } else { 0 };
    let version = vcs_pseudo_version(setting("vcs.revision")?, setting("vcs.time")?, major)?;
    let dirty = if setting("vcs.modified") == Some("true") { "+dirty" } else { "" };
    Some((name, format!("{version}{dirty}")))
}

/// Hosts whose import paths are `host/owner/repo/...`, one repository per
/// `owner/repo`: the layouts `cmd/go` fixes without asking the host.
/// gitlab.com is not one: its groups nest, so `a/b/c` may be a repository.
const OWNER_REPO_HOSTS: &[&str] = &["github.com", "bitbucket.org"];

/// The repository an import path outside any module belongs to, when its
/// form tells: `host/owner/repo` on [`OWNER_REPO_HOSTS`].
fn repository_root(path: &str) -> Option<&str> {
    let host = path.split('/').next()?;
    if !OWNER_REPO_HOSTS.contains(&host) {
        return None;
    }
    match path.match_indices('/').nth(2) {
        Some((end, _)) => Some(&path[..end]),
        // Two slashes: the repository's own root package.
        None if path.matches('/').count() == 2 => Some(path),
        None => None,
    }
}

/// The `N` of a module path ending in `/vN` (N ≥ 2), else 0.
fn major_version_suffix(module: &str) -> u64 {
    module
        .rsplit_once('/')
        .and_then(|(_, last)| last.strip_prefix('v'))
        .filter(|n| !n.starts_with('0'))
        .and_then(|n| n.parse().ok())
        .filter(|&n| n >= 2)
        .unwrap_or(0)
}

/// Variable names a linker `-X` stamp of the program's version uses.
const VERSION_VARIABLES: &[&str] = &["version", "gitversion", "buildversion", "releaseversion"];

/// The one version `flags` (an `-ldflags` value) stamps into `main` or a
/// package under `root`, `v`-prefixed.
fn stamped_version(flags: &str, root: &str) -> Option<String> {
    let fields = split_flags(flags)?;
    let mut versions = Vec::new();
    let mut fields = fields.iter();
    while let Some(field) = fields.next() {
        let assignment = match field.trim_start_matches('-') {
            "X" if field.starts_with('-') => fields.next().map(String::as_str),
            other => other.strip_prefix("X=").filter(|_| field.starts_with('-')),
        };
        let Some((symbol, value)) = assignment.and_then(|a| a.split_once('=')) else {
            continue;
        };
        let Some((package, variable)) = symbol.rsplit_once('.') else {
            continue;
        };
        let in_main_module = package == "main"
            || package == root
            || package.strip_prefix(root).is_some_and(|rest| rest.starts_with('/'));
        if in_main_module
            && VERSION_VARIABLES.contains(&variable.to_ascii_lowercase().as_str())
            && is_semver(value.strip_prefix('v').unwrap_or(value))
        {
            let version = if value.starts_with('v') { value.to_owned() } else { format!("v{value}") };
            versions.push(version);
        }
    }
    versions.sort();
    versions.dedup();
    match versions.as_slice() {
        [version] => Some(version.clone()),
        [] => None,
        several => {
            tracing::debug!(?several, "several version stamps in -ldflags; none taken");
            None
        }
    }
}

/// Splits a flags string as `cmd/internal/quoted.Split` does: blanks
/// separate fields, a field starting with `'` or `"` runs to the next same
/// quote (no escapes); `None` for an unterminated quote.
fn split_flags(flags: &str) -> Option<Vec<String>> {
    const BLANKS: &[char] = &[' ', '\t', '\n', '\r'];
    let mut fields = Vec::new();
    let mut rest = flags;
    loop {
        rest = rest.trim_start_matches(BLANKS);
        let Some(first) = rest.chars().next() else {
            return Some(fields);
        };
        if first == '\'' || first == '"' {
            let end = rest[1..].find(first)? + 1;
            fields.push(rest[1..end].to_owned());
            rest = &rest[end + 1..];
        } else {
            let end = rest.find(BLANKS).unwrap_or(rest.len());
            fields.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
}

/// Whether `s` is a semantic version 2.0.0 (`1.2.3`, `1.2.3-rc.1+build`),
/// without a `v`.
fn is_semver(s: &str) -> bool {
    let (rest, build) = match s.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (s, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (rest, None),
    };
    let numeric =
        |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && (n == "0" || !n.starts_with('0'));
    let identifiers = |ids: &str, numbers_canonical: bool| {
        ids.split('.').all(|id| {
            !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && (!numbers_canonical || !id.bytes().all(|b| b.is_ascii_digit()) || numeric(id))
        })
    };
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|part| numeric(part))
        && pre.is_none_or(|pre| identifiers(pre, true))
        && build.is_none_or(|build| identifiers(build, false))
}

/// The pseudo-version of an untagged commit (`golang.org/x/mod`'s
/// `module.PseudoVersion` with no prior tag): `vN.0.0-yyyymmddhhmmss-rev`,
/// the time in UTC and `rev` the first 12 characters of the revision.
/// `None` unless the revision is at least 12 lowercase hex digits and the
/// time is RFC 3339.
fn vcs_pseudo_version(revision: &str, time: &str, major: u64) -> Option<String> {
    let short = revision.get(..12)?;
    if !revision.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    let time = chrono::DateTime::parse_from_rfc3339(time).ok()?.with_timezone(&chrono::Utc);
    Some(format!("v{major}.0.0-{}-{short}", time.format("%Y%m%d%H%M%S")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cmd/go/internal/modload.infoStart` and `infoEnd`, from
    /// `src/cmd/go/internal/modload/build.go` of Go 1.19.
    const INFO_START: &[u8] = b"\x30\x77\xaf\x0c\x92\x74\x08\x02\x41\xe1\xc1\x07\xe6\xd6\x18\xe6";
    const INFO_END: &[u8] = b"\xf9\x32\x43\x31\x86\x18\x20\x72\x00\x82\x42\x10\x41\x16\xd8\xf2";

    fn framed(text: &str) -> Vec<u8> {
        [INFO_START, text.as_bytes(), INFO_END].concat()
    }

    fn varint(mut value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while value >= 0x80 {
            out.push((value as u8) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
        out
    }

    /// A Go ≥ 1.18 blob: header with flags 0x2 and zeroed pointer slots,
    /// then both strings inline.
    fn inline_blob(version: &[u8], modinfo: &[u8]) -> Vec<u8> {
        let mut blob = BUILD_INFO_MAGIC.to_vec();
        blob.push(8);
        blob.push(FLAG_INLINE_STRINGS);
        blob.extend_from_slice(&[0; 16]);
        blob.extend(varint(version.len() as u64));
        blob.extend_from_slice(version);
        blob.extend(varint(modinfo.len() as u64));
        blob.extend_from_slice(modinfo);
        blob
    }

    /// One region of `bytes` at `address`.
    fn space(address: u64, bytes: &[u8]) -> AddressSpace<'_, &[u8]> {
        AddressSpace { data: bytes, regions: vec![(address, 0, bytes.len() as u64)], _data: PhantomData }
    }

    const SAMPLE_MODINFO: &str = "path\texample.com/app\n\
        mod\texample.com/app\tv1.4.0\th1:abc=\n\
        dep\tgolang.org/x/text\tv0.3.7\th1:olpwvP2KacW1ZWvsR7uQhoyTYvKAupfQrRGBFM352Gk=\n\
        dep\texample.com/old\tv1.0.0\n\
        =>\texample.com/new\tv1.1.0\th1:xyz=\n\
        dep\texample.com/local\tv0.0.0-00010101000000-000000000000\n\
        =>\t../local\t\t\n\
        build\t-compiler=gc\n";

    #[test]
    fn inline_format_is_read_from_the_data_start() {
        let mut data = vec![0u8; 48];
        data.extend(inline_blob(b"go1.22.2", &framed(SAMPLE_MODINFO)));
        let space = space(0x1000, &data);
        let raw = read_raw_build_info(&space, 0x1000, data.len() as u64).expect("readable").expect("found");
        assert_eq!(raw.version, "go1.22.2");
        assert_eq!(raw.modinfo, SAMPLE_MODINFO);
    }

    #[test]
    fn pointer_format_follows_pointers_in_both_byte_orders() {
        for (pointer_size, big_endian) in [(8u8, false), (4, false), (8, true), (4, true)] {
            let size = usize::from(pointer_size);
            let put = |out: &mut Vec<u8>, value: u64| {
                let bytes = if big_endian { value.to_be_bytes() } else { value.to_le_bytes() };
                if big_endian {
                    out.extend_from_slice(&bytes[8 - size..]);
                } else {
                    out.extend_from_slice(&bytes[..size]);
                }
            };
            let base = 0x40_0000u64;
            let version = b"go1.16.15".to_vec();
            let modinfo = framed(SAMPLE_MODINFO);
            // Layout: header at base, version header at +32, modinfo header
            // after it, then the two strings' bytes.
            let version_header = base + 32;
            let modinfo_header = version_header + 2 * size as u64;
            let version_data = modinfo_header + 2 * size as u64;
            let modinfo_data = version_data + version.len() as u64;
            let mut image = BUILD_INFO_MAGIC.to_vec();
            image.push(pointer_size);
            image.push(u8::from(big_endian));
            put(&mut image, version_header);
            put(&mut image, modinfo_header);
            image.resize(32, 0);
            put(&mut image, version_data);
            put(&mut image, version.len() as u64);
            put(&mut image, modinfo_data);
            put(&mut image, modinfo.len() as u64);
            image.extend_from_slice(&version);
            image.extend_from_slice(&modinfo);
            let space = space(base, &image);
            let raw =
                read_raw_build_info(&space, base, image.len() as u64).expect("readable").expect("found");
            assert_eq!(raw.version, "go1.16.15", "{pointer_size} big={big_endian}");
            assert_eq!(raw.modinfo, SAMPLE_MODINFO);
        }
    }

    #[test]
    fn magic_is_only_accepted_at_aligned_addresses() {
        // An unaligned copy of the magic comes first and must be skipped.
        let mut data = vec![0u8; 8];
        data.extend_from_slice(BUILD_INFO_MAGIC);
        data.resize(64, 0);
        data.extend(inline_blob(b"go1.21.0", b""));
        let space = space(0x2000, &data);
        let raw = read_raw_build_info(&space, 0x2000, data.len() as u64).expect("readable").expect("found");
        assert_eq!(raw.version, "go1.21.0");
        assert_eq!(raw.modinfo, "", "no framing means no modules");

        let unaligned_only = [vec![0u8; 8], inline_blob(b"go1.21.0", b"")].concat();
        let space = self::space(0x2000, &unaligned_only);
        assert_eq!(read_raw_build_info(&space, 0x2000, unaligned_only.len() as u64), Ok(None));
    }

    #[test]
    fn no_magic_or_no_room_for_a_header_is_not_a_go_binary() {
        let data = vec![0xffu8; 4096];
        let space = space(0, &data);
        assert_eq!(read_raw_build_info(&space, 0, 4096), Ok(None));

        let mut short = vec![0u8; 16];
        short.extend_from_slice(BUILD_INFO_MAGIC);
        short.extend_from_slice(&[8, 2]);
        let space = self::space(0, &short);
        assert_eq!(read_raw_build_info(&space, 0, short.len() as u64), Ok(None));
        // A range that overflows the address space reads nothing.
        assert_eq!(read_raw_build_info(&space, u64::MAX - 4, 100), Ok(None));
    }

    #[test]
    fn hostile_inline_blobs_are_errors_not_panics() {
        // Version length larger than the data.
        let mut truncated = inline_blob(b"go1.22.2", &framed(SAMPLE_MODINFO));
        truncated.truncate(BUILD_INFO_HEADER_SIZE + 4);
        // A varint of ten 0xff bytes overflows 64 bits.
        let mut huge_varint = inline_blob(b"", b"");
        huge_varint.truncate(BUILD_INFO_HEADER_SIZE);
        huge_varint.extend_from_slice(&[0xff; 10]);
        huge_varint.push(0x01);
        // A valid varint claiming far more than the cap.
        let mut over_cap = inline_blob(b"", b"");
        over_cap.truncate(BUILD_INFO_HEADER_SIZE);
        over_cap.extend(varint(MAX_STRING_BYTES + 1));
        // Module info length running off the end.
        let mut modinfo_cut = inline_blob(b"go1.22.2", &framed(SAMPLE_MODINFO));
        modinfo_cut.truncate(modinfo_cut.len() - 5);
        // Empty version.
        let empty_version = inline_blob(b"", &framed(SAMPLE_MODINFO));
        // Header cut short by the end of the segment but not of the range.
        let header_cut = inline_blob(b"go1.22.2", b"")[..20].to_vec();
        for (name, blob, range) in [
            ("truncated", &truncated, truncated.len() as u64),
            ("huge varint", &huge_varint, huge_varint.len() as u64),
            ("over cap", &over_cap, over_cap.len() as u64),
            ("modinfo cut", &modinfo_cut, modinfo_cut.len() as u64),
            ("empty version", &empty_version, empty_version.len() as u64),
            ("header cut", &header_cut, 4096),
        ] {
            let space = space(0x10, blob);
            let result = read_raw_build_info(&space, 0x10, range);
            assert!(matches!(result, Err(BuildInfoError::Blob { address: 0x10, .. })), "{name}: {result:?}");
        }
    }

    #[test]
    fn blob_at_the_top_of_the_address_space_does_not_overflow() {
        // Header, version, then a module-info length prefix in the very last
        // byte of the address space: the string would start past it.
        let mut blob = inline_blob(b"go1.22.2", b"");
        assert_eq!(blob.len(), 42);
        blob.resize(47, b'x');
        blob[32] = 14;
        blob.push(0);
        let start = u64::MAX - 47;
        let space = space(start, &blob);
        let result = read_raw_build_info(&space, start, 47);
        assert!(
            matches!(&result, Err(BuildInfoError::Blob { reason, .. }) if reason.contains("end of the address space")),
            "{result:?}"
        );
    }

    #[test]
    fn hostile_pointer_blobs_are_errors_not_panics() {
        let header = |pointer_size: u8, version_pointer: u64| {
            let mut blob = BUILD_INFO_MAGIC.to_vec();
            blob.push(pointer_size);
            blob.push(0);
            blob.extend_from_slice(&version_pointer.to_le_bytes());
            blob.extend_from_slice(&0u64.to_le_bytes());
            blob
        };
        // Pointer to nowhere.
        let nowhere = header(8, 0xdead_beef_0000);
        // Pointer to a string header whose data pointer is out of range.
        let mut dangling = header(8, 0x1000 + 32);
        dangling.extend_from_slice(&0xffff_ffff_ffffu64.to_le_bytes());
        dangling.extend_from_slice(&5u64.to_le_bytes());
        // String header whose length exceeds its segment.
        let mut too_long = header(8, 0x1000 + 32);
        too_long.extend_from_slice(&(0x1000u64 + 48).to_le_bytes());
        too_long.extend_from_slice(&u64::MAX.to_le_bytes());
        // Pointer size that is neither 4 nor 8.
        let odd_size = header(3, 0x1000);
        for (name, blob) in
            [("nowhere", nowhere), ("dangling", dangling), ("too long", too_long), ("odd", odd_size)]
        {
            let space = space(0x1000, &blob);
            let result = read_raw_build_info(&space, 0x1000, blob.len() as u64);
            assert!(matches!(result, Err(BuildInfoError::Blob { .. })), "{name}: {result:?}");
        }
    }

    #[test]
    fn uvarint_matches_go() {
        assert_eq!(uvarint(&[0x00]), Some((0, 1)));
        assert_eq!(uvarint(&[0x96, 0x01]), Some((150, 2)));
        assert_eq!(
            uvarint(&[0xff; 9].iter().copied().chain([0x01]).collect::<Vec<_>>()),
            Some((u64::MAX, 10))
        );
        assert_eq!(uvarint(&[0x80, 0x80]), None, "truncated");
        assert_eq!(uvarint(&[0xff; 9].iter().copied().chain([0x02]).collect::<Vec<_>>()), None, "overflow");
        assert_eq!(uvarint(&[0x80; 11]), None, "too long");
        assert_eq!(uvarint(&[]), None);
    }

    /// The seeds of `FuzzParseBuildInfoRoundTrip` in Go's
    /// `src/runtime/debug/mod_test.go` (Go 1.19), with the results
    /// `ParseBuildInfo` gives for them.
    #[test]
    fn go_fuzz_seeds_parse_as_go_parses_them() {
        let outside_module =
            parse_build_info("path\trsc.io/fortune\nmod\trsc.io/fortune\tv1.0.0\n").expect("valid");
        assert_eq!(outside_module.path, "rsc.io/fortune");
        assert_eq!(
            outside_module.main,
            Some(Module { path: "rsc.io/fortune".into(), version: "v1.0.0".into(), ..Module::default() })
        );

        // No trailing newline: Go drops the line.
        assert_eq!(parse_build_info("path\tcmd/test2json").expect("valid"), BuildInfo::default());

        let in_module = parse_build_info(
            "go\t1.18\npath\texample.com/m\nmod\texample.com/m\t(devel)\t\nbuild\t-compiler=gc\n",
        )
        .expect("valid");
        assert_eq!(in_module.path, "example.com/m");
        assert_eq!(
            in_module.main,
            Some(Module { path: "example.com/m".into(), version: "(devel)".into(), ..Module::default() })
        );
        assert_eq!(in_module.settings, [BuildSetting { key: "-compiler".into(), value: "gc".into() }]);

        let gopath = parse_build_info("go\t1.18\npath\texample.com/m\nbuild\t-compiler=gc\n").expect("valid");
        assert_eq!(gopath.main, None);
        assert_eq!(gopath.settings.len(), 1);

        // Space-separated lines are not Go's format: all ignored.
        let spaced =
            parse_build_info("go 1.18\npath example.com/m\nbuild CRAZY_ENV=\"requires\\nescaping\"\n")
                .expect("valid");
        assert_eq!(spaced, BuildInfo::default());
    }

    #[test]
    fn quoted_build_settings_unquote_like_strconv() {
        // The tab-separated form `BuildInfo.String` writes for the escaped seed.
        let info = parse_build_info("build\tCRAZY_ENV=\"requires\\nescaping\"\n").expect("valid");
        assert_eq!(
            info.settings,
            [BuildSetting { key: "CRAZY_ENV".into(), value: "requires\nescaping".into() }]
        );

        let info = parse_build_info(
            "build\t\"key with space\"=`raw\r value`\nbuild\t-ldflags=\"-X main.v=\\u00e9\\x41\\101\"\nbuild\tempty=\n",
        )
        .expect("valid");
        assert_eq!(
            info.settings[0],
            BuildSetting { key: "key with space".into(), value: "raw value".into() }
        );
        assert_eq!(info.settings[1].value, "-X main.v=éAA");
        assert_eq!(info.settings[2], BuildSetting { key: "empty".into(), value: String::new() });

        for (text, reason) in [
            ("build\t\n", "build line missing '='"),
            ("build\t=x\n", "build line with missing key"),
            ("build\tnoequals\n", "build line missing '=' after key"),
            ("build\t\"unterminated=x\n", "invalid quoted key in build line"),
            ("build\t\"k\"\n", "build line missing '=' after quoted key"),
            ("build\t\"k\"x=1\n", "unexpected character after quoted key: 'x'"),
            ("build\tk=\"bad\\q\"\n", "invalid quoted value in build line"),
            ("build\tk=\"a\"b\n", "invalid quoted value in build line"),
            ("build\tk=two words\n", "unquoted value \"two words\" must be quoted"),
            ("build\tk\"=v\n", "unquoted key \"k\\\"\" must be quoted"),
            ("build\tk=\"\\400\"\n", "invalid quoted value in build line"),
            ("build\tk=\"\\ud800\"\n", "invalid quoted value in build line"),
        ] {
            assert_eq!(
                parse_build_info(text),
                Err(BuildInfoError::ModInfo { line: 1, reason: reason.into() }),
                "{text:?}"
            );
        }
    }

    #[test]
    fn module_lines_follow_go_column_rules() {
        let info = parse_build_info(SAMPLE_MODINFO).expect("valid");
        assert_eq!(info.deps.len(), 3);
        assert_eq!(info.deps[0].sum, "h1:olpwvP2KacW1ZWvsR7uQhoyTYvKAupfQrRGBFM352Gk=");
        assert_eq!(info.deps[1].sum, "");
        let replacement = info.deps[1].replace.as_deref().expect("replaced");
        assert_eq!((replacement.path.as_str(), replacement.version.as_str()), ("example.com/new", "v1.1.0"));
        assert_eq!(info.deps[2].replace.as_deref().map(|m| m.version.as_str()), Some(""));

        for (text, line, reason) in [
            ("mod\tonly-path\n", 1, "expected 2 or 3 columns; got 1"),
            ("path\tx\ndep\ta\tb\tc\td\n", 2, "expected 2 or 3 columns; got 4"),
            ("=>\ta\tb\tc\n", 1, "replacement with no module on previous line"),
            ("dep\ta\tv1\n=>\tb\tv2\n", 2, "expected 3 columns for replacement; got 2"),
            ("dep\ta\tv1\n=>\tb\tv2\t\n=>\tc\tv3\t\n", 3, "replacement with no module on previous line"),
        ] {
            assert_eq!(
                parse_build_info(text),
                Err(BuildInfoError::ModInfo { line, reason: reason.into() }),
                "{text:?}"
            );
        }
    }

    /// Test cases of `TestGoTagToSemver` in golang.org/x/vuln
    /// `internal/semver/semver_test.go`, plus the forms its regexp admits.
    #[test]
    fn toolchain_tags_become_osv_versions() {
        for (tag, want) in [
            ("go1.19", Some("v1.19.0")),
            ("go1.20-pre4", Some("v1.20.0-pre.4")),
            ("go1.22.2", Some("v1.22.2")),
            ("go1.21rc2", Some("v1.21.0-rc.2")),
            ("go1.18beta1", Some("v1.18.0-beta.1")),
            ("go1.22.2 X:boringcrypto", Some("v1.22.2")),
            ("go1", Some("v1.0.0")),
            ("go1.0", None),
            ("devel go1.23-abcdef Tue", None),
            ("go1.21.0-something", None),
            ("go1.21rc", None),
            ("gox", None),
            ("", None),
        ] {
            assert_eq!(go_version_to_semver(tag).as_deref(), want, "{tag}");
        }
    }

    #[test]
    fn packages_report_linked_modules_and_stdlib() {
        let mut info = parse_build_info(SAMPLE_MODINFO).expect("valid");
        info.go_version = "go1.22.2".into();
        let packages = packages(&info, "usr/bin/app");
        let found: Vec<(&str, &str)> =
            packages.iter().map(|p| (p.name.as_str(), p.version.as_str())).collect();
        assert_eq!(
            found,
            [
                ("example.com/app", "v1.4.0"),
                ("golang.org/x/text", "v0.3.7"),
                ("example.com/new", "v1.1.0"),
                ("stdlib", "v1.22.2"),
            ]
        );
        for package in &packages {
            assert_eq!(package.kind, PackageKind::GoModule);
            assert_eq!(package.ecosystem, "Go");
            assert_eq!(package.path, "usr/bin/app");
        }

        info.main =
            Some(Module { path: "example.com/app".into(), version: "(devel)".into(), ..Module::default() });
        info.go_version = "devel go1.23-abc".into();
        let names: Vec<String> = super::packages(&info, "app").into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["golang.org/x/text", "example.com/new"]);
    }

    #[test]
    fn non_elf_and_broken_elf_files_yield_nothing() {
        let cataloger = GoBinaryCataloger;
        assert!(cataloger.wants("usr/bin/anything", true));
        assert!(!cataloger.wants("usr/bin/anything", false));
        assert_eq!(cataloger.parse("bin/sh", b"#!/bin/sh\necho hi\n"), Ok(Vec::new()));
        assert_eq!(cataloger.parse("bin/x", b"\x7fELF\x02\x01\x01"), Ok(Vec::new()));
        assert_eq!(cataloger.parse("bin/x", b""), Ok(Vec::new()));
    }

    /// Module text of Debian bookworm's `/usr/sbin/dockerd` (docker.io
    /// 20.10.24+dfsg1-1+deb12u1+b6, amd64; toolchain go1.19.8), as its blob
    /// holds it: a GOPATH build, so no `mod` line; Debian stamps the version
    /// with `-X`.
    const DOCKERD_MODINFO: &str = "path\tgithub.com/docker/docker/cmd/dockerd\nbuild\t-compiler=gc\nbuild\t-ldflags=\" \\t\\t-w \\t-X \\\"github.com/docker/docker/dockerversion.Version=20.10.24+dfsg1\\\" \\t-X \\\"github.com/docker/docker/dockerversion.GitCommit=5d6db84\\\" \\t-X \\\"github.com/docker/docker/dockerversion.BuildTime=2026-05-07T21:09:36.000000000+00:00\\\" \\t-X \\\"github.com/docker/docker/dockerversion.IAmStatic=false\\\" \\t-X \\\"github.com/docker/docker/dockerversion.PlatformName=\\\" \\t-X \\\"github.com/docker/docker/dockerversion.ProductName=docker\\\" \\t-X \\\"github.com/docker/docker/dockerversion.DefaultProductLicense=\\\"  \\t\\t \\t\\t \\t\"\nbuild\t-tags=apparmor,seccomp,journald\nbuild\tCGO_ENABLED=1\nbuild\tCGO_CFLAGS=\nbuild\tCGO_CPPFLAGS=\nbuild\tCGO_CXXFLAGS=\nbuild\tCGO_LDFLAGS=\nbuild\tGOARCH=amd64\nbuild\tGOOS=linux\nbuild\tGOAMD64=v1\n";

    /// Module text of Debian bookworm's `/usr/sbin/runc` (runc
    /// 1.1.5+ds1-1+deb12u1, amd64): a GOPATH build with no stamp at all.
    const RUNC_MODINFO: &str = "path\tgithub.com/opencontainers/runc\nbuild\t-compiler=gc\nbuild\t-tags=seccomp,urfave_cli_no_docs\nbuild\t-trimpath=true\nbuild\tCGO_ENABLED=1\nbuild\tGOARCH=amd64\nbuild\tGOOS=linux\nbuild\tGOAMD64=v1\n";

    /// Module text go1.19.8 wrote for a module `example.com/stamped/v2`
    /// built in a git work tree whose one commit, 6ddb5844b908…, is dated
    /// 2024-03-01T10:20:30+02:00: with `go build` on the clean tree, then
    /// with `-ldflags "-X main.version=2.1.0 -X
    /// 'example.com/stamped/v2/internal/build.Version=v2.1.0'"`, then after
    /// an edit.
    const VCS_CLEAN_MODINFO: &str = "path\texample.com/stamped/v2\nmod\texample.com/stamped/v2\t(devel)\t\nbuild\t-compiler=gc\nbuild\tCGO_ENABLED=0\nbuild\tGOARCH=amd64\nbuild\tGOOS=linux\nbuild\tGOAMD64=v1\nbuild\tvcs=git\nbuild\tvcs.revision=6ddb5844b908ffa7cc921c27d121e6cec0a63d5b\nbuild\tvcs.time=2024-03-01T08:20:30Z\nbuild\tvcs.modified=false\n";
    const VCS_STAMPED_MODINFO: &str = "path\texample.com/stamped/v2\nmod\texample.com/stamped/v2\t(devel)\t\nbuild\t-compiler=gc\nbuild\t-ldflags=\"-X main.version=2.1.0 -X 'example.com/stamped/v2/internal/build.Version=v2.1.0'\"\nbuild\tCGO_ENABLED=0\nbuild\tGOARCH=amd64\nbuild\tGOOS=linux\nbuild\tGOAMD64=v1\nbuild\tvcs=git\nbuild\tvcs.revision=6ddb5844b908ffa7cc921c27d121e6cec0a63d5b\nbuild\tvcs.time=2024-03-01T08:20:30Z\nbuild\tvcs.modified=true\n";
    const VCS_DIRTY_MODINFO: &str = "path\texample.com/stamped/v2\nmod\texample.com/stamped/v2\t(devel)\t\nbuild\t-compiler=gc\nbuild\tCGO_ENABLED=0\nbuild\tGOARCH=amd64\nbuild\tGOOS=linux\nbuild\tGOAMD64=v1\nbuild\tvcs=git\nbuild\tvcs.revision=6ddb5844b908ffa7cc921c27d121e6cec0a63d5b\nbuild\tvcs.time=2024-03-01T08:20:30Z\nbuild\tvcs.modified=true\n";

    /// The packages of a go1.19.8 blob carrying `modinfo`, read the whole
    /// way: blob, module text, package rules.
    fn packages_of(modinfo: &str) -> Vec<(String, String)> {
        let blob = inline_blob(b"go1.19.8", &framed(modinfo));
        let raw = read_raw_build_info(&space(0x1000, &blob), 0x1000, blob.len() as u64)
            .expect("readable")
            .expect("found");
        let mut info = parse_build_info(&raw.modinfo).expect("valid");
        info.go_version = raw.version;
        packages(&info, "usr/bin/x").into_iter().map(|p| (p.name, p.version)).collect()
    }

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|&(name, version)| (name.to_owned(), version.to_owned())).collect()
    }

    #[test]
    fn main_module_of_a_gopath_build_is_its_repository_at_the_version_stamped_into_it() {
        // Advisories key `github.com/docker/docker`, not the package
        // `…/cmd/dockerd` the build info's `path` line names.
        assert_eq!(
            packages_of(DOCKERD_MODINFO),
            owned(&[("github.com/docker/docker", "v20.10.24+dfsg1"), ("stdlib", "v1.19.8")])
        );
        // Nothing stamped, no commit recorded: no version to report.
        assert_eq!(packages_of(RUNC_MODINFO), owned(&[("stdlib", "v1.19.8")]));
        // A main package at its repository's root is named as it is.
        let runc_stamped = RUNC_MODINFO
            .replace("build\t-tags=", "build\t-ldflags=\"-X main.version=1.1.5+ds1\"\nbuild\t-tags=");
        assert_eq!(
            packages_of(&runc_stamped)[0],
            ("github.com/opencontainers/runc".to_owned(), "v1.1.5+ds1".to_owned())
        );
    }

    #[test]
    fn gopath_builds_on_hosts_of_unknown_layout_keep_their_package_path() {
        for (package, stamp, want) in [
            // A vanity path: only the host's go-get answer tells where its
            // repository ends.
            (
                "k8s.io/kubernetes/cmd/kubelet",
                "k8s.io/kubernetes/cmd/kubelet/app.Version",
                "k8s.io/kubernetes/cmd/kubelet",
            ),
            // gitlab.com's groups nest: `group/sub/cmd` may be a repository.
            ("gitlab.com/group/sub/cmd/tool", "main.version", "gitlab.com/group/sub/cmd/tool"),
            (
                "bitbucket.org/acme/tool/cmd/tool",
                "bitbucket.org/acme/tool/version.Version",
                "bitbucket.org/acme/tool",
            ),
        ] {
            let modinfo = format!("path\t{package}\nbuild\t-ldflags=\"-X {stamp}=2.0.1\"\n");
            assert_eq!(packages_of(&modinfo)[0], (want.to_owned(), "v2.0.1".to_owned()), "{package}");
        }
    }

    #[test]
    fn module_mode_names_the_mod_line_not_the_main_package() {
        let modinfo = "path\tgithub.com/acme/tool/cmd/tool\nmod\tgithub.com/acme/tool/v3\tv3.2.1\th1:abc=\n";
        assert_eq!(packages_of(modinfo)[0], ("github.com/acme/tool/v3".to_owned(), "v3.2.1".to_owned()));
    }

    #[test]
    fn main_module_built_from_a_work_tree_gets_its_stamp_or_the_commits_pseudo_version() {
        // A /v2 module: the pseudo-version's major is 2; the time is UTC.
        assert_eq!(
            packages_of(VCS_CLEAN_MODINFO),
            owned(&[("example.com/stamped/v2", "v2.0.0-20240301082030-6ddb5844b908"), ("stdlib", "v1.19.8")])
        );
        assert_eq!(
            packages_of(VCS_DIRTY_MODINFO)[0],
            ("example.com/stamped/v2".to_owned(), "v2.0.0-20240301082030-6ddb5844b908+dirty".to_owned())
        );
        // Two stamps of one version (main, and a package of the module)
        // win over the commit.
        assert_eq!(
            packages_of(VCS_STAMPED_MODINFO)[0],
            ("example.com/stamped/v2".to_owned(), "v2.1.0".to_owned())
        );
        // Without the time, the commit alone makes no pseudo-version.
        let no_time = VCS_CLEAN_MODINFO.replace("build\tvcs.time=2024-03-01T08:20:30Z\n", "");
        assert_eq!(packages_of(&no_time), owned(&[("stdlib", "v1.19.8")]));
        let bad_time = VCS_CLEAN_MODINFO.replace("2024-03-01T08:20:30Z", "yesterday");
        assert_eq!(packages_of(&bad_time), owned(&[("stdlib", "v1.19.8")]));
        let short_revision =
            VCS_CLEAN_MODINFO.replace("6ddb5844b908ffa7cc921c27d121e6cec0a63d5b", "6ddb5844");
        assert_eq!(packages_of(&short_revision), owned(&[("stdlib", "v1.19.8")]));
    }

    #[test]
    fn only_an_unambiguous_semver_stamp_of_the_main_module_counts() {
        let root = "github.com/acme/tool";
        for (flags, want) in [
            ("-X main.version=1.2.3", Some("v1.2.3")),
            ("-X=main.Version=v1.2.3-rc.1", Some("v1.2.3-rc.1")),
            ("--X github.com/acme/tool/internal/build.gitVersion=1.0.0+meta.7", Some("v1.0.0+meta.7")),
            ("-s -w -X 'main.releaseVersion=3.0.0' -X \"main.buildVersion=3.0.0\"", Some("v3.0.0")),
            // A dependency's version, or a neighbour repository's.
            ("-X github.com/other/lib/version.Version=1.2.3", None),
            ("-X github.com/acme/tool-extra/v.Version=1.2.3", None),
            // Not a version variable, not a semantic version.
            ("-X main.GoVersion=1.21.0", None),
            ("-X main.commit=1.2.3", None),
            ("-X main.version=dev", None),
            ("-X main.version=1.2", None),
            ("-X main.version=01.2.3", None),
            ("-X main.version=1.2.3-01", None),
            // Two different stamps: ambiguous.
            ("-X main.version=1.0.0 -X main.Version=2.0.0", None),
            // Not a linker -X flag, or cut short.
            ("X=main.version=1.2.3", None),
            ("-X", None),
            ("-X 'main.version=1.2.3", None),
        ] {
            assert_eq!(stamped_version(flags, root).as_deref(), want, "{flags}");
        }
    }

    #[test]
    fn semantic_versions_follow_semver_org() {
        for valid in [
            "0.0.4",
            "1.2.3",
            "10.20.30",
            "1.1.2-prerelease+meta",
            "1.0.0-alpha.beta.1",
            "1.0.0-0A.is.legal",
            "1.0.0+0.build.1-rc.10000aaa-kk-0.1",
            "20.10.24+dfsg1",
            "1.0.0-alpha-a.b-c-somethinglong+build.1-aef.1-its-okay",
        ] {
            assert!(is_semver(valid), "{valid}");
        }
        for invalid in [
            "1",
            "1.2",
            "1.2.3-0123",
            "1.2.3-0123.0123",
            "1.1.2+.123",
            "+invalid",
            "-invalid",
            "alpha",
            "1.2.3.DEV",
            "1.2-SNAPSHOT",
            "01.1.1",
            "1.01.1",
            "1.1.01",
            "1.2.3-",
            "1.2.3+",
            "1.2.3-alpha_beta",
            "1.0.0-alpha..1",
        ] {
            assert!(!is_semver(invalid), "{invalid}");
        }
    }

    #[test]
    fn repositories_and_major_versions_come_from_the_path_form() {
        assert_eq!(repository_root("github.com/docker/docker/cmd/dockerd"), Some("github.com/docker/docker"));
        assert_eq!(repository_root("github.com/opencontainers/runc"), Some("github.com/opencontainers/runc"));
        assert_eq!(repository_root("bitbucket.org/a/b/c"), Some("bitbucket.org/a/b"));
        assert_eq!(repository_root("github.com/owner"), None);
        assert_eq!(repository_root("gitlab.com/a/b/c"), None);
        assert_eq!(repository_root("go.example.org/a/b/c"), None);
        assert_eq!(major_version_suffix("example.com/m/v2"), 2);
        assert_eq!(major_version_suffix("example.com/m/v1"), 0);
        assert_eq!(major_version_suffix("example.com/m/v02"), 0);
        assert_eq!(major_version_suffix("example.com/m"), 0);
        assert_eq!(
            split_flags(" a\t'b c' \"d\"e").as_deref(),
            Some(&["a".to_owned(), "b c".to_owned(), "d".to_owned(), "e".to_owned()][..])
        );
    }
}
