//! Checks on what the applied patch left in the working tree: file magic,
//! where symlinks lead, and the names a compiled copy of the repository's
//! own program would carry. Files are read, never executed or parsed
//! beyond their first bytes.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

/// How many leading bytes the magic checks need (tar's `ustar` sits at 257).
pub(crate) const HEAD_BYTES: usize = 4096;

/// What kind of compiled or packed file `head` starts like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryKind {
    /// An executable or object file (ELF, Mach-O, PE).
    Executable(&'static str),
    /// A Java class file: compiled output rather than a program.
    JavaClass,
    /// An archive or compressed stream.
    Archive(&'static str),
}

impl BinaryKind {
    /// A short description for reports.
    pub fn describe(self) -> &'static str {
        match self {
            BinaryKind::Executable(s) | BinaryKind::Archive(s) => s,
            BinaryKind::JavaClass => "Java class file",
        }
    }
}

/// Sniffs executables and archives from a file's first bytes. `pe_header`
/// is the 4 bytes at the offset an `MZ` header points to (its bytes
/// 0x3c..0x40, little-endian), when the caller could read them.
pub fn sniff(head: &[u8], pe_header: Option<[u8; 4]>) -> Option<BinaryKind> {
    let starts = |m: &[u8]| head.starts_with(m);
    if starts(b"\x7fELF") {
        return Some(BinaryKind::Executable("ELF executable or object"));
    }
    for m in [b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe"] {
        if starts(m) {
            return Some(BinaryKind::Executable("Mach-O executable or object"));
        }
    }
    // 0xCAFEBABE is both a universal (fat) Mach-O and a Java class; the
    // next word tells them apart: an architecture count (small) against a
    // class-file version (45 and up), the rule file(1) uses.
    if starts(b"\xca\xfe\xba\xbe") || starts(b"\xca\xfe\xba\xbf") {
        let next = head.get(4..8).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]])).unwrap_or(0);
        return Some(if next < 30 {
            BinaryKind::Executable("Mach-O universal binary")
        } else {
            BinaryKind::JavaClass
        });
    }
    if starts(b"\xbe\xba\xfe\xca") || starts(b"\xbf\xba\xfe\xca") {
        return Some(BinaryKind::Executable("Mach-O universal binary"));
    }
    if starts(b"MZ") && pe_header == Some(*b"PE\0\0") {
        return Some(BinaryKind::Executable("PE (Windows) executable"));
    }
    if starts(b"\0asm") {
        return Some(BinaryKind::Executable("WebAssembly module"));
    }
    const ARCHIVES: &[(&[u8], &str)] = &[
        (b"!<arch>\n", "ar archive (static library or .deb)"),
        (b"PK\x03\x04", "zip archive (zip, jar, wheel)"),
        (b"PK\x05\x06", "zip archive (empty)"),
        (b"PK\x07\x08", "zip archive (spanned)"),
        (b"\x1f\x8b", "gzip stream"),
        (b"\xfd7zXZ\x00", "xz stream"),
        (b"\x28\xb5\x2f\xfd", "zstd stream"),
        (b"7z\xbc\xaf\x27\x1c", "7z archive"),
        (b"Rar!\x1a\x07", "rar archive"),
        (b"\x04\x22\x4d\x18", "lz4 stream"),
    ];
    if let Some((_, what)) = ARCHIVES.iter().find(|(m, _)| starts(m)) {
        return Some(BinaryKind::Archive(what));
    }
    // bzip2: `BZh1`–`BZh9`, then the block magic (pi's digits), so a text
    // file starting "BZh" is not mistaken for one.
    if head.len() >= 10 && starts(b"BZh") && (b'1'..=b'9').contains(&head[3]) && &head[4..10] == b"1AY&SY" {
        return Some(BinaryKind::Archive("bzip2 stream"));
    }
    if head.get(257..262) == Some(b"ustar") {
        return Some(BinaryKind::Archive("tar archive"));
    }
    None
}

/// The first [`HEAD_BYTES`] of a file and, for an `MZ` file, the four
/// bytes its PE header offset points at.
pub(crate) fn read_head(path: &Path) -> std::io::Result<(Vec<u8>, Option<[u8; 4]>)> {
    let mut file = File::open(path)?;
    let mut head = Vec::with_capacity(HEAD_BYTES);
    (&mut file).take(HEAD_BYTES as u64).read_to_end(&mut head)?;
    let mut pe = None;
    if head.starts_with(b"MZ")
        && let Some(off) = head.get(0x3c..0x40)
    {
        let off = u64::from(u32::from_le_bytes([off[0], off[1], off[2], off[3]]));
        let mut sig = [0u8; 4];
        if file.seek(SeekFrom::Start(off)).is_ok() && file.read_exact(&mut sig).is_ok() {
            pe = Some(sig);
        }
    }
    Ok((head, pe))
}

/// Where a symlink at `link` (relative to `root`) leads, followed through
/// any symlinks already in the tree: `Err` with the reason if it leaves
/// `root`. Lexical normalisation alone is not enough: `a -> b/..` stays
/// inside only if `b` is not itself a link to somewhere else.
pub(crate) fn symlink_escapes(root: &Path, link: &str, target: &Path) -> Option<String> {
    if target.is_absolute() {
        return Some(format!("absolute target {}", target.display()));
    }
    let mut stack: Vec<String> = link.split('/').map(str::to_owned).collect();
    stack.pop();
    let Some(mut queue) = components(target) else {
        return Some(format!("target {} is not a plain relative path", target.display()));
    };
    queue.reverse();
    let mut hops = 0;
    while let Some(c) = queue.pop() {
        match c.as_str() {
            "" | "." => {}
            ".." => {
                if stack.pop().is_none() {
                    return Some(format!("target {} resolves outside the repository", target.display()));
                }
            }
            _ => {
                stack.push(c);
                let here = root.join(stack.join("/"));
                if let Ok(meta) = std::fs::symlink_metadata(&here)
                    && meta.file_type().is_symlink()
                {
                    hops += 1;
                    if hops > 40 {
                        return Some("symlink loop".into());
                    }
                    let Ok(next) = std::fs::read_link(&here) else {
                        return Some("unreadable symlink on the way".into());
                    };
                    if next.is_absolute() {
                        return Some(format!(
                            "target {} passes through a link to {}",
                            target.display(),
                            next.display()
                        ));
                    }
                    stack.pop();
                    let Some(mut more) = components(&next) else {
                        return Some("a link on the way is not a plain relative path".into());
                    };
                    more.reverse();
                    queue.extend(more);
                }
            }
        }
    }
    None
}

fn components(p: &Path) -> Option<Vec<String>> {
    p.components()
        .map(|c| match c {
            Component::Normal(s) => s.to_str().map(str::to_owned),
            Component::CurDir => Some(".".into()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Names a compiled copy of the repository's own program would have: the
/// repository's name, each `cmd/<x>` folder, the Go module's last path
/// element and the Cargo package and `[[bin]]` names. Lower case.
pub(crate) fn main_names(clone: &Path, repo_name: Option<&str>) -> Vec<String> {
    let mut names = Vec::new();
    let repo = repo_name
        .map(str::to_owned)
        .or_else(|| clone.file_name().and_then(|n| n.to_str()).map(str::to_owned));
    names.extend(repo);
    if let Ok(entries) = std::fs::read_dir(clone.join("cmd")) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir())
                && let Some(n) = entry.file_name().to_str()
            {
                names.push(n.to_owned());
            }
        }
    }
    if let Ok(go_mod) = std::fs::read_to_string(clone.join("go.mod"))
        && let Some(module) = go_mod.lines().find_map(|l| l.trim().strip_prefix("module "))
    {
        let module = module.trim().trim_matches('"');
        let mut parts = module.rsplit('/');
        let last = parts.next().unwrap_or("");
        // `example.com/app/v2` builds a binary called `app`.
        let is_major =
            last.len() > 1 && last.starts_with('v') && last[1..].bytes().all(|b| b.is_ascii_digit());
        let name = if is_major { parts.next().unwrap_or(last) } else { last };
        names.push(name.to_owned());
    }
    if let Ok(cargo) = std::fs::read_to_string(clone.join("Cargo.toml")) {
        let mut section = String::new();
        for line in cargo.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                section = line.to_owned();
            } else if (section == "[package]" || section == "[[bin]]")
                && let Some(v) = line.strip_prefix("name")
                && let Some(v) = v.trim_start().strip_prefix('=')
            {
                names.push(v.trim().trim_matches('"').to_owned());
            }
        }
    }
    let mut names: Vec<String> =
        names.into_iter().filter(|n| !n.is_empty()).map(|n| n.to_lowercase()).collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_the_magic_numbers() {
        assert!(matches!(sniff(b"\x7fELF\x02\x01\x01", None), Some(BinaryKind::Executable(_))));
        assert!(matches!(sniff(b"\xcf\xfa\xed\xfe\x07\0\0\x01", None), Some(BinaryKind::Executable(_))));
        assert!(matches!(sniff(b"\xca\xfe\xba\xbe\0\0\0\x02", None), Some(BinaryKind::Executable(_))));
        assert_eq!(sniff(b"\xca\xfe\xba\xbe\0\0\0\x41", None), Some(BinaryKind::JavaClass));
        assert!(sniff(b"MZ\x90\0", None).is_none());
        assert!(matches!(sniff(b"MZ\x90\0", Some(*b"PE\0\0")), Some(BinaryKind::Executable(_))));
        assert!(matches!(sniff(b"PK\x03\x04", None), Some(BinaryKind::Archive(_))));
        let mut tar = vec![b'a'; 300];
        tar[257..262].copy_from_slice(b"ustar");
        assert!(matches!(sniff(&tar, None), Some(BinaryKind::Archive(_))));
        assert!(sniff(b"BZh is a text file about bzip2", None).is_none());
        assert!(sniff(b"package main\n", None).is_none());
    }

    #[test]
    fn symlinks_are_followed_through_the_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).expect("dirs");
        assert!(symlink_escapes(root, "a/l", Path::new("b/../x")).is_none());
        assert!(symlink_escapes(root, "a/l", Path::new("../../x")).is_some());
        assert!(symlink_escapes(root, "l", Path::new("/etc/passwd")).is_some());
        // `up` points two folders up; `a/up/..` looks inside but is not.
        std::os::unix::fs::symlink("../..", root.join("a/up")).expect("symlink");
        assert!(symlink_escapes(root, "a/l", Path::new("up/x")).is_some());
    }
}
