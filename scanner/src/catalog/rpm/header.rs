//! rpm's header structure as the rpm database stores it, shared by every
//! database backend: each record of the SQLite `Packages` table, of the
//! BerkeleyDB `Packages` hash and of the NDB `Packages.db` is one header as
//! rpm's `headerExport` writes it (rpm's `lib/rpmdb.c` hands the same blob
//! to every backend's `pkgdbPut`). That is the header structure of rpm's
//! `docs/manual/format.md` and `format_header.md` without its 8-byte magic:
//! a big-endian index entry count and data length, that many 16-byte index
//! entries (tag, type, offset, count), then the data store.
//!
//! Every index entry is checked the way rpm's `hdrblobVerifyInfo` does before
//! any of it is read (known type, offset within the data, alignment, count
//! limits) and strings must end within the data. Only the tags PatchPilot
//! uses are decoded: NAME, EPOCH, VERSION, RELEASE, ARCH and SOURCERPM.

/// rpm's `HEADER_TAGS_MAX`: at most this many index entries.
const HEADER_TAGS_MAX: u32 = 0x0000_ffff;

/// rpm's `HEADER_DATA_MAX` (256 MiB): data length and offsets limit.
const HEADER_DATA_MAX: u32 = 0x0fff_ffff;

/// rpm's `HEADER_ARRAY_MAX`: element count limit of non-binary entries.
const HEADER_ARRAY_MAX: u32 = 0x000f_ffff;

/// Size of one index entry: tag, type, offset, count.
const INDEX_ENTRY_LEN: usize = 16;

/// Header tags read (`rpmtag.h`).
pub(crate) mod tag {
    pub const NAME: u32 = 1000;
    pub const VERSION: u32 = 1001;
    pub const RELEASE: u32 = 1002;
    pub const EPOCH: u32 = 1003;
    pub const ARCH: u32 = 1022;
    pub const SOURCERPM: u32 = 1044;
}

/// Header data types (`rpmTagType`), with the size and alignment of one
/// element of the fixed-size ones.
pub(crate) mod kind {
    pub const NULL: u32 = 0;
    pub const CHAR: u32 = 1;
    pub const INT8: u32 = 2;
    pub const INT16: u32 = 3;
    pub const INT32: u32 = 4;
    pub const INT64: u32 = 5;
    pub const STRING: u32 = 6;
    pub const BIN: u32 = 7;
    pub const STRING_ARRAY: u32 = 8;
    pub const I18NSTRING: u32 = 9;

    /// Element size of fixed-size types, which is also their alignment.
    pub fn fixed_size(kind: u32) -> Option<u32> {
        match kind {
            NULL | CHAR | INT8 | BIN => Some(1),
            INT16 => Some(2),
            INT32 => Some(4),
            INT64 => Some(8),
            _ => None,
        }
    }
}

/// A header blob that breaks the header format's rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The blob is shorter than its own lengths say, or they exceed rpm's
    /// limits.
    #[error("header: {0}")]
    Layout(String),
    /// An index entry is inconsistent.
    #[error("header index entry {index} (tag {tag}): {reason}")]
    Entry {
        /// Position of the entry in the index.
        index: usize,
        /// Its tag.
        tag: u32,
        /// What is wrong with it.
        reason: String,
    },
    /// A tag rpm always writes is missing or of the wrong type.
    #[error("header tag {tag}: {reason}")]
    Tag {
        /// The tag.
        tag: u32,
        /// What is wrong with it.
        reason: String,
    },
}

/// The fields of an installed package's header PatchPilot uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpmHeader {
    /// NAME.
    pub name: String,
    /// EPOCH, when present.
    pub epoch: Option<u32>,
    /// VERSION.
    pub version: String,
    /// RELEASE.
    pub release: String,
    /// ARCH (`x86_64`, `noarch`…); absent from `gpg-pubkey` entries.
    pub arch: Option<String>,
    /// SOURCERPM file name; absent from `gpg-pubkey` entries and source
    /// packages.
    pub source_rpm: Option<String>,
}

impl RpmHeader {
    /// `epoch:version-release`, or `version-release` when the epoch is
    /// absent or 0.
    pub fn full_version(&self) -> String {
        match self.epoch {
            Some(epoch) if epoch != 0 => format!("{epoch}:{}-{}", self.version, self.release),
            _ => format!("{}-{}", self.version, self.release),
        }
    }
}

/// One validated index entry.
#[derive(Debug, Clone, Copy)]
struct Entry {
    tag: u32,
    kind: u32,
    offset: usize,
    count: u32,
}

/// Parses one header blob as stored in the rpm database (no magic).
pub fn parse_header(blob: &[u8]) -> Result<RpmHeader, HeaderError> {
    let layout = |reason: String| HeaderError::Layout(reason);
    let index_count = read_u32(blob, 0).ok_or_else(|| layout("shorter than its 8-byte intro".to_owned()))?;
    let data_len = read_u32(blob, 4).ok_or_else(|| layout("shorter than its 8-byte intro".to_owned()))?;
    if index_count == 0 || index_count > HEADER_TAGS_MAX {
        return Err(layout(format!("{index_count} index entries (rpm allows 1 to {HEADER_TAGS_MAX})")));
    }
    if data_len > HEADER_DATA_MAX {
        return Err(layout(format!("{data_len} bytes of data (rpm allows at most {HEADER_DATA_MAX})")));
    }
    let index_len = index_count as usize * INDEX_ENTRY_LEN;
    let expected = 8 + index_len + data_len as usize;
    if blob.len() != expected {
        return Err(layout(format!(
            "{} bytes, but {index_count} index entries and {data_len} bytes of data take {expected}",
            blob.len()
        )));
    }
    let index = &blob[8..8 + index_len];
    let data = &blob[8 + index_len..];
    let mut entries = Vec::with_capacity(index_count as usize);
    for (position, raw) in index.chunks_exact(INDEX_ENTRY_LEN).enumerate() {
        entries.push(check_entry(position, raw, data_len)?);
    }
    // Entries added after install ("dribbles") follow the region and win
    // over an earlier entry with the same tag, as in rpm's headerImport.
    let find = |tag: u32| entries.iter().rev().find(|entry| entry.tag == tag);
    let string = |tag: u32| -> Result<Option<String>, HeaderError> {
        find(tag).map(|entry| read_string(entry, data)).transpose()
    };
    let required = |tag: u32| -> Result<String, HeaderError> {
        string(tag)?.ok_or(HeaderError::Tag { tag, reason: "missing".to_owned() })
    };
    let epoch = find(tag::EPOCH).map(|entry| read_int32(entry, data)).transpose()?;
    Ok(RpmHeader {
        name: required(tag::NAME)?,
        epoch,
        version: required(tag::VERSION)?,
        release: required(tag::RELEASE)?,
        arch: string(tag::ARCH)?,
        source_rpm: string(tag::SOURCERPM)?,
    })
}

/// Decodes one index entry and applies rpm's checks (`hdrchkType`,
/// `hdrchkRange`, `hdrchkAlign`, `hdrchkCount`, `hdrchkArray`), plus the
/// bounds of fixed-size data.
fn check_entry(position: usize, raw: &[u8], data_len: u32) -> Result<Entry, HeaderError> {
    let field = |at: usize| read_u32(raw, at).unwrap_or_default();
    let (tag, kind, offset, count) = (field(0), field(4), field(8), field(12));
    let error = |reason: String| HeaderError::Entry { index: position, tag, reason };
    if kind > kind::I18NSTRING {
        return Err(error(format!("unknown type {kind}")));
    }
    // The offset is a signed 32-bit number on disk.
    if offset > data_len || offset > i32::MAX as u32 {
        return Err(error(format!("offset {offset} is outside the {data_len}-byte data")));
    }
    if count == 0 || count > data_len {
        return Err(error(format!("count {count} is impossible for {data_len} bytes of data")));
    }
    if kind != kind::BIN && count > HEADER_ARRAY_MAX {
        return Err(error(format!("count {count} exceeds rpm's array limit")));
    }
    if let Some(size) = kind::fixed_size(kind) {
        if offset % size != 0 {
            return Err(error(format!("offset {offset} is not aligned for type {kind}")));
        }
        let end = u64::from(offset) + u64::from(count) * u64::from(size);
        if end > u64::from(data_len) {
            return Err(error(format!("{count} elements of type {kind} run past the end of the data")));
        }
    }
    Ok(Entry { tag, kind, offset: offset as usize, count })
}

/// The first string of a STRING, STRING_ARRAY or I18NSTRING entry, which
/// must end with a NUL inside the data.
fn read_string(entry: &Entry, data: &[u8]) -> Result<String, HeaderError> {
    let error = |reason: &str| HeaderError::Tag { tag: entry.tag, reason: reason.to_owned() };
    if !matches!(entry.kind, kind::STRING | kind::STRING_ARRAY | kind::I18NSTRING) {
        return Err(error(&format!("type {} is not a string", entry.kind)));
    }
    if entry.kind == kind::STRING && entry.count != 1 {
        return Err(error("a STRING entry must have count 1"));
    }
    let rest = data.get(entry.offset..).unwrap_or_default();
    let end =
        rest.iter().position(|&byte| byte == 0).ok_or_else(|| error("string has no NUL within the data"))?;
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// The first value of an INT32 entry (bounds checked by [`check_entry`]).
fn read_int32(entry: &Entry, data: &[u8]) -> Result<u32, HeaderError> {
    if entry.kind != kind::INT32 {
        return Err(HeaderError::Tag { tag: entry.tag, reason: format!("type {} is not INT32", entry.kind) });
    }
    read_u32(data, entry.offset).ok_or_else(|| HeaderError::Tag {
        tag: entry.tag,
        reason: "INT32 runs past the end of the data".to_owned(),
    })
}

/// The big-endian `u32` at `at`, when there are four bytes there.
fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    Some(u32::from_be_bytes(bytes.get(at..end)?.try_into().ok()?))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Builds a header blob (no magic) the way rpm lays one out: strings
    /// NUL-terminated, INT32 data 4-byte aligned.
    pub(crate) fn blob(entries: &[(u32, HeaderValue)]) -> Vec<u8> {
        let mut index = Vec::new();
        let mut data = Vec::new();
        for (tag, value) in entries {
            let (kind, count, bytes): (u32, u32, Vec<u8>) = match value {
                HeaderValue::Str(s) => (kind::STRING, 1, [s.as_bytes(), b"\0"].concat()),
                HeaderValue::Int32(v) => {
                    while data.len() % 4 != 0 {
                        data.push(0);
                    }
                    (kind::INT32, 1, v.to_be_bytes().to_vec())
                }
            };
            index.extend_from_slice(&tag.to_be_bytes());
            index.extend_from_slice(&kind.to_be_bytes());
            index.extend_from_slice(&(data.len() as u32).to_be_bytes());
            index.extend_from_slice(&count.to_be_bytes());
            data.extend_from_slice(&bytes);
        }
        let mut out = Vec::new();
        out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend(index);
        out.extend(data);
        out
    }

    pub(crate) enum HeaderValue {
        Str(&'static str),
        Int32(u32),
    }
    pub(crate) use HeaderValue::{Int32, Str};

    pub(crate) fn openssl_libs() -> Vec<u8> {
        blob(&[
            (tag::NAME, Str("openssl-libs")),
            (tag::VERSION, Str("3.0.7")),
            (tag::RELEASE, Str("24.el9")),
            (tag::EPOCH, Int32(1)),
            (tag::ARCH, Str("x86_64")),
            (tag::SOURCERPM, Str("openssl-3.0.7-24.el9.src.rpm")),
        ])
    }

    #[test]
    fn later_entries_override_earlier_ones_with_the_same_tag() {
        let header = parse_header(&blob(&[
            (tag::NAME, Str("old")),
            (tag::VERSION, Str("1")),
            (tag::RELEASE, Str("1")),
            (tag::NAME, Str("new")),
        ]))
        .expect("valid");
        assert_eq!(header.name, "new");
        assert_eq!(header.epoch, None);
        assert_eq!(header.arch, None);
    }

    /// Replaces the big-endian u32 at `at`.
    fn poke(mut blob: Vec<u8>, at: usize, value: u32) -> Vec<u8> {
        blob[at..at + 4].copy_from_slice(&value.to_be_bytes());
        blob
    }

    #[test]
    fn hostile_headers_are_errors_not_panics() {
        let good = openssl_libs();
        let entry = |n: usize, field: usize| 8 + n * INDEX_ENTRY_LEN + field * 4;
        let data_len = u32::from_be_bytes(good[4..8].try_into().expect("4 bytes"));
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", Vec::new()),
            ("intro only", good[..7].to_vec()),
            ("no entries", poke(good.clone(), 0, 0)),
            ("too many entries", poke(good.clone(), 0, 0x1_0000)),
            ("entries beyond blob", poke(good.clone(), 0, 1000)),
            ("data length too large", poke(good.clone(), 4, 0x1000_0000)),
            ("data length beyond blob", poke(good.clone(), 4, data_len + 1)),
            ("trailing bytes", [good.clone(), vec![0]].concat()),
            ("truncated data", good[..good.len() - 1].to_vec()),
            ("unknown type", poke(good.clone(), entry(0, 1), 10)),
            ("offset out of range", poke(good.clone(), entry(0, 2), data_len + 1)),
            ("negative offset", poke(good.clone(), entry(0, 2), 0x8000_0000)),
            ("zero count", poke(good.clone(), entry(0, 3), 0)),
            ("count beyond data", poke(good.clone(), entry(0, 3), data_len + 1)),
            ("int32 misaligned", poke(good.clone(), entry(3, 2), 1)),
            ("int32 past end", poke(good.clone(), entry(3, 2), data_len - 2)),
            ("string without nul", poke(good.clone(), entry(5, 2), data_len)),
            ("string count", poke(good.clone(), entry(0, 3), 2)),
            ("name as int32", poke(poke(good.clone(), entry(0, 1), kind::INT32), entry(0, 2), 0)),
            ("epoch as string", poke(good.clone(), entry(3, 1), kind::STRING)),
            ("name missing", poke(good.clone(), entry(0, 0), 999)),
        ];
        for (name, blob) in cases {
            assert!(parse_header(&blob).is_err(), "{name}");
        }
        // An entry at offset == data length with count 1 and type CHAR
        // would read past the end.
        let char_at_end = poke(poke(good.clone(), entry(4, 1), kind::CHAR), entry(4, 2), data_len);
        assert!(matches!(parse_header(&char_at_end), Err(HeaderError::Entry { index: 4, .. })));
    }
}
