//! Alpine-like base images that a real Docker daemon can build on, for the
//! remediation agent's tests.
//!
//! Each image is Debian's static busybox (a real shell and coreutils) plus
//! an Alpine 3.19 os-release and an apk installed database listing the
//! packages a test chooses, so the scanner sees an Alpine image with those
//! package versions. Alpine's mirrors are out of reach here, so the image
//! carries a stand-in `apk` script: `apk add name=version` succeeds only
//! when `/etc/apk/available` lists that version (what the test's package
//! index serves), and then records it in the installed database — enough
//! for a pinned install to build, a missing version to fail as apk fails,
//! and the rescan to see what was installed.
//!
//! Also the advisory records the tests match against: OSV records in
//! Alpine's format, reconstructed from Alpine's secdb entries (each names
//! its source), imported with the scanner's own importer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::Registry;
use crate::images::{TestLayer, sha256};

/// One installed apk package.
#[derive(Debug, Clone)]
pub struct ApkPackage {
    /// Binary package name.
    pub name: &'static str,
    /// Version.
    pub version: String,
    /// Origin (source package).
    pub origin: &'static str,
}

/// `libcrypto3` and `libssl3` (origin `openssl`) at `version`.
pub fn openssl(version: &str) -> Vec<ApkPackage> {
    ["libcrypto3", "libssl3"]
        .into_iter()
        .map(|name| ApkPackage { name, version: version.to_owned(), origin: "openssl" })
        .collect()
}

/// The stand-in `apk` (see the module docs), shared with `scripts/demo`.
/// Busybox sh and awk only.
const APK_SCRIPT: &str = include_str!("../../examples/remediation/base/sbin/apk");

/// Busybox applets the images link, enough for shells in `RUN` lines.
const APPLETS: &[&str] = &[
    "sh", "echo", "cat", "ls", "mkdir", "cp", "mv", "rm", "grep", "awk", "sed", "true", "false", "test",
    "chmod", "env", "touch",
];

/// A tar with files (mode, content) and symlinks (path, target).
fn tar(files: &[(&str, u32, Vec<u8>)], symlinks: &[(String, &str)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, mode, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(*mode);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, path, &data[..]).expect("append to an in-memory tar");
    }
    for (path, target) in symlinks {
        let mut header = tar::Header::new_gnu();
        header.set_size(0);
        header.set_mode(0o777);
        header.set_entry_type(tar::EntryType::Symlink);
        builder.append_link(&mut header, path, target).expect("append a symlink");
    }
    builder.into_inner().expect("finish an in-memory tar")
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).expect("gzip in memory");
    gz.finish().expect("gzip in memory")
}

/// The busybox layer, shared by every image (one blob in the registry).
pub fn busybox_layer() -> anyhow::Result<TestLayer> {
    let busybox = std::fs::read("/bin/busybox").map_err(|e| {
        anyhow::anyhow!("/bin/busybox: {e}; install busybox-static (scripts/services install does)")
    })?;
    let mut links: Vec<(String, &str)> = APPLETS.iter().map(|a| (format!("bin/{a}"), "busybox")).collect();
    links.push(("usr/bin/env".into(), "/bin/busybox"));
    let layer = tar(&[("bin/busybox", 0o755, busybox), ("tmp/.keep", 0o644, Vec::new())], &links);
    Ok(TestLayer {
        blob: gzip(&layer),
        tar: layer,
        media_type: "application/vnd.oci.image.layer.v1.tar+gzip",
    })
}

/// What a base image carries beyond its packages.
#[derive(Debug, Clone, Default)]
pub struct BaseExtras {
    /// Config labels.
    pub labels: BTreeMap<String, String>,
    /// Post-install messages: installing the package prints the text, as
    /// apk prints what a package's `.post-install` script says.
    pub post_install: BTreeMap<String, String>,
}

/// The Alpine layer: os-release, the installed database, the stand-in apk
/// and the versions it may install.
pub fn alpine_layer(packages: &[ApkPackage], available: &[(&str, &str)]) -> TestLayer {
    alpine_layer_with(packages, available, &BTreeMap::new())
}

/// The same, with post-install messages by package.
fn alpine_layer_with(
    packages: &[ApkPackage],
    available: &[(&str, &str)],
    post_install: &BTreeMap<String, String>,
) -> TestLayer {
    let mut installed = String::new();
    for p in packages {
        installed.push_str(&format!(
            "C:Q1{}=\nP:{}\nV:{}\nA:x86_64\no:{}\nL:MIT\n\n",
            &sha256(p.name.as_bytes())[7..31],
            p.name,
            p.version,
            p.origin
        ));
    }
    let available: String = available.iter().map(|(n, v)| format!("{n}={v}\n")).collect();
    let messages: Vec<(String, Vec<u8>)> = post_install
        .iter()
        .map(|(package, text)| (format!("etc/apk/post-install/{package}"), format!("{text}\n").into_bytes()))
        .collect();
    let mut files: Vec<(&str, u32, Vec<u8>)> = vec![
        (
            "etc/os-release",
            0o644,
            b"NAME=\"Alpine Linux\"\nID=alpine\nVERSION_ID=3.19.1\nPRETTY_NAME=\"Alpine Linux v3.19\"\n"
                .to_vec(),
        ),
        ("etc/alpine-release", 0o644, b"3.19.1\n".to_vec()),
        ("lib/apk/db/installed", 0o644, installed.into_bytes()),
        ("etc/apk/available", 0o644, available.into_bytes()),
        ("sbin/apk", 0o755, APK_SCRIPT.as_bytes().to_vec()),
    ];
    files.extend(messages.iter().map(|(path, text)| (path.as_str(), 0o644, text.clone())));
    let layer = tar(&files, &[]);
    TestLayer { blob: gzip(&layer), tar: layer, media_type: "application/vnd.oci.image.layer.v1.tar+gzip" }
}

/// An image config Docker can run: PATH set, a shell as the command.
pub fn runnable_config(layers: &[TestLayer]) -> Vec<u8> {
    serde_json::to_vec(&runnable_config_json(layers)).expect("config JSON")
}

/// The same config as JSON, for callers that add to it.
fn runnable_config_json(layers: &[TestLayer]) -> serde_json::Value {
    serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "created": "2026-11-30T00:00:00Z",
        "config": { "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["/bin/sh"] },
        "rootfs": { "type": "layers", "diff_ids": layers.iter().map(|l| sha256(&l.tar)).collect::<Vec<_>>() }
    })
}

/// Pushes an Alpine-like base as `repository:tag`; returns its digest.
pub async fn push_base(
    registry: &Registry,
    repository: &str,
    tag: &str,
    packages: &[ApkPackage],
    available: &[(&str, &str)],
) -> anyhow::Result<String> {
    push_base_with(registry, repository, tag, packages, available, &BaseExtras::default()).await
}

/// The same, with labels and post-install messages.
pub async fn push_base_with(
    registry: &Registry,
    repository: &str,
    tag: &str,
    packages: &[ApkPackage],
    available: &[(&str, &str)],
    extras: &BaseExtras,
) -> anyhow::Result<String> {
    let layers = vec![busybox_layer()?, alpine_layer_with(packages, available, &extras.post_install)];
    let mut config = runnable_config_json(&layers);
    if !extras.labels.is_empty() {
        config["config"]["Labels"] = serde_json::to_value(&extras.labels)?;
    }
    crate::images::push_image(registry, repository, tag, &layers, serde_json::to_vec(&config)?).await
}

/// An OSV record in Alpine's format: `package` (a source package) in
/// `Alpine:v3.19`, affected from `introduced` until `fixed` (none: no fix
/// published).
pub fn alpine_osv(
    id: &str,
    package: &str,
    fixed: Option<&str>,
    cvss_vector: Option<&str>,
    summary: &str,
) -> serde_json::Value {
    let mut events = vec![serde_json::json!({ "introduced": "0" })];
    if let Some(f) = fixed {
        events.push(serde_json::json!({ "fixed": f }));
    }
    let mut record = serde_json::json!({
        "schema_version": "1.6.0",
        "id": id,
        "modified": "2026-11-01T00:00:00Z",
        "published": "2024-04-08T14:15:00Z",
        "summary": summary,
        "affected": [{
            "package": { "ecosystem": "Alpine:v3.19", "name": package, "purl": format!("pkg:apk/alpine/{package}?arch=source") },
            "ranges": [{ "type": "ECOSYSTEM", "events": events }]
        }]
    });
    if let Some(v) = cvss_vector {
        record["severity"] = serde_json::json!([{ "type": "CVSS_V3", "score": v }]);
    }
    record
}

/// CVE-2024-2511 as Alpine records it for 3.19: openssl, fixed in
/// 3.1.4-r6 (Alpine secdb v3.19/main, openssl 3.1.4-r6), with NVD's CVSS
/// vector (Alpine's records carry none). The demo imports the same file.
pub fn cve_2024_2511() -> serde_json::Value {
    let path = crate::workspace_root().join("examples/remediation/osv/CVE-2024-2511.json");
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Writes `records` as JSON files into a new folder and imports them into
/// an advisory DB in `db_dir`, with the scanner's importer.
pub fn advisory_db(db_dir: &Path, records: &[serde_json::Value]) -> anyhow::Result<PathBuf> {
    let source = db_dir.with_extension("osv");
    std::fs::create_dir_all(&source)?;
    for (i, record) in records.iter().enumerate() {
        std::fs::write(source.join(format!("{i:03}.json")), serde_json::to_vec_pretty(record)?)?;
    }
    std::fs::create_dir_all(db_dir)?;
    let mut db = patchpilot_scanner::db::AdvisoryDb::open(db_dir)?;
    db.import(&source)?;
    Ok(db_dir.to_owned())
}

/// The Docker daemon the tests build with (`DOCKER_HOST`, set by
/// `scripts/services env`); an error naming the command that starts it when
/// there is none, so that a test needing Docker fails rather than skips.
pub fn docker_host() -> anyhow::Result<String> {
    const START: &str = "`scripts/services up` starts a private dockerd and \
         `eval \"$(scripts/services env)\"` sets DOCKER_HOST (scripts/test does both)";
    let host =
        std::env::var("DOCKER_HOST").map_err(|_| anyhow::anyhow!("DOCKER_HOST is not set; {START}"))?;
    let path = host
        .strip_prefix("unix://")
        .ok_or_else(|| anyhow::anyhow!("DOCKER_HOST={host} is not a unix socket; {START}"))?;
    anyhow::ensure!(Path::new(path).exists(), "DOCKER_HOST={host}: no socket there; {START}");
    Ok(host)
}

/// An `APKINDEX.tar.gz` listing `packages` (name, version, origin).
pub fn apkindex_archive(packages: &[(&str, &str, &str)]) -> Vec<u8> {
    let text: String =
        packages.iter().map(|(n, v, o)| format!("C:Q1AAAA=\nP:{n}\nV:{v}\nA:x86_64\no:{o}\n\n")).collect();
    gzip(&tar(&[("APKINDEX", 0o644, text.into_bytes())], &[]))
}

/// A one-folder HTTP server on loopback: GET `/<name>` answers the file's
/// bytes, anything else 404. Stops when dropped.
#[derive(Debug)]
pub struct FileServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl FileServer {
    /// Serves `files` (name → bytes).
    pub async fn start(files: Vec<(String, Vec<u8>)>) -> anyhow::Result<FileServer> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let files = std::sync::Arc::new(files);
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let files = files.clone();
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let line =
                        String::from_utf8_lossy(&request).lines().next().unwrap_or_default().to_owned();
                    let path =
                        line.split_whitespace().nth(1).unwrap_or("/").trim_start_matches('/').to_owned();
                    let response = match files.iter().find(|(name, _)| *name == path) {
                        Some((_, body)) => {
                            let mut r = format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                body.len()
                            )
                            .into_bytes();
                            r.extend_from_slice(body);
                            r
                        }
                        None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec(),
                    };
                    let _ = stream.write_all(&response).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Ok(FileServer { url, task })
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
