//! Vetting: the gate between a sandbox run's patch and a published commit.
//!
//! What this crate owns: the verdict on the patch a sandbox run returned.
//! That patch is untrusted input (the run executed repository code and
//! model output), so everything that reads it lives here: a strict reader
//! of `git diff --binary`, the rules on paths, the checks on what the
//! applied tree holds, secret detection ([`secrets`]), the policy
//! ([`VetPolicy`]) and what a repair must keep
//! ([`required_edits_from_patch`]).
//!
//! Why a crate of its own: it is a trust boundary. It links git, only
//! through [`patchpilot_git`], and nothing of the controller's forges,
//! credentials, database or bus, so the code that parses hostile diffs
//! cannot reach them, and its dependency list shows all it can touch.
//!
//! [`vet_patch`], which the controller calls before it publishes anything,
//! applies the patch a run returned (a `git diff --binary` against the
//! clone's HEAD) to the controller's own clone and decides whether it may
//! be published, naming every file it refuses and why: unsafe or
//! git-internal paths, empty files, executables and archives, build output,
//! CI definitions (all but edits that only move pinned versions forward,
//! which the report lists: `ci`), symlinks that leave the repository,
//! oversize files, secret-looking text, oversize diffs, and — for a repair
//! — any undoing of the first run's version edits. An accepted patch is
//! left staged and uncommitted for the publisher; a refused one leaves
//! nothing behind.
//!
//! What it must never do:
//! - run repository code: git runs only through [`patchpilot_git::Git`] (hooks,
//!   fsmonitor, attribute files and filters off), and files are read for
//!   their first bytes and lines, never executed, built or interpreted;
//! - trust the patch's metadata beyond parsing it: paths are checked before
//!   git sees the patch, the set of files git actually changed is compared
//!   against what the headers declared, and sizes, kinds and link targets
//!   are read from the applied tree, not from the patch;
//! - write to `.git/`, `.gitmodules` or `.gitattributes`, or leave a
//!   half-applied tree behind after a refusal.

pub mod access;
mod ci;
mod content;
mod markdown;
mod patch;
mod repair;
mod rules;
pub mod secrets;

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use ci::compare as ci_version_edits;
pub use content::{BinaryKind, sniff};
pub use markdown::code_span;
use patchpilot_git::{Git, GitError};
pub use repair::{check as check_required_edit, required_edits_from_patch};
pub use rules::ci_definition;

/// The `path` of findings about the patch as a whole.
pub const WHOLE_PATCH: &str = "(patch)";

/// Most secret findings reported for one file; the rest are counted.
const SECRETS_PER_FILE: usize = 10;

/// What vetting allows; per repository in the controller's config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VetPolicy {
    /// Largest file the patch may leave, in bytes.
    pub max_file_bytes: u64,
    /// Most lines the patch may add plus remove, vendored lines aside when
    /// [`VetPolicy::allow_vendor`] is set.
    pub max_changed_lines: u64,
    /// Whether lines under [`VetPolicy::vendor_dirs`] are exempt from the
    /// line cap (a vendored dependency bump).
    pub allow_vendor: bool,
    /// Folder names that root a vendor tree, anywhere in a path.
    pub vendor_dirs: Vec<String>,
    /// Folder names whose contents are build output, anywhere in a path
    /// outside a vendor tree. `build` is not in the defaults: Go's common
    /// layout keeps Dockerfiles and packaging scripts under `build/`, and
    /// compiled files there are caught by their content and extension.
    pub build_output_dirs: Vec<String>,
    /// File extensions of compiled output, without the dot.
    pub build_output_extensions: Vec<String>,
    /// Whether a CI definition may change where the change only moves
    /// pinned versions forward, in place (a linter's `version:`, an
    /// action's `@v4`, a toolchain, an image tag); off, every change to a
    /// CI definition is refused.
    pub allow_ci_version_edits: bool,
    /// Whether added lines may grant access to the image (an SSH key, a
    /// user, a password, sudo rights, a setuid bit, a download piped into
    /// a shell: [`access`]). A remediation never needs one; off, each is
    /// refused with its line.
    pub allow_access_grants: bool,
}

impl Default for VetPolicy {
    fn default() -> Self {
        let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
        VetPolicy {
            max_file_bytes: 1024 * 1024,
            max_changed_lines: 5_000,
            allow_vendor: false,
            vendor_dirs: strings(&["vendor", "third_party"]),
            build_output_dirs: strings(&["target", "node_modules", "dist", "__pycache__"]),
            build_output_extensions: strings(&[
                "o", "obj", "a", "lib", "so", "dylib", "dll", "exe", "pyc", "pyo", "class",
            ]),
            allow_ci_version_edits: true,
            allow_access_grants: false,
        }
    }
}

/// Which kind of sandbox run produced the patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// The first run: remediate the findings.
    #[default]
    Remediate,
    /// A repair after CI failed: forward fixes only.
    Repair,
}

/// An edit of the first run that a repair must keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequiredEdit {
    /// Repository-relative path.
    pub path: String,
    /// Text some line of the file must still contain.
    pub must_contain: String,
    /// Text no line may contain again (lines that also contain
    /// `must_contain` excepted).
    pub must_not_contain: Option<String>,
}

/// What the patch is for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VetContext {
    /// Remediation or repair.
    pub kind: RunKind,
    /// Edits that must survive; usually [`required_edits_from_patch`] of
    /// the first run's patch. Checked whenever non-empty.
    pub required_edits: Vec<RequiredEdit>,
    /// The repository's name, for spotting a compiled copy of its own
    /// program; the clone's folder name when absent.
    pub repo_name: Option<String>,
}

impl VetContext {
    /// A first run.
    pub fn remediate() -> Self {
        VetContext::default()
    }
    /// A repair run that must keep `required_edits`.
    pub fn repair(required_edits: Vec<RequiredEdit>) -> Self {
        VetContext { kind: RunKind::Repair, required_edits, repo_name: None }
    }
}

/// Why a file (or the patch) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// Not well-formed `git diff` output, or git changed something the
    /// headers did not declare.
    Malformed,
    /// Absolute, `..`, or otherwise outside the working tree.
    UnsafePath,
    /// `.git/`, `.gitmodules`, `.gitattributes`, or a submodule.
    GitMetadata,
    /// git could not apply the patch to HEAD.
    DoesNotApply,
    /// Empty after the change.
    Empty,
    /// An executable or archive.
    Binary,
    /// Build output.
    BuildOutput,
    /// A change to a CI definition other than moving pinned versions
    /// forward (or any change, when the policy allows none).
    CiDefinition,
    /// A symlink leading out of the repository.
    SymlinkEscape,
    /// Over the per-file size cap.
    Oversize,
    /// Added text that looks like a secret or token.
    Secret,
    /// More changed lines than the policy allows.
    DiffTooLarge,
    /// A repair undoes an edit of the first run.
    RevertsFix,
    /// Added text that grants access to the image: an SSH key, a user, a
    /// password, a setuid bit, a download piped into a shell
    /// ([`access`]).
    GrantsAccess,
}

impl RejectReason {
    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            RejectReason::Malformed => "malformed patch",
            RejectReason::UnsafePath => "unsafe path",
            RejectReason::GitMetadata => "git metadata",
            RejectReason::DoesNotApply => "does not apply",
            RejectReason::Empty => "empty file",
            RejectReason::Binary => "binary",
            RejectReason::BuildOutput => "build output",
            RejectReason::CiDefinition => "CI definition",
            RejectReason::SymlinkEscape => "symlink leaves the repository",
            RejectReason::Oversize => "file too large",
            RejectReason::Secret => "looks like a secret",
            RejectReason::DiffTooLarge => "diff too large",
            RejectReason::RevertsFix => "reverts a fix",
            RejectReason::GrantsAccess => "grants access",
        }
    }

    /// Findings that stop the patch before git applies it.
    fn blocks_apply(self) -> bool {
        matches!(self, RejectReason::Malformed | RejectReason::UnsafePath | RejectReason::GitMetadata)
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One refused file and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    /// Repository-relative path, or [`WHOLE_PATCH`].
    pub path: String,
    /// Why.
    pub reason: RejectReason,
    /// Specifics (never a secret's value).
    pub detail: String,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.path, self.reason, self.detail)
    }
}

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// New (copies included).
    Added,
    /// Changed in place (content or mode).
    Modified,
    /// Removed.
    Deleted,
    /// Moved, maybe with edits.
    Renamed,
}

/// One file the patch touches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// Path after the change (before, for a deletion).
    pub path: String,
    /// The source of a rename or copy.
    pub old_path: Option<String>,
    /// How it changed.
    pub kind: ChangeKind,
    /// Carried as a git binary patch.
    pub binary: bool,
    /// Size in the working tree after applying; `None` for a deletion or
    /// when the patch was refused before applying.
    pub size: Option<u64>,
}

/// A version a CI definition edit moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionChange {
    /// The version before (`v1.55.2`).
    pub from: String,
    /// The version after (`v1.59.1`).
    pub to: String,
}

/// A line of a CI definition that vetting let through because it only
/// moves pinned versions forward; the reviewer is shown each one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiVersionEdit {
    /// Repository-relative path.
    pub path: String,
    /// 1-based line in the changed file (the same as in the original: such
    /// edits add and remove no lines).
    pub line: u32,
    /// The line before, trimmed.
    pub old: String,
    /// The line after, trimmed.
    pub new: String,
    /// The versions it moves, in line order.
    pub versions: Vec<VersionChange>,
}

/// The verdict on a patch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VetReport {
    /// True when nothing was refused; the change is then staged.
    pub accepted: bool,
    /// Every finding, sorted by path then reason.
    pub rejections: Vec<Rejection>,
    /// The files the patch touches, in patch order.
    pub files: Vec<FileChange>,
    /// Lines added, all files.
    pub lines_added: u64,
    /// Lines removed, all files.
    pub lines_removed: u64,
    /// Lines added or removed under vendor trees.
    pub vendor_lines: u64,
    /// The edits of CI definitions that passed as version-only, in patch
    /// then line order; listed once the patch applied, even when another
    /// file was refused. Absent from reports stored before it existed.
    #[serde(default)]
    pub ci_version_edits: Vec<CiVersionEdit>,
}

impl fmt::Display for VetReport {
    /// Markdown: a verdict line, then each finding as `path: reason (detail)`,
    /// the path in a code span it cannot leave ([`code_span`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.accepted { "accepted" } else { "refused" };
        writeln!(
            f,
            "**Vetting {verdict}**: {} files, +{} −{} lines ({} vendored)",
            self.files.len(),
            self.lines_added,
            self.lines_removed,
            self.vendor_lines
        )?;
        if !self.rejections.is_empty() {
            writeln!(f)?;
            for r in &self.rejections {
                writeln!(f, "- {}: {} ({})", code_span(&r.path, 300), r.reason, r.detail)?;
            }
        }
        Ok(())
    }
}

/// Vetting could not reach a verdict (the controller's fault, not the
/// patch's).
#[derive(Debug, thiserror::Error)]
pub enum VetError {
    /// A git call failed outside applying the patch.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The clone has uncommitted changes to tracked files, which would be
    /// published with the patch or destroyed by a reset.
    #[error("the clone at {dir} has uncommitted changes: {changes}")]
    DirtyClone {
        /// The clone.
        dir: String,
        /// What `git status` listed (first lines).
        changes: String,
    },
    /// Reading the applied tree failed.
    #[error("reading {path}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Applies `patch` to the clone at `clone` and vets it; see the module
/// documentation. On acceptance the change is staged (`git apply --index`)
/// and not committed; on refusal the clone is back at HEAD (or untouched,
/// when the refusal came before applying).
pub async fn vet_patch(
    clone: &Path,
    patch: &[u8],
    policy: &VetPolicy,
    context: &VetContext,
) -> Result<VetReport, VetError> {
    let git = Git::new(clone);
    let mut rejections = Vec::new();
    let reject = |rejections: &mut Vec<Rejection>, path: &str, reason, detail: String| {
        rejections.push(Rejection { path: path.to_owned(), reason, detail });
    };

    let files = match patch::parse(patch) {
        Ok(files) => files,
        Err(e) => {
            let detail = format!("line {}: {}", e.line, e.message);
            // Unparsed means unchecked: git never sees it.
            return Ok(finish(
                vec![Rejection { path: WHOLE_PATCH.into(), reason: RejectReason::Malformed, detail }],
                &[],
                0,
            ));
        }
    };
    if files.is_empty() {
        reject(&mut rejections, WHOLE_PATCH, RejectReason::Malformed, "the patch changes no files".into());
        return Ok(finish(rejections, &[], 0));
    }

    // Checks on the patch alone, before git runs.
    let mut vendor_lines = 0u64;
    let mut links_created = BTreeSet::new();
    // CI definitions whose patch has the shape of a version-only edit,
    // still to be compared as staged.
    let mut ci_files: Vec<(&str, &str)> = Vec::new();
    for file in &files {
        let path = file.path();
        if let Some((reason, detail)) = rules::unsafe_header(&file.header) {
            reject(&mut rejections, path, reason, detail);
        }
        let names: BTreeSet<&String> =
            file.names.iter().chain(&file.old_path).chain(&file.new_path).collect();
        for name in names {
            if let Some((reason, detail)) = rules::unsafe_path(name) {
                reject(&mut rejections, name, reason, detail);
            }
        }
        if file.old_mode == Some(0o160000) || file.new_mode == Some(0o160000) {
            reject(&mut rejections, path, RejectReason::GitMetadata, "a submodule (gitlink) entry".into());
        }
        if file.binary_without_data {
            let detail = "binary change without its data (the patch was not made with --binary)".into();
            reject(&mut rejections, path, RejectReason::Malformed, detail);
        }
        if file.new_mode == Some(0o120000)
            && let Some(p) = &file.new_path
        {
            links_created.insert(p.clone());
        }
        if let Some(what) =
            rules::ci_definition(path).or_else(|| file.old_path.as_deref().and_then(rules::ci_definition))
        {
            if !policy.allow_ci_version_edits {
                let detail = format!("{what}: CI is changed by people, not runs");
                reject(&mut rejections, path, RejectReason::CiDefinition, detail);
            } else {
                match ci::patch_shape(file) {
                    Ok(()) => ci_files.push((path, what)),
                    Err(why) => {
                        reject(&mut rejections, path, RejectReason::CiDefinition, ci::refusal(what, &why))
                    }
                }
            }
        }
        if file.op != patch::Op::Deleted
            && let Some(why) = rules::build_output(path, policy)
        {
            reject(&mut rejections, path, RejectReason::BuildOutput, why);
        }
        if rules::vendor_depth(path, policy).is_some() {
            vendor_lines += file.added + file.removed;
        }
        scan_secrets(patch, file, &mut rejections);
        if !policy.allow_access_grants {
            scan_access(patch, file, &mut rejections);
        }
    }
    // Writing through a symlink (one in the tree, or one this patch
    // creates) would land outside the path that was checked.
    for file in &files {
        for name in file.old_path.iter().chain(&file.new_path) {
            if let Some(link) = through_symlink(clone, name, &links_created) {
                reject(
                    &mut rejections,
                    name,
                    RejectReason::UnsafePath,
                    format!("written through the symlink {link}"),
                );
            }
        }
    }
    let lines_added: u64 = files.iter().map(|f| f.added).sum();
    let lines_removed: u64 = files.iter().map(|f| f.removed).sum();
    let counted = lines_added + lines_removed - if policy.allow_vendor { vendor_lines } else { 0 };
    if counted > policy.max_changed_lines {
        let vendor = if vendor_lines == 0 {
            String::new()
        } else if policy.allow_vendor {
            format!(", {vendor_lines} vendored lines not counted")
        } else {
            format!(", {vendor_lines} of them vendored, which this policy counts")
        };
        let detail = format!("{counted} changed lines over the cap of {}{vendor}", policy.max_changed_lines);
        reject(&mut rejections, WHOLE_PATCH, RejectReason::DiffTooLarge, detail);
    }

    let mut changes = file_changes(&files);
    if rejections.iter().any(|r| r.reason.blocks_apply()) {
        return Ok(finish_with(rejections, changes, lines_added, lines_removed, vendor_lines));
    }

    // A clean start: otherwise staged leftovers would be published with the
    // patch, or destroyed by the reset after a refusal.
    let status = git.run(&["status", "--porcelain=v1", "--untracked-files=no"]).await?.text();
    if !status.is_empty() {
        let changes = status.lines().take(5).collect::<Vec<_>>().join("; ");
        return Err(VetError::DirtyClone { dir: clone.display().to_string(), changes });
    }

    if let Err(e) =
        git.run_with_input(&["apply", "--index", "--binary", "--whitespace=nowarn", "-"], patch).await
    {
        if e.detail.starts_with("cannot start git") {
            return Err(e.into());
        }
        reject(&mut rejections, WHOLE_PATCH, RejectReason::DoesNotApply, first_lines(&e.detail, 3));
        reset(&git).await?;
        return Ok(finish_with(rejections, changes, lines_added, lines_removed, vendor_lines));
    }

    // From here on the tree holds the patch; any refusal resets it.
    let verdict = async {
        let staged = staged_changes(&git).await?;
        vet_applied(&staged, clone, &files, &mut changes, policy, context, &mut rejections)?;
        ci_edits(&git, &staged, &ci_files, &mut rejections).await
    }
    .await;
    let ci_version_edits = match verdict {
        Ok(edits) => edits,
        Err(e) => {
            reset(&git).await?;
            return Err(e);
        }
    };
    if !rejections.is_empty() {
        reset(&git).await?;
    }
    let mut report = finish_with(rejections, changes, lines_added, lines_removed, vendor_lines);
    report.ci_version_edits = ci_version_edits;
    Ok(report)
}

/// One file `git diff --cached --raw` lists: what git staged for it.
struct Staged {
    path: String,
    old_mode: String,
    new_mode: String,
    old_blob: String,
    new_blob: String,
    /// `M`, `A`, `D`, `T`, …
    status: String,
}

/// What the applied patch staged, against HEAD, as git sees it.
async fn staged_changes(git: &Git) -> Result<Vec<Staged>, VetError> {
    let raw = git.run(&["diff", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", "HEAD"]).await?;
    let mut staged = Vec::new();
    let mut fields = raw.stdout.split(|&b| b == 0);
    while let Some(meta) = fields.next() {
        if meta.is_empty() {
            continue;
        }
        let Some(path) = fields.next() else { break };
        // `:old-mode new-mode old-blob new-blob status`.
        let meta = String::from_utf8_lossy(meta);
        let mut parts = meta.trim_start_matches(':').split(' ').map(str::to_owned);
        let mut next = || parts.next().unwrap_or_default();
        staged.push(Staged {
            old_mode: next(),
            new_mode: next(),
            old_blob: next(),
            new_blob: next(),
            status: next(),
            path: String::from_utf8_lossy(path).into_owned(),
        });
    }
    Ok(staged)
}

/// Compares each CI definition in `ci_files` as staged (HEAD's blob
/// against the index's) and returns the version-only edits; a file that is
/// more than that is refused.
async fn ci_edits(
    git: &Git,
    staged: &[Staged],
    ci_files: &[(&str, &str)],
    rejections: &mut Vec<Rejection>,
) -> Result<Vec<CiVersionEdit>, VetError> {
    let mut edits = Vec::new();
    for &(path, what) in ci_files {
        // Refused already (too large, say): no need to read it.
        if rejections.iter().any(|r| r.path == path) {
            continue;
        }
        let mut refuse = |why: &str| {
            let detail = ci::refusal(what, why);
            rejections.push(Rejection { path: path.to_owned(), reason: RejectReason::CiDefinition, detail });
        };
        let Some(entry) = staged.iter().find(|s| s.path == path) else {
            refuse("git staged no change to it");
            continue;
        };
        let regular = matches!(entry.new_mode.as_str(), "100644" | "100755");
        if entry.status != "M" || entry.old_mode != entry.new_mode || !regular {
            refuse("git staged more than a change of its text");
            continue;
        }
        let old = git.run(&["cat-file", "blob", &entry.old_blob]).await?.stdout;
        let new = git.run(&["cat-file", "blob", &entry.new_blob]).await?.stdout;
        let (Ok(old), Ok(new)) = (String::from_utf8(old), String::from_utf8(new)) else {
            refuse("not UTF-8 text");
            continue;
        };
        match ci::compare(path, &old, &new) {
            Ok(found) => edits.extend(found),
            Err(why) => refuse(&why),
        }
    }
    Ok(edits)
}

/// Checks on the applied tree.
fn vet_applied(
    staged: &[Staged],
    clone: &Path,
    files: &[patch::FileDiff],
    changes: &mut [FileChange],
    policy: &VetPolicy,
    context: &VetContext,
    rejections: &mut Vec<Rejection>,
) -> Result<(), VetError> {
    // What git actually changed, against what the headers declared: a
    // difference means the two read the patch differently.
    let mut declared: BTreeSet<&str> = BTreeSet::new();
    for file in files {
        declared.extend(file.old_path.as_deref().filter(|_| file.op != patch::Op::Copied));
        declared.extend(file.new_path.as_deref());
    }
    let mut actual = BTreeSet::new();
    for entry in staged {
        if entry.old_mode == "160000" || entry.new_mode == "160000" {
            rejections.push(Rejection {
                path: entry.path.clone(),
                reason: RejectReason::GitMetadata,
                detail: "a submodule (gitlink) entry".into(),
            });
        }
        actual.insert(entry.path.as_str());
    }
    for path in actual {
        if !declared.contains(path) {
            rejections.push(Rejection {
                path: path.to_owned(),
                reason: RejectReason::Malformed,
                detail: "git changed this file, which the patch headers do not name".into(),
            });
        }
    }

    let main_names = content::main_names(clone, context.repo_name.as_deref());
    for (file, change) in files.iter().zip(changes.iter_mut()) {
        let Some(path) = file.new_path.as_deref() else { continue };
        let full = clone.join(path);
        let meta = std::fs::symlink_metadata(&full)
            .map_err(|source| VetError::Io { path: path.to_owned(), source })?;
        change.size = Some(meta.len());
        let mut reject =
            |reason, detail: String| rejections.push(Rejection { path: path.to_owned(), reason, detail });
        if meta.file_type().is_symlink() {
            let target =
                std::fs::read_link(&full).map_err(|source| VetError::Io { path: path.to_owned(), source })?;
            if let Some(why) = content::symlink_escapes(clone, path, &target) {
                reject(RejectReason::SymlinkEscape, why);
            }
            continue;
        }
        if meta.len() == 0 {
            reject(RejectReason::Empty, "0 bytes after the change".into());
            continue;
        }
        if meta.len() > policy.max_file_bytes {
            reject(RejectReason::Oversize, format!("{} bytes, cap {}", meta.len(), policy.max_file_bytes));
        }
        let (head, pe) =
            content::read_head(&full).map_err(|source| VetError::Io { path: path.to_owned(), source })?;
        if let Some(kind) = content::sniff(&head, pe) {
            match kind {
                BinaryKind::JavaClass => reject(RejectReason::BuildOutput, "a compiled Java class".into()),
                _ => reject(RejectReason::Binary, kind.describe().into()),
            }
            if let BinaryKind::Executable(_) = kind {
                let name = path.rsplit('/').next().unwrap_or(path).to_lowercase();
                let stem = name.strip_suffix(".exe").unwrap_or(&name);
                if main_names.iter().any(|m| m == stem) {
                    reject(
                        RejectReason::BuildOutput,
                        format!("a compiled copy of the repository's own program `{stem}`"),
                    );
                }
            }
        }
    }

    if context.kind == RunKind::Repair || !context.required_edits.is_empty() {
        for edit in &context.required_edits {
            if let Some(r) = repair::check(clone, edit) {
                rejections.push(r);
            }
        }
    }
    Ok(())
}

/// The symlink, if any, that writing `path` would go through: a folder on
/// the way that is a symlink in the tree or one the patch creates.
fn through_symlink(clone: &Path, path: &str, created: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = path.split('/').collect();
    let mut prefix = String::new();
    for part in &parts[..parts.len().saturating_sub(1)] {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if created.contains(&prefix) {
            return Some(prefix);
        }
        match std::fs::symlink_metadata(clone.join(&prefix)) {
            Ok(m) if m.file_type().is_symlink() => return Some(prefix),
            Ok(_) => {}
            // Nothing further down can be a link that exists.
            Err(_) => return None,
        }
    }
    None
}

fn scan_secrets(patch: &[u8], file: &patch::FileDiff, rejections: &mut Vec<Rejection>) {
    let mut found = 0usize;
    for line in file.lines.iter().filter(|l| l.op == b'+') {
        let Some(m) = secrets::find_secret(&patch[line.text.clone()]) else { continue };
        found += 1;
        if found <= SECRETS_PER_FILE {
            rejections.push(Rejection {
                path: file.path().to_owned(),
                reason: RejectReason::Secret,
                detail: format!("line {}: {} {}", line.line_no, m.kind, m.redacted),
            });
        }
    }
    if found > SECRETS_PER_FILE {
        rejections.push(Rejection {
            path: file.path().to_owned(),
            reason: RejectReason::Secret,
            detail: format!("and {} more secret-looking lines", found - SECRETS_PER_FILE),
        });
    }
}

/// Refuses each kind of access-granting construct that the file's added
/// lines hold more often than its removed ones: new, not carried along on
/// an edited line.
fn scan_access(patch: &[u8], file: &patch::FileDiff, rejections: &mut Vec<Rejection>) {
    let path = file.path();
    let mut balance: std::collections::BTreeMap<access::Access, (i64, Option<u32>)> = Default::default();
    for line in file.lines.iter().filter(|l| l.op == b'+' || l.op == b'-') {
        let text = String::from_utf8_lossy(&patch[line.text.clone()]);
        for kind in access::find(path, &text) {
            let entry = balance.entry(kind).or_insert((0, None));
            if line.op == b'+' {
                entry.0 += 1;
                entry.1.get_or_insert(line.line_no);
            } else {
                entry.0 -= 1;
            }
        }
    }
    for (kind, (count, first)) in balance {
        if count > 0 {
            rejections.push(Rejection {
                path: path.to_owned(),
                reason: RejectReason::GrantsAccess,
                detail: format!("line {}: {}", first.unwrap_or(0), kind.describe()),
            });
        }
    }
}

fn file_changes(files: &[patch::FileDiff]) -> Vec<FileChange> {
    files
        .iter()
        .map(|f| FileChange {
            path: f.path().to_owned(),
            old_path: if matches!(f.op, patch::Op::Renamed | patch::Op::Copied) {
                f.old_path.clone()
            } else {
                None
            },
            kind: match f.op {
                patch::Op::Added | patch::Op::Copied => ChangeKind::Added,
                patch::Op::Modified => ChangeKind::Modified,
                patch::Op::Deleted => ChangeKind::Deleted,
                patch::Op::Renamed => ChangeKind::Renamed,
            },
            binary: f.binary || f.binary_without_data,
            size: None,
        })
        .collect()
}

/// Back to HEAD: tracked files restored, everything untracked (ignored
/// files included) removed, so no half-applied file survives a refusal.
async fn reset(git: &Git) -> Result<(), VetError> {
    git.run(&["reset", "-q", "--hard", "HEAD"]).await?;
    git.run(&["clean", "-q", "-ffdx"]).await?;
    Ok(())
}

fn finish(rejections: Vec<Rejection>, files: &[patch::FileDiff], vendor_lines: u64) -> VetReport {
    let added = files.iter().map(|f| f.added).sum();
    let removed = files.iter().map(|f| f.removed).sum();
    finish_with(rejections, file_changes(files), added, removed, vendor_lines)
}

fn finish_with(
    mut rejections: Vec<Rejection>,
    files: Vec<FileChange>,
    lines_added: u64,
    lines_removed: u64,
    vendor_lines: u64,
) -> VetReport {
    rejections.sort_by(|a, b| (&a.path, a.reason).cmp(&(&b.path, b.reason)));
    rejections.dedup();
    VetReport {
        accepted: rejections.is_empty(),
        rejections,
        files,
        lines_added,
        lines_removed,
        vendor_lines,
        ci_version_edits: Vec::new(),
    }
}

fn first_lines(text: &str, n: usize) -> String {
    text.lines().take(n).collect::<Vec<_>>().join(" / ")
}
