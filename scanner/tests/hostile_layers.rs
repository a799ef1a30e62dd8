//! Layers built to attack the scanner are refused with a clear error, and
//! nothing is ever written: not outside a scratch folder, not at all. Also
//! the ordinary layer semantics (compression, whiteouts) the attacks lean on.
//!
//! The tar streams are built byte by byte here, because tar writers refuse
//! to produce hostile names.

use std::io::Write as _;
use std::path::Path;

use patchpilot_scanner::image::fs::ImageFs;
use patchpilot_scanner::image::layer::{Budget, LayerError, LayerInput, Limits, apply_layer};

/// One raw tar entry: a GNU header with the name and link name written as
/// given, then the data padded to 512 bytes.
fn entry(name: &str, kind: u8, data: &[u8], link: &str) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    {
        let gnu = header.as_gnu_mut().expect("gnu header");
        gnu.name[..name.len()].copy_from_slice(name.as_bytes());
        gnu.linkname[..link.len()].copy_from_slice(link.as_bytes());
    }
    header.set_entry_type(tar::EntryType::new(kind));
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    let mut out = header.as_bytes().to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

fn tar_of(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut out: Vec<u8> = entries.concat();
    out.extend_from_slice(&[0u8; 1024]);
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).expect("gzip");
    e.finish().expect("gzip")
}

fn wants_everything(_: &str, _: bool) -> bool {
    true
}

fn apply(
    fs: &mut ImageFs,
    bytes: &[u8],
    index: usize,
    limits: &Limits,
) -> Result<patchpilot_scanner::image::LayerReport, LayerError> {
    let input = LayerInput { index, name: "test-layer", verify_digest: false };
    apply_layer(fs, bytes, &input, &wants_everything, limits, &mut Budget::default())
}

/// Everything under `dir`, to show nothing appeared.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        out.push(e.path().display().to_string());
        if e.path().is_dir() {
            out.extend(listing(&e.path()));
        }
    }
    out.sort();
    out
}

#[test]
fn path_traversal_is_refused_and_nothing_is_written() {
    let sandbox = tempfile::tempdir().expect("tempdir");
    let scratch = sandbox.path().join("scratch");
    std::fs::create_dir(&scratch).expect("scratch");
    let before = listing(sandbox.path());
    let layer = tar_of(&[entry("etc/ok", b'0', b"fine", ""), entry("../../escaped", b'0', b"evil", "")]);
    let mut fs = ImageFs::new();
    let err = apply(&mut fs, &layer, 0, &Limits::default()).expect_err("refused");
    let msg = err.to_string();
    assert!(matches!(err, LayerError::Hostile { .. }), "{msg}");
    assert!(msg.contains("../../escaped") && msg.contains("climbs out"), "{msg}");
    assert_eq!(listing(sandbox.path()), before, "nothing written anywhere");
    assert!(!sandbox.path().join("escaped").exists());
}

#[test]
fn absolute_symlinks_resolve_inside_the_image_never_on_the_host() {
    // /etc/hostname exists on the host; the image's link to it must not
    // reach it.
    assert!(Path::new("/etc/hostname").exists() || Path::new("/etc/passwd").exists());
    let layer = tar_of(&[
        entry("etc/os-release", b'2', b"", "/etc/passwd"),
        entry("usr/lib/os-release", b'0', b"ID=alpine\n", ""),
        entry("etc/issue", b'2', b"", "/usr/lib/os-release"),
    ]);
    let mut fs = ImageFs::new();
    apply(&mut fs, &layer, 0, &Limits::default()).expect("legitimate layer");
    assert!(fs.read("etc/os-release").is_none(), "the host's /etc/passwd was reached");
    assert_eq!(fs.read("etc/issue").map(|f| f.data.to_vec()), Some(b"ID=alpine\n".to_vec()));
}

#[test]
fn a_hard_link_out_of_the_root_is_refused() {
    let layer = tar_of(&[entry("etc/passwd", b'1', b"", "../../../etc/shadow")]);
    let err = apply(&mut ImageFs::new(), &layer, 0, &Limits::default()).expect_err("refused");
    assert!(matches!(err, LayerError::Hostile { .. }), "{err}");
    assert!(err.to_string().contains("hard link to `../../../etc/shadow` leaves the image root"), "{err}");
}

#[test]
fn device_nodes_are_never_created_and_are_reported() {
    let sandbox = tempfile::tempdir().expect("tempdir");
    let before = listing(sandbox.path());
    let layer = tar_of(&[
        entry("dev/sda", b'4', b"", ""),
        entry("dev/null", b'3', b"", ""),
        entry("etc/ok", b'0', b"x", ""),
    ]);
    let mut fs = ImageFs::new();
    let report = apply(&mut fs, &layer, 0, &Limits::default()).expect("read");
    assert_eq!(
        report.warnings.iter().filter(|w| w.contains("device node")).count(),
        2,
        "{:?}",
        report.warnings
    );
    assert!(fs.read("dev/sda").is_none() && fs.read("dev/null").is_none());
    assert!(fs.read("etc/ok").is_some());
    assert_eq!(listing(sandbox.path()), before);
}

#[test]
fn a_decompression_bomb_is_stopped_by_the_ratio_limit() {
    let zeros = vec![0u8; 24 << 20];
    let layer = gzip(&tar_of(&[entry("bomb", b'0', &zeros, "")]));
    assert!(layer.len() < 200 << 10, "the fixture compresses well ({} bytes)", layer.len());
    let limits = Limits { max_ratio: 100, ratio_grace: 1 << 20, ..Limits::default() };
    let err = apply(&mut ImageFs::new(), &layer, 0, &limits).expect_err("stopped");
    assert!(matches!(err, LayerError::Limit { .. }), "{err}");
    assert!(err.to_string().contains("decompression bomb"), "{err}");
    // The same layer under a size limit instead of the ratio.
    let limits = Limits { max_layer_uncompressed: 8 << 20, ..Limits::default() };
    let err = apply(&mut ImageFs::new(), &layer, 0, &limits).expect_err("stopped");
    assert!(err.to_string().contains("exceeds the layer limit"), "{err}");
}

#[test]
fn a_truncated_gzip_layer_is_an_error() {
    let full = gzip(&tar_of(&[entry("etc/os-release", b'0', &vec![b'x'; 100_000], "")]));
    let cut = &full[..full.len() / 2];
    let err = apply(&mut ImageFs::new(), cut, 0, &Limits::default()).expect_err("truncated");
    assert!(matches!(err, LayerError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("truncated gzip stream"), "{err}");
    // Even when the cut falls after the tar's end, the missing trailer is
    // noticed.
    let small = gzip(&tar_of(&[entry("a", b'0', b"x", "")]));
    let err =
        apply(&mut ImageFs::new(), &small[..small.len() - 4], 0, &Limits::default()).expect_err("no trailer");
    assert!(err.to_string().contains("gzip"), "{err}");
}

#[test]
fn a_layer_that_does_not_match_its_digest_is_refused() {
    let layer = gzip(&tar_of(&[entry("a", b'0', b"x", "")]));
    let wrong = format!("sha256:{}", "0".repeat(64));
    let input = LayerInput { index: 0, name: &wrong, verify_digest: true };
    let err = apply_layer(
        &mut ImageFs::new(),
        &layer[..],
        &input,
        &wants_everything,
        &Limits::default(),
        &mut Budget::default(),
    )
    .expect_err("mismatch");
    assert!(matches!(err, LayerError::DigestMismatch { .. }), "{err}");
}

#[test]
fn gzip_zstd_and_plain_layers_stack_with_whiteouts() {
    let mut fs = ImageFs::new();
    let bottom = gzip(&tar_of(&[
        entry("var/lib/dpkg/status", b'0', b"bottom", ""),
        entry("opt/app/a", b'0', b"a", ""),
        entry("opt/app/b", b'0', b"b", ""),
    ]));
    apply(&mut fs, &bottom, 0, &Limits::default()).expect("gzip layer");
    let middle = ruzstd::encoding::compress_to_vec(
        &tar_of(&[entry("opt/app/.wh.a", b'0', b"", ""), entry("var/lib/dpkg/status", b'0', b"middle", "")])
            [..],
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    apply(&mut fs, &middle, 1, &Limits::default()).expect("zstd layer");
    assert!(fs.read("opt/app/a").is_none(), "whited out");
    assert!(fs.read("opt/app/b").is_some());
    assert_eq!(
        fs.read("var/lib/dpkg/status").map(|f| (f.data.to_vec(), f.layer)),
        Some((b"middle".to_vec(), 1))
    );
    let top = tar_of(&[entry("opt/app/.wh..wh..opq", b'0', b"", ""), entry("opt/app/c", b'0', b"c", "")]);
    apply(&mut fs, &top, 2, &Limits::default()).expect("plain layer");
    assert!(fs.read("opt/app/b").is_none(), "opaque directory hides the lower layer");
    assert!(fs.read("opt/app/c").is_some());
}
