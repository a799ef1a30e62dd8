//! The merged view of an image's files: what the catalogers may read.
//!
//! Layers are applied in order, as a container runtime would: a later entry
//! replaces an earlier one, a whiteout (`.wh.<name>`) removes `<name>` and
//! everything under it from lower layers, and an opaque marker
//! (`.wh..wh..opq`) hides everything a lower layer put in its directory.
//! Only files some cataloger wants are kept: with their bytes, or, for
//! files read in ranges as they were found (executables), with what the
//! catalogers found in them ([`Keep`]). Symlinks are always kept, because
//! resolving a wanted path may need them.
//!
//! Paths are image-relative, normalised, without a leading `/`. They never
//! leave the image root: [`normalize`] refuses `..` components, and
//! [`ImageFs::resolve`] interprets absolute symlink targets from the image
//! root and clamps `..` at the root. Nothing here touches the host
//! filesystem.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::catalog;
use crate::package::Package;

/// Most symlinks followed while resolving one path (as Linux's `MAXSYMLINKS`).
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// A `..` component: the entry would escape its directory.
    #[error("`{0}` contains a `..` component")]
    Traversal(String),
    /// An empty or NUL-containing name.
    #[error("`{0}` is not a usable path")]
    Invalid(String),
}

/// Normalises a tar entry name: strips `./` and leading `/`, collapses
/// repeated and trailing slashes, refuses `..` and NUL bytes. Returns the
/// empty string for the root itself.
pub fn normalize(name: &str) -> Result<String, PathError> {
    if name.contains('\0') {
        return Err(PathError::Invalid(name.escape_debug().to_string()));
    }
    let mut parts = Vec::new();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(PathError::Traversal(name.to_owned())),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// What the view keeps of a regular file, decided by a [`Selector`] as the
/// file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Nothing: no cataloger wants it. It still hides whatever lower layers
    /// had at its path.
    Nothing,
    /// Its bytes, for catalogers that parse whole files (package databases,
    /// manifests, archives).
    Bytes,
    /// Only what [`Selector::catalog`] finds in it, read then, through the
    /// file: for executables, of which catalogers read a few sections while
    /// an image holds hundreds of megabytes of them.
    Findings,
}

/// Decides what is kept of each regular file while an image is read, and
/// catalogs the files kept as [`Keep::Findings`].
pub trait Selector {
    /// What to keep of the file at `path` (image-relative); `executable` is
    /// true when any execute bit is set. Asked for every regular file.
    fn keep(&self, path: &str, executable: bool) -> Keep;

    /// Catalogs a file [`Selector::keep`] answered [`Keep::Findings`] for,
    /// reading it through `file` (positioned anywhere).
    fn catalog(&self, path: &str, executable: bool, file: &std::fs::File) -> Findings;
}

/// A predicate keeps the bytes of the files it accepts, and nothing of the
/// others (it catalogs nothing itself).
impl<F: Fn(&str, bool) -> bool> Selector for F {
    fn keep(&self, path: &str, executable: bool) -> Keep {
        if self(path, executable) { Keep::Bytes } else { Keep::Nothing }
    }

    fn catalog(&self, _path: &str, _executable: bool, _file: &std::fs::File) -> Findings {
        Findings::default()
    }
}

/// What the catalogers found in a file kept as [`Keep::Findings`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// The packages, with the file's path.
    pub packages: Vec<Package>,
    /// What the catalogers could not read.
    pub errors: Vec<catalog::Error>,
}

impl Findings {
    /// The same findings for the same bytes at another path (a hard link).
    fn at(&self, path: &str) -> Findings {
        let packages = self.packages.iter().map(|p| Package { path: path.to_owned(), ..p.clone() }).collect();
        let errors =
            self.errors.iter().map(|e| catalog::Error { path: path.to_owned(), ..e.clone() }).collect();
        Findings { packages, errors }
    }
}

/// A node in the merged view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A regular file whose bytes were kept.
    File {
        /// Its content.
        data: Arc<[u8]>,
        /// Unix mode bits.
        mode: u32,
        /// Index of the layer it came from.
        layer: usize,
    },
    /// A regular file cataloged as it was read; its bytes were not kept.
    Cataloged {
        /// What the catalogers found in it.
        findings: Arc<Findings>,
        /// Unix mode bits.
        mode: u32,
        /// Index of the layer it came from.
        layer: usize,
    },
    /// A symbolic link.
    Symlink {
        /// The link target as written in the layer.
        target: String,
        /// Index of the layer it came from.
        layer: usize,
    },
}

impl Node {
    fn layer(&self) -> usize {
        match self {
            Node::File { layer, .. } | Node::Cataloged { layer, .. } | Node::Symlink { layer, .. } => *layer,
        }
    }
}

/// A file as the catalogers see it.
#[derive(Debug, Clone)]
pub struct FileRef<'a> {
    /// The image-relative path of the file itself (symlinks resolved).
    pub path: &'a str,
    /// Its bytes.
    pub data: &'a Arc<[u8]>,
    /// Index of the layer it came from.
    pub layer: usize,
    /// Unix mode bits.
    pub mode: u32,
}

/// A file kept as [`Keep::Findings`], as the pipeline sees it.
#[derive(Debug, Clone)]
pub struct CatalogedRef<'a> {
    /// The image-relative path of the file.
    pub path: &'a str,
    /// What the catalogers found in it.
    pub findings: &'a Findings,
    /// Index of the layer it came from.
    pub layer: usize,
    /// Unix mode bits.
    pub mode: u32,
}

/// The merged view.
#[derive(Debug, Default, Clone)]
pub struct ImageFs {
    nodes: BTreeMap<String, Node>,
}

impl ImageFs {
    /// An empty view.
    pub fn new() -> ImageFs {
        ImageFs::default()
    }

    /// Applies a whiteout found in `layer` at `dir/.wh.<name>`: removes
    /// `dir/name` and everything under it that lower layers added.
    pub fn whiteout(&mut self, path: &str, layer: usize) {
        let prefix = format!("{path}/");
        self.nodes.retain(|p, n| n.layer() >= layer || (p != path && !p.starts_with(&prefix)));
    }

    /// Applies an opaque-directory marker found in `layer`: hides what lower
    /// layers put under `dir`.
    pub fn opaque(&mut self, dir: &str, layer: usize) {
        let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
        self.nodes.retain(|p, n| n.layer() >= layer || !p.starts_with(&prefix));
    }

    /// Records a kept file, replacing whatever was at `path`.
    pub fn insert_file(&mut self, path: String, data: Arc<[u8]>, mode: u32, layer: usize) {
        self.nodes.insert(path, Node::File { data, mode, layer });
    }

    /// Records a file cataloged as it was read, replacing whatever was at
    /// `path`.
    pub fn insert_cataloged(&mut self, path: String, findings: Arc<Findings>, mode: u32, layer: usize) {
        self.nodes.insert(path, Node::Cataloged { findings, mode, layer });
    }

    /// Records a hard link at `path` to the kept file `target` of the same
    /// `layer` (a link into a lower layer is refused, as container runtimes
    /// refuse it). Returns whether `target` was such a file.
    pub fn link(&mut self, path: String, target: &str, layer: usize) -> bool {
        let Some(resolved) = self.resolve(target) else {
            return false;
        };
        let node = match self.nodes.get(&resolved) {
            Some(Node::File { data, mode, layer: from }) if *from == layer => {
                Node::File { data: data.clone(), mode: *mode, layer }
            }
            Some(Node::Cataloged { findings, mode, layer: from }) if *from == layer => {
                Node::Cataloged { findings: Arc::new(findings.at(&path)), mode: *mode, layer }
            }
            _ => return false,
        };
        self.nodes.insert(path, node);
        true
    }

    /// Records a symlink, replacing whatever was at `path`.
    pub fn insert_symlink(&mut self, path: String, target: String, layer: usize) {
        self.nodes.insert(path, Node::Symlink { target, layer });
    }

    /// A later layer put something that is not kept (a directory, a file no
    /// cataloger wants) at `path`: it hides what lower layers had there.
    pub fn shadow(&mut self, path: &str, layer: usize) {
        if self.nodes.get(path).is_some_and(|n| n.layer() < layer) {
            self.nodes.remove(path);
        }
    }

    /// Follows symlinks in every component of `path`, within the image
    /// root. Returns the path of the node it ends at, or `None` when a
    /// component is missing or the links loop.
    pub fn resolve(&self, path: &str) -> Option<String> {
        let mut pending: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect();
        pending.reverse();
        let mut resolved: Vec<String> = Vec::new();
        let mut hops = 0;
        while let Some(part) = pending.pop() {
            match part.as_str() {
                "." => continue,
                ".." => {
                    // Clamped at the root, as the kernel does for `/..`.
                    resolved.pop();
                    continue;
                }
                _ => {}
            }
            resolved.push(part);
            let here = resolved.join("/");
            if let Some(Node::Symlink { target, .. }) = self.nodes.get(&here) {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return None;
                }
                resolved.pop();
                if target.starts_with('/') {
                    // Absolute targets are relative to the image root, never
                    // to the host's.
                    resolved.clear();
                }
                for t in target.split('/').filter(|s| !s.is_empty()).rev() {
                    pending.push(t.to_owned());
                }
            }
        }
        let path = resolved.join("/");
        self.nodes.contains_key(&path).then_some(path)
    }

    /// Reads a kept file, following symlinks.
    pub fn read(&self, path: &str) -> Option<FileRef<'_>> {
        let resolved = self.resolve(path)?;
        let (key, node) = self.nodes.get_key_value(&resolved)?;
        match node {
            Node::File { data, mode, layer } => Some(FileRef { path: key, data, layer: *layer, mode: *mode }),
            Node::Cataloged { .. } | Node::Symlink { .. } => None,
        }
    }

    /// Every file kept with its bytes, in path order.
    pub fn files(&self) -> impl Iterator<Item = FileRef<'_>> {
        self.nodes.iter().filter_map(|(path, node)| match node {
            Node::File { data, mode, layer } => Some(FileRef { path, data, layer: *layer, mode: *mode }),
            Node::Cataloged { .. } | Node::Symlink { .. } => None,
        })
    }

    /// Every file cataloged as it was read, in path order.
    pub fn cataloged(&self) -> impl Iterator<Item = CatalogedRef<'_>> {
        self.nodes.iter().filter_map(|(path, node)| match node {
            Node::Cataloged { findings, mode, layer } => {
                Some(CatalogedRef { path, findings, layer: *layer, mode: *mode })
            }
            Node::File { .. } | Node::Symlink { .. } => None,
        })
    }

    /// Number of kept files and symlinks.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether nothing was kept.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(s: &str) -> Arc<[u8]> {
        Arc::from(s.as_bytes())
    }

    #[test]
    fn normalisation() {
        assert_eq!(normalize("./etc//os-release").as_deref(), Ok("etc/os-release"));
        assert_eq!(normalize("/usr/lib/").as_deref(), Ok("usr/lib"));
        assert_eq!(normalize("./").as_deref(), Ok(""));
        assert!(matches!(normalize("etc/../../host"), Err(PathError::Traversal(_))));
        assert!(matches!(normalize("a\0b"), Err(PathError::Invalid(_))));
    }

    #[test]
    fn whiteouts_and_opaque_directories_hide_lower_layers_only() {
        let mut fs = ImageFs::new();
        fs.insert_file("var/lib/dpkg/status".into(), bytes("old"), 0o644, 0);
        fs.insert_file("var/lib/dpkg/status.d/a".into(), bytes("a"), 0o644, 0);
        fs.insert_file("opt/app/x".into(), bytes("x"), 0o644, 0);
        fs.insert_file("opt/app/y".into(), bytes("y"), 0o644, 1);
        // Layer 1 deletes the whole status.d directory…
        fs.whiteout("var/lib/dpkg/status.d", 1);
        assert!(fs.read("var/lib/dpkg/status.d/a").is_none());
        assert!(fs.read("var/lib/dpkg/status").is_some(), "a sibling with a common prefix survives");
        // …and layer 2 makes opt/app opaque: layer 0's x goes, nothing of
        // layer 2 or later is affected (y is layer 1, so it goes too).
        fs.opaque("opt/app", 2);
        assert!(fs.read("opt/app/x").is_none());
        assert!(fs.read("opt/app/y").is_none());
        fs.insert_file("opt/app/z".into(), bytes("z"), 0o644, 2);
        fs.opaque("opt/app", 2);
        assert!(fs.read("opt/app/z").is_some(), "an opaque marker does not hide its own layer");
    }

    #[test]
    fn symlinks_resolve_inside_the_image_only() {
        let mut fs = ImageFs::new();
        fs.insert_file("usr/lib/os-release".into(), bytes("ID=debian"), 0o644, 0);
        fs.insert_symlink("etc/os-release".into(), "../usr/lib/os-release".into(), 0);
        fs.insert_symlink("lib".into(), "usr/lib".into(), 0);
        fs.insert_symlink("etc/shadow-link".into(), "/etc/shadow".into(), 0);
        fs.insert_symlink("escape".into(), "../../../../usr/lib/os-release".into(), 0);
        fs.insert_symlink("loop-a".into(), "loop-b".into(), 0);
        fs.insert_symlink("loop-b".into(), "loop-a".into(), 0);
        assert_eq!(fs.read("etc/os-release").map(|f| f.path), Some("usr/lib/os-release"));
        assert_eq!(fs.read("lib/os-release").map(|f| f.path), Some("usr/lib/os-release"));
        // An absolute target names the image's /etc/shadow, which it lacks:
        // the host's is never consulted.
        assert!(fs.read("etc/shadow-link").is_none());
        // `..` above the root stays at the root.
        assert_eq!(fs.read("escape").map(|f| f.path), Some("usr/lib/os-release"));
        assert!(fs.read("loop-a").is_none());
    }

    #[test]
    fn a_later_directory_or_unkept_file_shadows_a_kept_one() {
        let mut fs = ImageFs::new();
        fs.insert_file("etc/os-release".into(), bytes("ID=alpine"), 0o644, 0);
        fs.shadow("etc/os-release", 1);
        assert!(fs.read("etc/os-release").is_none());
    }

    #[test]
    fn cataloged_files_follow_layers_and_hard_links_get_their_own_path() {
        let package = |path: &str| Package {
            name: "stdlib".into(),
            version: "v1.19.8".into(),
            kind: crate::package::PackageKind::GoModule,
            source_name: None,
            source_version: None,
            arch: None,
            path: path.into(),
            layer: None,
            ecosystem: "Go".into(),
        };
        let findings = Findings {
            packages: vec![package("usr/bin/app")],
            errors: vec![catalog::Error::new("cargo-auditable", "usr/bin/app", "bad")],
        };
        let mut fs = ImageFs::new();
        fs.insert_cataloged("usr/bin/app".into(), Arc::new(findings), 0o755, 0);
        assert!(fs.read("usr/bin/app").is_none(), "no bytes to read");
        assert!(fs.link("usr/bin/alias".into(), "usr/bin/app", 0));
        assert!(!fs.link("usr/bin/later".into(), "usr/bin/app", 1), "a link into a lower layer");
        assert!(!fs.link("usr/bin/none".into(), "usr/bin/missing", 0));
        let found: Vec<(&str, &str, &str)> = fs
            .cataloged()
            .map(|f| (f.path, f.findings.packages[0].path.as_str(), f.findings.errors[0].path.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("usr/bin/alias", "usr/bin/alias", "usr/bin/alias"),
                ("usr/bin/app", "usr/bin/app", "usr/bin/app")
            ]
        );
        fs.whiteout("usr/bin/app", 1);
        fs.shadow("usr/bin/alias", 1);
        assert_eq!(fs.cataloged().count(), 0, "whiteouts and later entries hide cataloged files too");
    }
}
