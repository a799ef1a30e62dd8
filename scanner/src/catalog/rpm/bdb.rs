//! The BerkeleyDB rpm database (`Packages`, rpm < 4.16: RHEL/CentOS 5 to 8,
//! Amazon Linux 2, SLES 12 and 15, older Fedora), read without BerkeleyDB.
//!
//! rpm kept its headers in a BerkeleyDB **hash** database: one record per
//! installed package, keyed by its header instance number (4 bytes in the
//! writing machine's byte order), whose value is the header blob, and under
//! instance 0 the largest instance given out so far, which is not a header
//! and is skipped (rpm's `rpmdbNextIterator`). The layout read here is
//! BerkeleyDB's on-disk format as its `dbinc/db_page.h` defines it and as
//! rpm's own reader for such files, `lib/backend/bdb_ro.c` (rpm ≥ 4.16),
//! walks it:
//!
//! - page 0, the hash metadata page: magic `0x061561` at byte 12 (read in
//!   both byte orders: a file written on a big-endian machine has every
//!   field swapped), hash version (8 to 10), page size, last page number,
//!   the highest bucket, and `spares`, from which bucket `b` lives on page
//!   `b + spares[bit length of b]`;
//! - every page starts with a 26-byte header: page number (bytes 8–11),
//!   previous and next page (12–19), item count (20–21), high free offset
//!   (22–23, on an overflow page the bytes of data it holds) and page type
//!   (25): 13 `P_HASH` (2 `P_HASH_UNSORTED` before BerkeleyDB 4.6), 7
//!   `P_OVERFLOW`;
//! - a hash page holds key/data item pairs through 2-byte offsets after its
//!   header; an item's length is the distance to the previous item's offset
//!   (to the page end for the first); its first byte is its type: 1
//!   `H_KEYDATA` (the bytes follow) or 3 `H_OFFPAGE` (12 bytes: the first
//!   overflow page and the total length). Header blobs are larger than a
//!   quarter page nearly always, so nearly every value is `H_OFFPAGE`;
//! - overflow pages chain through their next-page field.
//!
//! Each bucket's chain of hash pages is followed from its first page. The
//! file is untrusted: every page number is checked against the last page and
//! the file, every offset and length against the page; a page is visited at
//! most once in the whole file (a cycle, or two items sharing an overflow
//! chain, is an error), so the work and the memory are bounded by the file
//! size. Encrypted or checksummed files, B-tree files and duplicate items
//! (none of which rpm wrote) are refused.

use std::collections::BTreeMap;

/// Hash metadata magic number (`DB_HASHMAGIC`).
const HASH_MAGIC: u32 = 0x0006_1561;

/// B-tree metadata magic number (`DB_BTREEMAGIC`), to name what a file is.
const BTREE_MAGIC: u32 = 0x0005_3162;

/// Size of the header of every page (`SIZEOF_PAGE`).
const PAGE_HEADER_LEN: usize = 26;

/// Page types (`db_page.h`).
mod page_type {
    pub const HASH_UNSORTED: u8 = 2;
    pub const OVERFLOW: u8 = 7;
    pub const HASH_META: u8 = 8;
    pub const HASH: u8 = 13;
}

/// Hash item types (`db_page.h`).
mod item_type {
    pub const KEYDATA: u8 = 1;
    pub const DUPLICATE: u8 = 2;
    pub const OFFPAGE: u8 = 3;
    pub const OFFDUP: u8 = 4;
}

/// Size of an `H_OFFPAGE` item: type, 3 unused bytes, page, total length.
const OFFPAGE_LEN: usize = 12;

/// A `Packages` file that is not a readable BerkeleyDB hash database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BdbError {
    /// The metadata page is missing or says this is not a hash database
    /// rpm could have written.
    #[error("BerkeleyDB metadata: {0}")]
    Meta(String),
    /// A page is missing, of the wrong kind or inconsistent.
    #[error("BerkeleyDB page {page}: {reason}")]
    Page {
        /// The page number.
        page: u32,
        /// What is wrong with it.
        reason: String,
    },
    /// A record is not an rpm header record.
    #[error("BerkeleyDB page {page}, item {item}: {reason}")]
    Item {
        /// The hash page the item is on.
        page: u32,
        /// The item's index on the page.
        item: usize,
        /// What is wrong with it.
        reason: String,
    },
}

/// Byte order of the file's numbers (page contents are bytes either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Little,
    Big,
}

impl Order {
    fn u16(self, bytes: &[u8], at: usize) -> Option<u16> {
        let raw: [u8; 2] = bytes.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(match self {
            Order::Little => u16::from_le_bytes(raw),
            Order::Big => u16::from_be_bytes(raw),
        })
    }

    fn u32(self, bytes: &[u8], at: usize) -> Option<u32> {
        let raw: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(match self {
            Order::Little => u32::from_le_bytes(raw),
            Order::Big => u32::from_be_bytes(raw),
        })
    }
}

/// The fields of the hash metadata page that are used.
#[derive(Debug)]
struct Meta {
    order: Order,
    page_size: usize,
    last_page: u32,
    max_bucket: u32,
    spares: [u32; 32],
}

/// One page's header fields.
#[derive(Debug, Clone, Copy)]
struct PageHeader {
    next: u32,
    entries: u16,
    high_free: u16,
    kind: u8,
}

/// The file, its metadata and the pages already visited.
struct Reader<'a> {
    data: &'a [u8],
    meta: Meta,
    visited: Vec<bool>,
}

/// Every `(header instance, header blob)` of an rpm `Packages` file, by
/// instance.
pub fn read_headers(data: &[u8]) -> Result<Vec<(u32, Vec<u8>)>, BdbError> {
    let meta = read_meta(data)?;
    let pages_in_file = data.len() / meta.page_size;
    let mut reader = Reader { data, meta, visited: vec![false; pages_in_file] };
    let mut headers = BTreeMap::new();
    for bucket in 0..=reader.meta.max_bucket {
        let mut page_no = reader.bucket_page(bucket)?;
        // Each page is visited once at most, so the chain ends.
        while page_no != 0 {
            let (header, page) = reader.page(page_no)?;
            if header.kind != page_type::HASH && header.kind != page_type::HASH_UNSORTED {
                return Err(page_error(
                    page_no,
                    format!("type {} in bucket {bucket}'s chain, not a hash page", header.kind),
                ));
            }
            for (instance, blob) in reader.hash_page_records(page_no, header, page)? {
                if headers.insert(instance, blob).is_some() {
                    return Err(page_error(page_no, format!("header instance {instance} is stored twice")));
                }
            }
            page_no = header.next;
        }
    }
    Ok(headers.into_iter().collect())
}

fn page_error(page: u32, reason: impl Into<String>) -> BdbError {
    BdbError::Page { page, reason: reason.into() }
}

/// Reads and checks the hash metadata page, as rpm's `bdb_open` does.
fn read_meta(data: &[u8]) -> Result<Meta, BdbError> {
    let meta_error = |reason: &str| BdbError::Meta(reason.to_owned());
    // The metadata fields used end with `spares` at byte 224; the smallest
    // page is 512 bytes.
    let page = data.get(..512).ok_or_else(|| meta_error("the file is shorter than one 512-byte page"))?;
    let magic_le = Order::Little.u32(page, 12).unwrap_or_default();
    let magic_be = Order::Big.u32(page, 12).unwrap_or_default();
    let order = if magic_le == HASH_MAGIC {
        Order::Little
    } else if magic_be == HASH_MAGIC {
        Order::Big
    } else if magic_le == BTREE_MAGIC || magic_be == BTREE_MAGIC {
        return Err(meta_error("a B-tree database, not the hash database rpm keeps its headers in"));
    } else {
        return Err(meta_error("no BerkeleyDB hash magic (0x061561) at byte 12"));
    };
    let field = |at: usize| order.u32(page, at).unwrap_or_default();
    let version = field(16);
    if !(8..=10).contains(&version) {
        return Err(BdbError::Meta(format!("hash version {version}; rpm wrote versions 8 to 10")));
    }
    let page_size = field(20);
    if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(BdbError::Meta(format!("page size {page_size} is not a power of two from 512 to 65536")));
    }
    if page[24] != 0 {
        return Err(meta_error("the database is encrypted"));
    }
    if page[25] != page_type::HASH_META {
        return Err(BdbError::Meta(format!("page 0 has type {}, not hash metadata", page[25])));
    }
    // DBMETA_CHKSUM: page checksums move every page's items.
    if page[26] & 0x01 != 0 {
        return Err(meta_error("pages carry checksums, which rpm never enabled"));
    }
    let page_size = page_size as usize;
    if data.len() < page_size {
        return Err(BdbError::Meta(format!("the file is shorter than its {page_size}-byte metadata page")));
    }
    let last_page = field(32);
    let max_bucket = field(72);
    // Each bucket has a page of its own after the metadata page.
    if u64::from(max_bucket) >= u64::from(last_page) {
        return Err(BdbError::Meta(format!(
            "{} buckets do not fit in {last_page} pages",
            u64::from(max_bucket) + 1
        )));
    }
    let mut spares = [0u32; 32];
    for (index, spare) in spares.iter_mut().enumerate() {
        *spare = field(96 + 4 * index);
    }
    Ok(Meta { order, page_size, last_page, max_bucket, spares })
}

impl<'a> Reader<'a> {
    /// The first page of `bucket` (rpm's `hash_bucket_to_page`).
    fn bucket_page(&self, bucket: u32) -> Result<u32, BdbError> {
        let bits = (u32::BITS - bucket.leading_zeros()) as usize;
        self.meta
            .spares
            .get(bits)
            .and_then(|spare| bucket.checked_add(*spare))
            .ok_or_else(|| BdbError::Meta(format!("bucket {bucket} has no page")))
    }

    /// Page `page_no`, checked and marked visited.
    fn page(&mut self, page_no: u32) -> Result<(PageHeader, &'a [u8]), BdbError> {
        if page_no == 0 || page_no > self.meta.last_page {
            return Err(page_error(
                page_no,
                format!("referenced, but pages run from 1 to {} after the metadata", self.meta.last_page),
            ));
        }
        let index = page_no as usize;
        let start = index.checked_mul(self.meta.page_size);
        let page = start
            .and_then(|start| self.data.get(start..start.checked_add(self.meta.page_size)?))
            .ok_or_else(|| page_error(page_no, "past the end of the file (truncated?)"))?;
        let visited =
            self.visited.get_mut(index).ok_or_else(|| page_error(page_no, "past the end of the file"))?;
        if *visited {
            return Err(page_error(page_no, "reached twice (a cycle, or a page shared by two chains)"));
        }
        *visited = true;
        let order = self.meta.order;
        let field32 = |at| order.u32(page, at).unwrap_or_default();
        let field16 = |at| order.u16(page, at).unwrap_or_default();
        if field32(8) != page_no {
            return Err(page_error(page_no, format!("says it is page {}", field32(8))));
        }
        Ok((
            PageHeader { next: field32(16), entries: field16(20), high_free: field16(22), kind: page[25] },
            page,
        ))
    }

    /// The header records of one hash page: key/data pairs whose key is a
    /// 4-byte instance number other than 0.
    fn hash_page_records(
        &mut self,
        page_no: u32,
        header: PageHeader,
        page: &'a [u8],
    ) -> Result<Vec<(u32, Vec<u8>)>, BdbError> {
        let order = self.meta.order;
        let page_size = self.meta.page_size;
        let entries = usize::from(header.entries);
        let index_end = PAGE_HEADER_LEN + 2 * entries;
        if index_end > page_size {
            return Err(page_error(page_no, format!("{entries} items do not fit in the page")));
        }
        if !entries.is_multiple_of(2) {
            return Err(page_error(page_no, format!("{entries} items, not key/data pairs")));
        }
        // Items are laid out from the end of the page down, in index order,
        // each as long as the distance to the one before (BerkeleyDB's
        // `LEN_HITEM`): offsets must fall strictly, so items never overlap.
        let mut items = Vec::with_capacity(entries);
        let mut previous = page_size;
        for item in 0..entries {
            let offset = usize::from(order.u16(page, PAGE_HEADER_LEN + 2 * item).unwrap_or_default());
            if offset < index_end || offset >= previous {
                return Err(BdbError::Item {
                    page: page_no,
                    item,
                    reason: format!("offset {offset} is outside {index_end}..{previous}"),
                });
            }
            items.push(&page[offset..previous]);
            previous = offset;
        }
        let mut records = Vec::with_capacity(entries / 2);
        for (pair, key_value) in items.chunks_exact(2).enumerate() {
            let item_error =
                |item: usize, reason: String| BdbError::Item { page: page_no, item: 2 * pair + item, reason };
            let [key, value] = [key_value[0], key_value[1]];
            let instance = match key {
                [item_type::KEYDATA, number @ ..] if number.len() == 4 => {
                    order.u32(number, 0).unwrap_or_default()
                }
                _ => return Err(item_error(0, "the key is not a 4-byte header instance".to_owned())),
            };
            let blob = match value.first().copied() {
                Some(item_type::KEYDATA) => value[1..].to_vec(),
                Some(item_type::OFFPAGE) if value.len() == OFFPAGE_LEN => {
                    let first = order.u32(value, 4).unwrap_or_default();
                    let total = order.u32(value, 8).unwrap_or_default();
                    self.overflow(first, total).map_err(|err| match err {
                        BdbError::Page { page, reason } => {
                            item_error(1, format!("overflow page {page}: {reason}"))
                        }
                        other => other,
                    })?
                }
                Some(item_type::DUPLICATE | item_type::OFFDUP) => {
                    return Err(item_error(1, "duplicate data items, which rpm never stored".to_owned()));
                }
                Some(other) => return Err(item_error(1, format!("unknown item type {other}"))),
                None => return Err(item_error(1, "empty item".to_owned())),
            };
            // Instance 0 holds the largest instance number, not a header.
            if instance != 0 {
                records.push((instance, blob));
            }
        }
        Ok(records)
    }

    /// The `total` bytes of an overflow chain starting at `first` (rpm's
    /// `ovfl_get`).
    fn overflow(&mut self, first: u32, total: u32) -> Result<Vec<u8>, BdbError> {
        let total = total as usize;
        // A value cannot be longer than the file that holds it.
        if total == 0 || total > self.data.len() {
            return Err(page_error(first, format!("starts a chain of an impossible {total} bytes")));
        }
        let mut value = Vec::with_capacity(total);
        let (mut page_no, mut previous) = (first, first);
        while value.len() < total {
            if page_no == 0 {
                return Err(page_error(
                    previous,
                    format!("the chain ends here, after {} of its {total} bytes", value.len()),
                ));
            }
            previous = page_no;
            let (header, page) = self.page(page_no)?;
            if header.kind != page_type::OVERFLOW {
                return Err(page_error(page_no, format!("type {}, not an overflow page", header.kind)));
            }
            // On an overflow page the high free offset is the data length.
            let len = usize::from(header.high_free);
            if PAGE_HEADER_LEN + len > self.meta.page_size || len > total - value.len() {
                return Err(page_error(page_no, format!("holds an impossible {len} bytes")));
            }
            value.extend_from_slice(&page[PAGE_HEADER_LEN..PAGE_HEADER_LEN + len]);
            page_no = header.next;
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page of `size` bytes with BerkeleyDB's page header, big- or
    /// little-endian.
    fn page(
        size: usize,
        order: Order,
        number: u32,
        next: u32,
        entries: u16,
        high_free: u16,
        kind: u8,
    ) -> Vec<u8> {
        let mut page = vec![0u8; size];
        put32(&mut page, order, 8, number);
        put32(&mut page, order, 16, next);
        put16(&mut page, order, 20, entries);
        put16(&mut page, order, 22, high_free);
        page[25] = kind;
        page
    }

    fn put16(bytes: &mut [u8], order: Order, at: usize, value: u16) {
        let raw = match order {
            Order::Little => value.to_le_bytes(),
            Order::Big => value.to_be_bytes(),
        };
        bytes[at..at + 2].copy_from_slice(&raw);
    }

    fn put32(bytes: &mut [u8], order: Order, at: usize, value: u32) {
        let raw = match order {
            Order::Little => value.to_le_bytes(),
            Order::Big => value.to_be_bytes(),
        };
        bytes[at..at + 4].copy_from_slice(&raw);
    }

    /// A one-bucket hash database laid out as BerkeleyDB writes it: the
    /// metadata page, the bucket's page (1) holding the pairs, then each
    /// value longer than `inline_max` in a chain of overflow pages.
    fn build(order: Order, size: usize, records: &[(u32, &[u8])], inline_max: usize) -> Vec<u8> {
        let mut overflow_pages: Vec<Vec<u8>> = Vec::new();
        let mut items: Vec<Vec<u8>> = Vec::new();
        for (instance, value) in records {
            let mut key = vec![item_type::KEYDATA, 0, 0, 0, 0];
            put32(&mut key, order, 1, *instance);
            items.push(key);
            if value.len() <= inline_max {
                items.push([&[item_type::KEYDATA][..], value].concat());
            } else {
                let first = 2 + overflow_pages.len() as u32;
                let chunks: Vec<&[u8]> = value.chunks(size - PAGE_HEADER_LEN).collect();
                for (n, chunk) in chunks.iter().enumerate() {
                    let number = first + n as u32;
                    let next = if n + 1 < chunks.len() { number + 1 } else { 0 };
                    let mut overflow =
                        page(size, order, number, next, 1, chunk.len() as u16, page_type::OVERFLOW);
                    overflow[PAGE_HEADER_LEN..PAGE_HEADER_LEN + chunk.len()].copy_from_slice(chunk);
                    overflow_pages.push(overflow);
                }
                let mut item = vec![item_type::OFFPAGE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
                put32(&mut item, order, 4, first);
                put32(&mut item, order, 8, value.len() as u32);
                items.push(item);
            }
        }
        let mut bucket = page(size, order, 1, 0, items.len() as u16, 0, page_type::HASH);
        let mut offset = size;
        for (index, item) in items.iter().enumerate() {
            offset -= item.len();
            bucket[offset..offset + item.len()].copy_from_slice(item);
            put16(&mut bucket, order, PAGE_HEADER_LEN + 2 * index, offset as u16);
        }
        put16(&mut bucket, order, 22, offset as u16);
        let last_page = 1 + overflow_pages.len() as u32;
        let mut meta = page(size, order, 0, 0, 0, 0, page_type::HASH_META);
        put32(&mut meta, order, 12, HASH_MAGIC);
        put32(&mut meta, order, 16, 9);
        put32(&mut meta, order, 20, size as u32);
        put32(&mut meta, order, 32, last_page);
        put32(&mut meta, order, 72, 0); // max bucket
        put32(&mut meta, order, 96, 1); // spares[0]: bucket 0 is page 1
        [meta, bucket].into_iter().chain(overflow_pages).flatten().collect()
    }

    fn long_value(len: usize) -> Vec<u8> {
        (0..len).map(|n| (n % 251) as u8).collect()
    }

    #[test]
    fn records_come_back_in_both_byte_orders_and_page_sizes() {
        let big = long_value(3000);
        for order in [Order::Little, Order::Big] {
            for size in [512, 4096, 65536] {
                let file = build(order, size, &[(0, &[9, 0, 0, 0]), (2, &big), (1, b"short")], 100);
                let headers = read_headers(&file).expect("readable");
                assert_eq!(headers, vec![(1, b"short".to_vec()), (2, big.clone())], "{order:?} {size}");
            }
        }
    }

    #[test]
    fn truncated_and_corrupted_files_are_errors() {
        let order = Order::Little;
        let big = long_value(1500);
        let good = build(order, 512, &[(1, &big)], 100);
        assert!(read_headers(&good).is_ok());
        // Page 1 is the bucket page; 2 to 5 the overflow chain (486 bytes a
        // page).
        let with = |at: usize, bytes: &[u8]| {
            let mut file = good.clone();
            file[at..at + bytes.len()].copy_from_slice(bytes);
            file
        };
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("empty", Vec::new(), "shorter than one"),
            ("truncated in the chain", good[..512 * 4].to_vec(), "page 4: past the end"),
            ("half a page", good[..512 * 4 + 100].to_vec(), "page 4: past the end"),
            ("no magic", with(12, &[0, 0, 0, 0]), "no BerkeleyDB hash magic"),
            ("b-tree", with(12, &0x0005_3162u32.to_le_bytes()), "B-tree"),
            ("hash version", with(16, &[7, 0, 0, 0]), "hash version 7"),
            ("page size", with(20, &[0, 3, 0, 0]), "page size 768"),
            ("encrypted", with(24, &[1]), "encrypted"),
            ("checksums", with(26, &[1]), "checksums"),
            ("too many buckets", with(72, &[9, 0, 0, 0]), "buckets do not fit"),
            ("bucket beyond last page", with(96, &[7, 0, 0, 0]), "page 7: referenced"),
            ("wrong page number", with(512 + 8, &[5, 0, 0, 0]), "says it is page 5"),
            ("bucket page type", with(512 + 25, &[5]), "not a hash page"),
            ("odd item count", with(512 + 20, &[1, 0]), "not key/data pairs"),
            ("item count beyond page", with(512 + 20, &[0, 1]), "do not fit"),
            ("rising offsets", with(512 + 26, &[0x10, 0x00]), "item 0: offset 16"),
            ("key length", with(512 + 26, &[0xfa, 0x01]), "not a 4-byte header instance"),
            ("value type", with(512 + 512 - 5 - 12, &[4]), "duplicate data items"),
            ("unknown value type", with(512 + 512 - 5 - 12, &[9]), "unknown item type 9"),
            ("zero total", with(512 + 512 - 5 - 4, &[0, 0, 0, 0]), "impossible 0 bytes"),
            ("total beyond file", with(512 + 512 - 5 - 4, &[0, 0, 0, 1]), "impossible"),
            (
                "total beyond chain",
                with(512 + 512 - 5 - 4, &[0xdd, 0x05, 0, 0]),
                "ends here, after 1500 of its 1501 bytes",
            ),
            ("overflow type", with(1024 + 25, &[13]), "not an overflow page"),
            ("overflow length", with(1024 + 22, &[0xff, 0x01]), "impossible 511 bytes"),
            (
                "overflow to metadata",
                with(1024 + 16, &[0, 0, 0, 0]),
                "page 2: the chain ends here, after 486",
            ),
        ];
        for (name, file, want) in cases {
            let error = read_headers(&file).expect_err(name);
            assert!(error.to_string().contains(want), "{name}: {error}");
        }
    }

    #[test]
    fn overflow_cycles_and_shared_chains_end() {
        let order = Order::Little;
        let big = long_value(1500);
        // The last overflow page points back at the first (2).
        let mut cycle = build(order, 512, &[(1, &big)], 100);
        let last = cycle.len() - 512;
        put32(&mut cycle, order, last + 16, 2);
        // Say the value is longer than the chain, so the cycle is followed.
        let len = cycle.len() as u32;
        put32(&mut cycle, order, 512 + 512 - 5 - 4, len);
        let error = read_headers(&cycle).expect_err("cycle");
        assert!(error.to_string().contains("page 2: reached twice"), "{error}");

        // A page pointing at itself.
        let mut own = build(order, 512, &[(1, &big)], 100);
        put32(&mut own, order, 2 * 512 + 16, 2);
        let error = read_headers(&own).expect_err("self loop");
        assert!(error.to_string().contains("reached twice"), "{error}");

        // Two records sharing one chain would double the memory read.
        let mut shared = build(order, 512, &[(1, &big), (2, &big)], 100);
        // Record 2's item (the last, lowest in the page) points at record
        // 1's chain.
        put32(&mut shared, order, 512 + 512 - 2 * (5 + 12) + 4, 2);
        let error = read_headers(&shared).expect_err("shared chain");
        assert!(error.to_string().contains("reached twice"), "{error}");

        // A bucket chain that loops back to its own page.
        let mut bucket_loop = build(order, 512, &[(1, b"x")], 100);
        put32(&mut bucket_loop, order, 512 + 16, 1);
        let error = read_headers(&bucket_loop).expect_err("bucket loop");
        assert!(error.to_string().contains("page 1: reached twice"), "{error}");
    }

    #[test]
    fn every_single_byte_corruption_is_a_result_or_an_error() {
        let big = long_value(700);
        let good = build(Order::Big, 512, &[(1, &big), (2, b"inline value")], 100);
        for at in 0..good.len() {
            for mask in [0xff, 0x80, 0x01] {
                let mut file = good.clone();
                file[at] ^= mask;
                let _ = read_headers(&file);
            }
        }
    }
}
