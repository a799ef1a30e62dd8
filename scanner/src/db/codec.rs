//! How a record is stored: the serde JSON of [`Record`] (which leaves out
//! `details` and empty fields) compressed with raw DEFLATE (RFC 1951).
//!
//! Per-record compression keeps a lookup to the records it needs: no
//! shared dictionary to load, and decoding one record of a few hundred bytes
//! takes microseconds. Changing this format needs a schema migration that
//! re-encodes or drops the stored records (see the module docs of `db`).

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;

use crate::osv::Record;

/// Largest decoded record accepted, so a corrupt or hostile body cannot
/// make a lookup allocate without bound. The largest OSV records (Linux
/// distributions' kernel advisories with long `versions` lists) are a few
/// MiB.
pub(crate) const MAX_RECORD_BYTES: u64 = 64 * 1024 * 1024;

/// Encodes `record` for storage.
pub(crate) fn encode(record: &Record) -> Result<Vec<u8>, String> {
    let json = serde_json::to_vec(record).map_err(|e| format!("cannot serialise: {e}"))?;
    let mut encoder = DeflateEncoder::new(Vec::with_capacity(json.len() / 3 + 16), Compression::fast());
    encoder.write_all(&json).map_err(|e| format!("cannot compress: {e}"))?;
    encoder.finish().map_err(|e| format!("cannot compress: {e}"))
}

/// Decodes a stored body.
pub(crate) fn decode(body: &[u8]) -> Result<Record, String> {
    let mut json = Vec::with_capacity(body.len() * 4);
    DeflateDecoder::new(body)
        .take(MAX_RECORD_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| format!("cannot decompress: {e}"))?;
    if json.len() as u64 > MAX_RECORD_BYTES {
        return Err(format!("decompresses to more than {MAX_RECORD_BYTES} bytes"));
    }
    serde_json::from_slice(&json).map_err(|e| format!("not an OSV record: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_drops_only_details() {
        let text = r#"{"id":"X-1","modified":"2024-01-01T00:00:00Z","details":"long text",
            "summary":"s","affected":[{"package":{"ecosystem":"npm","name":"a"},
            "ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"1.0.0"}]}]}]}"#;
        let record: Record = serde_json::from_str(text).expect("parses");
        let decoded = decode(&encode(&record).expect("encodes")).expect("decodes");
        assert_eq!(decoded.details, None);
        assert_eq!(decoded, Record { details: None, ..record });
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode(b"not deflate at all \xff\xfe").is_err());
        assert!(decode(&[]).is_err());
    }
}
