//! What the scanner's benches share: the cached Debian bookworm minbase
//! image (debootstrap, then one gzip layer in an OCI layout), the dpkg
//! status reader the DB generator needs, the cache location, and timing
//! helpers. `scan.rs` and `versus_syft.rs` both build on the same cached
//! image, so the two measure the same packages.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

pub const SUITE: &str = "bookworm";
pub const MIRROR: &str = "http://deb.debian.org/debian";
pub const IMAGE_REF: &str = "local/bookworm-minbase:bench";

/// Which image to scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The debootstrap rootfs as it is (apt lists and the downloaded .debs
    /// included), as `tar -C ROOTFS -c . | docker import` makes it.
    Minbase,
    /// The same with `/var/cache/apt/archives/*.deb` and `/var/lib/apt/lists/*`
    /// removed, as Debian's official images are cleaned.
    MinbaseClean,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Minbase => "minbase",
            Variant::MinbaseClean => "minbase-clean",
        }
    }
}

// ------------------------------------------------------------------ timing

#[derive(Debug, Clone, Default)]
pub struct Samples(pub Vec<Duration>);

impl Samples {
    pub fn push(&mut self, d: Duration) {
        self.0.push(d);
    }
    pub fn sorted(&self) -> Vec<Duration> {
        let mut v = self.0.clone();
        v.sort();
        v
    }
    pub fn median(&self) -> Duration {
        let v = self.sorted();
        match v.len() {
            0 => Duration::ZERO,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2,
        }
    }
    pub fn min(&self) -> Duration {
        self.sorted().first().copied().unwrap_or_default()
    }
    pub fn max(&self) -> Duration {
        self.sorted().last().copied().unwrap_or_default()
    }
}

pub fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 10.0 { format!("{ms:.2} ms") } else { format!("{ms:.1} ms") }
}

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// A `/proc/<pid>/status` field in KiB (`VmHWM`, `VmRSS`).
pub fn proc_status_kib(field: &str) -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// Resets this process's `VmHWM` to its current RSS (Linux ≥ 4.0).
pub fn reset_peak_rss() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

// ------------------------------------------------------------- the image

/// Counts and hashes what passes through, then hands it on.
pub struct HashingWriter<W> {
    pub inner: W,
    pub hasher: Sha256,
    pub bytes: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter { inner, hasher: Sha256::new(), bytes: 0 }
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// The cached image: an OCI layout and facts about how it was made.
#[derive(Debug)]
pub struct CachedImage {
    pub layout: PathBuf,
    pub blob: PathBuf,
    pub dir: PathBuf,
    pub info: Value,
}

pub fn run(command: &mut Command) -> anyhow::Result<String> {
    let output = command.output().with_context(|| format!("cannot run {command:?}"))?;
    if !output.status.success() {
        bail!("{command:?} failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

pub fn is_root() -> bool {
    run(Command::new("id").arg("-u")).is_ok_and(|uid| uid.trim() == "0")
}

pub fn ensure_image(dir: &Path, variant: Variant, rebuild: bool) -> anyhow::Result<CachedImage> {
    let info_path = dir.join("info.json");
    if !rebuild && info_path.exists() {
        let info: Value = serde_json::from_slice(&fs::read(&info_path)?).context("info.json")?;
        return cached_image(dir, info);
    }
    if !is_root() {
        bail!(
            "building the bench image needs root (debootstrap); run as root once, the image is then cached in {}",
            dir.display()
        );
    }
    if run(Command::new("sh").args(["-c", "command -v debootstrap"])).is_err() {
        println!("debootstrap is missing: apt-get install -y debootstrap");
        let installed = run(Command::new("apt-get").args(["install", "-y", "debootstrap"]));
        if installed.is_err() {
            run(Command::new("apt-get").arg("update"))?;
            run(Command::new("apt-get").args(["install", "-y", "debootstrap"]))?;
        }
    }
    let work = dir.with_extension("building");
    if work.exists() {
        fs::remove_dir_all(&work).with_context(|| format!("cannot clear {}", work.display()))?;
    }
    fs::create_dir_all(&work)?;
    let rootfs = work.join("rootfs");
    let debootstrap_version = run(Command::new("dpkg-query").args(["-W", "-f", "${Version}", "debootstrap"]))
        .unwrap_or_else(|_| "unknown".into());
    println!(
        "building the image: debootstrap --variant=minbase {SUITE} ROOTFS {MIRROR} (debootstrap {debootstrap_version})"
    );
    let clock = Instant::now();
    let log = File::create(work.join("debootstrap.log"))?;
    let status = Command::new("debootstrap")
        .arg("--variant=minbase")
        .arg(SUITE)
        .arg(&rootfs)
        .arg(MIRROR)
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()
        .context("cannot run debootstrap")?;
    if !status.success() {
        bail!("debootstrap failed ({status}); see {}", work.join("debootstrap.log").display());
    }
    let debootstrap_time = clock.elapsed();
    println!("  debootstrap took {:.1} s", debootstrap_time.as_secs_f64());

    // What the generator needs from the rootfs: the installed packages, and
    // the suite's source packages (for records about packages not installed).
    let status_file =
        fs::read(rootfs.join("var/lib/dpkg/status")).context("the rootfs has no dpkg status")?;
    fs::write(work.join("dpkg-status"), &status_file)?;
    let sources = suite_sources(&rootfs)?;
    let mut tsv = String::new();
    for (name, version) in &sources {
        tsv.push_str(&format!("{name}\t{version}\n"));
    }
    fs::write(work.join("suite-sources.tsv"), tsv)?;
    let mut made_by_suffix = "";
    if variant == Variant::MinbaseClean {
        for dir in ["var/cache/apt/archives", "var/lib/apt/lists"] {
            for entry in fs::read_dir(rootfs.join(dir))? {
                let path = entry?.path();
                if path.is_file() {
                    fs::remove_file(&path)?;
                }
            }
        }
        made_by_suffix = "; rm ROOTFS/var/cache/apt/archives/*.deb ROOTFS/var/lib/apt/lists/*";
    }

    let layout = work.join("oci");
    let blobs = layout.join("blobs/sha256");
    fs::create_dir_all(&blobs)?;
    let clock = Instant::now();
    let tar_args = ["--numeric-owner", "--sort=name", "-cf", "-", "."];
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(&rootfs)
        .args(tar_args)
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run tar")?;
    let blob_tmp = layout.join("layer.tmp");
    let compressed = HashingWriter::new(BufWriter::new(File::create(&blob_tmp)?));
    let mut uncompressed =
        HashingWriter::new(flate2::write::GzEncoder::new(compressed, flate2::Compression::default()));
    let mut stdout = tar.stdout.take().context("tar has no stdout")?;
    io::copy(&mut stdout, &mut uncompressed).context("cannot gzip the rootfs tar")?;
    let tar_status = tar.wait()?;
    if !tar_status.success() {
        bail!("tar failed ({tar_status})");
    }
    let HashingWriter { inner: gz, hasher: diff_hasher, bytes: tar_bytes } = uncompressed;
    let mut compressed = gz.finish()?;
    compressed.flush()?;
    let HashingWriter { hasher: blob_hasher, bytes: blob_bytes, .. } = compressed;
    let diff_id = format!("sha256:{}", hex::encode(diff_hasher.finalize()));
    let layer_hex = hex::encode(blob_hasher.finalize());
    fs::rename(&blob_tmp, blobs.join(&layer_hex))?;
    let tar_time = clock.elapsed();

    let created = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let made_by = format!(
        "debootstrap --variant=minbase {SUITE} ROOTFS {MIRROR}{made_by_suffix}; tar -C ROOTFS {} | gzip -6 (flate2)",
        tar_args.join(" ")
    );
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": ["bash"],
            "Labels": { "org.opencontainers.image.description": "Debian bookworm minbase for the PatchPilot scanner bench" }
        },
        "rootfs": { "type": "layers", "diff_ids": [diff_id] },
        "history": [{ "created": created, "created_by": made_by }]
    }))?;
    let config_hex = sha256_hex(&config);
    fs::write(blobs.join(&config_hex), &config)?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": { "mediaType": "application/vnd.oci.image.config.v1+json", "digest": format!("sha256:{config_hex}"), "size": config.len() },
        "layers": [{ "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": format!("sha256:{layer_hex}"), "size": blob_bytes }],
    }))?;
    let manifest_hex = sha256_hex(&manifest);
    fs::write(blobs.join(&manifest_hex), &manifest)?;
    fs::write(layout.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": format!("sha256:{manifest_hex}"), "size": manifest.len(),
                "annotations": { "org.opencontainers.image.ref.name": IMAGE_REF }
            }]
        }))?,
    )?;

    let installed = parse_dpkg_status(&String::from_utf8_lossy(&status_file));
    let source_packages: BTreeSet<&str> = installed.iter().map(|p| p.source.as_str()).collect();
    let files =
        run(Command::new("find").arg(&rootfs).args(["-type", "f"])).map(|s| s.lines().count()).unwrap_or(0);
    let executables = run(Command::new("find").arg(&rootfs).args(["-type", "f", "-perm", "/111"]))
        .map(|s| s.lines().count())
        .unwrap_or(0);
    let info = json!({
        "variant": variant.name(),
        "made_by": made_by,
        "debootstrap_version": debootstrap_version.trim(),
        "built_at": created,
        "debootstrap_seconds": debootstrap_time.as_secs_f64(),
        "tar_gzip_seconds": tar_time.as_secs_f64(),
        "packages": installed.len(),
        "source_packages": source_packages.len(),
        "regular_files": files,
        "executable_files": executables,
        "layer_digest": format!("sha256:{layer_hex}"),
        "diff_id": diff_id,
        "layer_compressed_bytes": blob_bytes,
        "layer_uncompressed_bytes": tar_bytes,
        "manifest_digest": format!("sha256:{manifest_hex}"),
    });
    fs::write(work.join("info.json"), serde_json::to_vec_pretty(&info)?)?;
    fs::remove_dir_all(&rootfs).context("cannot remove the rootfs")?;
    if dir.exists() {
        fs::remove_dir_all(dir)?;
    }
    fs::rename(&work, dir)?;
    cached_image(dir, info)
}

pub fn cached_image(dir: &Path, info: Value) -> anyhow::Result<CachedImage> {
    let digest = info["layer_digest"].as_str().context("info.json has no layer_digest")?;
    let hex = digest.trim_start_matches("sha256:");
    let layout = dir.join("oci");
    let blob = layout.join("blobs/sha256").join(hex);
    if !blob.exists() {
        bail!("{} is missing: rerun with --rebuild-image", blob.display());
    }
    Ok(CachedImage { layout, blob, dir: dir.to_owned(), info })
}

/// An installed binary package and its source package.
#[derive(Debug, Clone)]
pub struct InstalledPackage {
    pub name: String,
    pub source: String,
    pub source_version: String,
}

/// deb822 stanzas as (field → value) maps; continuation lines are dropped
/// (no field the bench reads spans lines).
pub fn stanzas(text: &str) -> impl Iterator<Item = BTreeMap<&str, &str>> {
    text.split("\n\n").filter(|s| !s.trim().is_empty()).map(|stanza| {
        stanza
            .lines()
            .filter(|l| !l.starts_with([' ', '\t']))
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k, v.trim()))
            .collect()
    })
}

/// `Source: name (version)` or `Source: name`, defaulting to the binary's.
pub fn source_of<'a>(
    fields: &BTreeMap<&str, &'a str>,
    name: &'a str,
    version: &'a str,
) -> (&'a str, &'a str) {
    match fields.get("Source") {
        Some(source) => match source.split_once(' ') {
            Some((n, v)) => (n, v.trim().trim_start_matches('(').trim_end_matches(')')),
            None => (source, version),
        },
        None => (name, version),
    }
}

pub fn parse_dpkg_status(text: &str) -> Vec<InstalledPackage> {
    let mut out = Vec::new();
    for fields in stanzas(text) {
        let (Some(name), Some(version), Some(status)) =
            (fields.get("Package"), fields.get("Version"), fields.get("Status"))
        else {
            continue;
        };
        if !status.ends_with(" installed") {
            continue;
        }
        let (source, source_version) = source_of(&fields, name, version);
        out.push(InstalledPackage {
            name: (*name).to_owned(),
            source: source.to_owned(),
            source_version: source_version.to_owned(),
        });
    }
    out
}

/// Source package → version, from the suite's `Packages` index that
/// debootstrap left in the rootfs.
pub fn suite_sources(rootfs: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let lists = rootfs.join("var/lib/apt/lists");
    let mut sources = BTreeMap::new();
    for entry in fs::read_dir(&lists).with_context(|| format!("{}", lists.display()))? {
        let path = entry?.path();
        if !path.to_string_lossy().ends_with("_Packages") {
            continue;
        }
        let text = fs::read_to_string(&path)?;
        for fields in stanzas(&text) {
            let (Some(name), Some(version)) = (fields.get("Package"), fields.get("Version")) else {
                continue;
            };
            let (source, source_version) = source_of(&fields, name, version);
            sources.entry(source.to_owned()).or_insert_with(|| source_version.to_owned());
        }
    }
    Ok(sources)
}

/// `--cache`, then `$PATCHPILOT_BENCH_CACHE`, then `<target>/bench-cache`,
/// found from this binary's path (`<target>/release/deps/<bench>-…`).
pub fn cache_dir(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir.to_owned());
    }
    if let Some(dir) = std::env::var_os("PATCHPILOT_BENCH_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    let exe = std::env::current_exe().context("cannot find this binary")?;
    let target = exe
        .ancestors()
        .find(|p| p.join("CACHEDIR.TAG").exists())
        .map(Path::to_path_buf)
        .or_else(|| exe.parent().and_then(Path::parent).and_then(Path::parent).map(Path::to_path_buf))
        .context("cannot find the target directory from the binary's path")?;
    Ok(target.join("bench-cache"))
}
