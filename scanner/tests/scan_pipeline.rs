//! The whole scanner library on the test image of `support` (an OCI
//! layout and a `docker save` archive), matched against real OSV records.
//! The findings must be exactly the expected ones.

mod support;

use patchpilot_model::Severity;
use patchpilot_registry::oci::PlatformChoice;
use patchpilot_scanner::image;
use patchpilot_scanner::matching;
use patchpilot_scanner::scan::Scanner;
use support::{db, write_docker_archive, write_oci_layout};

/// (id, package, installed, fixed[0], severity) of every finding.
/// (id, package, installed, fixed[0], severity).
type Row = (String, String, String, String, Severity);

fn summary(image: &image::Image) -> (Vec<Row>, Vec<String>) {
    let (_dir, db) = db();
    let catalog = Scanner::default().catalog_image(image).expect("catalog");
    let matched = matching::match_catalog(&catalog, &db).expect("match");
    let rows = matched
        .findings
        .iter()
        .map(|f| {
            (
                f.id.clone(),
                f.package.name.clone(),
                f.package.version.clone(),
                f.fixed_versions.first().cloned().unwrap_or_default(),
                f.severity,
            )
        })
        .collect();
    let aliases = matched.findings.iter().flat_map(|f| f.aliases.iter().cloned()).collect();
    (rows, aliases)
}

fn expected() -> Vec<Row> {
    let row = |id: &str, p: &str, v: &str, fix: &str, s| {
        (id.to_owned(), p.to_owned(), v.to_owned(), fix.to_owned(), s)
    };
    vec![
        // GHSA-whgm-jr23-g3j9 (CVSS 3.1 …/A:H = 7.5), merged into its CVE.
        row("CVE-2020-14343", "PyYAML", "5.3.1", "5.4", Severity::Critical),
        row("CVE-2021-23424", "ansi-html", "0.0.7", "0.0.8", Severity::High),
        // ALPINE-CVE-2025-26519 names the CVE as upstream; musl and
        // musl-utils (origin musl) are both affected, via the source package.
        row("CVE-2025-26519", "musl", "1.1.14-r10", "1.2.4_git20230717-r5", Severity::High),
        row("CVE-2025-26519", "musl-utils", "1.1.14-r10", "1.2.4_git20230717-r5", Severity::High),
    ]
}

#[test]
fn an_oci_layout_scans_to_exactly_the_expected_findings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest_digest = write_oci_layout(dir.path());
    let image =
        image::open_oci_layout(dir.path(), Some("acme/app:1.0"), &PlatformChoice::default()).expect("layout");
    assert_eq!(image.digest, manifest_digest);
    assert_eq!(
        image.labels.get("org.opencontainers.image.source").map(String::as_str),
        Some("https://github.com/acme/app")
    );
    let (rows, aliases) = summary(&image);
    assert_eq!(rows, expected(), "the whited-out PyYAML 5.1 must not appear");
    assert!(aliases.contains(&"ALPINE-CVE-2025-26519".to_owned()));
    assert!(aliases.contains(&"GHSA-8q59-q68h-6hv4".to_owned()));
}

#[test]
fn reading_layers_reports_each_layer_then_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = dir.path().join("app.tar");
    write_docker_archive(&archive);
    let image = image::open_docker_archive(&archive).expect("archive");
    let recorded = support::Recorded::default();
    let catalog =
        Scanner::new(Default::default()).catalog_image_with_progress(&image, &recorded).expect("catalog");
    assert!(!catalog.packages.is_empty());
    assert_eq!(recorded.lines(), ["begin reading layers Some(3)", "+1", "+1", "+1", "end"]);
    // A layer that cannot be read still ends the step.
    let mut broken = image.clone();
    broken.layers[1].location.len = 3;
    let recorded = support::Recorded::default();
    assert!(Scanner::new(Default::default()).catalog_image_with_progress(&broken, &recorded).is_err());
    assert_eq!(recorded.lines(), ["begin reading layers Some(3)", "+1", "end"]);
}

#[test]
fn a_docker_save_archive_scans_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = dir.path().join("app.tar");
    write_docker_archive(&archive);
    let image = image::open_docker_archive(&archive).expect("archive");
    assert_eq!(image.reference, "acme/app:1.0");
    assert_eq!(image.layers.len(), 3);
    assert_eq!(summary(&image).0, expected());
}

#[test]
fn findings_carry_layer_and_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_oci_layout(dir.path());
    let image = image::open_oci_layout(dir.path(), None, &PlatformChoice::default()).expect("layout");
    let (_db_dir, db) = db();
    let catalog = Scanner::default().catalog_image(&image).expect("catalog");
    let matched = matching::match_catalog(&catalog, &db).expect("match");
    let musl = matched.findings.iter().find(|f| f.package.name == "musl").expect("musl finding");
    assert_eq!(musl.package.path, "lib/apk/db/installed");
    assert_eq!(musl.package.layer, image.layers[0].digest, "the bottom layer added it");
    assert_eq!(musl.package.ecosystem, "Alpine:v3.19");
    assert_eq!(musl.package.purl, "pkg:apk/alpine/musl@1.1.14-r10?arch=x86_64&distro=alpine-3.19.1");
    let yaml = matched.findings.iter().find(|f| f.package.name == "PyYAML").expect("PyYAML finding");
    assert_eq!(yaml.package.layer, image.layers[1].digest, "the zstd layer added it");
    assert_eq!(catalog.layers.len(), 3);
}
