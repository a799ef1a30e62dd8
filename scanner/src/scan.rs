//! The scan pipeline: an image's layers → the merged view → packages.
//!
//! Each layer is streamed once; the view keeps only files a cataloger (or
//! OS detection) wants. Executables wanted only by catalogers that read
//! ranges are cataloged as they are found and only the packages are kept
//! (see [`crate::catalog`]); the other catalogers then run over the
//! surviving files. A cataloger that cannot read a file does not fail the
//! scan: the file is reported as a warning and the rest of the image is
//! still cataloged.

use std::collections::BTreeSet;
use std::path::Path;

use patchpilot_model::Assessment;

use crate::catalog::{self, Cataloger, os_release};
use crate::db::AdvisoryDb;
use crate::image::{self, Findings, Image, ImageFs, Keep, LayerReport, Limits, Selector};
use crate::package::Package;

/// One scan, start to finish, on the calling (blocking) thread: catalogs
/// `image`, matches against the DB in `db_dir`, builds the assessment.
pub fn scan_image(
    scanner: &Scanner,
    db: &AdvisoryDb,
    image: &Image,
) -> Result<(Assessment, Catalog, crate::matching::Matched), String> {
    let catalog = scanner.catalog_image(image).map_err(|e| patchpilot_model::error_chain(&e))?;
    let matched =
        crate::matching::match_catalog(&catalog, db).map_err(|e| patchpilot_model::error_chain(&e))?;
    let assessment = crate::report::assessment(image, &catalog, &matched)?;
    Ok((assessment, catalog, matched))
}

/// What cataloging an image found.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// The distribution, when one was recognised.
    pub os: Option<os_release::OsRelease>,
    /// Installed packages, deduplicated, in a stable order.
    pub packages: Vec<Package>,
    /// Files that could not be cataloged and other things skipped.
    pub warnings: Vec<String>,
    /// Per-layer reading statistics, bottom first.
    pub layers: Vec<LayerReport>,
}

/// Catalogs images.
#[derive(Debug)]
pub struct Scanner {
    catalogers: Vec<Box<dyn Cataloger>>,
    limits: Limits,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner::new(Limits::default())
    }
}

impl Scanner {
    /// A scanner with every cataloger and the given limits.
    pub fn new(limits: Limits) -> Scanner {
        Scanner { catalogers: catalog::all(), limits }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether a file must be kept while streaming layers.
    pub fn wants(&self, path: &str, executable: bool) -> bool {
        os_release::FILES.contains(&path) || self.catalogers.iter().any(|c| c.wants(path, executable))
    }

    /// Reads `image`'s layers and catalogs the result.
    pub fn catalog_image(&self, image: &Image) -> Result<Catalog, image::source::Error> {
        self.catalog_image_with_progress(image, &crate::progress::Silent)
    }

    /// [`Scanner::catalog_image`], reporting each layer read.
    pub fn catalog_image_with_progress(
        &self,
        image: &Image,
        progress: &dyn crate::progress::Progress,
    ) -> Result<Catalog, image::source::Error> {
        let (fs, layers) = image::source::read_layers_with_progress(image, self, &self.limits, progress)?;
        let digests: Vec<&str> = image.layers.iter().map(|l| l.digest.as_str()).collect();
        let mut catalog = self.catalog_fs(&fs, &digests);
        catalog.warnings.extend(layers.iter().flat_map(|l| l.warnings.iter().cloned()));
        catalog.layers = layers;
        Ok(catalog)
    }

    /// Reads a root filesystem directory and catalogs it.
    pub fn catalog_rootfs(&self, root: &Path) -> Result<(Image, Catalog), image::source::Error> {
        let (image, fs, report) = image::read_rootfs(root, self, &self.limits)?;
        let mut catalog = self.catalog_fs(&fs, &[]);
        catalog.warnings.extend(report.warnings.iter().cloned());
        catalog.layers = vec![report];
        Ok((image, catalog))
    }

    /// Catalogs a merged view; `layer_digests[i]` names layer `i`.
    pub fn catalog_fs(&self, fs: &ImageFs, layer_digests: &[&str]) -> Catalog {
        let os = os_release::detect(&|p| fs.read(p).map(|f| f.data.to_vec()));
        let os_ecosystem = os.as_ref().and_then(|o| o.ecosystem());
        let mut warnings = Vec::new();
        let mut found = BTreeSet::new();
        let mut add = |mut p: Package, layer: usize| {
            p.layer = layer_digests.get(layer).map(|d| (*d).to_owned());
            if p.kind.is_os() {
                p.ecosystem = os_ecosystem.clone().unwrap_or_default();
            } else if p.ecosystem.is_empty() {
                p.ecosystem = p.kind.language_ecosystem().unwrap_or_default().to_owned();
            }
            found.insert(p);
        };
        for file in fs.files() {
            let executable = file.mode & 0o111 != 0;
            for cataloger in &self.catalogers {
                if !cataloger.wants(file.path, executable) {
                    continue;
                }
                match cataloger.parse(file.path, file.data) {
                    Ok(packages) => packages.into_iter().for_each(|p| add(p, file.layer)),
                    Err(e) => warnings.push(e.to_string()),
                }
            }
        }
        for file in fs.cataloged() {
            file.findings.packages.iter().for_each(|p| add(p.clone(), file.layer));
            warnings.extend(file.findings.errors.iter().map(ToString::to_string));
        }
        if os.is_none() && found.iter().any(|p| p.kind.is_os()) {
            warnings.push(
                "OS packages found but the distribution was not recognised; they cannot be matched".into(),
            );
        }
        Catalog { os, packages: found.into_iter().collect(), warnings, layers: Vec::new() }
    }
}

/// Files only range-reading catalogers want (executables) are cataloged as
/// the image is read; any file a whole-file cataloger or OS detection wants
/// keeps its bytes, and then every cataloger wanting it reads those.
impl Selector for Scanner {
    fn keep(&self, path: &str, executable: bool) -> Keep {
        let mut wanted = self.catalogers.iter().filter(|c| c.wants(path, executable)).peekable();
        if os_release::FILES.contains(&path) || wanted.clone().any(|c| !c.reads_ranges()) {
            Keep::Bytes
        } else if wanted.peek().is_some() {
            Keep::Findings
        } else {
            Keep::Nothing
        }
    }

    fn catalog(&self, path: &str, executable: bool, file: &std::fs::File) -> Findings {
        // One reader for all: the ELF headers both binary catalogers parse
        // are read once.
        let reader = catalog::FileReader::new(file);
        let mut findings = Findings::default();
        for cataloger in self.catalogers.iter().filter(|c| c.reads_ranges() && c.wants(path, executable)) {
            match cataloger.parse_file(path, &reader) {
                Ok(packages) => findings.packages.extend(packages),
                Err(e) => findings.errors.push(e),
            }
        }
        findings
    }
}
