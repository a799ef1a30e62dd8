//! The workspace as the tools see it: paths the model names are checked
//! before any file is touched, and the tree as it was when the session
//! started is kept, so gates can diff against it and a session that gives
//! up can put everything back.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use patchpilot_model::context::CONTEXT_DIR;

/// Folders that are other people's code, skipped unless asked for.
pub const VENDORED: &[&str] = &["vendor", "node_modules", "third_party"];
/// Folders never listed, read or written by a tool.
const HIDDEN: &[&str] = &[".git"];
/// Largest file the snapshot keeps the bytes of; larger ones are hashed.
const SNAPSHOT_FILE_BYTES: u64 = 1 << 20;
/// Most bytes the snapshot keeps in all.
const SNAPSHOT_TOTAL_BYTES: u64 = 64 << 20;

/// A path the model named, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// Relative, `/`-separated, no `.` or `..`.
    pub rel: String,
    /// Absolute.
    pub abs: PathBuf,
}

/// The workspace root and the rules on paths.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// The workspace at `root` (made absolute).
    pub fn new(root: &Path) -> std::io::Result<Workspace> {
        Ok(Workspace { root: root.canonicalize()? })
    }

    /// Its root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Checks a path the model gave: relative, inside the tree, not into
    /// `.git/`; for writes not into `.patchpilot/` either (the task and the
    /// evidence are the controller's). A symlink on the way that leaves the
    /// tree is refused.
    pub fn check(&self, path: &str, write: bool) -> Result<Checked, String> {
        let trimmed = path.trim();
        let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
        if trimmed.is_empty() || trimmed == "." {
            return Ok(Checked { rel: String::new(), abs: self.root.clone() });
        }
        let p = Path::new(trimmed);
        if p.is_absolute() {
            return Err(format!("{path:?}: give a path relative to the workspace root"));
        }
        let mut parts = Vec::new();
        for c in p.components() {
            match c {
                Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
                Component::CurDir => {}
                _ => return Err(format!("{path:?}: `..` and absolute parts are not allowed")),
            }
        }
        if parts.first().is_some_and(|f| HIDDEN.contains(&f.as_str())) {
            return Err(format!("{path:?}: git's own data is not part of the work"));
        }
        if write && parts.first().is_some_and(|f| f == CONTEXT_DIR) {
            return Err(format!("{path:?}: `.patchpilot/` holds the task and its evidence; it is read-only"));
        }
        let rel = parts.join("/");
        let abs = self.root.join(&rel);
        // The deepest existing ancestor must resolve inside the root.
        let mut probe = abs.clone();
        while !probe.exists() {
            if !probe.pop() {
                break;
            }
        }
        let resolved = probe.canonicalize().map_err(|e| format!("{path:?}: {e}"))?;
        if !resolved.starts_with(&self.root) {
            return Err(format!("{path:?}: leads outside the workspace through a symlink"));
        }
        Ok(Checked { rel, abs })
    }

    /// Files under `rel` (relative paths), depth-first, sorted; vendored
    /// trees only when `vendored`.
    pub fn files(&self, rel: &str, depth: usize, vendored: bool) -> Vec<String> {
        let mut out = Vec::new();
        let start = if rel.is_empty() { self.root.clone() } else { self.root.join(rel) };
        walk(&start, rel, depth, vendored, &mut out);
        out.sort();
        out
    }

    /// The tree as it is now.
    pub fn snapshot(&self) -> Snapshot {
        let mut snap = Snapshot::default();
        let mut kept = 0u64;
        for rel in self.files("", 32, true) {
            if rel.starts_with(&format!("{CONTEXT_DIR}/")) {
                continue;
            }
            let Ok(bytes) = std::fs::read(self.root.join(&rel)) else { continue };
            let digest = patchpilot_llm::sha256_hex(&bytes);
            let len = bytes.len() as u64;
            let content = (len <= SNAPSHOT_FILE_BYTES && kept + len <= SNAPSHOT_TOTAL_BYTES).then(|| {
                kept += len;
                bytes
            });
            snap.files.insert(rel, FileState { digest, content });
        }
        snap
    }
}

fn walk(dir: &Path, rel: &str, depth: usize, vendored: bool, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let child = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if HIDDEN.contains(&name.as_str()) || (!vendored && VENDORED.contains(&name.as_str())) {
                continue;
            }
            if depth > 0 {
                walk(&entry.path(), &child, depth - 1, vendored, out);
            }
        } else if kind.is_file() || kind.is_symlink() {
            out.push(child);
        }
    }
}

/// One file in a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    /// sha256 of its bytes.
    pub digest: String,
    /// Its bytes, when small enough to keep.
    pub content: Option<Vec<u8>>,
}

/// The tree at one moment (`.git/` and `.patchpilot/` left out).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Path → state.
    pub files: BTreeMap<String, FileState>,
}

/// How one file differs between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The path.
    pub path: String,
    /// Before (`None`: new).
    pub before: Option<Vec<u8>>,
    /// After (`None`: deleted).
    pub after: Option<Vec<u8>>,
    /// Whether the old bytes were too large to keep.
    pub unknown_before: bool,
}

impl Snapshot {
    /// What changed from `self` to `now` (read from `workspace`).
    pub fn changes(&self, workspace: &Workspace) -> Vec<Change> {
        let now = workspace.snapshot();
        let mut out = Vec::new();
        for (path, before) in &self.files {
            match now.files.get(path) {
                Some(after) if after.digest == before.digest => {}
                after => out.push(Change {
                    path: path.clone(),
                    before: before.content.clone(),
                    after: after.map(|a| current(workspace, path, a)),
                    unknown_before: before.content.is_none(),
                }),
            }
        }
        for (path, after) in now.files.iter().filter(|(p, _)| !self.files.contains_key(*p)) {
            out.push(Change {
                path: path.clone(),
                before: None,
                after: Some(current(workspace, path, after)),
                unknown_before: false,
            });
        }
        out
    }

    /// Puts the tree back as it was: changed files rewritten, new ones
    /// removed. Files too large to have been kept are reported.
    pub fn restore(&self, workspace: &Workspace) -> Vec<String> {
        let mut problems = Vec::new();
        for change in self.changes(workspace) {
            let abs = workspace.root().join(&change.path);
            let result = match (&change.before, change.unknown_before) {
                (_, true) => Err(std::io::Error::other("too large to have been kept")),
                (Some(bytes), false) => std::fs::write(&abs, bytes),
                (None, false) => std::fs::remove_file(&abs),
            };
            if let Err(e) = result {
                problems.push(format!("cannot put {} back: {e}", change.path));
            }
        }
        problems
    }
}

/// The bytes of a file the latest snapshot saw: kept ones from memory,
/// only those too large to keep read again.
fn current(workspace: &Workspace, path: &str, state: &FileState) -> Vec<u8> {
    state.content.clone().unwrap_or_else(|| std::fs::read(workspace.root().join(path)).unwrap_or_default())
}

/// A unified diff of `changes`, as git writes it (`a/…`, `b/…`).
pub fn unified_diff(changes: &[Change]) -> String {
    let triples: Vec<(String, Vec<u8>, Vec<u8>)> = changes
        .iter()
        .map(|c| (c.path.clone(), c.before.clone().unwrap_or_default(), c.after.clone().unwrap_or_default()))
        .collect();
    crate::run::unified_diff(&triples)
}

/// Lines added plus removed in `changes`.
pub fn changed_lines(changes: &[Change]) -> u64 {
    changes
        .iter()
        .map(|c| {
            let (old, new) = (
                String::from_utf8_lossy(c.before.as_deref().unwrap_or_default()).into_owned(),
                String::from_utf8_lossy(c.after.as_deref().unwrap_or_default()).into_owned(),
            );
            similar::TextDiff::from_lines(&old, &new)
                .iter_all_changes()
                .filter(|ch| ch.tag() != similar::ChangeTag::Equal)
                .count() as u64
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_and_off_git_and_the_context_folder() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir_all(dir.path().join(".patchpilot")).expect("mkdir");
        std::fs::write(dir.path().join("a.txt"), "a").expect("write");
        let ws = Workspace::new(dir.path()).expect("ws");
        assert_eq!(ws.check("./a.txt", true).expect("ok").rel, "a.txt");
        assert!(ws.check("../etc/passwd", false).is_err());
        assert!(ws.check("/etc/passwd", false).is_err());
        assert!(ws.check(".git/config", false).is_err());
        assert!(ws.check(".patchpilot/ci-failure.md", false).is_ok());
        assert!(ws.check(".patchpilot/task.json", true).is_err());
        std::os::unix::fs::symlink("/etc", dir.path().join("out")).expect("link");
        assert!(ws.check("out/passwd", false).expect_err("refused").contains("symlink"));
    }

    #[test]
    fn a_snapshot_diffs_and_restores() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("a.txt"), "one\n").expect("write");
        let ws = Workspace::new(dir.path()).expect("ws");
        let snap = ws.snapshot();
        std::fs::write(dir.path().join("a.txt"), "two\n").expect("write");
        std::fs::write(dir.path().join("b.txt"), "new\n").expect("write");
        let changes = snap.changes(&ws);
        assert_eq!(changes.len(), 2);
        assert_eq!(changed_lines(&changes), 3);
        assert!(unified_diff(&changes).contains("+two"));
        assert!(snap.restore(&ws).is_empty());
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).expect("read"), "one\n");
        assert!(!dir.path().join("b.txt").exists());
    }
}
