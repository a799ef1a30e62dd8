//! rpm's NDB database (`Packages.db`, SUSE and openSUSE since 2020-ish,
//! rpm ≥ 4.15), read as rpm's `lib/backend/ndb/rpmpkg.c` lays it out.
//!
//! Every number is little-endian. The file starts with a 32-byte header:
//! magic `RpmP`, version 0, a generation counter, the number of slot pages
//! and the next package index. The slot pages (4096 bytes each, the first
//! one after the header) hold 16-byte slots: magic `Slot`, package index,
//! block offset and block count, in 16-byte blocks; a slot whose offset is
//! 0 is free. A used slot points at a blob: a 16-byte head (magic `BlbS`,
//! package index, a timestamp, the blob length), the header blob itself,
//! zero padding to a whole block after the tail, and a 12-byte tail (the
//! Adler-32 of everything from the head to the tail, the length again,
//! magic `BlbE`). go-rpmdb's `pkg/ndb` reads the same layout.
//!
//! The checks are rpm's (`rpmpkgReadSlots`, `rpmpkgReadBlob`,
//! `rpmpkgVerifyblob`): the file is a whole number of blocks, every slot has
//! its magic, a used slot has a package index and blocks that lie after the
//! slot pages and inside the file, a blob's head names its slot's package,
//! its length fills exactly its blocks, the tail repeats the length and the
//! checksum matches. In addition two slots may not claim one package or
//! overlapping blocks (rpm refuses to write to such a file), so the blobs
//! read add up to no more than the file. rpm's optional LZO compression of
//! blobs (`RPMPKG_LZO`, off in every distribution's build) is not read.

/// `RpmP` in the file's byte order.
const MAGIC: u32 = u32::from_le_bytes(*b"RpmP");

/// The only NDB format version.
const VERSION: u32 = 0;

/// Size of the file header, which takes the first two slots.
const HEADER_LEN: usize = 32;

/// Slot pages are always 4096 bytes.
const SLOT_PAGE_LEN: usize = 4096;

/// Size of a slot.
const SLOT_LEN: usize = 16;

/// `Slot` in the file's byte order.
const SLOT_MAGIC: u32 = u32::from_le_bytes(*b"Slot");

/// Blobs are placed in 16-byte blocks.
const BLOCK_LEN: usize = 16;

/// Blob head: magic, package index, timestamp, length.
const BLOB_HEAD_LEN: usize = 16;

/// Blob tail: Adler-32, length, magic.
const BLOB_TAIL_LEN: usize = 12;

/// `BlbS`, the blob head's magic.
const BLOB_HEAD_MAGIC: u32 = u32::from_le_bytes(*b"BlbS");

/// `BlbE`, the blob tail's magic.
const BLOB_TAIL_MAGIC: u32 = u32::from_le_bytes(*b"BlbE");

/// A `Packages.db` file that is not a readable NDB database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NdbError {
    /// The file header or size is wrong.
    #[error("NDB header: {0}")]
    Header(String),
    /// A slot is inconsistent.
    #[error("NDB slot {slot}: {reason}")]
    Slot {
        /// Slot number, counting the two the header takes.
        slot: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A package's blob is inconsistent.
    #[error("NDB package {package}: {reason}")]
    Blob {
        /// The package index.
        package: u32,
        /// What is wrong with it.
        reason: String,
    },
}

/// One used slot.
#[derive(Debug, Clone, Copy)]
struct Slot {
    number: usize,
    package: u32,
    block: u64,
    blocks: u64,
}

/// Every `(package index, header blob)` of an NDB `Packages.db`, by package
/// index.
pub fn read_headers(data: &[u8]) -> Result<Vec<(u32, Vec<u8>)>, NdbError> {
    let header_error = |reason: String| NdbError::Header(reason);
    if data.len() < HEADER_LEN {
        return Err(header_error(format!("the file is {} bytes, shorter than its header", data.len())));
    }
    if le32(data, 0) != MAGIC {
        return Err(header_error("no `RpmP` magic".to_owned()));
    }
    let version = le32(data, 4);
    if version != VERSION {
        return Err(header_error(format!("version {version}; only version {VERSION} exists")));
    }
    if !data.len().is_multiple_of(BLOCK_LEN) {
        return Err(header_error(format!("{} bytes is not a whole number of 16-byte blocks", data.len())));
    }
    let slot_pages = le32(data, 12) as usize;
    let slots_end = slot_pages.checked_mul(SLOT_PAGE_LEN).filter(|end| *end <= data.len());
    let Some(slots_end) = slots_end.filter(|_| slot_pages > 0) else {
        return Err(header_error(format!("{slot_pages} slot pages do not fit in {} bytes", data.len())));
    };
    let file_blocks = (data.len() / BLOCK_LEN) as u64;
    let first_blob_block = (slots_end / BLOCK_LEN) as u64;

    let mut slots = Vec::new();
    for (number, raw) in data[..slots_end].chunks_exact(SLOT_LEN).enumerate().skip(HEADER_LEN / SLOT_LEN) {
        let slot_error = |reason: String| NdbError::Slot { slot: number, reason };
        if le32(raw, 0) != SLOT_MAGIC {
            return Err(slot_error("no `Slot` magic".to_owned()));
        }
        let block = u64::from(le32(raw, 8));
        if block == 0 {
            continue;
        }
        let package = le32(raw, 4);
        let blocks = u64::from(le32(raw, 12));
        if package == 0 || blocks == 0 {
            return Err(slot_error(format!("package {package} in {blocks} blocks")));
        }
        if block < first_blob_block {
            return Err(slot_error(format!("block {block} lies in the slot pages")));
        }
        if block + blocks > file_blocks {
            return Err(slot_error(format!(
                "blocks {block} to {} run past the file's {file_blocks} (truncated?)",
                block + blocks
            )));
        }
        slots.push(Slot { number, package, block, blocks });
    }

    slots.sort_by_key(|slot| slot.block);
    for pair in slots.windows(2) {
        if pair[0].block + pair[0].blocks > pair[1].block {
            return Err(NdbError::Slot {
                slot: pair[1].number,
                reason: format!("its blocks overlap slot {}'s", pair[0].number),
            });
        }
    }
    let mut headers = Vec::with_capacity(slots.len());
    for slot in &slots {
        headers.push((slot.package, read_blob(data, slot)?.to_vec()));
    }
    headers.sort_by_key(|(package, _)| *package);
    if let Some(pair) = headers.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        return Err(NdbError::Blob { package: pair[0].0, reason: "two slots hold this package".to_owned() });
    }
    Ok(headers)
}

/// The header blob `slot` points at, checked as rpm's `rpmpkgReadBlob`
/// (with the Adler-32 check of `rpmpkgVerifyblob`).
fn read_blob<'a>(data: &'a [u8], slot: &Slot) -> Result<&'a [u8], NdbError> {
    let blob_error = |reason: String| NdbError::Blob { package: slot.package, reason };
    // Both were checked against the file's length in blocks.
    let start = slot.block as usize * BLOCK_LEN;
    let end = (slot.block + slot.blocks) as usize * BLOCK_LEN;
    let area = &data[start..end];
    if area.len() < BLOB_HEAD_LEN + BLOB_TAIL_LEN {
        return Err(blob_error(format!("{} blocks cannot hold a blob", slot.blocks)));
    }
    if le32(area, 0) != BLOB_HEAD_MAGIC {
        return Err(blob_error(format!("no `BlbS` magic at block {}", slot.block)));
    }
    let owner = le32(area, 4);
    if owner != slot.package {
        return Err(blob_error(format!("the blob at block {} belongs to package {owner}", slot.block)));
    }
    let len = le32(area, 12) as usize;
    let needed = (BLOB_HEAD_LEN + len + BLOB_TAIL_LEN).div_ceil(BLOCK_LEN);
    if needed as u64 != slot.blocks {
        return Err(blob_error(format!(
            "a {len}-byte blob takes {needed} blocks, the slot says {}",
            slot.blocks
        )));
    }
    let tail = area.len() - BLOB_TAIL_LEN;
    let checksum = le32(area, tail);
    if le32(area, tail + 4) as usize != len {
        return Err(blob_error(format!(
            "the tail's length {} is not the head's {len}",
            le32(area, tail + 4)
        )));
    }
    if le32(area, tail + 8) != BLOB_TAIL_MAGIC {
        return Err(blob_error("no `BlbE` magic at the end of the blob".to_owned()));
    }
    let computed = adler32(&area[..tail]);
    if computed != checksum {
        return Err(blob_error(format!("Adler-32 {computed:#010x}, the tail says {checksum:#010x}")));
    }
    Ok(&area[BLOB_HEAD_LEN..BLOB_HEAD_LEN + len])
}

/// The little-endian `u32` at `at`; callers have checked the bounds.
fn le32(bytes: &[u8], at: usize) -> u32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(raw)
}

/// Adler-32 (RFC 1950), starting from 1 as rpm's `update_adler32` does.
fn adler32(bytes: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    // The largest run of bytes whose sums cannot overflow a u32 before the
    // modulo (RFC 1950's NMAX).
    const RUN: usize = 5552;
    let (mut a, mut b) = (1u32, 0u32);
    for run in bytes.chunks(RUN) {
        for &byte in run {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An NDB file as rpm writes one: header, one slot page, then each blob
    /// in turn (package indexes from 1).
    fn build(blobs: &[&[u8]]) -> Vec<u8> {
        let mut file = vec![0u8; SLOT_PAGE_LEN];
        file[..4].copy_from_slice(b"RpmP");
        file[8..12].copy_from_slice(&1u32.to_le_bytes());
        file[12..16].copy_from_slice(&1u32.to_le_bytes());
        file[16..20].copy_from_slice(&(blobs.len() as u32 + 1).to_le_bytes());
        for slot in file[HEADER_LEN..].chunks_exact_mut(SLOT_LEN) {
            slot[..4].copy_from_slice(b"Slot");
        }
        for (n, blob) in blobs.iter().enumerate() {
            let package = n as u32 + 1;
            let block = (file.len() / BLOCK_LEN) as u32;
            let blocks = (BLOB_HEAD_LEN + blob.len() + BLOB_TAIL_LEN).div_ceil(BLOCK_LEN);
            let mut area = Vec::with_capacity(blocks * BLOCK_LEN);
            area.extend_from_slice(b"BlbS");
            area.extend_from_slice(&package.to_le_bytes());
            area.extend_from_slice(&1_700_000_000u32.to_le_bytes());
            area.extend_from_slice(&(blob.len() as u32).to_le_bytes());
            area.extend_from_slice(blob);
            area.resize(blocks * BLOCK_LEN - BLOB_TAIL_LEN, 0);
            let checksum = adler32(&area);
            area.extend_from_slice(&checksum.to_le_bytes());
            area.extend_from_slice(&(blob.len() as u32).to_le_bytes());
            area.extend_from_slice(b"BlbE");
            let slot = HEADER_LEN + n * SLOT_LEN;
            file[slot + 4..slot + 8].copy_from_slice(&package.to_le_bytes());
            file[slot + 8..slot + 12].copy_from_slice(&block.to_le_bytes());
            file[slot + 12..slot + 16].copy_from_slice(&(blocks as u32).to_le_bytes());
            file.extend(area);
        }
        file
    }

    #[test]
    fn adler32_matches_rfc_1950_examples() {
        assert_eq!(adler32(b""), 1);
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
        // Long enough to need the modulo between runs.
        let long = vec![0xffu8; 100_000];
        let (mut a, mut b) = (1u64, 0u64);
        for &byte in &long {
            a = (a + u64::from(byte)) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!(adler32(&long), ((b << 16) | a) as u32);
    }

    #[test]
    fn blobs_come_back_by_package_index_and_free_slots_are_skipped() {
        let mut file = build(&[b"first header", b"second", b"third one"]);
        // Free slot 3 (package 2) as rpm does on erase: slot offset 0, blob
        // zeroed.
        let slot = HEADER_LEN + SLOT_LEN;
        let block = le32(&file, slot + 8) as usize;
        let blocks = le32(&file, slot + 12) as usize;
        file[slot + 4..slot + 16].fill(0);
        file[block * BLOCK_LEN..(block + blocks) * BLOCK_LEN].fill(0);
        let headers = read_headers(&file).expect("readable");
        assert_eq!(headers, vec![(1, b"first header".to_vec()), (3, b"third one".to_vec())]);
    }

    #[test]
    fn truncated_and_corrupted_files_are_errors() {
        let good = build(&[b"first header", b"second"]);
        assert!(read_headers(&good).is_ok());
        let with = |at: usize, bytes: &[u8]| {
            let mut file = good.clone();
            file[at..at + bytes.len()].copy_from_slice(bytes);
            file
        };
        let first_slot = HEADER_LEN;
        let first_blob = SLOT_PAGE_LEN;
        // "first header": 16 + 12 + 12 bytes, 3 blocks.
        let first_tail = first_blob + 3 * BLOCK_LEN - BLOB_TAIL_LEN;
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("empty", Vec::new(), "shorter than its header"),
            ("magic", with(0, b"RpmQ"), "no `RpmP` magic"),
            ("version", with(4, &[1]), "version 1"),
            ("not whole blocks", good[..good.len() - 1].to_vec(), "whole number of 16-byte blocks"),
            ("no slot pages", with(12, &[0]), "0 slot pages"),
            ("slot pages past the end", with(12, &[9]), "9 slot pages"),
            ("slot magic", with(first_slot + SLOT_LEN, b"Slop"), "slot 3: no `Slot` magic"),
            ("package 0", with(first_slot + 4, &[0]), "slot 2: package 0"),
            ("no blocks", with(first_slot + 12, &[0]), "slot 2: package 1 in 0 blocks"),
            ("blob in slot pages", with(first_slot + 8, &[1, 0]), "lies in the slot pages"),
            ("truncated", good[..good.len() - BLOCK_LEN].to_vec(), "run past the file"),
            ("huge block count", with(first_slot + 12, &[0xff, 0xff, 0xff, 0xff]), "run past the file"),
            ("overlap", with(first_slot + 12, &[4]), "overlap"),
            ("same package twice", with(first_slot + SLOT_LEN + 4, &[1]), "belongs to package 2"),
            ("blob magic", with(first_blob, b"BlbT"), "no `BlbS` magic"),
            ("blob owner", with(first_blob + 4, &[2]), "belongs to package 2"),
            ("blob length", with(first_blob + 12, &[40]), "takes 5 blocks"),
            ("tail length", with(first_tail + 4, &[13]), "tail's length 13"),
            ("tail magic", with(first_tail + 8, b"BlbF"), "no `BlbE` magic"),
            ("checksum", with(first_tail, &[0]), "Adler-32"),
            ("corrupt header byte", with(first_blob + BLOB_HEAD_LEN, b"F"), "Adler-32"),
        ];
        for (name, file, want) in cases {
            let error = read_headers(&file).expect_err(name);
            assert!(error.to_string().contains(want), "{name}: {error}");
        }
        // Two slots naming one package, each with its own valid blob.
        let mut twice = build(&[b"a", b"b"]);
        let second = HEADER_LEN + SLOT_LEN;
        twice[second + 4..second + 8].copy_from_slice(&1u32.to_le_bytes());
        let block = le32(&twice, second + 8) as usize * BLOCK_LEN;
        twice[block + 4..block + 8].copy_from_slice(&1u32.to_le_bytes());
        let tail = block + 2 * BLOCK_LEN - BLOB_TAIL_LEN;
        let checksum = adler32(&twice[block..tail]);
        twice[tail..tail + 4].copy_from_slice(&checksum.to_le_bytes());
        let error = read_headers(&twice).expect_err("package twice");
        assert!(error.to_string().contains("two slots hold this package"), "{error}");
    }

    #[test]
    fn every_single_byte_corruption_is_a_result_or_an_error() {
        let good = build(&[b"first header", b"second"]);
        // The slot page is mostly empty slots; the interesting bytes are the
        // header, the used slots and the blobs.
        let interesting = (0..HEADER_LEN + 3 * SLOT_LEN).chain(SLOT_PAGE_LEN..good.len());
        for at in interesting {
            for mask in [0xff, 0x80, 0x01] {
                let mut file = good.clone();
                file[at] ^= mask;
                let _ = read_headers(&file);
            }
        }
    }
}
