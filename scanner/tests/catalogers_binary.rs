//! The binary-format catalogers (Go build info, cargo-auditable, rpm's
//! databases) against files made by the real tools at test time: a Go
//! toolchain, gcc and objcopy, cargo-auditable, rpmbuild and rpm. Each test
//! that needs a tool it cannot find says which and returns early; the
//! Debian packages that provide them are `golang-go`, `gcc`, `binutils`,
//! `rpm` and `gpg` (cargo-auditable comes from `cargo install
//! cargo-auditable`). Expectations come from the tools' own view of the file
//! (`go version -m`, `rpm -qa`, the section as objcopy dumps it) wherever
//! they have one. Everything is built in temporary directories; how the
//! fixtures are made is recorded in `tests/fixtures/binary/SOURCES.md`.
//! The rpm databases in their older formats (BerkeleyDB, NDB), which
//! Debian's rpm cannot write, are committed instead, with the script that
//! made them and `rpm -qa`'s listing of each
//! (`tests/fixtures/catalog/rpm/README.md`).

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::rc::Rc;

use patchpilot_scanner::catalog::cargo_auditable::CargoAuditableCataloger;
use patchpilot_scanner::catalog::gobinary::{GoBinaryCataloger, read_build_info, read_build_info_from};
use patchpilot_scanner::catalog::rpm::{self, RpmCataloger, parse_header};
use patchpilot_scanner::catalog::{Cataloger, FileReader};
use patchpilot_scanner::image::fs::ImageFs;
use patchpilot_scanner::image::layer::{Budget, LayerInput, Limits, apply_layer};
use patchpilot_scanner::package::{Package, PackageKind};
use patchpilot_scanner::scan::Scanner;

/// The program `name` on `PATH`, if there is one.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}

/// Runs `command`, failing the test with its output when it fails.
fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap_or_else(|err| panic!("cannot start {command:?}: {err}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn write(path: &Path, contents: impl AsRef<[u8]>) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create fixture directory");
    }
    std::fs::write(path, contents).expect("write fixture file");
}

fn names_and_versions(packages: &[Package]) -> Vec<(String, String)> {
    packages.iter().map(|p| (p.name.clone(), p.version.clone())).collect()
}

/// A file that counts the bytes read from it, to show a cataloger reads
/// only parts of a binary.
struct CountingFile {
    file: std::fs::File,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl std::io::Read for CountingFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

impl std::io::Seek for CountingFile {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        self.file.seek(pos)
    }
}

/// `binary`'s packages through `cataloger.parse_file`, which must equal
/// what `parse` finds in its bytes.
fn parse_file(cataloger: &dyn Cataloger, path: &str, binary: &Path) -> Vec<Package> {
    let file = std::fs::File::open(binary).expect("binary");
    let from_file = cataloger.parse_file(path, &FileReader::new(&file)).expect("readable");
    let in_memory = cataloger.parse(path, &std::fs::read(binary).expect("binary")).expect("readable");
    assert_eq!(from_file, in_memory, "{}", binary.display());
    from_file
}

/// One uncompressed tar layer of `(path, mode, contents)` regular files and
/// `(path, target)` hard links.
fn tar_layer(files: &[(&str, u32, &[u8])], links: &[(&str, &str)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, mode, contents) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(contents.len() as u64);
        header.set_mode(*mode);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, path, *contents).expect("tar entry");
    }
    for (path, target) in links {
        let mut header = tar::Header::new_gnu();
        header.set_size(0);
        header.set_mode(0o755);
        header.set_entry_type(tar::EntryType::Link);
        builder.append_link(&mut header, path, target).expect("tar link");
    }
    builder.into_inner().expect("tar")
}

// ---------------------------------------------------------------- Go ----

/// Serves `module_path@version` from a `file://` module proxy directory, the
/// layout of `go help goproxy`: `@v/list`, `.info`, `.mod` and the zip with
/// every file under `module_path@version/`. `go_mod` is the module's go.mod.
fn publish_module(proxy: &Path, module_path: &str, version: &str, go_mod: &str, files: &[(&str, &str)]) {
    let dir = proxy.join(module_path).join("@v");
    std::fs::create_dir_all(&dir).expect("proxy directory");
    let mut list =
        std::fs::OpenOptions::new().create(true).append(true).open(dir.join("list")).expect("list");
    writeln!(list, "{version}").expect("list");
    write(
        &dir.join(format!("{version}.info")),
        format!(r#"{{"Version":"{version}","Time":"2023-01-01T00:00:00Z"}}"#),
    );
    write(&dir.join(format!("{version}.mod")), go_mod);
    let zip_file = std::fs::File::create(dir.join(format!("{version}.zip"))).expect("zip");
    let mut zip = zip::ZipWriter::new(zip_file);
    let options = zip::write::SimpleFileOptions::default();
    for (name, contents) in std::iter::once(("go.mod", go_mod)).chain(files.iter().copied()) {
        zip.start_file(format!("{module_path}@{version}/{name}"), options).expect("zip entry");
        zip.write_all(contents.as_bytes()).expect("zip entry");
    }
    zip.finish().expect("zip");
}

/// A `go` command confined to `root`: its own caches, the file proxy, no
/// checksum database, no toolchain download, no user configuration.
fn go_command(go: &Path, root: &Path, dir: &Path) -> Command {
    let mut command = Command::new(go);
    command
        .current_dir(dir)
        .env("GOPROXY", format!("file://{}", root.join("proxy").display()))
        .env("GOSUMDB", "off")
        .env("GOFLAGS", "-modcacherw")
        .env("GOTOOLCHAIN", "local")
        .env("GOENV", "off")
        .env("GOWORK", "off")
        .env("GO111MODULE", "on")
        .env("CGO_ENABLED", "0")
        .env("GOCACHE", root.join("gocache"))
        .env("GOMODCACHE", root.join("gomodcache"))
        .env("GOPATH", root.join("gopath"))
        .env("GOBIN", root.join("bin"));
    command
}

/// What `go version -m` says a binary contains, turned into the packages
/// the cataloger is documented to report.
fn expected_from_go_version_m(listing: &str) -> (String, Vec<(String, String)>, usize) {
    let mut lines = listing.lines();
    let first = lines.next().expect("go version -m prints the toolchain first");
    let toolchain = first.rsplit(": ").next().expect("path: version").to_owned();
    let mut main = None;
    let mut deps: Vec<(String, String)> = Vec::new();
    let mut build_lines = 0;
    for line in lines {
        let columns: Vec<&str> = line.trim_start_matches('\t').split('\t').collect();
        match columns[..] {
            ["mod", path, version, ..] => main = Some((path.to_owned(), version.to_owned())),
            ["dep", path, version, ..] => deps.push((path.to_owned(), version.to_owned())),
            ["=>", path, version, ..] => {
                let replaced = deps.last_mut().expect("=> follows a dep");
                *replaced = (path.to_owned(), version.to_owned());
            }
            ["build", ..] => build_lines += 1,
            _ => {}
        }
    }
    let mut expected = Vec::new();
    if let Some((path, version)) = main.filter(|(_, version)| version != "(devel)") {
        expected.push((path, version));
    }
    expected.extend(deps.into_iter().filter(|(_, version)| !version.is_empty()));
    let release = toolchain.trim_start_matches("go");
    let stdlib =
        if release.matches('.').count() == 1 { format!("v{release}.0") } else { format!("v{release}") };
    expected.push(("stdlib".to_owned(), stdlib));
    (toolchain, expected, build_lines)
}

#[test]
fn go_binaries_built_by_the_toolchain_match_go_version_m() {
    let Some(go) = on_path("go") else {
        eprintln!("skipping: no `go` on PATH (Debian package golang-go) to build Go binaries with");
        return;
    };
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    let proxy = root.join("proxy");
    publish_module(
        &proxy,
        "example.com/greeting",
        "v1.2.3",
        "module example.com/greeting\n\ngo 1.18\n",
        &[("greeting.go", "package greeting\n\nfunc Hello() string { return \"hello\" }\n")],
    );
    // A fork published under another path whose go.mod keeps the original
    // module path, as forks used through `replace` do.
    publish_module(
        &proxy,
        "example.com/newname",
        "v1.1.0",
        "module example.com/oldname\n\ngo 1.18\n",
        &[("old.go", "package oldname\n\nfunc Name() string { return \"new\" }\n")],
    );
    publish_module(
        &proxy,
        "example.com/tool",
        "v0.3.0",
        "module example.com/tool\n\ngo 1.18\n\nrequire example.com/greeting v1.2.3\n",
        &[(
            "main.go",
            "package main\n\nimport (\n\t\"os\"\n\n\t\"example.com/greeting\"\n)\n\n\
             func main() { os.Stdout.WriteString(greeting.Hello()) }\n",
        )],
    );
    let app = root.join("app");
    write(
        &app.join("go.mod"),
        "module example.com/app\n\ngo 1.18\n\nrequire (\n\texample.com/greeting v1.2.3\n\texample.com/oldname v1.0.0\n)\n\n\
         replace example.com/oldname => example.com/newname v1.1.0\n",
    );
    write(
        &app.join("main.go"),
        "package main\n\nimport (\n\t\"os\"\n\n\t\"example.com/greeting\"\n\t\"example.com/oldname\"\n)\n\n\
         func main() { os.Stdout.WriteString(greeting.Hello() + oldname.Name()) }\n",
    );
    run(go_command(&go, root, &app).args(["mod", "tidy"]));
    let app_binary = root.join("app.bin");
    run(go_command(&go, root, &app).arg("build").arg("-o").arg(&app_binary).arg("."));
    // Installed at a version, so the main module carries that version rather
    // than `(devel)`.
    run(go_command(&go, root, root).args(["install", "example.com/tool@v0.3.0"]));
    let tool_binary = root.join("bin").join("tool");

    for (binary, must_contain) in [
        (&app_binary, vec![("example.com/greeting", "v1.2.3"), ("example.com/newname", "v1.1.0")]),
        (&tool_binary, vec![("example.com/tool", "v0.3.0"), ("example.com/greeting", "v1.2.3")]),
    ] {
        let listing = run(go_command(&go, root, root).arg("version").arg("-m").arg(binary)).stdout;
        let listing = String::from_utf8(listing).expect("UTF-8 listing");
        let (toolchain, expected, build_lines) = expected_from_go_version_m(&listing);
        for (name, version) in must_contain {
            assert!(
                expected.contains(&(name.to_owned(), version.to_owned())),
                "{name} {version} in\n{listing}"
            );
        }

        let data = std::fs::read(binary).expect("binary");
        let packages = GoBinaryCataloger.parse("usr/local/bin/app", &data).expect("readable build info");
        assert_eq!(names_and_versions(&packages), expected, "go version -m says:\n{listing}");
        assert_eq!(parse_file(&GoBinaryCataloger, "usr/local/bin/app", binary), packages);

        // Read through a file, only the headers and the blob are read: a
        // few kilobytes of a binary of megabytes.
        let read = std::rc::Rc::default();
        let file =
            CountingFile { file: std::fs::File::open(binary).expect("binary"), read: Rc::clone(&read) };
        let info =
            read_build_info_from(&object::ReadCache::new(file)).expect("readable").expect("a Go binary");
        assert_eq!(info.go_version, toolchain);
        assert!(data.len() > 1 << 20, "{} bytes", data.len());
        assert!(read.get() < 64 << 10, "read {} of {} bytes", read.get(), data.len());
        for package in &packages {
            assert_eq!(package.kind, PackageKind::GoModule);
            assert_eq!(package.ecosystem, "Go");
            assert_eq!(package.path, "usr/local/bin/app");
        }
        let info = read_build_info(&data).expect("readable").expect("a Go binary");
        assert_eq!(info.go_version, toolchain);
        assert_eq!(info.settings.len(), build_lines);
        assert!(info.settings.iter().any(|s| s.key == "-compiler" && s.value == "gc"), "{:?}", info.settings);

        // The same damage Go's own buildinfo test does: a broken magic makes
        // the file not a Go binary.
        let mut damaged = data.clone();
        let magic = damaged.windows(14).position(|w| w == b"\xff Go buildinf:").expect("magic present");
        damaged[magic + 2] = b'N';
        assert_eq!(GoBinaryCataloger.parse("usr/local/bin/app", &damaged), Ok(Vec::new()));

        // Corrupting the blob's header, lengths and text, or cutting the
        // file inside it, gives a result or an error, never a panic.
        for offset in magic + 14..(magic + 400).min(data.len()) {
            let mut corrupt = data.clone();
            corrupt[offset] ^= 0xff;
            let _ = GoBinaryCataloger.parse("usr/local/bin/app", &corrupt);
        }
        for cut in [magic + 8, magic + 20, magic + 40, magic + 200] {
            let _ = GoBinaryCataloger.parse("usr/local/bin/app", &data[..cut.min(data.len())]);
        }
    }
    pipeline_catalogs_binaries_as_it_reads_them(&app_binary);
}

/// The scan pipeline catalogs executables as it finds them and keeps only
/// the packages: in a layer (from the spool file, a hard link getting its
/// own path) and in a root filesystem (in place).
fn pipeline_catalogs_binaries_as_it_reads_them(binary: &Path) {
    let data = std::fs::read(binary).expect("binary");
    let expected = GoBinaryCataloger.parse("usr/bin/app", &data).expect("readable");
    assert!(!expected.is_empty());
    let scanner = Scanner::default();

    let layer = tar_layer(
        &[("usr/bin/app", 0o755, &data), ("usr/share/app/data.bin", 0o644, &data)],
        &[("usr/bin/app-link", "usr/bin/app")],
    );
    let mut fs = ImageFs::new();
    let mut budget = Budget::default();
    let input = LayerInput { index: 0, name: "layer", verify_digest: false };
    let report = apply_layer(&mut fs, &layer[..], &input, &scanner, &Limits::default(), &mut budget)
        .expect("layer reads");
    assert_eq!(report.kept_files, 2, "{report:?}");
    assert_eq!(budget.kept, 0, "no executable bytes are kept in memory");
    assert_eq!(fs.files().count(), 0, "nothing is kept with its bytes");
    let cataloged: Vec<(&str, Vec<Package>)> =
        fs.cataloged().map(|f| (f.path, f.findings.packages.clone())).collect();
    let at = |path: &str| -> Vec<Package> {
        expected.iter().map(|p| Package { path: path.to_owned(), ..p.clone() }).collect()
    };
    assert_eq!(cataloged, [("usr/bin/app", at("usr/bin/app")), ("usr/bin/app-link", at("usr/bin/app-link"))]);

    let root = tempfile::tempdir().expect("tempdir");
    write(&root.path().join("usr/bin/app"), &data);
    std::fs::set_permissions(root.path().join("usr/bin/app"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let (image, catalog) = scanner.catalog_rootfs(root.path()).expect("rootfs");
    let found: Vec<Package> = catalog.packages.iter().map(|p| Package { layer: None, ..p.clone() }).collect();
    let mut want = at("usr/bin/app");
    want.sort();
    assert_eq!(found, want);
    // The digest covers the binary's contents, read in place.
    write(&root.path().join("usr/bin/app"), [&data[..], b"x"].concat());
    let (changed, _) = scanner.catalog_rootfs(root.path()).expect("rootfs");
    assert_ne!(changed.digest, image.digest);
}

/// Every byte as a C `\x` escape, each its own string literal so no escape
/// swallows the next character.
fn c_bytes(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("\"\\x{byte:02x}\" ")).collect()
}

/// The pre-1.18 layout (pointers to Go string headers), laid out by gcc's
/// linker exactly as `debug/buildinfo` documents it, since no installable Go
/// toolchain still writes it.
#[test]
fn pointer_format_blob_laid_out_by_the_linker_is_read() {
    let Some(gcc) = on_path("gcc") else {
        eprintln!("skipping: no `gcc` on PATH (Debian package gcc) to link the pre-1.18 layout with");
        return;
    };
    // `cmd/go/internal/modload.infoStart` / `infoEnd`.
    let info_start = b"\x30\x77\xaf\x0c\x92\x74\x08\x02\x41\xe1\xc1\x07\xe6\xd6\x18\xe6";
    let info_end = b"\xf9\x32\x43\x31\x86\x18\x20\x72\x00\x82\x42\x10\x41\x16\xd8\xf2";
    let modinfo = "path\texample.com/legacy\n\
                   mod\texample.com/legacy\tv0.9.0\t\n\
                   dep\texample.com/greeting\tv1.2.3\t\n\
                   build\t-compiler=gc\n";
    let source = format!(
        "struct gostring {{ const char *data; unsigned long len; }};\n\
         static const char version[] = \"go1.16.15\";\n\
         static const char modinfo[] = {start} {text:?} {end};\n\
         struct gostring runtime_buildVersion = {{ version, sizeof version - 1 }};\n\
         struct gostring runtime_modinfo = {{ modinfo, sizeof modinfo - 1 }};\n\
         struct buildinfo {{ char magic[14]; unsigned char ptrsize; unsigned char flags;\n\
                             struct gostring *version; struct gostring *modinfo; }};\n\
         __attribute__((section(\".go.buildinfo\"), aligned(16), used))\n\
         struct buildinfo go_buildinfo = {{ \"\\xff Go buildinf:\", sizeof(void *),\n\
             __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__, &runtime_buildVersion, &runtime_modinfo }};\n\
         int main(void) {{ return go_buildinfo.flags; }}\n",
        start = c_bytes(info_start),
        text = modinfo,
        end = c_bytes(info_end),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let c_file = dir.path().join("legacy.c");
    let binary = dir.path().join("legacy");
    write(&c_file, source);
    // Not position-independent, so the pointers hold final addresses in the
    // file, as the Go linker wrote them.
    run(Command::new(gcc).arg("-O0").arg("-no-pie").arg("-o").arg(&binary).arg(&c_file));

    let data = std::fs::read(&binary).expect("binary");
    let packages = GoBinaryCataloger.parse("opt/legacy", &data).expect("readable build info");
    assert_eq!(
        names_and_versions(&packages),
        [
            ("example.com/legacy".to_owned(), "v0.9.0".to_owned()),
            ("example.com/greeting".to_owned(), "v1.2.3".to_owned()),
            ("stdlib".to_owned(), "v1.16.15".to_owned()),
        ]
    );
}

// --------------------------------------------------- cargo-auditable ----

/// What the cataloger is documented to report from a dependency list:
/// runtime entries that are not local, plus the root.
fn expected_from_audit_json(json: &[u8]) -> Vec<(String, String)> {
    let value: serde_json::Value = serde_json::from_slice(json).expect("fixture JSON");
    let packages = value["packages"].as_array().expect("packages array");
    packages
        .iter()
        .filter(|p| p["kind"].as_str().unwrap_or("runtime") == "runtime")
        .filter(|p| p["root"].as_bool().unwrap_or(false) || p["source"] != "local")
        .map(|p| {
            (p["name"].as_str().expect("name").to_owned(), p["version"].as_str().expect("version").to_owned())
        })
        .collect()
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).expect("in-memory write");
    encoder.finish().expect("in-memory write")
}

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/binary").join(name);
    std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[test]
fn dep_v0_section_added_to_a_gcc_binary_is_read() {
    let (Some(gcc), Some(objcopy)) = (on_path("gcc"), on_path("objcopy")) else {
        eprintln!("skipping: needs `gcc` and `objcopy` on PATH (Debian packages gcc, binutils)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let c_file = dir.path().join("main.c");
    let plain = dir.path().join("plain");
    write(&c_file, "int main(void) { return 0; }\n");
    run(Command::new(gcc).arg("-o").arg(&plain).arg(&c_file));
    let with_section = |name: &str, section: &[u8]| -> Vec<u8> {
        let section_file = dir.path().join(format!("{name}.z"));
        let binary = dir.path().join(name);
        write(&section_file, section);
        run(Command::new(&objcopy)
            .arg("--add-section")
            .arg(format!(".dep-v0={}", section_file.display()))
            .arg("--set-section-flags")
            .arg(".dep-v0=noload,readonly")
            .arg(&plain)
            .arg(&binary));
        std::fs::read(&binary).expect("binary")
    };

    let plain_data = std::fs::read(&plain).expect("binary");
    assert_eq!(CargoAuditableCataloger.parse("usr/bin/plain", &plain_data), Ok(Vec::new()));

    for (fixture_name, must_contain) in [
        ("auditable-serde-doc-example.json", ("adler", "0.2.3")),
        ("cargo-auditable-0.7.7-output.json", ("hex", "0.4.3")),
    ] {
        let json = fixture(fixture_name);
        let data = with_section(fixture_name, &zlib(&json));
        let packages = CargoAuditableCataloger.parse("usr/bin/tool", &data).expect("readable audit data");
        assert_eq!(
            parse_file(&CargoAuditableCataloger, "usr/bin/tool", &dir.path().join(fixture_name)),
            packages
        );
        let expected = expected_from_audit_json(&json);
        assert!(expected.contains(&(must_contain.0.to_owned(), must_contain.1.to_owned())), "{fixture_name}");
        assert_eq!(names_and_versions(&packages), expected, "{fixture_name}");
        for package in &packages {
            assert_eq!(package.kind, PackageKind::RustCrate);
            assert_eq!(package.ecosystem, "crates.io");
            assert_eq!(package.path, "usr/bin/tool");
        }
    }
    // The real output lists build dependencies and a local path crate, which
    // must be left out.
    let real = String::from_utf8(fixture("cargo-auditable-0.7.7-output.json")).expect("UTF-8");
    assert!(real.contains(r#""kind":"build""#) && real.contains(r#""name":"helper""#));

    let corrupt = with_section("corrupt", b"this is not zlib");
    let error = CargoAuditableCataloger.parse("usr/bin/corrupt", &corrupt).expect_err("corrupt section");
    assert_eq!(error.path, "usr/bin/corrupt");
    assert!(error.reason.contains("does not decompress"), "{error}");

    let bomb = with_section("bomb", &zlib(&vec![b'['; 9 << 20]));
    let error = CargoAuditableCataloger.parse("usr/bin/bomb", &bomb).expect_err("oversized section");
    assert!(error.reason.contains("exceeds"), "{error}");
}

#[test]
fn binary_built_by_cargo_auditable_is_read() {
    let cargo = std::env::var_os("CARGO").map(PathBuf::from).or_else(|| on_path("cargo"));
    let Some(cargo) = cargo else {
        eprintln!("skipping: no cargo to build with");
        return;
    };
    let commands = run(Command::new(&cargo).arg("--list")).stdout;
    if !String::from_utf8_lossy(&commands).lines().any(|line| line.trim().starts_with("auditable")) {
        eprintln!("skipping: `cargo auditable` is not installed (`cargo install cargo-auditable`)");
        return;
    }
    let Some(objcopy) = on_path("objcopy") else {
        eprintln!("skipping: no `objcopy` on PATH (Debian package binutils) to dump the section with");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(
        &root.join("app/Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n\n\
         [dependencies]\nhelper = { path = \"../helper\" }\n\n[build-dependencies]\nbuilder = { path = \"../builder\" }\n",
    );
    write(&root.join("app/build.rs"), "fn main() { builder::run(); }\n");
    write(&root.join("app/src/main.rs"), "fn main() { println!(\"{}\", helper::answer()); }\n");
    write(
        &root.join("helper/Cargo.toml"),
        "[package]\nname = \"helper\"\nversion = \"0.2.0\"\nedition = \"2021\"\n",
    );
    write(&root.join("helper/src/lib.rs"), "pub fn answer() -> u32 { 42 }\n");
    write(
        &root.join("builder/Cargo.toml"),
        "[package]\nname = \"builder\"\nversion = \"0.3.0\"\nedition = \"2021\"\n",
    );
    write(&root.join("builder/src/lib.rs"), "pub fn run() {}\n");
    run(Command::new(&cargo)
        .args(["auditable", "build", "--offline", "--quiet"])
        .current_dir(root.join("app"))
        .env("CARGO_TARGET_DIR", root.join("target")));
    let binary = root.join("target/debug/app");
    let section = root.join("dep-v0.z");
    run(Command::new(objcopy)
        .arg("--dump-section")
        .arg(format!(".dep-v0={}", section.display()))
        .arg(&binary));
    let mut json = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::ZlibDecoder::new(&std::fs::read(&section).expect("dumped section")[..]),
        &mut json,
    )
    .expect("zlib section");
    let listed = String::from_utf8(json.clone()).expect("UTF-8 JSON");
    assert!(listed.contains(r#""name":"helper""#) && listed.contains(r#""name":"builder""#), "{listed}");

    let data = std::fs::read(&binary).expect("binary");
    let packages = CargoAuditableCataloger.parse("usr/local/bin/app", &data).expect("readable audit data");
    assert_eq!(names_and_versions(&packages), expected_from_audit_json(&json));
    assert_eq!(parse_file(&CargoAuditableCataloger, "usr/local/bin/app", &binary), packages);
    assert_eq!(names_and_versions(&packages), [("app".to_owned(), "0.1.0".to_owned())], "{listed}");
}

// --------------------------------------------------------------- rpm ----

const TOOL_SPEC: &str = "Name: pp-tool\nEpoch: 3\nVersion: 1.2.3\nRelease: 4.test\n\
Summary: PatchPilot scanner test package\nLicense: MIT\nBuildArch: noarch\n\n\
%description\nBuilt by scanner/tests/catalogers_binary.rs.\n\n\
%package libs\nSummary: Subpackage of pp-tool\n\n%description libs\nIts source package is pp-tool.\n\n\
%files\n\n%files libs\n";

const PLAIN_SPEC: &str = "Name: pp-plain\nVersion: 0.9\nRelease: 1\n\
Summary: PatchPilot scanner test package without epoch\nLicense: MIT\nBuildArch: noarch\n\n\
%description\nBuilt by scanner/tests/catalogers_binary.rs.\n\n%files\n";

/// Imports a freshly made signing key into the database, as `rpm --import`
/// does on every Red Hat system; `false` when gpg is not available.
fn import_signing_key(root: &Path, dbpath: &Path) -> bool {
    let (Some(gpg), Some(gpgconf)) = (on_path("gpg"), on_path("gpgconf")) else {
        eprintln!("note: no `gpg`/`gpgconf` on PATH (Debian package gpg); database has no gpg-pubkey entry");
        return false;
    };
    let home = root.join("gnupg");
    std::fs::create_dir_all(&home).expect("gnupg home");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).expect("gnupg home mode");
    }
    run(Command::new(&gpg)
        .env("GNUPGHOME", &home)
        .args(["--batch", "--passphrase", "", "--quick-gen-key", "PatchPilot Test <test@example.invalid>"])
        .args(["ed25519", "sign", "never"]));
    let key = run(Command::new(&gpg).env("GNUPGHOME", &home).args(["--armor", "--export"])).stdout;
    // Stop the agent gpg started for this home directory only.
    let _ = Command::new(gpgconf).env("GNUPGHOME", &home).args(["--kill", "gpg-agent"]).output();
    let key_file = root.join("key.asc");
    write(&key_file, key);
    run(Command::new("rpm").arg("--dbpath").arg(dbpath).arg("--import").arg(&key_file));
    true
}

#[test]
fn rpmdb_written_by_rpm_matches_rpm_query() {
    let (Some(rpm), Some(rpmbuild)) = (on_path("rpm"), on_path("rpmbuild")) else {
        eprintln!("skipping: needs `rpm` and `rpmbuild` on PATH (Debian package rpm)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let topdir = root.join("rpmbuild");
    for (file, spec) in [("pp-tool.spec", TOOL_SPEC), ("pp-plain.spec", PLAIN_SPEC)] {
        let spec_path = root.join(file);
        write(&spec_path, spec);
        run(Command::new(&rpmbuild)
            .arg("--define")
            .arg(format!("_topdir {}", topdir.display()))
            .arg("-bb")
            .arg(&spec_path));
    }
    let built: Vec<PathBuf> = std::fs::read_dir(topdir.join("RPMS/noarch"))
        .expect("built packages")
        .map(|entry| entry.expect("entry").path())
        .collect();
    assert_eq!(built.len(), 3, "{built:?}");

    let dbpath = root.join("db");
    run(Command::new(&rpm).arg("--dbpath").arg(&dbpath).arg("--initdb"));
    run(Command::new(&rpm)
        .arg("--dbpath")
        .arg(&dbpath)
        .args(["-i", "--justdb", "--nodeps", "--ignorearch", "--ignoreos"])
        .args(&built));
    let imported_key = import_signing_key(root, &dbpath);

    let query = run(Command::new(&rpm).arg("--dbpath").arg(&dbpath).args([
        "-qa",
        "--qf",
        "%{NAME} %{EPOCH} %{VERSION} %{RELEASE} %{SOURCERPM}\\n",
    ]))
    .stdout;
    let query = String::from_utf8(query).expect("UTF-8 query output");
    assert_eq!(query.lines().any(|line| line.starts_with("gpg-pubkey ")), imported_key, "{query}");

    let mut expected = BTreeSet::new();
    for line in query.lines().filter(|line| !line.starts_with("gpg-pubkey ")) {
        let [name, epoch, version, release, source_rpm] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("unexpected query line {line:?}");
        };
        let epoch = (epoch != "(none)" && epoch != "0").then_some(epoch);
        let full = match epoch {
            Some(epoch) => format!("{epoch}:{version}-{release}"),
            None => format!("{version}-{release}"),
        };
        let stem = source_rpm.strip_suffix(".src.rpm").expect("source package file name");
        let mut parts = stem.rsplitn(3, '-');
        let (source_release, source_version, source_name) =
            (parts.next().expect("release"), parts.next().expect("version"), parts.next().expect("name"));
        let source_full = match epoch {
            Some(epoch) => format!("{epoch}:{source_version}-{source_release}"),
            None => format!("{source_version}-{source_release}"),
        };
        expected.insert((
            name.to_owned(),
            full.clone(),
            (source_name != name).then(|| source_name.to_owned()),
            (source_full != full).then_some(source_full),
        ));
    }
    assert!(expected.contains(&(
        "pp-tool-libs".to_owned(),
        "3:1.2.3-4.test".to_owned(),
        Some("pp-tool".to_owned()),
        None
    )));
    assert_eq!(expected.len(), 3, "{query}");

    let database = std::fs::read(dbpath.join("rpmdb.sqlite")).expect("rpmdb.sqlite");
    let cataloger = RpmCataloger;
    assert!(cataloger.wants("var/lib/rpm/rpmdb.sqlite", false));
    let packages = cataloger.parse("var/lib/rpm/rpmdb.sqlite", &database).expect("readable database");
    let found: BTreeSet<_> = packages
        .iter()
        .map(|p| (p.name.clone(), p.version.clone(), p.source_name.clone(), p.source_version.clone()))
        .collect();
    assert_eq!(found, expected, "rpm -qa says:\n{query}");
    assert_eq!(packages.len(), expected.len());
    // Every byte of a real header blob corrupted in turn: a result or an
    // error, never a panic.
    let connection = rusqlite::Connection::open_with_flags(
        dbpath.join("rpmdb.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the database rpm wrote");
    let blob: Vec<u8> = connection
        .query_row("SELECT blob FROM Packages ORDER BY hnum LIMIT 1", [], |row| row.get(0))
        .expect("a header blob");
    assert!(parse_header(&blob).is_ok());
    for offset in 0..blob.len() {
        for mask in [0xff, 0x80, 0x01] {
            let mut corrupt = blob.clone();
            corrupt[offset] ^= mask;
            let _ = parse_header(&corrupt);
        }
    }
    for package in &packages {
        assert_eq!(package.kind, PackageKind::Rpm);
        assert_eq!(package.ecosystem, "");
        assert_eq!(package.path, "var/lib/rpm/rpmdb.sqlite");
    }
}

// ------------------------------------------- rpm: the committed databases ----
//
// `tests/fixtures/catalog/rpm/`: the same packages in each rpm database
// format, written by rpm 4.18 (SQLite), db5.3_load (BerkeleyDB, the SQLite
// database's header blobs) and rpm 4.16 (NDB); `generate.sh` there makes
// them, and `expected/` holds what `rpm -qa` lists for each.

/// One committed database: fixture folder, its path in the image, the
/// `rpm -qa` output recorded for it.
const RPM_DATABASES: [(&str, &str, &str); 4] = [
    ("sqlite", "var/lib/rpm/rpmdb.sqlite", "sqlite.txt"),
    ("bdb-le", "var/lib/rpm/Packages", "bdb-le.txt"),
    ("bdb-be", "var/lib/rpm/Packages", "bdb-be.txt"),
    ("ndb", "usr/lib/sysimage/rpm/Packages.db", "ndb.txt"),
];

fn rpm_fixture(relative: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/catalog/rpm").join(relative);
    std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// Every header blob of a committed database, read by its backend's reader.
fn rpm_header_blobs(folder: &str, path: &str) -> Vec<Vec<u8>> {
    let data = rpm_fixture(&format!("{folder}/{path}"));
    match rpm::backend(path).expect("an rpm database path") {
        rpm::Backend::Sqlite => {
            rpm::sqlite::read_headers(&data).expect("sqlite").into_iter().map(|(_, b)| b).collect()
        }
        rpm::Backend::BerkeleyDb => {
            rpm::bdb::read_headers(&data).expect("bdb").into_iter().map(|(_, b)| b).collect()
        }
        rpm::Backend::Ndb => {
            rpm::ndb::read_headers(&data).expect("ndb").into_iter().map(|(_, b)| b).collect()
        }
    }
}

/// A header as `rpm -qa --qf '%{NAME} %{EPOCH} %{VERSION} %{RELEASE}
/// %{ARCH} %{SOURCERPM}\n'` prints it.
fn rpm_query_line(header: &rpm::RpmHeader) -> String {
    let none = || "(none)".to_owned();
    format!(
        "{} {} {} {} {} {}",
        header.name,
        header.epoch.map_or_else(none, |epoch| epoch.to_string()),
        header.version,
        header.release,
        header.arch.clone().unwrap_or_else(none),
        header.source_rpm.clone().unwrap_or_else(none),
    )
}

/// Name, full version, source name and source version as rpm's query says
/// they are, by the cataloger's conventions (epoch 0 or none left out,
/// source fields only when they differ, `gpg-pubkey` skipped).
fn expected_packages(query: &str) -> BTreeSet<(String, String, Option<String>, Option<String>)> {
    let mut expected = BTreeSet::new();
    for line in query.lines().filter(|line| !line.starts_with("gpg-pubkey ")) {
        let [name, epoch, version, release, _arch, source_rpm] = line.split(' ').collect::<Vec<_>>()[..]
        else {
            panic!("unexpected query line {line:?}");
        };
        let epoch = (epoch != "(none)" && epoch != "0").then_some(epoch);
        let with_epoch = |evr: String| match epoch {
            Some(epoch) => format!("{epoch}:{evr}"),
            None => evr,
        };
        let full = with_epoch(format!("{version}-{release}"));
        let stem = source_rpm.strip_suffix(".src.rpm").expect("source package file name");
        let mut parts = stem.rsplitn(3, '-');
        let (source_release, source_version, source_name) =
            (parts.next().expect("release"), parts.next().expect("version"), parts.next().expect("name"));
        let source_full = with_epoch(format!("{source_version}-{source_release}"));
        expected.insert((
            name.to_owned(),
            full.clone(),
            (source_name != name).then(|| source_name.to_owned()),
            (source_full != full).then_some(source_full),
        ));
    }
    expected
}

#[test]
fn committed_rpm_databases_in_every_format_match_rpm_query() {
    let mut package_sets = Vec::new();
    for (folder, path, expected_file) in RPM_DATABASES {
        let query = String::from_utf8(rpm_fixture(&format!("expected/{expected_file}"))).expect("UTF-8");

        // Every header, gpg-pubkey included, field for field as rpm -qa.
        let mut lines: Vec<String> = rpm_header_blobs(folder, path)
            .iter()
            .map(|blob| rpm_query_line(&parse_header(blob).expect("a valid header")))
            .collect();
        lines.sort();
        assert_eq!(lines, query.lines().collect::<Vec<_>>(), "{folder}");

        // And the packages the cataloger reports from the file.
        assert!(RpmCataloger.wants(path, false), "{path}");
        let packages =
            RpmCataloger.parse(path, &rpm_fixture(&format!("{folder}/{path}"))).expect("readable database");
        let found: BTreeSet<_> = packages
            .iter()
            .map(|p| (p.name.clone(), p.version.clone(), p.source_name.clone(), p.source_version.clone()))
            .collect();
        assert_eq!(found, expected_packages(&query), "{folder}: rpm -qa says:\n{query}");
        assert_eq!(packages.len(), 5, "{folder}");
        for package in &packages {
            assert_eq!(package.kind, PackageKind::Rpm);
            assert_eq!(package.path, path);
        }
        package_sets.push((folder, found));
    }
    // The same packages whatever the format.
    for (folder, found) in &package_sets[1..] {
        assert_eq!(found, &package_sets[0].1, "{folder} against sqlite");
    }
    let pp_tool_libs = package_sets[0].1.iter().find(|p| p.0 == "pp-tool-libs").expect("pp-tool-libs");
    assert_eq!(pp_tool_libs, &("pp-tool-libs".into(), "3:1.2.3-4.test".into(), Some("pp-tool".into()), None));
    let pp_zero = package_sets[0].1.iter().find(|p| p.0 == "pp-zero").expect("pp-zero");
    assert_eq!(pp_zero.1, "2.0.1-2.el8_4", "epoch 0 is left out");
}

/// The recorded `rpm -qa` output is what this machine's rpm (4.16 or later:
/// SQLite and read-only BerkeleyDB; NDB only where rpm was built with it)
/// lists now.
#[test]
fn committed_rpm_query_output_is_what_rpm_lists() {
    let Some(rpm) = on_path("rpm") else {
        eprintln!("skipping: needs `rpm` on PATH (Debian package rpm)");
        return;
    };
    for (folder, path, expected_file) in RPM_DATABASES {
        let backend = match rpm::backend(path).expect("an rpm database path") {
            rpm::Backend::Sqlite => "sqlite",
            rpm::Backend::BerkeleyDb => "bdb_ro",
            rpm::Backend::Ndb => continue,
        };
        // rpm writes lock and WAL files beside the database: work on a copy.
        let dir = tempfile::tempdir().expect("tempdir");
        let file_name = Path::new(path).file_name().expect("file name");
        write(&dir.path().join(file_name), rpm_fixture(&format!("{folder}/{path}")));
        let output = run(Command::new(&rpm)
            .arg("--define")
            .arg(format!("_db_backend {backend}"))
            .arg("--dbpath")
            .arg(dir.path())
            .args(["-qa", "--qf", "%{NAME} %{EPOCH} %{VERSION} %{RELEASE} %{ARCH} %{SOURCERPM}\\n"]));
        let mut listed: Vec<String> =
            String::from_utf8(output.stdout).expect("UTF-8").lines().map(str::to_owned).collect();
        listed.sort();
        let expected = String::from_utf8(rpm_fixture(&format!("expected/{expected_file}"))).expect("UTF-8");
        assert_eq!(listed, expected.lines().collect::<Vec<_>>(), "{folder}");
    }
}

#[test]
fn committed_rpm_databases_hold_what_the_fixture_readme_says() {
    // The BerkeleyDB files store the SQLite database's blobs byte for byte,
    // under the same instance numbers, with the gap the erased package left.
    let sqlite = rpm::sqlite::read_headers(&rpm_fixture("sqlite/var/lib/rpm/rpmdb.sqlite")).expect("sqlite");
    for folder in ["bdb-le", "bdb-be"] {
        let bdb =
            rpm::bdb::read_headers(&rpm_fixture(&format!("{folder}/var/lib/rpm/Packages"))).expect("bdb");
        let bdb: Vec<(i64, Vec<u8>)> = bdb.into_iter().map(|(n, blob)| (i64::from(n), blob)).collect();
        assert_eq!(bdb, sqlite, "{folder}");
    }
    let numbers: Vec<i64> = sqlite.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, [1, 2, 3, 4, 6, 7]);
    // pp-big's header needs several overflow pages even at 4096 bytes.
    assert!(sqlite.iter().any(|(_, blob)| blob.len() > 3 * 4096), "a header larger than three pages");
    // NDB: package 5 was erased, leaving a free slot.
    let ndb = rpm::ndb::read_headers(&rpm_fixture("ndb/usr/lib/sysimage/rpm/Packages.db")).expect("ndb");
    assert_eq!(ndb.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 2, 3, 4, 6]);
}

#[test]
fn damaged_committed_rpm_databases_are_errors_not_panics() {
    for (folder, path, _) in RPM_DATABASES {
        let good = rpm_fixture(&format!("{folder}/{path}"));
        // Cut short anywhere on a 512-byte boundary, and one byte short.
        for len in (0..good.len()).step_by(512).chain([good.len() - 1]) {
            let result = RpmCataloger.parse(path, &good[..len]);
            if folder != "sqlite" {
                // (SQLite itself may still read a file cut in its free pages.)
                let error = result.expect_err("a truncated database");
                assert_eq!(error.path, path);
            }
        }
        if folder == "sqlite" {
            continue;
        }
        // Bytes flipped in turn where page headers, item offsets, slots and
        // short items sit in these files: the first and last 32 bytes of
        // every 512 (every byte would take half a minute in a debug build;
        // the unit tests flip every byte of smaller files).
        for at in (0..good.len()).filter(|at| !(32..480).contains(&(at % 512))) {
            let mut damaged = good.clone();
            damaged[at] ^= 0xff;
            let _ = RpmCataloger.parse(path, &damaged);
        }
    }
    // The BerkeleyDB reader names the file and what is wrong.
    let mut bdb = rpm_fixture("bdb-le/var/lib/rpm/Packages");
    bdb[12] ^= 0xff;
    let error = RpmCataloger.parse("var/lib/rpm/Packages", &bdb).expect_err("no magic");
    assert_eq!(
        error.to_string(),
        "rpm: var/lib/rpm/Packages: BerkeleyDB metadata: no BerkeleyDB hash magic (0x061561) at byte 12"
    );
    // An NDB file at a BerkeleyDB path, and the other way round.
    let ndb = rpm_fixture("ndb/usr/lib/sysimage/rpm/Packages.db");
    assert!(RpmCataloger.parse("var/lib/rpm/Packages", &ndb).is_err());
    let bdb = rpm_fixture("bdb-le/var/lib/rpm/Packages");
    let error = RpmCataloger.parse("var/lib/rpm/Packages.db", &bdb).expect_err("not NDB");
    assert!(error.reason.contains("no `RpmP` magic"), "{error}");
}

/// A whole-root scan finds the older formats where the distributions keep
/// them: RHEL 8's `var/lib/rpm/Packages`, and SUSE's
/// `usr/lib/sysimage/rpm/Packages.db` behind a `var/lib/rpm` symlink.
#[test]
fn rootfs_scans_find_berkeleydb_and_ndb_databases() {
    let os_release = |name: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/catalog/os_release").join(name);
        std::fs::read(path.join("etc/os-release")).expect("os-release fixture")
    };
    let scanner = patchpilot_scanner::scan::Scanner::new(Default::default());

    let rhel = tempfile::tempdir().expect("tempdir");
    write(&rhel.path().join("etc/os-release"), os_release("trivy-rhel"));
    write(&rhel.path().join("var/lib/rpm/Packages"), rpm_fixture("bdb-le/var/lib/rpm/Packages"));
    let (_, catalog) = scanner.catalog_rootfs(rhel.path()).expect("scan");
    assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
    let rpms: Vec<&Package> = catalog.packages.iter().filter(|p| p.kind == PackageKind::Rpm).collect();
    assert_eq!(rpms.len(), 5);
    assert!(
        rpms.iter().all(|p| p.path == "var/lib/rpm/Packages" && p.ecosystem.starts_with("Red Hat")),
        "{rpms:?}"
    );

    let suse = tempfile::tempdir().expect("tempdir");
    write(&suse.path().join("etc/os-release"), os_release("trivy-sles"));
    write(
        &suse.path().join("usr/lib/sysimage/rpm/Packages.db"),
        rpm_fixture("ndb/usr/lib/sysimage/rpm/Packages.db"),
    );
    std::fs::create_dir_all(suse.path().join("var/lib")).expect("var/lib");
    std::os::unix::fs::symlink("../../usr/lib/sysimage/rpm", suse.path().join("var/lib/rpm"))
        .expect("symlink");
    let (_, catalog) = scanner.catalog_rootfs(suse.path()).expect("scan");
    assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
    let rpms: Vec<&Package> = catalog.packages.iter().filter(|p| p.kind == PackageKind::Rpm).collect();
    assert_eq!(rpms.len(), 5, "{rpms:?}");
    assert!(
        rpms.iter().all(|p| p.path == "usr/lib/sysimage/rpm/Packages.db" && p.ecosystem.starts_with("SUSE")),
        "{rpms:?}"
    );
}

/// Where the spool-fallback child looks for temporary files: nowhere.
const UNUSABLE_TMPDIR: &str = "/nonexistent/patchpilot-test-tmp";

/// Run by `executables_are_kept_whole_when_no_temporary_file_can_be_made`,
/// in a child whose `TMPDIR` is [`UNUSABLE_TMPDIR`] (tests cannot change
/// their own environment without `unsafe`).
#[test]
#[ignore = "run by executables_are_kept_whole_when_no_temporary_file_can_be_made, with TMPDIR unusable"]
fn spool_fallback_child() {
    assert_eq!(std::env::var("TMPDIR").as_deref(), Ok(UNUSABLE_TMPDIR), "run through its parent test");
    assert!(tempfile::tempfile().is_err(), "no temporary file can be made here");
    let layer = tar_layer(&[("usr/bin/tool", 0o755, b"\x7fELF, or so it claims")], &[]);
    let mut fs = ImageFs::new();
    let mut budget = Budget::default();
    let input = LayerInput { index: 0, name: "layer", verify_digest: false };
    let report =
        apply_layer(&mut fs, &layer[..], &input, &Scanner::default(), &Limits::default(), &mut budget)
            .expect("the layer still reads");
    let kept: Vec<&str> = fs.files().map(|f| f.path).collect();
    assert_eq!(kept, ["usr/bin/tool"], "kept whole, to be cataloged from memory");
    assert_eq!(fs.cataloged().count(), 0);
    assert_eq!(budget.kept, 21);
    assert!(report.warnings.iter().any(|w| w.contains("held in memory instead")), "{:?}", report.warnings);
}

#[test]
fn executables_are_kept_whole_when_no_temporary_file_can_be_made() {
    let output = run(Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "spool_fallback_child", "--ignored", "--test-threads=1"])
        .env("TMPDIR", UNUSABLE_TMPDIR));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// Kernel modules as the kernel's build lays out their metadata: each
/// `MODULE_INFO` is a NUL-terminated `tag=value` string in section
/// `.modinfo` of an ELF relocatable object, which gcc makes from the same
/// declaration the kernel's `__MODULE_INFO` expands to. Scanned as a root
/// filesystem, beside a kernel boot image whose header follows the x86
/// boot protocol.
#[test]
fn kernel_modules_compiled_by_gcc_and_a_boot_image_are_cataloged_from_a_rootfs() {
    let Some(gcc) = on_path("gcc") else {
        eprintln!("skipping: no `gcc` on PATH (Debian package gcc) to compile module objects with");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = tempfile::tempdir().expect("tempdir");
    let release = "6.1.0-18-amd64";
    let modules = root.path().join("lib/modules").join(release).join("kernel");
    let module = |name: &str, tags: &[&str]| {
        let c_file = dir.path().join(format!("{name}.c"));
        let declarations: String = tags
            .iter()
            .enumerate()
            .map(|(i, tag)| {
                format!(
                    "static const char info{i}[] __attribute__((used, section(\".modinfo\"), aligned(1))) = \"{tag}\";\n"
                )
            })
            .collect();
        write(&c_file, format!("{declarations}int init_module(void) {{ return 0; }}\n"));
        let object = modules.join(format!("{name}.ko"));
        std::fs::create_dir_all(&modules).expect("modules dir");
        run(Command::new(&gcc).arg("-c").arg("-o").arg(&object).arg(&c_file));
    };
    let vermagic = format!("vermagic={release} SMP preempt mod_unload modversions ");
    // In-tree: no version tag, versioned by the kernel it was built for.
    module("overlay", &["license=GPL", "description=Overlay filesystem", "name=overlay", &vermagic]);
    // Out of tree, with its own version.
    module("wireguard", &["version=1.0.20220627", "license=GPL v2", "name=wireguard", &vermagic]);
    // Before 5.x, modpost wrote no name tag: the file names the module.
    module("old_driver", &["license=GPL", "vermagic=4.19.0-27-amd64 SMP mod_unload modversions "]);
    // No vermagic, no version: reported without one.
    module("bare", &["license=MIT"]);
    // Not a module: no .modinfo.
    module("plain", &[]);
    // Compressed as distributions ship them, each by its own tool: xz as
    // the kernel's build compresses (CRC32, a 1 MiB dictionary: Debian 13,
    // Fedora), zstd (Ubuntu), gzip (Alpine, no name tag either).
    module("xz_module", &["name=xz_module", "license=GPL", &vermagic]);
    module("zst_module", &["version=2.1", "name=zst_module", &vermagic]);
    module("gz_module", &["license=GPL", &vermagic]);
    let compressors: [(&str, &[&str]); 3] = [
        ("xz_module", &["xz", "--check=crc32", "--lzma2=dict=1MiB"]),
        ("zst_module", &["zstd", "-q", "--rm"]),
        ("gz_module", &["gzip", "-n"]),
    ];
    for (name, command) in compressors {
        let Some(tool) = on_path(command[0]) else {
            panic!("no `{}` on PATH (`scripts/services tools` installs it)", command[0]);
        };
        run(Command::new(tool).args(&command[1..]).arg(modules.join(format!("{name}.ko"))));
    }
    // A compressed module whose stream is damaged: a warning naming it,
    // never a scan that fails.
    write(&modules.join("broken.ko.xz"), b"\xfd7zXZ\0 not really");

    let version_string =
        format!("{release} (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1");
    let mut image = vec![0u8; 0x4000];
    image[0x1f1] = 0x1b;
    image[0x1fe..0x200].copy_from_slice(&[0x55, 0xaa]);
    image[0x202..0x206].copy_from_slice(b"HdrS");
    image[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
    image[0x20e..0x210].copy_from_slice(&(0x3000u16 - 0x200).to_le_bytes());
    image[0x3000..0x3000 + version_string.len()].copy_from_slice(version_string.as_bytes());
    write(&root.path().join(format!("boot/vmlinuz-{release}")), &image);

    let (_, catalog) = Scanner::default().catalog_rootfs(root.path()).expect("rootfs");
    let found: BTreeSet<(PackageKind, String, String, String)> = catalog
        .packages
        .iter()
        .map(|p| (p.kind, p.name.clone(), p.version.clone(), p.path.clone()))
        .collect();
    let at = |name: &str| format!("lib/modules/{release}/kernel/{name}.ko");
    let want: BTreeSet<(PackageKind, String, String, String)> = [
        (
            PackageKind::LinuxKernel,
            "linux-kernel".to_owned(),
            release.to_owned(),
            format!("boot/vmlinuz-{release}"),
        ),
        (PackageKind::LinuxKernelModule, "overlay".to_owned(), release.to_owned(), at("overlay")),
        (PackageKind::LinuxKernelModule, "wireguard".to_owned(), "1.0.20220627".to_owned(), at("wireguard")),
        (
            PackageKind::LinuxKernelModule,
            "old_driver".to_owned(),
            "4.19.0-27-amd64".to_owned(),
            at("old_driver"),
        ),
        (PackageKind::LinuxKernelModule, "bare".to_owned(), String::new(), at("bare")),
        (
            PackageKind::LinuxKernelModule,
            "xz_module".to_owned(),
            release.to_owned(),
            format!("{}.xz", at("xz_module")),
        ),
        (
            PackageKind::LinuxKernelModule,
            "zst_module".to_owned(),
            "2.1".to_owned(),
            format!("{}.zst", at("zst_module")),
        ),
        (
            PackageKind::LinuxKernelModule,
            "gz_module".to_owned(),
            release.to_owned(),
            format!("{}.gz", at("gz_module")),
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(found, want);
    assert!(
        catalog.packages.iter().all(|p| p.ecosystem.is_empty()),
        "kernel packages match no OSV ecosystem"
    );
    assert_eq!(catalog.warnings.len(), 1, "{:?}", catalog.warnings);
    assert!(
        catalog.warnings[0].contains("broken.ko.xz") && catalog.warnings[0].contains("cannot decompress"),
        "{:?}",
        catalog.warnings
    );
    let overlay = catalog.packages.iter().find(|p| p.name == "overlay").expect("overlay");
    assert_eq!(overlay.purl(None), format!("pkg:generic/overlay@{release}"));
}
