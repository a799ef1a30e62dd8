//! Where images come from: a registry, a `docker save` archive, an OCI
//! layout directory, or a root filesystem directory.
//!
//! Every source resolves to an [`Image`]: its identity (reference, digest,
//! platform, labels) and its layers as byte ranges of local files. Registry
//! blobs are downloaded into a scratch folder first (the only place the
//! scanner writes under a name, besides the unnamed temporary file layers'
//! executables are cataloged from: see [`super::layer`]), named by digest,
//! so a warm scan reuses them; their digests are checked while the layers
//! are read.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::fs::{ImageFs, Keep, Selector, normalize};
use super::layer::{Budget, LayerError, LayerInput, LayerReport, Limits, apply_layer};
use crate::progress::{Progress, Silent, Step};
use patchpilot_registry::oci::{self, ImageConfig, ManifestOrIndex, PlatformChoice};
use patchpilot_registry::{Registry, repository_of};

/// Why an image could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file of the source could not be read.
    #[error("{path}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The source is not a valid image of its kind.
    #[error("{source_path}: {reason}")]
    Invalid {
        /// The archive, layout or reference.
        source_path: String,
        /// What is wrong.
        reason: String,
    },
    /// A layer could not be read safely.
    #[error(transparent)]
    Layer(#[from] LayerError),
    /// The registry failed.
    #[error(transparent)]
    Registry(#[from] patchpilot_registry::Error),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.display().to_string(), source }
}

/// Where a layer's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobLocation {
    /// The file holding them.
    pub path: PathBuf,
    /// Offset of the first byte.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// One layer of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// Its digest (or, for legacy Docker archives, its diff id).
    pub digest: String,
    /// Where its bytes are.
    pub location: BlobLocation,
}

/// What an [`Image`]'s digest is the digest of, which decides whether a
/// report may present it as a hash of the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestKind {
    /// The image manifest's bytes (registries and OCI layouts).
    Manifest,
    /// The image config's bytes, Docker's image ID (`docker save` archives,
    /// whose manifest.json is not an OCI manifest).
    Config,
    /// PatchPilot's own SHA-256 over the paths, sizes and contents of the
    /// files a root filesystem scan kept: an identity for caching, not the
    /// hash of any artifact anyone else can compute.
    RootfsContent,
}

/// An image ready to be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Reference as given or recorded (`RepoTags[0]` for archives).
    pub reference: String,
    /// Manifest digest; the config digest for Docker archives; a content
    /// digest for root filesystems (see [`DigestKind`]).
    pub digest: String,
    /// What `digest` hashes.
    pub digest_kind: DigestKind,
    /// Platform from the image config.
    pub platform: Option<PlatformChoice>,
    /// Config labels.
    pub labels: BTreeMap<String, String>,
    /// Config creation time.
    pub created: Option<String>,
    /// Layers, bottom first.
    pub layers: Vec<Layer>,
}

fn image_from_config(
    reference: String,
    digest: String,
    digest_kind: DigestKind,
    config: &ImageConfig,
    layers: Vec<Layer>,
) -> Image {
    Image {
        reference,
        digest,
        digest_kind,
        platform: (!config.architecture.is_empty()).then(|| PlatformChoice {
            os: config.os.clone(),
            architecture: config.architecture.clone(),
            variant: config.variant.clone(),
        }),
        labels: config.config.as_ref().and_then(|c| c.labels.clone()).unwrap_or_default(),
        created: config.created.clone(),
        layers,
    }
}

fn blob_path(root: &Path, digest: &str) -> Result<PathBuf, String> {
    let (algorithm, hex) = digest.split_once(':').ok_or_else(|| format!("`{digest}` is not a digest"))?;
    if !matches!(algorithm, "sha256" | "sha512")
        || hex.is_empty()
        || !hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(format!("`{digest}` is not a digest"));
    }
    Ok(root.join("blobs").join(algorithm).join(hex))
}

/// Opens an OCI image layout directory (`oci-layout`, `index.json`,
/// `blobs/`). `reference` names the image (an `org.opencontainers.image.ref.name`
/// annotation, or the first manifest when `None`); indexes are resolved to
/// `platform`.
pub fn open_oci_layout(
    dir: &Path,
    reference: Option<&str>,
    platform: &PlatformChoice,
) -> Result<Image, Error> {
    let invalid = |reason: String| Error::Invalid { source_path: dir.display().to_string(), reason };
    let index_path = dir.join("index.json");
    let index: ManifestOrIndex =
        serde_json::from_slice(&std::fs::read(&index_path).map_err(io(&index_path))?)
            .map_err(|e| invalid(format!("index.json: {e}")))?;
    let entries = index.manifests.ok_or_else(|| invalid("index.json has no manifests".into()))?;
    let entry = match reference {
        Some(name) => entries
            .iter()
            .find(|d| d.annotations.get("org.opencontainers.image.ref.name").is_some_and(|n| n == name))
            .ok_or_else(|| invalid(format!("no manifest named `{name}`")))?,
        None => entries.first().ok_or_else(|| invalid("index.json lists no manifests".into()))?,
    };
    let name = entry
        .annotations
        .get("org.opencontainers.image.ref.name")
        .cloned()
        .unwrap_or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
    let read_json = |digest: &str| -> Result<ManifestOrIndex, Error> {
        let path = blob_path(dir, digest).map_err(invalid)?;
        serde_json::from_slice(&std::fs::read(&path).map_err(io(&path))?)
            .map_err(|e| invalid(format!("{digest}: {e}")))
    };
    let mut digest = entry.digest.clone();
    let mut manifest = read_json(&digest)?;
    if let Some(nested) = &manifest.manifests {
        digest = oci::select(nested, platform).map_err(invalid)?.digest.clone();
        manifest = read_json(&digest)?;
    }
    let config_desc = manifest.config.ok_or_else(|| invalid(format!("{digest}: manifest has no config")))?;
    let config_path = blob_path(dir, &config_desc.digest).map_err(invalid)?;
    let config: ImageConfig = serde_json::from_slice(&std::fs::read(&config_path).map_err(io(&config_path))?)
        .map_err(|e| invalid(format!("{}: {e}", config_desc.digest)))?;
    let mut layers = Vec::new();
    for d in manifest.layers.unwrap_or_default() {
        let path = blob_path(dir, &d.digest).map_err(invalid)?;
        let len = std::fs::metadata(&path).map_err(io(&path))?.len();
        layers.push(Layer { digest: d.digest, location: BlobLocation { path, offset: 0, len } });
    }
    Ok(image_from_config(name, digest, DigestKind::Manifest, &config, layers))
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ArchiveManifest {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

/// Opens a `docker save` archive (legacy layout with `manifest.json`, or
/// Docker 25+ with OCI blobs inside). Layers are read in place from the
/// archive; nothing is extracted.
pub fn open_docker_archive(path: &Path) -> Result<Image, Error> {
    use sha2::Digest as _;
    let invalid = |reason: String| Error::Invalid { source_path: path.display().to_string(), reason };
    // Index the archive once: name → (offset, size) of regular files.
    let file = File::open(path).map_err(io(path))?;
    let mut archive = tar::Archive::new(file);
    let mut members: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for entry in archive.entries().map_err(io(path))? {
        let entry = entry.map_err(io(path))?;
        if !matches!(entry.header().entry_type(), tar::EntryType::Regular | tar::EntryType::Continuous) {
            continue;
        }
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let name = normalize(&name).map_err(|e| invalid(format!("refused member: {e}")))?;
        members.insert(name, (entry.raw_file_position(), entry.size()));
    }
    let read_member = |name: &str, limit: u64| -> Result<Vec<u8>, Error> {
        let name = normalize(name).map_err(|e| invalid(format!("refused member name: {e}")))?;
        let &(offset, size) = members.get(&name).ok_or_else(|| invalid(format!("no member `{name}`")))?;
        if size > limit {
            return Err(invalid(format!("member `{name}` is {size} bytes, over the {limit}-byte limit")));
        }
        let mut f = File::open(path).map_err(io(path))?;
        f.seek(SeekFrom::Start(offset)).map_err(io(path))?;
        let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        f.take(size).read_to_end(&mut buf).map_err(io(path))?;
        Ok(buf)
    };
    const DOCUMENT_LIMIT: u64 = 16 << 20;
    let manifests: Vec<ArchiveManifest> =
        serde_json::from_slice(&read_member("manifest.json", DOCUMENT_LIMIT)?)
            .map_err(|e| invalid(format!("manifest.json: {e}")))?;
    let manifest = manifests.first().ok_or_else(|| invalid("manifest.json lists no image".into()))?;
    let config_bytes = read_member(&manifest.config, DOCUMENT_LIMIT)?;
    let config: ImageConfig =
        serde_json::from_slice(&config_bytes).map_err(|e| invalid(format!("{}: {e}", manifest.config)))?;
    let config_digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&config_bytes)));
    let diff_ids = config.rootfs.as_ref().map(|r| r.diff_ids.clone()).unwrap_or_default();
    let mut layers = Vec::new();
    for (i, name) in manifest.layers.iter().enumerate() {
        let key = normalize(name).map_err(|e| invalid(format!("refused layer name: {e}")))?;
        let &(offset, len) =
            members.get(&key).ok_or_else(|| invalid(format!("layer `{name}` is not in the archive")))?;
        // Docker 25+ names layers blobs/sha256/<hex>: that is their digest.
        // Legacy archives store uncompressed tars, whose digest is the diff id.
        let digest = match key.strip_prefix("blobs/sha256/") {
            Some(hex) => format!("sha256:{hex}"),
            None => diff_ids.get(i).cloned().ok_or_else(|| invalid(format!("no diff id for layer {i}")))?,
        };
        layers.push(Layer { digest, location: BlobLocation { path: path.to_owned(), offset, len } });
    }
    let reference =
        manifest.repo_tags.as_ref().and_then(|t| t.first().cloned()).unwrap_or_else(|| {
            path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
        });
    Ok(image_from_config(reference, config_digest, DigestKind::Config, &config, layers))
}

/// Resolves `reference` in a registry and downloads the layers it lacks into
/// `cache` (`cache/blobs/sha256/<hex>`).
pub async fn fetch_registry(
    registry: &Registry,
    reference: &str,
    platform: &PlatformChoice,
    cache: &Path,
) -> Result<Image, Error> {
    fetch_registry_with_progress(registry, reference, platform, cache, &Silent).await
}

/// [`fetch_registry`], reporting each layer pulled (or found in the cache).
pub async fn fetch_registry_with_progress(
    registry: &Registry,
    reference: &str,
    platform: &PlatformChoice,
    cache: &Path,
    progress: &dyn Progress,
) -> Result<Image, Error> {
    let (config, resolved) = registry.config(reference, platform).await?;
    let repository = repository_of(reference);
    let mut layers = Vec::new();
    let step = Step::begin(progress, "pulling layers", Some(resolved.layers.len() as u64));
    for d in &resolved.layers {
        let path = blob_path(cache, &d.digest)
            .map_err(|reason| Error::Invalid { source_path: reference.to_owned(), reason })?;
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(io(parent))?;
        }
        let cached = tokio::fs::metadata(&path).await.ok().filter(|m| d.size == 0 || m.len() == d.size);
        if cached.is_none() {
            registry.blob_to_file(&format!("{repository}@{}", d.digest), &d.digest, &path).await?;
        }
        let len = tokio::fs::metadata(&path).await.map_err(io(&path))?.len();
        layers.push(Layer { digest: d.digest.clone(), location: BlobLocation { path, offset: 0, len } });
        step.tick();
    }
    drop(step);
    Ok(image_from_config(reference.to_owned(), resolved.digest, DigestKind::Manifest, &config, layers))
}

/// Reads every layer of `image` into one merged view.
pub fn read_layers(
    image: &Image,
    selector: &dyn Selector,
    limits: &Limits,
) -> Result<(ImageFs, Vec<LayerReport>), Error> {
    read_layers_with_progress(image, selector, limits, &Silent)
}

/// [`read_layers`], reporting each layer read.
pub fn read_layers_with_progress(
    image: &Image,
    selector: &dyn Selector,
    limits: &Limits,
    progress: &dyn Progress,
) -> Result<(ImageFs, Vec<LayerReport>), Error> {
    let step = Step::begin(progress, "reading layers", Some(image.layers.len() as u64));
    let mut fs = ImageFs::new();
    let mut budget = Budget::default();
    let mut reports = Vec::with_capacity(image.layers.len());
    for (index, layer) in image.layers.iter().enumerate() {
        let loc = &layer.location;
        if loc.len > limits.max_layer_compressed {
            return Err(LayerError::Limit {
                layer: layer.digest.clone(),
                what: format!(
                    "{} bytes is over the compressed layer limit of {}",
                    loc.len, limits.max_layer_compressed
                ),
            }
            .into());
        }
        let mut file = File::open(&loc.path).map_err(io(&loc.path))?;
        file.seek(SeekFrom::Start(loc.offset)).map_err(io(&loc.path))?;
        let input = LayerInput { index, name: &layer.digest, verify_digest: true };
        let report = apply_layer(&mut fs, file.take(loc.len), &input, selector, limits, &mut budget)?;
        reports.push(report);
        step.tick();
    }
    Ok((fs, reports))
}

/// Reads a root filesystem directory as a one-layer image. Symlinks are
/// recorded, never followed on the host; wanted files are read within the
/// same limits as layers, and files kept as [`Keep::Findings`] are cataloged
/// in place, through their own handle, as the walk finds them. The digest is
/// a SHA-256 over the paths, sizes and contents of the files kept (for
/// files cataloged in place, the SHA-256 of their contents, computed
/// streaming), so an unchanged tree keeps its identity.
pub fn read_rootfs(
    root: &Path,
    selector: &dyn Selector,
    limits: &Limits,
) -> Result<(Image, ImageFs, LayerReport), Error> {
    use sha2::Digest as _;
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::symlink_metadata(root).map_err(io(root))?;
    if !meta.is_dir() {
        return Err(Error::Invalid {
            source_path: root.display().to_string(),
            reason: "not a directory".into(),
        });
    }
    let mut fs = ImageFs::new();
    let mut report = LayerReport::default();
    let mut kept = 0u64;
    // Size and content digest of each file cataloged in place, for the
    // image digest.
    let mut in_place: BTreeMap<String, (u64, [u8; 32])> = BTreeMap::new();
    let mut pending = vec![(root.to_owned(), String::new())];
    while let Some((dir, rel)) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(io(&dir))?;
        for entry in entries {
            let entry = entry.map_err(io(&dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            let host = entry.path();
            let meta = std::fs::symlink_metadata(&host).map_err(io(&host))?;
            report.entries += 1;
            let ft = meta.file_type();
            if ft.is_symlink() {
                let target = std::fs::read_link(&host).map_err(io(&host))?;
                fs.insert_symlink(path, target.to_string_lossy().into_owned(), 0);
            } else if ft.is_dir() {
                pending.push((host, path));
            } else if ft.is_file() {
                let mode = meta.permissions().mode();
                let keep = selector.keep(&path, mode & 0o111 != 0);
                if keep == Keep::Nothing {
                    continue;
                }
                if meta.len() > limits.max_file {
                    report.warnings.push(format!(
                        "{path}: {} bytes is over the per-file limit; not cataloged",
                        meta.len()
                    ));
                    continue;
                }
                if keep == Keep::Findings {
                    let mut file = File::open(&host).map_err(io(&host))?;
                    let mut hasher = sha2::Sha256::new();
                    let len = std::io::copy(&mut file, &mut hasher).map_err(io(&host))?;
                    let findings = selector.catalog(&path, mode & 0o111 != 0, &file);
                    report.kept_files += 1;
                    report.uncompressed_bytes += len;
                    in_place.insert(path.clone(), (len, hasher.finalize().into()));
                    fs.insert_cataloged(path, Arc::new(findings), mode, 0);
                    continue;
                }
                if kept + meta.len() > limits.max_kept {
                    return Err(LayerError::Limit {
                        layer: root.display().to_string(),
                        what: format!(
                            "files kept for cataloging exceed the limit of {} bytes",
                            limits.max_kept
                        ),
                    }
                    .into());
                }
                let data = std::fs::read(&host).map_err(io(&host))?;
                kept += data.len() as u64;
                report.kept_files += 1;
                report.uncompressed_bytes += data.len() as u64;
                fs.insert_file(path, Arc::from(data), mode, 0);
            } else {
                report.warnings.push(format!("{path}: device node, FIFO or socket skipped"));
            }
        }
    }
    let mut contents: BTreeMap<&str, (u64, &[u8])> =
        in_place.iter().map(|(path, (len, digest))| (path.as_str(), (*len, &digest[..]))).collect();
    contents.extend(fs.files().map(|f| (f.path, (f.data.len() as u64, &f.data[..]))));
    let mut hasher = sha2::Sha256::new();
    for (path, (len, content)) in contents {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update(len.to_be_bytes());
        hasher.update(content);
    }
    let digest = format!("sha256:{}", hex::encode(hasher.finalize()));
    let image = Image {
        reference: root.display().to_string(),
        digest,
        digest_kind: DigestKind::RootfsContent,
        platform: None,
        labels: BTreeMap::new(),
        created: None,
        layers: Vec::new(),
    };
    Ok((image, fs, report))
}
