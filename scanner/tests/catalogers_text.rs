//! The text-format catalogers (apk, dpkg, Python, npm, Java archives) and OS
//! release detection, run over real package databases and metadata files
//! copied from public scanners' test fixtures.
//!
//! Each fixture directory under `tests/fixtures/catalog/` is laid out as an
//! image's filesystem; the test walks it the way the scan pipeline walks a
//! layer (ask [`Cataloger::wants`] of every file, parse the wanted ones) and
//! compares the packages with the expected list. Where a list comes from the
//! source project's own tests it says so; the others were worked out by hand
//! from the file. `tests/fixtures/catalog/SOURCES.md` names the repository,
//! path and commit of every file. Jars are binary and cannot be copied through
//! the text tools used to collect fixtures, so the Java tests zip real
//! `pom.properties` and `MANIFEST.MF` texts into archives at run time.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use patchpilot_scanner::catalog::apk::ApkCataloger;
use patchpilot_scanner::catalog::dpkg::DpkgCataloger;
use patchpilot_scanner::catalog::java::JavaCataloger;
use patchpilot_scanner::catalog::node::NodeCataloger;
use patchpilot_scanner::catalog::os_release::{self, OsRelease};
use patchpilot_scanner::catalog::python::PythonCataloger;
use patchpilot_scanner::catalog::{Cataloger, Error};
use patchpilot_scanner::package::{Package, PackageKind};

fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/catalog").join(relative)
}

/// Every file under `root` as `(image-relative path, host path)`, sorted by
/// the image path.
fn files_under(root: &Path) -> Vec<(String, PathBuf)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
        for entry in std::fs::read_dir(dir).expect("read fixture directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).expect("under root");
                let image_path = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                out.push((image_path, path));
            }
        }
    }
    let mut files = Vec::new();
    walk(root, root, &mut files);
    files.sort();
    files
}

/// Runs a cataloger over a fixture tree the way the pipeline does.
fn catalog(cataloger: &dyn Cataloger, root: &Path) -> Result<Vec<Package>, Error> {
    let mut packages = Vec::new();
    for (image_path, host_path) in files_under(root) {
        if cataloger.wants(&image_path, false) {
            let data = std::fs::read(&host_path).expect("read fixture");
            packages.extend(cataloger.parse(&image_path, &data)?);
        }
    }
    Ok(packages)
}

/// What the tests compare: name, version, source name, source version, path.
type Row = (String, String, Option<String>, Option<String>, String);

fn rows(packages: &[Package]) -> Vec<Row> {
    packages
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                p.version.clone(),
                p.source_name.clone(),
                p.source_version.clone(),
                p.path.clone(),
            )
        })
        .collect()
}

/// An expected row: name, version, source name, source version, path.
type Want<'a> = (&'a str, &'a str, Option<&'a str>, Option<&'a str>, &'a str);

fn expected(list: &[Want<'_>]) -> Vec<Row> {
    list.iter()
        .map(|(name, version, source, source_version, path)| {
            (
                (*name).to_owned(),
                (*version).to_owned(),
                source.map(str::to_owned),
                source_version.map(str::to_owned),
                (*path).to_owned(),
            )
        })
        .collect()
}

fn assert_kind_and_ecosystem(packages: &[Package], kind: PackageKind, ecosystem: &str) {
    for package in packages {
        assert_eq!(package.kind, kind, "{package:?}");
        assert_eq!(package.ecosystem, ecosystem, "{package:?}");
        assert_eq!(package.layer, None, "{package:?}");
    }
}

const APK_DB: &str = "lib/apk/db/installed";

#[test]
fn apk_trivy_database_with_a_versionless_stanza_keeps_the_rest() {
    // Trivy's fixture carries a hand-added `P:invalidPackageWithoutAVersion`
    // stanza; like Trivy, PatchPilot skips it (with a warning) and reads the
    // other packages, the same list as with the stanza removed.
    let packages = catalog(&ApkCataloger, &fixture("apk/trivy-alpine")).expect("the rest is read");
    assert!(packages.iter().all(|p| p.name != "invalidPackageWithoutAVersion"));
    let text = std::fs::read_to_string(fixture("apk/trivy-alpine/lib/apk/db/installed")).expect("fixture");
    let cleaned = text.replacen("P:invalidPackageWithoutAVersion\n\n", "", 1);
    assert_eq!(rows(&packages), rows(&ApkCataloger.parse(APK_DB, cleaned.as_bytes()).expect("parses")));
}

#[test]
fn apk_trivy_database_matches_trivys_expected_list() {
    // The same file with only the versionless stanza removed; the list is
    // the one in Trivy's pkg/fanal/analyzer/pkg/apk/apk_test.go (Trivy fills
    // SrcName even when it equals the name, PatchPilot leaves it empty).
    let text = std::fs::read_to_string(fixture("apk/trivy-alpine/lib/apk/db/installed")).expect("fixture");
    let cleaned = text.replacen("P:invalidPackageWithoutAVersion\n\n", "", 1);
    assert_ne!(cleaned, text, "the fixture still has the stanza this test removes");
    let packages = ApkCataloger.parse(APK_DB, cleaned.as_bytes()).expect("parses");
    assert_kind_and_ecosystem(&packages, PackageKind::Apk, "");
    assert_eq!(
        rows(&packages),
        expected(&[
            ("musl", "1.1.14-r10", None, None, APK_DB),
            ("busybox", "1.24.2-r9", None, None, APK_DB),
            ("alpine-baselayout", "3.0.3-r0", None, None, APK_DB),
            ("alpine-keys", "1.1-r0", None, None, APK_DB),
            ("zlib", "1.2.8-r2", None, None, APK_DB),
            ("libcrypto1.0", "1.0.2h-r1", Some("openssl"), None, APK_DB),
            ("libssl1.0", "1.0.2h-r1", Some("openssl"), None, APK_DB),
            ("apk-tools", "2.6.7-r0", None, None, APK_DB),
            ("scanelf", "1.1.6-r0", Some("pax-utils"), None, APK_DB),
            ("musl-utils", "1.1.14-r10", Some("musl"), None, APK_DB),
            ("libc-utils", "0.7-r0", Some("libc-dev"), None, APK_DB),
            ("pkgconf", "1.6.0-r0", None, None, APK_DB),
            ("sqlite-libs", "3.26.0-r3", Some("sqlite"), None, APK_DB),
            ("test", "2.9.11_pre20061021-r2", Some("test-parent"), None, APK_DB),
            ("ada-libs", "2.7.4-r0", Some("ada"), None, APK_DB),
        ])
    );
}

#[test]
fn apk_small_real_databases() {
    // syft-base: syft's parse_apk_db_test.go expects alpine-baselayout
    // 3.2.0-r6 with origin alpine-baselayout. The other two lists were worked
    // out by hand from the files.
    let cases: &[(&str, &[Want<'_>])] = &[
        ("apk/syft-base", &[("alpine-baselayout", "3.2.0-r6", None, None, APK_DB)]),
        (
            "apk/syft-multiple-1",
            &[
                ("bash", "5.2.21-r0", None, None, APK_DB),
                ("busybox-binsh", "1.36.1-r15", Some("busybox"), None, APK_DB),
                ("musl", "1.2.4_git20230717-r4", None, None, APK_DB),
                ("readline", "8.2.1-r2", None, None, APK_DB),
            ],
        ),
        ("apk/trivy-repeated-checksum", &[("musl", "1.1.14-r10", None, None, APK_DB)]),
    ];
    for (dir, want) in cases {
        let packages = catalog(&ApkCataloger, &fixture(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert_eq!(rows(&packages), expected(want), "{dir}");
    }
}

#[test]
fn dpkg_debian_status_with_source_versions_and_epochs() {
    // osv-scalibr's Debian 12 status; list worked out by hand.
    const STATUS: &str = "var/lib/dpkg/status";
    let packages = catalog(&DpkgCataloger, &fixture("dpkg/scalibr-debian12")).expect("parses");
    assert_kind_and_ecosystem(&packages, PackageKind::Deb, "");
    assert_eq!(
        rows(&packages),
        expected(&[
            ("accountsservice", "22.08.8-6", None, None, STATUS),
            ("acl", "2.3.1-3", None, None, STATUS),
            ("adduser", "3.131", None, None, STATUS),
            ("admin-session", "2023.06.26.c543406313-00", None, None, STATUS),
            ("attr", "1:2.5.1-4", None, None, STATUS),
            ("libacl1", "2.3.1-3", Some("acl"), None, STATUS),
            ("util-linux-extra", "2.38.1-5+b1", Some("util-linux"), Some("2.38.1-5"), STATUS),
        ])
    );
}

#[test]
fn dpkg_removed_package_is_skipped() {
    // syft's Ubuntu kernel stanzas: one installed, one `deinstall ok
    // config-files`; list worked out by hand.
    const FILE: &str = "var/lib/dpkg/status.d/deinstall";
    let packages = catalog(&DpkgCataloger, &fixture("dpkg/syft-ubuntu-deinstall")).expect("parses");
    assert_eq!(
        rows(&packages),
        expected(&[(
            "linux-image-6.14.0-1012-aws",
            "6.14.0-1012.12~24.04.1",
            Some("linux-signed-aws-6.14"),
            None,
            FILE
        )])
    );
}

#[test]
fn dpkg_distroless_status_d() {
    // Trivy's status-dir.txtar (with a `.md5sums` file that is not a control
    // file) and syft's distroless libsqlite3-0; lists worked out by hand.
    let packages = catalog(&DpkgCataloger, &fixture("dpkg/trivy-distroless")).expect("parses");
    assert_eq!(
        rows(&packages),
        expected(&[
            ("libc6", "2.36-9+deb12u7", Some("glibc"), None, "var/lib/dpkg/status.d/libc6"),
            ("libssl3", "3.0.14-1~deb12u2", Some("openssl"), None, "var/lib/dpkg/status.d/libssl3"),
            ("openssl", "3.0.14-1~deb12u2", None, None, "var/lib/dpkg/status.d/openssl"),
        ])
    );
    let packages = catalog(&DpkgCataloger, &fixture("dpkg/syft-distroless")).expect("parses");
    assert_eq!(
        rows(&packages),
        expected(&[(
            "libsqlite3-0",
            "3.34.1-3",
            Some("sqlite3"),
            None,
            "var/lib/dpkg/status.d/libsqlite3-0"
        )])
    );
}

#[test]
fn dpkg_trivy_corrupted_status_is_refused() {
    // Trivy's "corrupsed" fixture: conffile lines lost their leading space.
    let err = catalog(&DpkgCataloger, &fixture("dpkg/trivy-corrupted")).expect_err("corrupt");
    assert_eq!((err.cataloger, err.path.as_str()), ("dpkg", "var/lib/dpkg/status"));
    assert!(err.reason.starts_with("line 15:"), "{err}");
}

#[test]
fn python_metadata_files() {
    // syft's and osv-scalibr's metadata files; lists worked out by hand with
    // the standard library email parser's rules: passlib's broken Keywords
    // continuation ends the headers after Version, httplib2's lower-case
    // headers count, and root's first Version wins.
    const SITE: &str = "usr/lib/python3/dist-packages";
    let packages = catalog(&PythonCataloger, &fixture("python/site")).expect("parses");
    assert_kind_and_ecosystem(&packages, PackageKind::Python, "PyPI");
    let python27 = "usr/lib/python2.7/Python-2.7.egg-info".to_owned();
    let at = |p: &str| format!("{SITE}/{p}");
    let want: Vec<Row> = vec![
        ("Python".into(), "2.7.18".into(), None, None, python27),
        ("Pygments".into(), "2.6.1".into(), None, None, at("Pygments-2.6.1.dist-info/METADATA")),
        ("httplib2".into(), "1.0".into(), None, None, at("httplib2-1.0.dist-info/METADATA")),
        ("passlib".into(), "1.7.4".into(), None, None, at("passlib-1.7.4.dist-info/METADATA")),
        ("root".into(), "1.0.0".into(), None, None, at("root-1.0.0.egg-info/PKG-INFO")),
        ("setuptools".into(), "57.4.0".into(), None, None, at("setuptools-57.4.0.egg-info/PKG-INFO")),
    ];
    assert_eq!(rows(&packages), want);
}

#[test]
fn npm_packages_under_node_modules() {
    // osv-scalibr's, babel's and syft's package.json files; the app's own
    // package.json and the sub-path stub are not wanted, and the files
    // without a name or version give nothing. List worked out by hand.
    let packages = catalog(&NodeCataloger, &fixture("node/app")).expect("parses");
    assert_kind_and_ecosystem(&packages, PackageKind::Npm, "npm");
    assert_eq!(
        rows(&packages),
        expected(&[
            ("@babel/code-frame", "7.24.2", None, None, "node_modules/@babel/code-frame/package.json"),
            ("accepts", "1.3.8", None, None, "node_modules/accepts/package.json"),
            ("grunt", "1.0.0", None, None, "node_modules/grunt/package.json"),
        ])
    );
}

#[test]
fn npm_corrupt_package_json_is_refused() {
    let err = catalog(&NodeCataloger, &fixture("node/corrupt")).expect_err("corrupt JSON");
    assert_eq!((err.cataloger, err.path.as_str()), ("npm", "node_modules/corrupt/package.json"));
    assert!(err.reason.contains("not valid JSON"), "{err}");
}

#[test]
fn os_release_detection_and_ecosystems() {
    let cases: &[(&str, &str, &str, Option<&str>)] = &[
        ("trivy-alpine", "alpine", "3.15.4", Some("Alpine:v3.15")),
        ("trivy-rhel", "rhel", "9.4", Some("Red Hat:9")),
        ("trivy-rocky", "rocky", "9.3", Some("Rocky Linux:9")),
        ("trivy-alma", "almalinux", "9.4", Some("AlmaLinux:9")),
        ("trivy-opensuse-leap", "opensuse-leap", "15.2.1", Some("openSUSE:Leap 15.2.1")),
        ("trivy-sles", "sles", "15.3", Some("SUSE:Linux Enterprise Server 15 SP3")),
        ("trivy-wolfi", "wolfi", "20221118", Some("Wolfi")),
        ("trivy-debian-sid", "debian", "buster/sid", Some("Debian:10")),
        ("briefcase-ubuntu-22.04", "ubuntu", "22.04", Some("Ubuntu:22.04:LTS")),
        ("briefcase-debian-11", "debian", "11", Some("Debian:11")),
        ("briefcase-opensuse-tumbleweed", "opensuse-tumbleweed", "20230304", Some("openSUSE:Tumbleweed")),
        ("briefcase-linuxmint-19.2", "linuxmint", "19.2", None),
        ("syft-debian-12", "debian", "12", Some("Debian:12")),
        ("syft-distroless-debian", "debian", "10.8", Some("Debian:10")),
        ("syft-debian-point-release", "debian", "13.5", Some("Debian:13")),
        ("syft-rhel-redhat-release", "rhel", "8.10", Some("Red Hat:8")),
        ("syft-rocky-redhat-release", "rocky", "8.10", Some("Rocky Linux:8")),
        ("syft-alma-redhat-release", "almalinux", "8.10", Some("AlmaLinux:8")),
    ];
    for (dir, id, version_id, ecosystem) in cases {
        let root = fixture(&format!("os_release/{dir}"));
        let read = |path: &str| {
            assert!(os_release::FILES.contains(&path), "detect read {path}, which FILES does not list");
            std::fs::read(root.join(path)).ok()
        };
        let found: OsRelease = os_release::detect(&read).unwrap_or_else(|| panic!("{dir}: nothing detected"));
        assert_eq!((found.id.as_str(), found.version_id.as_str()), (*id, *version_id), "{dir}");
        assert_eq!(found.ecosystem().as_deref(), *ecosystem, "{dir}");
    }
}

#[test]
fn os_release_fields_from_real_files() {
    let root = fixture("os_release/trivy-rocky");
    let found = os_release::detect(&|path: &str| std::fs::read(root.join(path)).ok()).expect("rocky");
    assert_eq!(found.pretty_name, "Rocky Linux 9.3 (Blue Onyx)");
    assert_eq!(found.id_like, ["rhel", "centos", "fedora"]);
    let root = fixture("os_release/briefcase-linuxmint-19.2");
    let found = os_release::detect(&|path: &str| std::fs::read(root.join(path)).ok()).expect("mint");
    assert_eq!(found.id_like, ["ubuntu"]);
}

/// Zips `(entry name, contents)` pairs into a jar.
fn jar(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        writer.start_file(*name, options).expect("start entry");
        writer.write_all(data).expect("write entry");
    }
    writer.finish().expect("finish jar").into_inner()
}

#[test]
fn java_archives_built_from_real_metadata() {
    let api_all = std::fs::read(fixture("java/api-all.pom.properties")).expect("fixture");
    let colon = std::fs::read(fixture("java/colon-delimited.pom.properties")).expect("fixture");
    let jackson_manifest = std::fs::read(fixture("java/jackson-core-2.15.2.MANIFEST.MF")).expect("fixture");

    let api_all_jar = jar(&[
        ("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\n"),
        ("META-INF/maven/org.apache.directory.api/api-all/pom.properties", &api_all),
    ]);
    let jackson_jar = jar(&[
        ("META-INF/MANIFEST.MF", &jackson_manifest),
        ("com/fasterxml/jackson/core/JsonParser.class", b"\xca\xfe\xba\xbe"),
    ]);
    let boot_jar = jar(&[
        ("META-INF/maven/org.anchore/example-java-app-maven/pom.properties", &colon),
        ("BOOT-INF/lib/api-all-2.0.0.jar", &api_all_jar),
        ("BOOT-INF/lib/jackson-core-2.15.2.jar", &jackson_jar),
    ]);
    let war = jar(&[("WEB-INF/lib/api-all-2.0.0.jar", &api_all_jar), ("WEB-INF/web.xml", b"<web-app/>")]);

    let image = tempfile::tempdir().expect("tempdir");
    for (path, data) in [
        ("opt/app/app.jar", &boot_jar),
        ("opt/lib/jackson-core-2.15.2.jar", &jackson_jar),
        ("srv/webapps/ROOT.war", &war),
        ("opt/lib/notes.txt", &b"not an archive".to_vec()),
    ] {
        let host = image.path().join(path);
        std::fs::create_dir_all(host.parent().expect("parent")).expect("mkdir");
        std::fs::write(host, data).expect("write jar");
    }

    let packages = catalog(&JavaCataloger, image.path()).expect("parses");
    assert_kind_and_ecosystem(&packages, PackageKind::JavaArchive, "Maven");
    assert_eq!(
        rows(&packages),
        expected(&[
            ("org.anchore:example-java-app-maven", "0.1.0", None, None, "opt/app/app.jar"),
            (
                "org.apache.directory.api:api-all",
                "2.0.0",
                None,
                None,
                "opt/app/app.jar!/BOOT-INF/lib/api-all-2.0.0.jar"
            ),
            ("Jackson-core", "2.15.2", None, None, "opt/app/app.jar!/BOOT-INF/lib/jackson-core-2.15.2.jar"),
            ("Jackson-core", "2.15.2", None, None, "opt/lib/jackson-core-2.15.2.jar"),
            (
                "org.apache.directory.api:api-all",
                "2.0.0",
                None,
                None,
                "srv/webapps/ROOT.war!/WEB-INF/lib/api-all-2.0.0.jar"
            ),
        ])
    );
}

/// Fixture files cut short, run through the cataloger that reads them.
#[test]
fn truncated_real_files_lose_only_the_cut_stanza_or_are_errors_naming_the_path() {
    // The apk database cut just after a `P:` line: the complete stanzas
    // before the cut are read, the cut one is skipped.
    let apk = std::fs::read_to_string(fixture("apk/syft-multiple-1/lib/apk/db/installed")).expect("fixture");
    let cut = apk.find("P:readline\n").expect("stanza") + "P:readline\n".len();
    let packages = ApkCataloger.parse(APK_DB, &apk.as_bytes()[..cut]).expect("truncated apk");
    assert!(!packages.is_empty() && packages.iter().all(|p| p.name != "readline"));

    // The dpkg status cut inside util-linux-extra, before its Version.
    let status =
        std::fs::read_to_string(fixture("dpkg/scalibr-debian12/var/lib/dpkg/status")).expect("fixture");
    let cut = status.find("Source: util-linux (2.38.1-5)").expect("stanza");
    let packages =
        DpkgCataloger.parse("var/lib/dpkg/status", &status.as_bytes()[..cut]).expect("truncated dpkg");
    assert!(!packages.is_empty() && packages.iter().all(|p| p.name != "util-linux-extra"));

    // The Pygments METADATA cut before its Version header.
    let path = "usr/lib/python3/dist-packages/Pygments-2.6.1.dist-info/METADATA";
    let metadata = std::fs::read(fixture(&format!("python/site/{path}"))).expect("fixture");
    let err = PythonCataloger.parse(path, &metadata[..30]).expect_err("truncated METADATA");
    assert_eq!((err.cataloger, err.path.as_str()), ("python", path));

    // accepts' package.json cut in half.
    let path = "node_modules/accepts/package.json";
    let manifest = std::fs::read(fixture(&format!("node/app/{path}"))).expect("fixture");
    let err = NodeCataloger.parse(path, &manifest[..manifest.len() / 2]).expect_err("truncated JSON");
    assert_eq!(err.path, path);

    // A jar cut in half.
    let api_all = std::fs::read(fixture("java/api-all.pom.properties")).expect("fixture");
    let whole = jar(&[("META-INF/maven/org.apache.directory.api/api-all/pom.properties", &api_all)]);
    let err =
        JavaCataloger.parse("opt/app/api-all.jar", &whole[..whole.len() / 2]).expect_err("truncated jar");
    assert_eq!((err.cataloger, err.path.as_str()), ("java-archive", "opt/app/api-all.jar"));
}

#[test]
fn binary_garbage_and_non_utf8_are_errors_naming_the_path() {
    // The first bytes of a gzip stream followed by Latin-1 text: binary, with
    // NUL bytes, and not UTF-8.
    let garbage: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03caf\xe9 \xff\xfe";
    let catalogers: [(&dyn Cataloger, &str); 5] = [
        (&ApkCataloger, "lib/apk/db/installed"),
        (&DpkgCataloger, "var/lib/dpkg/status"),
        (&PythonCataloger, "usr/lib/python3/dist-packages/x-1.dist-info/METADATA"),
        (&NodeCataloger, "node_modules/x/package.json"),
        (&JavaCataloger, "opt/x.jar"),
    ];
    for (cataloger, path) in catalogers {
        assert!(cataloger.wants(path, false), "{} should want {path}", cataloger.name());
        let err = cataloger.parse(path, garbage).expect_err("garbage");
        assert_eq!((err.cataloger, err.path.as_str()), (cataloger.name(), path));
        assert!(err.to_string().starts_with(&format!("{}: {path}: ", cataloger.name())), "{err}");
    }

    // Non-UTF-8 (Latin-1) in the fields each text format needs, without NUL.
    let latin1: [(&dyn Cataloger, &str, &[u8]); 4] = [
        (&ApkCataloger, "lib/apk/db/installed", b"P:caf\xe9\nV:1.0-r0\n"),
        (&DpkgCataloger, "var/lib/dpkg/status", b"Package: caf\xe9\nVersion: 1.0\n"),
        (
            &PythonCataloger,
            "usr/lib/python3/dist-packages/x-1.dist-info/METADATA",
            b"Name: caf\xe9\nVersion: 1.0\n",
        ),
        (&NodeCataloger, "node_modules/x/package.json", b"{\"name\": \"caf\xe9\", \"version\": \"1.0\"}"),
    ];
    for (cataloger, path, data) in latin1 {
        let err = cataloger.parse(path, data).expect_err("latin-1");
        assert_eq!(err.path, path, "{err}");
    }
}

#[test]
fn no_fixture_file_is_wanted_by_two_catalogers() {
    // No fixture file is wanted by two of these catalogers.
    let catalogers: [&dyn Cataloger; 5] =
        [&ApkCataloger, &DpkgCataloger, &PythonCataloger, &NodeCataloger, &JavaCataloger];
    let mut all_paths = BTreeSet::new();
    for (path, _) in files_under(&fixture("")) {
        all_paths.insert(path);
    }
    for path in &all_paths {
        let wanting: Vec<&str> =
            catalogers.iter().filter(|c| c.wants(path, false)).map(|c| c.name()).collect();
        assert!(wanting.len() <= 1, "{path} wanted by {wanting:?}");
    }
}
