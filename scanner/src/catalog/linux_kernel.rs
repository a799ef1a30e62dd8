//! The Linux kernel and its loadable modules, from the files themselves: a
//! root filesystem (a VM's, an appliance's) carries a kernel no package
//! database may list, and modules built outside the distribution.
//!
//! **The kernel**: an x86 boot image (`bzImage`) named `vmlinuz`,
//! `vmlinuz-*` or `bzImage`. By the x86 boot protocol
//! (`Documentation/arch/x86/boot.rst`), its real-mode header carries the
//! magic `HdrS` at offset `0x202`, the protocol version (little-endian
//! `u16`) at `0x206` and, from protocol 2.00 on, at `0x20e` the
//! `kernel_version` field: the offset, less `0x200`, of a NUL-terminated
//! string such as `6.1.0-18-amd64 (debian-kernel@lists.debian.org) #1 SMP
//! PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)`. Its first word is the
//! kernel release (`uname -r`), reported as package `linux-kernel`, as syft
//! names it. A file without the magic, or whose field is 0 or points outside
//! the file, is no kernel this reads: no package.
//!
//! **Modules**: ELF relocatable files `*.ko` under `lib/modules/` or
//! `usr/lib/modules/`. The kernel's `modpost` and `MODULE_INFO` write the
//! section `.modinfo` as NUL-separated `tag=value` strings (`name`,
//! `version`, `license`, `vermagic`, `srcversion`, `alias`, …; a tag may
//! repeat). A module is reported by its `name` tag (its file name without
//! `.ko` when the tag is absent, as in kernels before 5.x) at its `version`
//! tag, as syft reports it; most in-tree modules have none, and are then
//! versioned by the kernel release their `vermagic` was built for (its first
//! word): such a module ships with that kernel and changes with it. A
//! module with neither is reported without a version. Compressed modules
//! (`.ko.gz`, `.ko.xz`, `.ko.zst`, as Alpine, Debian 13, Fedora and Ubuntu
//! ship them) are decompressed in memory, at most [`MAX_MODULE_BYTES`]
//! (the largest in-tree modules are some tens of megabytes), and read the
//! same way; syft 1.18 does not read them.
//!
//! Neither kind has an OSV ecosystem PatchPilot matches: distribution
//! kernels are matched through their OS packages (`linux-image-*`,
//! `linux-virt`), which carry the distribution's own fixes. They are
//! inventory, for the SBOM.
//!
//! Both are read in ranges: the boot header and the version string, or the
//! ELF headers and `.modinfo` (at most [`MAX_MODINFO_BYTES`]). A compressed
//! module is read whole: its section table is at the end of the
//! decompressed stream.

use std::io::Read as _;

use object::ReadRef;

use super::{Cataloger, Error, FileReader, elf};
use crate::package::{Package, PackageKind};

/// Name of this cataloger in errors and logs.
const CATALOGER: &str = "linux-kernel";

/// The name the kernel is reported under.
pub const KERNEL_PACKAGE: &str = "linux-kernel";

/// Offset of the boot protocol's header magic.
const HEADER_MAGIC_OFFSET: u64 = 0x202;
/// `HdrS`.
const HEADER_MAGIC: &[u8] = b"HdrS";
/// Offset of the protocol version.
const PROTOCOL_OFFSET: u64 = 0x206;
/// Offset of `kernel_version`.
const KERNEL_VERSION_OFFSET: u64 = 0x20e;
/// What `kernel_version` is relative to.
const KERNEL_VERSION_BASE: u64 = 0x200;
/// The first protocol with `kernel_version`.
const KERNEL_VERSION_PROTOCOL: u16 = 0x0200;
/// Longest version string read; real ones are about a hundred bytes.
const MAX_VERSION_STRING: u64 = 512;

/// The section module metadata lives in.
const MODINFO_SECTION: &[u8] = b".modinfo";
/// Largest `.modinfo` read; real ones are a few kilobytes, the largest
/// (drivers with thousands of device aliases) some hundreds.
pub const MAX_MODINFO_BYTES: u64 = 4 << 20;

/// Largest decompressed module read; a larger one is an error naming it.
pub const MAX_MODULE_BYTES: u64 = 64 << 20;

/// How a compressed module file is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    Gzip,
    Xz,
    Zstd,
}

/// A module's file name suffixes, and how each is compressed.
const MODULE_SUFFIXES: [(&str, Option<Compression>); 4] = [
    (".ko", None),
    (".ko.gz", Some(Compression::Gzip)),
    (".ko.xz", Some(Compression::Xz)),
    (".ko.zst", Some(Compression::Zstd)),
];

/// Finds the Linux kernel and its modules.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinuxKernelCataloger;

impl Cataloger for LinuxKernelCataloger {
    fn name(&self) -> &'static str {
        CATALOGER
    }

    fn wants(&self, path: &str, _executable: bool) -> bool {
        is_kernel_image(path) || is_module(path)
    }

    fn parse(&self, path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
        catalog(path, data)
    }

    fn reads_ranges(&self) -> bool {
        true
    }

    fn parse_file(&self, path: &str, file: &FileReader<'_>) -> Result<Vec<Package>, Error> {
        catalog(path, file)
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn is_kernel_image(path: &str) -> bool {
    let name = file_name(path);
    name == "vmlinuz" || name.starts_with("vmlinuz-") || name == "bzImage"
}

fn is_module(path: &str) -> bool {
    module_suffix(path).is_some()
}

/// For a module's path, its suffix and how it is compressed; `None` for
/// any other file.
fn module_suffix(path: &str) -> Option<(&'static str, Option<Compression>)> {
    if !(path.starts_with("lib/modules/") || path.starts_with("usr/lib/modules/")) {
        return None;
    }
    MODULE_SUFFIXES.into_iter().find(|(suffix, _)| path.ends_with(suffix))
}

fn catalog<'data>(path: &str, data: impl ReadRef<'data>) -> Result<Vec<Package>, Error> {
    let found = if let Some((suffix, compression)) = module_suffix(path) {
        let module = match compression {
            None => read_module(data),
            Some(compressed) => {
                let whole = data
                    .len()
                    .and_then(|len| data.read_bytes_at(0, len))
                    .map_err(|()| Error::new(CATALOGER, path, "the file cannot be read"))?;
                let module = decompress(compressed, whole).map_err(|e| Error::new(CATALOGER, path, e))?;
                read_module(&module[..])
            }
        };
        module.map_err(|err| Error::new(CATALOGER, path, err.to_string()))?.map(|module| {
            let name = module.name.unwrap_or_else(|| file_name(path).trim_end_matches(suffix).to_owned());
            let version = module.version.or(module.kernel_release).unwrap_or_default();
            package(name, version, PackageKind::LinuxKernelModule, path)
        })
    } else {
        kernel_release(data)
            .map(|release| package(KERNEL_PACKAGE.to_owned(), release, PackageKind::LinuxKernel, path))
    };
    Ok(found.into_iter().collect())
}

/// The module `compressed` holds, at most [`MAX_MODULE_BYTES`] of it.
fn decompress(compression: Compression, compressed: &[u8]) -> Result<Vec<u8>, String> {
    let mut module = Vec::new();
    let read = match compression {
        Compression::Gzip => {
            flate2::read::MultiGzDecoder::new(compressed).take(MAX_MODULE_BYTES + 1).read_to_end(&mut module)
        }
        Compression::Zstd => ruzstd::decoding::StreamingDecoder::new(compressed)
            .map_err(|e| format!("not zstd: {e}"))?
            .take(MAX_MODULE_BYTES + 1)
            .read_to_end(&mut module),
        Compression::Xz => {
            let mut capped = Capped { bytes: &mut module, cap: MAX_MODULE_BYTES as usize };
            lzma_rs::xz_decompress(&mut std::io::BufReader::new(compressed), &mut capped).map(|()| 0).map_err(
                |e| match e {
                    lzma_rs::error::Error::IoError(io) => io,
                    other => std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{other:?}")),
                },
            )
        }
    };
    read.map_err(|e| format!("cannot decompress it: {e}"))?;
    if module.len() as u64 > MAX_MODULE_BYTES {
        return Err(format!("it decompresses to more than {MAX_MODULE_BYTES} bytes"));
    }
    Ok(module)
}

/// A writer that takes at most `cap` + 1 bytes, then refuses: the xz
/// decoder writes where the others are read.
struct Capped<'a> {
    bytes: &'a mut Vec<u8>,
    cap: usize,
}

impl std::io::Write for Capped<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() > self.cap {
            return Err(std::io::Error::other(format!("more than {} bytes", self.cap)));
        }
        let room = self.cap + 1 - self.bytes.len();
        let taken = buf.len().min(room);
        self.bytes.extend_from_slice(&buf[..taken]);
        Ok(taken)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn package(name: String, version: String, kind: PackageKind, path: &str) -> Package {
    Package {
        name,
        version,
        kind,
        source_name: None,
        source_version: None,
        arch: None,
        path: path.to_owned(),
        layer: None,
        ecosystem: String::new(),
    }
}

/// The kernel release a boot image's header names; `None` when `data` is
/// not a boot image with a version string.
pub fn kernel_release<'data>(data: impl ReadRef<'data>) -> Option<String> {
    if data.read_bytes_at(HEADER_MAGIC_OFFSET, HEADER_MAGIC.len() as u64).ok()? != HEADER_MAGIC {
        return None;
    }
    let le16 = |offset: u64| data.read_bytes_at(offset, 2).ok().map(|b| u16::from_le_bytes([b[0], b[1]]));
    if le16(PROTOCOL_OFFSET)? < KERNEL_VERSION_PROTOCOL {
        return None;
    }
    let pointer = le16(KERNEL_VERSION_OFFSET)?;
    if pointer == 0 {
        return None;
    }
    let start = u64::from(pointer) + KERNEL_VERSION_BASE;
    let len = data.len().ok()?.checked_sub(start)?.min(MAX_VERSION_STRING);
    let bytes = data.read_bytes_at(start, len).ok()?;
    let text = bytes.split(|&b| b == 0).next()?;
    let release = std::str::from_utf8(text).ok()?.split_whitespace().next()?;
    // A release is printable ASCII; anything else is not the string the
    // field is meant to point at.
    release.bytes().all(|b| b.is_ascii_graphic()).then(|| release.to_owned())
}

/// What a module's `.modinfo` says about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleInfo {
    /// `name` tag.
    pub name: Option<String>,
    /// `version` tag.
    pub version: Option<String>,
    /// `license` tag.
    pub license: Option<String>,
    /// First word of the `vermagic` tag: the kernel release it was built for.
    pub kernel_release: Option<String>,
}

/// A module's `.modinfo` section that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModinfoError {
    /// Larger than [`MAX_MODINFO_BYTES`].
    #[error("section .modinfo: {size} bytes exceed the {MAX_MODINFO_BYTES}-byte cap")]
    TooLarge {
        /// The section's size in the file.
        size: u64,
    },
    /// Its bytes lie (partly) outside the file.
    #[error("section .modinfo: {size} bytes at offset {offset:#x} run past the end of the file")]
    OutsideFile {
        /// `sh_offset`.
        offset: u64,
        /// `sh_size`.
        size: u64,
    },
}

/// The `.modinfo` of the ELF module `data`: `Ok(None)` when `data` is not
/// ELF or has no such section (not a module).
pub fn read_module<'data>(data: impl ReadRef<'data>) -> Result<Option<ModuleInfo>, ModinfoError> {
    let Some(section) = elf::read(data, MODINFO_SECTION).and_then(|layout| layout.section) else {
        return Ok(None);
    };
    let (offset, size) = (section.offset, section.file_size);
    if size > MAX_MODINFO_BYTES {
        return Err(ModinfoError::TooLarge { size });
    }
    let bytes = elf::in_file(data, offset, size)
        .then(|| data.read_bytes_at(offset, size).ok())
        .flatten()
        .ok_or(ModinfoError::OutsideFile { offset, size })?;
    Ok(Some(parse_modinfo(bytes)))
}

/// `tag=value` strings separated by NULs (padding NULs between them
/// included); the first of a repeated tag counts.
pub fn parse_modinfo(bytes: &[u8]) -> ModuleInfo {
    let mut info = ModuleInfo::default();
    for entry in bytes.split(|&b| b == 0).filter(|e| !e.is_empty()) {
        let entry = String::from_utf8_lossy(entry);
        let Some((tag, value)) = entry.split_once('=') else {
            continue;
        };
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        let slot = match tag {
            "name" => &mut info.name,
            "version" => &mut info.version,
            "license" => &mut info.license,
            "vermagic" => &mut info.kernel_release,
            _ => continue,
        };
        if slot.is_none() {
            let value =
                if tag == "vermagic" { value.split_whitespace().next().unwrap_or(value) } else { value };
            *slot = Some(value.to_owned());
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A boot image's first bytes as the x86 boot protocol lays them out:
    /// the version string placed right after the header, as real kernels
    /// place it in the setup code.
    fn boot_image(protocol: u16, version: &[u8]) -> Vec<u8> {
        let mut image = vec![0u8; 0x300];
        image[0x1fe..0x200].copy_from_slice(&[0x55, 0xaa]);
        image[0x202..0x206].copy_from_slice(HEADER_MAGIC);
        image[0x206..0x208].copy_from_slice(&protocol.to_le_bytes());
        let at = image.len();
        image[0x20e..0x210].copy_from_slice(&u16::try_from(at - 0x200).expect("small").to_le_bytes());
        image.extend_from_slice(version);
        image.push(0);
        image.extend_from_slice(&[0xAB; 64]);
        image
    }

    #[test]
    fn the_release_is_the_first_word_of_the_boot_headers_version_string() {
        let debian = b"6.1.0-18-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)";
        assert_eq!(kernel_release(&boot_image(0x020f, debian)[..]).as_deref(), Some("6.1.0-18-amd64"));
        let alpine =
            b"6.18.56-0-virt (buildozer@build-3-23-x86_64) #1-Alpine SMP PREEMPT_DYNAMIC 2026-10-12 12:54:18";
        assert_eq!(kernel_release(&boot_image(0x020f, alpine)[..]).as_deref(), Some("6.18.56-0-virt"));
    }

    #[test]
    fn images_without_a_version_string_are_no_kernel() {
        // Protocol 1.x has no `kernel_version` field.
        assert_eq!(kernel_release(&boot_image(0x0105, b"6.1.0")[..]), None);
        let mut zero = boot_image(0x020f, b"6.1.0");
        zero[0x20e..0x210].copy_from_slice(&[0, 0]);
        assert_eq!(kernel_release(&zero[..]), None);
        let mut outside = boot_image(0x020f, b"6.1.0");
        outside[0x20e..0x210].copy_from_slice(&0xfff0u16.to_le_bytes());
        assert_eq!(kernel_release(&outside[..]), None);
        let mut no_magic = boot_image(0x020f, b"6.1.0");
        no_magic[0x202] = b'X';
        assert_eq!(kernel_release(&no_magic[..]), None);
        assert_eq!(kernel_release(&boot_image(0x020f, b"")[..]), None);
        assert_eq!(kernel_release(&b"HdrS"[..]), None);
        assert_eq!(kernel_release(&[][..]), None);
    }

    #[test]
    fn modinfo_tags_are_read_first_one_wins() {
        let section = b"\0\0license=GPL\0description=Overlay filesystem\0author=Miklos Szeredi\0alias=fs-overlay\0depends=\0retpoline=Y\0intree=Y\0name=overlay\0vermagic=6.1.0-18-amd64 SMP preempt mod_unload modversions \0\0\0version=1.2\0version=9.9\0";
        assert_eq!(
            parse_modinfo(section),
            ModuleInfo {
                name: Some("overlay".into()),
                version: Some("1.2".into()),
                license: Some("GPL".into()),
                kernel_release: Some("6.1.0-18-amd64".into()),
            }
        );
        assert_eq!(parse_modinfo(b"garbage\0=\0name=\0"), ModuleInfo::default());
    }

    #[test]
    fn wanted_paths() {
        let cataloger = LinuxKernelCataloger;
        for wanted in [
            "boot/vmlinuz-6.1.0-18-amd64",
            "boot/vmlinuz-virt",
            "boot/vmlinuz",
            "lib/modules/6.18.56-0-virt/vmlinuz",
            "lib/modules/6.1.0-18-amd64/kernel/fs/overlayfs/overlay.ko",
            "usr/lib/modules/6.1.0-18-amd64/kernel/net/bridge/bridge.ko",
            "lib/modules/6.18.56-0-virt/kernel/fs/overlayfs/overlay.ko.gz",
            "lib/modules/6.12.57+deb13-amd64/kernel/fs/overlayfs/overlay.ko.xz",
            "usr/lib/modules/6.8.0-88-generic/kernel/fs/overlayfs/overlay.ko.zst",
        ] {
            assert!(cataloger.wants(wanted, false), "{wanted}");
        }
        for unwanted in [
            "boot/config-6.1.0-18-amd64",
            "boot/System.map-6.1.0-18-amd64",
            "lib/modules/6.18.56-0-virt/kernel/fs/overlayfs/overlay.ko.bz2",
            "lib/modules/6.1.0-18-amd64/modules.dep",
            "opt/driver/thing.ko",
        ] {
            assert!(!cataloger.wants(unwanted, false), "{unwanted}");
        }
    }

    #[test]
    fn a_module_that_decompresses_past_the_cap_is_refused() {
        use std::io::Write as _;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..=(MAX_MODULE_BYTES >> 20) {
            gz.write_all(&zeros).expect("compress");
        }
        let bomb = gz.finish().expect("compress");
        let err = decompress(Compression::Gzip, &bomb).expect_err("past the cap");
        assert!(err.contains("more than"), "{err}");
        // The xz decoder writes into a writer that takes its cap and one
        // byte more, then refuses.
        let mut bytes = Vec::new();
        let mut capped = Capped { bytes: &mut bytes, cap: 4 };
        assert_eq!(capped.write(b"abcdefgh").expect("room for 5"), 5);
        assert!(capped.write(b"i").is_err());
    }

    #[test]
    fn files_that_are_neither_yield_nothing() {
        let cataloger = LinuxKernelCataloger;
        assert_eq!(cataloger.parse("boot/vmlinuz", b"not a kernel"), Ok(Vec::new()));
        assert_eq!(cataloger.parse("lib/modules/x/a.ko", b"not ELF"), Ok(Vec::new()));
        let kernel = cataloger
            .parse("boot/vmlinuz-6.1.0-18-amd64", &boot_image(0x020f, b"6.1.0-18-amd64 (x) #1"))
            .expect("readable");
        assert_eq!(kernel.len(), 1);
        assert_eq!(
            (kernel[0].name.as_str(), kernel[0].version.as_str(), kernel[0].kind),
            (KERNEL_PACKAGE, "6.1.0-18-amd64", PackageKind::LinuxKernel)
        );
        assert_eq!(kernel[0].ecosystem, "");
    }
}
