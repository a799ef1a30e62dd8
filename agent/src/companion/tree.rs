//! The files of a workspace the companion planner reads, found by name.
//!
//! Vendored trees (`vendor/`, `node_modules/`, `third_party/`) and `.git/`
//! are skipped at any depth, symbolic links are never followed (a link
//! could lead out of the workspace, and `apply` refuses to write through
//! one), and the walk is bounded in depth, count and file size so that an
//! odd repository cannot make it slow.

use std::path::Path;

/// Folders never entered.
const SKIPPED: [&str; 4] = ["vendor", "node_modules", "third_party", ".git"];
/// Deeper folders are not read.
const MAX_DEPTH: usize = 16;
/// At most this many directory entries are looked at.
const MAX_ENTRIES: usize = 50_000;
/// Larger files are not read (none of the files we look for is large).
const MAX_FILE: u64 = 1024 * 1024;

/// What a file is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `Dockerfile`, `Dockerfile.*`, `*.Dockerfile`, `Containerfile`.
    Dockerfile,
    /// `Makefile`, `makefile`, `GNUmakefile`, `*.mk`.
    Makefile,
    /// `.github/workflows/*.yml`.
    Workflow,
    /// `go.mod`.
    GoMod,
    /// `package.json`.
    PackageJson,
    /// `.nvmrc`, `.node-version`.
    NodeVersion,
    /// `.python-version`.
    PythonVersion,
    /// `.go-version`.
    GoVersion,
    /// `.tool-versions` (asdf, mise).
    ToolVersions,
    /// `.pre-commit-config.yaml`.
    PreCommit,
    /// `requirements*.txt`, `constraints*.txt`, `requirements/*.txt`.
    Requirements,
    /// `pyproject.toml`.
    Pyproject,
    /// A dotfile ending in `-version` that holds one tool's version
    /// (`.golangci-lint-version`).
    VersionFile,
    /// A golangci-lint configuration (`.golangci.yml` and friends).
    GolangciConfig,
}

/// A file read from the workspace.
#[derive(Debug, Clone)]
pub struct File {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    /// Its name.
    pub name: String,
    /// Its text.
    pub text: String,
    /// What it is.
    pub kind: Kind,
}

#[cfg(test)]
impl File {
    /// A file as the walk would read it, for the detectors' tests.
    pub(crate) fn for_test(path: &str, text: &str) -> File {
        File {
            path: path.into(),
            name: path.rsplit('/').next().unwrap_or(path).into(),
            text: text.into(),
            kind: kind_of(path).expect("a known kind"),
        }
    }
}

/// The kind of a file by its relative path.
pub fn kind_of(path: &str) -> Option<Kind> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let lower = name.to_ascii_lowercase();
    let kind = match name {
        "go.mod" => Kind::GoMod,
        "package.json" => Kind::PackageJson,
        ".nvmrc" | ".node-version" => Kind::NodeVersion,
        ".python-version" => Kind::PythonVersion,
        ".go-version" => Kind::GoVersion,
        ".tool-versions" => Kind::ToolVersions,
        ".pre-commit-config.yaml" | ".pre-commit-config.yml" => Kind::PreCommit,
        "pyproject.toml" => Kind::Pyproject,
        "Makefile" | "makefile" | "GNUmakefile" => Kind::Makefile,
        "Containerfile" => Kind::Dockerfile,
        ".golangci.yml" | ".golangci.yaml" | ".golangci.toml" | ".golangci.json" => Kind::GolangciConfig,
        _ if lower == "dockerfile" || lower.starts_with("dockerfile.") || lower.ends_with(".dockerfile") => {
            Kind::Dockerfile
        }
        _ if name.ends_with(".mk") => Kind::Makefile,
        _ if path.starts_with(".github/workflows/")
            && (name.ends_with(".yml") || name.ends_with(".yaml")) =>
        {
            Kind::Workflow
        }
        _ if name.ends_with(".txt")
            && (lower.starts_with("requirements")
                || lower.starts_with("constraints")
                || path.contains("requirements/")) =>
        {
            Kind::Requirements
        }
        _ if name.starts_with('.') && name.ends_with("-version") => Kind::VersionFile,
        _ => return None,
    };
    Some(kind)
}

/// Reads the files of `workspace` the planner looks at, in path order;
/// what it skips or cannot read goes to `notes`.
pub fn read(workspace: &Path, notes: &mut Vec<String>) -> Vec<File> {
    let mut files = Vec::new();
    let mut entries = 0;
    let mut pending = vec![(workspace.to_path_buf(), String::new(), 0usize)];
    while let Some((dir, rel, depth)) = pending.pop() {
        let listing = match std::fs::read_dir(&dir) {
            Ok(l) => l,
            Err(e) => {
                notes.push(format!("cannot list {}: {e}", if rel.is_empty() { "." } else { &rel }));
                continue;
            }
        };
        for entry in listing.flatten() {
            entries += 1;
            if entries > MAX_ENTRIES {
                notes.push(format!("stopped reading the workspace after {MAX_ENTRIES} entries"));
                return sorted(files);
            }
            let Ok(name) = entry.file_name().into_string() else { continue };
            let path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            // symlink_metadata: a link is neither a file nor a folder here.
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else { continue };
            if meta.is_dir() {
                if SKIPPED.contains(&name.as_str()) {
                    continue;
                }
                if depth + 1 > MAX_DEPTH {
                    notes.push(format!("{path}/ is deeper than {MAX_DEPTH} folders and was not read"));
                    continue;
                }
                pending.push((entry.path(), path, depth + 1));
                continue;
            }
            if !meta.is_file() {
                continue;
            }
            let Some(kind) = kind_of(&path) else { continue };
            if meta.len() > MAX_FILE {
                notes.push(format!("{path} is larger than {MAX_FILE} bytes and was not read"));
                continue;
            }
            match std::fs::read(entry.path()).map(String::from_utf8) {
                Ok(Ok(text)) => files.push(File { path, name, text, kind }),
                Ok(Err(_)) => notes.push(format!("{path} is not UTF-8 and was not read")),
                Err(e) => notes.push(format!("cannot read {path}: {e}")),
            }
        }
    }
    sorted(files)
}

fn sorted(mut files: Vec<File>) -> Vec<File> {
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_name() {
        assert_eq!(kind_of("Dockerfile"), Some(Kind::Dockerfile));
        assert_eq!(kind_of("build/Dockerfile.ci"), Some(Kind::Dockerfile));
        assert_eq!(kind_of("api.Dockerfile"), Some(Kind::Dockerfile));
        assert_eq!(kind_of("tools/lint.mk"), Some(Kind::Makefile));
        assert_eq!(kind_of(".github/workflows/ci.yaml"), Some(Kind::Workflow));
        assert_eq!(kind_of("ci.yaml"), None);
        assert_eq!(kind_of("requirements-dev.txt"), Some(Kind::Requirements));
        assert_eq!(kind_of("requirements/base.txt"), Some(Kind::Requirements));
        assert_eq!(kind_of("notes.txt"), None);
        assert_eq!(kind_of(".golangci-lint-version"), Some(Kind::VersionFile));
        assert_eq!(kind_of(".python-version"), Some(Kind::PythonVersion));
    }

    #[test]
    fn skips_vendored_trees_and_links() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for p in ["vendor/x", "node_modules/y", "a/third_party/z", "src"] {
            std::fs::create_dir_all(root.join(p)).expect("mkdir");
        }
        for p in
            ["vendor/x/Makefile", "node_modules/y/package.json", "a/third_party/z/go.mod", "src/Makefile"]
        {
            std::fs::write(root.join(p), "X ?= 1\n").expect("write");
        }
        std::fs::write(root.join("outside.mk"), "X ?= 1\n").expect("write");
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("outside.mk"), root.join("src/linked.mk")).expect("symlink");
        let mut notes = Vec::new();
        let paths: Vec<String> = read(root, &mut notes).into_iter().map(|f| f.path).collect();
        assert_eq!(paths, vec!["outside.mk", "src/Makefile"], "{notes:?}");
    }
}
