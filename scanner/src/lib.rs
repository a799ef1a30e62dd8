//! PatchPilot's native image scanner: from an image to the vulnerabilities
//! in it, without shelling out to another scanner. A library first (the
//! `patchpilot scan` command and the agent's in-sandbox rescan use it), then
//! the `patchpilot-scanner` service.
//!
//! It owns reading images (registries, `docker save` archives, OCI layouts,
//! root filesystems), cataloging installed packages, the local OSV advisory
//! database, version comparison per ecosystem, matching, and report formats.
//! It must never write outside its scratch folder (registry blobs only;
//! besides one unnamed temporary file a layer's executables are cataloged
//! from, see [`image::layer`]), never follow a path out of an image's root, never execute anything from
//! an image, and never trust image contents: every byte it reads is
//! untrusted input, bounded by [`image::Limits`]. Talking to registries and
//! the OCI documents themselves are `patchpilot-registry`'s; the scanner
//! asks it for manifests and blobs and reads what lands in its scratch
//! folder.
//!
//! # Layout
//!
//! - [`image`]: sources, layer streaming with whiteouts and safety limits,
//!   the merged file view.
//! - [`catalog`]: catalogers (apk, dpkg, rpm, Go binaries, cargo-auditable,
//!   Python, npm, Java) and OS detection.
//! - [`scan`]: the pipeline from image to packages.
//! - [`db`]: the OSV advisory database (import, status, lookups).
//! - [`osv`] and [`version`]: the OSV model, range evaluation and version
//!   comparison per ecosystem.
//! - [`matching`]: packages → findings, aliases merged.
//! - [`ignore`]: `.patchpilotignore` and `.trivyignore` files.
//! - [`cvss`]: scores from CVSS v2, v3.x and v4.0 vectors.
//! - [`progress`]: progress of pulls, layer reads and imports, for the CLI's bars.
//! - [`report`]: native JSON, SARIF 2.1.0, CycloneDX 1.6, SPDX 2.3 JSON, table.
//! - [`discovery`] and [`service`]: the fleet service.
//! - [`config`]: `[scanner]` configuration.

pub mod catalog;
#[cfg(feature = "service")]
pub mod config;
pub mod cvss;
pub mod db;
pub mod discovery;
pub mod ignore;
pub mod image;
pub mod matching;
pub mod osv;
pub mod package;
pub mod progress;
pub mod report;
pub mod scan;
#[cfg(feature = "service")]
pub mod service;
pub mod version;
