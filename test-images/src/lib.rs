//! Test images: layers built from real package databases (the scanner's
//! catalog fixtures) and hand-written package metadata. The end-to-end
//! harness (`patchpilot_e2e::images`) pushes them to a real registry; the
//! scanner's tests read them as OCI layouts and archives.
//!
//! The vulnerable app image pairs Trivy's Alpine package database with an
//! Alpine 3.19 os-release, a PyYAML 5.3.1 dist-info and an ansi-html 0.0.7
//! package.json, so that real OSV records (the scanner's osv fixtures)
//! apply; a second PyYAML copy is whited out by the top layer and must
//! never be reported. The pairing is made up, the data is not.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::Digest as _;

/// The scanner's test fixtures folder.
pub fn scanner_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scanner/tests/fixtures")
}

/// A tar archive of regular files.
pub fn tar_layer(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, path, &data[..]).expect("append to an in-memory tar");
    }
    builder.into_inner().expect("finish an in-memory tar")
}

/// `sha256:<hex>` of `data`.
pub fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(data)))
}

/// One layer: the uncompressed tar (its digest is the diff id), the stored
/// blob and its media type.
#[derive(Debug, Clone)]
pub struct TestLayer {
    /// Uncompressed tar.
    pub tar: Vec<u8>,
    /// The bytes stored in the registry or layout.
    pub blob: Vec<u8>,
    /// OCI media type of `blob`.
    pub media_type: &'static str,
}

/// The vulnerable app's layers, bottom first: gzip, zstd and plain.
/// `extra` files go into the top layer (to make a new digest of the same
/// image).
pub fn vulnerable_app_layers(extra: &[(&str, Vec<u8>)]) -> Vec<TestLayer> {
    let installed = std::fs::read(scanner_fixtures().join("catalog/apk/trivy-alpine/lib/apk/db/installed"))
        .expect("scanner apk fixture");
    let bottom = tar_layer(&[
        (
            "etc/os-release",
            b"NAME=\"Alpine Linux\"\nID=alpine\nVERSION_ID=3.19.1\nPRETTY_NAME=\"Alpine Linux v3.19\"\n"
                .to_vec(),
        ),
        ("lib/apk/db/installed", installed),
    ]);
    let middle = tar_layer(&[
        (
            "usr/lib/python3.11/site-packages/PyYAML-5.3.1.dist-info/METADATA",
            b"Metadata-Version: 2.1\nName: PyYAML\nVersion: 5.3.1\n\nYAML parser\n".to_vec(),
        ),
        (
            "opt/old/PyYAML-5.1.dist-info/METADATA",
            b"Metadata-Version: 2.1\nName: PyYAML\nVersion: 5.1\n".to_vec(),
        ),
        ("app/node_modules/ansi-html/package.json", br#"{"name":"ansi-html","version":"0.0.7"}"#.to_vec()),
    ]);
    let mut top_files = vec![("opt/.wh.old", Vec::new())];
    top_files.extend(extra.iter().map(|(p, d)| (*p, d.clone())));
    let top = tar_layer(&top_files);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bottom).expect("gzip in memory");
    let bottom_blob = gz.finish().expect("gzip in memory");
    let middle_blob =
        ruzstd::encoding::compress_to_vec(&middle[..], ruzstd::encoding::CompressionLevel::Fastest);
    vec![
        TestLayer {
            tar: bottom,
            blob: bottom_blob,
            media_type: "application/vnd.oci.image.layer.v1.tar+gzip",
        },
        TestLayer {
            tar: middle,
            blob: middle_blob,
            media_type: "application/vnd.oci.image.layer.v1.tar+zstd",
        },
        TestLayer { tar: top.clone(), blob: top, media_type: "application/vnd.oci.image.layer.v1.tar" },
    ]
}

/// An image config for `layers` with `labels`, created at a fixed time.
pub fn image_config(layers: &[TestLayer], labels: &[(&str, &str)]) -> Vec<u8> {
    image_config_created(layers, labels, "2026-11-30T00:00:00Z")
}

/// An image config for `layers` with `labels`, created at `created`
/// (RFC 3339).
pub fn image_config_created(layers: &[TestLayer], labels: &[(&str, &str)], created: &str) -> Vec<u8> {
    let labels: serde_json::Map<String, serde_json::Value> =
        labels.iter().map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v))).collect();
    serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": { "Labels": labels },
        "rootfs": { "type": "layers", "diff_ids": layers.iter().map(|l| sha256(&l.tar)).collect::<Vec<_>>() }
    }))
    .expect("config JSON")
}
