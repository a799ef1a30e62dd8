//! Test images shared by the scanner's integration tests: layers with real
//! package databases (from the catalog fixtures) and hand-written package
//! metadata, stacked with a whiteout, written as an OCI layout or a
//! `docker save` archive (the layers come from `patchpilot_test_images`,
//! which the end-to-end harness pushes to a registry); and an advisory DB
//! of the real osv fixtures.
//!
//! The pairing is made up (Trivy's Alpine package database was not taken
//! from an Alpine 3.19 image): it is chosen so that real advisories apply.

#![allow(dead_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};

use patchpilot_scanner::db::AdvisoryDb;
pub use patchpilot_test_images::{TestLayer, image_config, sha256 as sha, vulnerable_app_layers};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The vulnerable app's layers (the workspace test harness builds them).
pub fn layers() -> Vec<TestLayer> {
    vulnerable_app_layers(&[])
}

/// Its config, labelled with its source repository.
pub fn config(layers: &[TestLayer]) -> Vec<u8> {
    image_config(layers, &[("org.opencontainers.image.source", "https://github.com/acme/app")])
}

pub fn write_oci_layout(dir: &Path) -> String {
    let layers = layers();
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).expect("blobs");
    let put = |data: &[u8]| {
        let digest = sha(data);
        std::fs::write(blobs.join(digest.trim_start_matches("sha256:")), data).expect("blob");
        (digest, data.len())
    };
    let (config_digest, config_size) = put(&config(&layers));
    let descriptors: Vec<_> = layers
        .iter()
        .map(|l| {
            let (digest, size) = put(&l.blob);
            serde_json::json!({ "mediaType": l.media_type, "digest": digest, "size": size })
        })
        .collect();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": { "mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config_size },
        "layers": descriptors,
    }))
    .expect("manifest");
    let (manifest_digest, manifest_size) = put(&manifest);
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).expect("oci-layout");
    std::fs::write(
        dir.join("index.json"),
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest, "size": manifest_size,
                "annotations": { "org.opencontainers.image.ref.name": "acme/app:1.0" }
            }]
        }))
        .expect("index"),
    )
    .expect("index.json");
    manifest_digest
}

/// A legacy `docker save` archive: uncompressed layer tars, manifest.json.
pub fn write_docker_archive(path: &Path) {
    let layers = layers();
    let config = config(&layers);
    let mut builder = tar::Builder::new(std::fs::File::create(path).expect("archive"));
    let mut add = |name: &str, data: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, name, data).expect("append");
    };
    let config_name = format!("{}.json", sha(&config).trim_start_matches("sha256:"));
    add(&config_name, &config);
    let mut names = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        let name = format!("layer{i}/layer.tar");
        add(&name, &layer.tar);
        names.push(name);
    }
    let manifest =
        serde_json::json!([{ "Config": config_name, "RepoTags": ["acme/app:1.0"], "Layers": names }]);
    add("manifest.json", &serde_json::to_vec(&manifest).expect("manifest"));
    builder.into_inner().expect("finish").flush().expect("flush");
}

pub fn db() -> (tempfile::TempDir, AdvisoryDb) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut db = AdvisoryDb::open(dir.path()).expect("db");
    let stats = db.import(&fixtures().join("osv/records")).expect("import");
    assert!(stats.refused.is_empty(), "{:?}", stats.refused);
    (dir, db)
}

/// A [`Progress`](patchpilot_scanner::progress::Progress) that writes down
/// what it was told, as `begin <what> <total>`, `+<n>` and `end` lines.
#[derive(Debug, Default)]
pub struct Recorded(pub std::sync::Mutex<Vec<String>>);

impl Recorded {
    /// The lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().expect("lock").clone()
    }
}

impl patchpilot_scanner::progress::Progress for Recorded {
    fn begin(&self, what: &str, total: Option<u64>) {
        self.0.lock().expect("lock").push(format!("begin {what} {total:?}"));
    }
    fn advance(&self, units: u64) {
        self.0.lock().expect("lock").push(format!("+{units}"));
    }
    fn end(&self) {
        self.0.lock().expect("lock").push("end".into());
    }
}
