//! The few headers of an ELF file the binary catalogers need: its loaded
//! segments and one named section, read through any [`ReadRef`].
//!
//! The catalogers read executables through `object`'s [`ReadCache`] over
//! an open file, which reads (and keeps) only the byte ranges asked for. So
//! this parses the file header, the program headers and the section
//! headers with their name table, and nothing else: `object::File::parse`
//! would also read both symbol tables and their strings, which in an
//! unstripped Go binary are tens of megabytes no cataloger looks at.
//!
//! [`ReadCache`]: object::ReadCache

use object::elf::{FileHeader32, FileHeader64, PT_LOAD, SHT_NOBITS};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::{Endianness, FileKind, ReadRef};

/// Start of every ELF file.
pub(crate) const MAGIC: &[u8] = b"\x7fELF";

/// A `PT_LOAD` segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Load {
    /// Virtual address (`p_vaddr`).
    pub address: u64,
    /// Size in memory (`p_memsz`).
    pub memory_size: u64,
    /// Offset of its bytes in the file (`p_offset`).
    pub offset: u64,
    /// Bytes of it in the file (`p_filesz`).
    pub file_size: u64,
    /// `PF_*` flags.
    pub flags: u32,
}

/// A section found by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Section {
    /// Virtual address (`sh_addr`).
    pub address: u64,
    /// Size (`sh_size`).
    pub size: u64,
    /// Offset of its bytes in the file (`sh_offset`).
    pub offset: u64,
    /// Bytes of it in the file: 0 for `SHT_NOBITS`, else `size`.
    pub file_size: u64,
}

/// What [`read`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The `PT_LOAD` segments, in header order.
    pub loads: Vec<Load>,
    /// The section asked for, when the file has section headers and one of
    /// that name.
    pub section: Option<Section>,
}

/// The segments of the ELF file `data` and its section named `section`.
/// `None` when `data` is not ELF or its headers do not parse: such a file is
/// no binary the catalogers can read.
pub(crate) fn read<'data, R: ReadRef<'data>>(data: R, section: &[u8]) -> Option<Layout> {
    if data.read_bytes_at(0, MAGIC.len() as u64).ok()? != MAGIC {
        return None;
    }
    let layout = match FileKind::parse(data).ok()? {
        FileKind::Elf32 => read_class::<FileHeader32<Endianness>, R>(data, section),
        FileKind::Elf64 => read_class::<FileHeader64<Endianness>, R>(data, section),
        _ => return None,
    };
    layout.map_err(|err| tracing::debug!(error = %err, "ELF headers do not parse; not read as a binary")).ok()
}

fn read_class<'data, Elf, R>(data: R, name: &[u8]) -> object::read::Result<Layout>
where
    Elf: FileHeader<Endian = Endianness>,
    R: ReadRef<'data>,
{
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let loads = header
        .program_headers(endian, data)?
        .iter()
        .filter(|segment| segment.p_type(endian) == PT_LOAD)
        .map(|segment| Load {
            address: segment.p_vaddr(endian).into(),
            memory_size: segment.p_memsz(endian).into(),
            offset: segment.p_offset(endian).into(),
            file_size: segment.p_filesz(endian).into(),
            flags: segment.p_flags(endian).0,
        })
        .collect();
    let sections = header.sections(endian, data)?;
    let section = sections.section_by_name(endian, name).map(|(_, section)| {
        let size: u64 = section.sh_size(endian).into();
        Section {
            address: section.sh_addr(endian).into(),
            size,
            offset: section.sh_offset(endian).into(),
            file_size: if section.sh_type(endian) == SHT_NOBITS { 0 } else { size },
        }
    });
    Ok(Layout { loads, section })
}

/// Whether `[offset, offset + size)` lies inside `data`.
pub(crate) fn in_file<'data, R: ReadRef<'data>>(data: R, offset: u64, size: u64) -> bool {
    offset.checked_add(size).zip(data.len().ok()).is_some_and(|(end, len)| end <= len)
}
