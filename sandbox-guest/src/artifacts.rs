//! The artifacts the guest copies out of the workspace's `.patchpilot/`
//! once the command has ended: the agent's report (`result`), its
//! retrospective (`retrospective`) and the model session's transcript
//! (`session`).
//!
//! The workspace was written by untrusted code, which may still be running
//! (a background process the command left behind) and may still be
//! changing it. So a file is opened relative to a handle on its folder and
//! never by resolving its path again; neither the workspace, its
//! `.patchpilot` nor the file may be a symbolic link; only a regular file
//! is read (a FIFO would hold the guest, a device would never end); and at
//! most the run's output cap plus one byte is copied, so an oversized file
//! costs the scratch disc no more than that and the host still sees that it
//! is over the cap (and ends the run `limit_exceeded`, as for any artifact).
//!
//! Must never follow a link, read anything outside the workspace, or offer
//! a file it could not vouch was the one in the workspace.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

/// The context folder, relative to the workspace (`patchpilot_model::context::CONTEXT_DIR`;
/// the guest links no model crate, and the host's tests check the names agree).
pub const CONTEXT_DIR: &str = ".patchpilot";

/// One file of `.patchpilot/` offered as an artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextArtifact {
    /// The artifact's name on the wire.
    pub name: &'static str,
    /// The file in `.patchpilot/`.
    pub file: &'static str,
    /// Whether an empty file is still offered. The reports are (an empty
    /// report is worth saying so about); an empty transcript says nothing
    /// and is not.
    pub offer_empty: bool,
}

/// What the guest offers from `.patchpilot/`, by the names in
/// `patchpilot_model::context` (`RESULT`, `RETROSPECTIVE`, `TRANSCRIPT`).
pub const CONTEXT_ARTIFACTS: [ContextArtifact; 3] = [
    ContextArtifact { name: "result", file: "result.json", offer_empty: true },
    ContextArtifact { name: "retrospective", file: "retrospective.json", offer_empty: true },
    ContextArtifact { name: "session", file: "transcript.jsonl", offer_empty: false },
];

/// Why a file in `.patchpilot/` is not offered.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file, or a folder on its way, is a symbolic link.
    #[error("{path} is a symbolic link; it is not followed")]
    Link {
        /// The path, relative to the workspace.
        path: String,
    },
    /// The file is not a regular file (a FIFO, a device, a folder…), or a
    /// folder on its way is not a folder.
    #[error("{path} is not a regular {expected}")]
    NotRegular {
        /// The path, relative to the workspace.
        path: String,
        /// `file` or `folder`.
        expected: &'static str,
    },
    /// Opening, reading or writing failed.
    #[error("{path}")]
    Io {
        /// The path (relative to the workspace, or the copy's).
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Copies `.patchpilot/<artifact.file>` of `workspace` to `to`, at most
/// `cap + 1` bytes. `Ok(None)` when there is nothing to offer: no such file
/// (or folder), or an empty one the artifact does not offer. Blocking.
pub fn copy_from_context(
    workspace: &Path,
    artifact: &ContextArtifact,
    to: &Path,
    cap: u64,
) -> Result<Option<u64>, Error> {
    let relative = format!("{CONTEXT_DIR}/{}", artifact.file);
    let folder = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let root = match rustix::fs::openat(rustix::fs::CWD, workspace, folder, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            return Err(refusal(e, rustix::fs::CWD, workspace, workspace.display().to_string(), "folder"));
        }
    };
    let context = match rustix::fs::openat(&root, CONTEXT_DIR, folder, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(refusal(e, &root, Path::new(CONTEXT_DIR), CONTEXT_DIR.to_owned(), "folder")),
    };
    // NONBLOCK: opening a FIFO for reading would otherwise wait for a
    // writer; it has no effect on a regular file.
    let file_flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(&context, artifact.file, file_flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(refusal(e, &context, Path::new(artifact.file), relative, "file")),
    };
    let stat =
        rustix::fs::fstat(&file).map_err(|e| Error::Io { path: relative.clone(), source: e.into() })?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(Error::NotRegular { path: relative, expected: "file" });
    }
    let mut out =
        std::fs::File::create(to).map_err(|source| Error::Io { path: to.display().to_string(), source })?;
    let copied = std::io::copy(&mut std::fs::File::from(file).take(cap.saturating_add(1)), &mut out)
        .map_err(|source| Error::Io { path: relative, source })?;
    if copied == 0 && !artifact.offer_empty {
        drop(out);
        let _ = std::fs::remove_file(to);
        return Ok(None);
    }
    Ok(Some(copied))
}

/// What an `openat` with `O_NOFOLLOW` refusing `name` in `parent` means.
/// On a link Linux answers `ELOOP`, or `ENOTDIR` when `O_DIRECTORY` was
/// asked too: a look at the entry itself (never through it) tells a link
/// from anything else. The refusal stands either way; this only names it.
fn refusal(
    errno: Errno,
    parent: impl std::os::fd::AsFd,
    name: &Path,
    path: String,
    expected: &'static str,
) -> Error {
    if !matches!(errno, Errno::LOOP | Errno::NOTDIR) {
        return Error::Io { path, source: errno.into() };
    }
    let is_link = rustix::fs::statat(parent, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
    match errno {
        _ if is_link => Error::Link { path },
        Errno::NOTDIR => Error::NotRegular { path, expected },
        e => Error::Io { path, source: e.into() },
    }
}

/// Where each artifact of [`CONTEXT_ARTIFACTS`] was copied, and why the
/// ones that were there but are not offered were refused. Blocking.
pub fn collect(
    workspace: &Path,
    artifacts_dir: &Path,
    cap: u64,
) -> (Vec<(&'static str, PathBuf)>, Vec<String>) {
    let mut offered = Vec::new();
    let mut refused = Vec::new();
    for artifact in &CONTEXT_ARTIFACTS {
        let to = artifacts_dir.join(artifact.name);
        match copy_from_context(workspace, artifact, &to, cap) {
            Ok(Some(_)) => offered.push((artifact.name, to)),
            Ok(None) => {}
            Err(e) => {
                let _ = std::fs::remove_file(&to);
                refused.push(format!("{}: {}", artifact.name, crate::serve::describe(&e)));
            }
        }
    }
    (offered, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: ContextArtifact = CONTEXT_ARTIFACTS[2];
    const RESULT: ContextArtifact = CONTEXT_ARTIFACTS[0];

    struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = tempfile::tempdir().expect("tempdir");
            std::fs::create_dir_all(dir.path().join("workspace")).expect("workspace");
            std::fs::create_dir_all(dir.path().join("artifacts")).expect("artifacts");
            Fixture { dir }
        }
        fn workspace(&self) -> PathBuf {
            self.dir.path().join("workspace")
        }
        fn context(&self) -> PathBuf {
            let context = self.workspace().join(CONTEXT_DIR);
            std::fs::create_dir_all(&context).expect("context");
            context
        }
        fn to(&self, name: &str) -> PathBuf {
            self.dir.path().join("artifacts").join(name)
        }
        fn copy(&self, artifact: &ContextArtifact, cap: u64) -> Result<Option<u64>, Error> {
            copy_from_context(&self.workspace(), artifact, &self.to(artifact.name), cap)
        }
    }

    #[test]
    fn a_transcript_is_copied_byte_for_byte() {
        let f = Fixture::new();
        let bytes = b"{\"type\":\"session\"}\n{\"type\":\"outcome\",\"end\":\"finished\"}\n";
        std::fs::write(f.context().join("transcript.jsonl"), bytes).expect("write");
        assert_eq!(f.copy(&SESSION, 1 << 20).expect("copied"), Some(bytes.len() as u64));
        assert_eq!(std::fs::read(f.to("session")).expect("read"), bytes);
    }

    #[test]
    fn nothing_is_offered_without_the_file_or_the_folder() {
        let f = Fixture::new();
        assert_eq!(f.copy(&SESSION, 1 << 20).expect("no folder"), None);
        f.context();
        assert_eq!(f.copy(&SESSION, 1 << 20).expect("no file"), None);
        assert!(!f.to("session").exists());
    }

    #[test]
    fn an_empty_transcript_is_not_offered_but_an_empty_report_is() {
        let f = Fixture::new();
        std::fs::write(f.context().join("transcript.jsonl"), b"").expect("write");
        std::fs::write(f.context().join("result.json"), b"").expect("write");
        assert_eq!(f.copy(&SESSION, 1 << 20).expect("empty"), None);
        assert!(!f.to("session").exists(), "no empty artifact is left behind");
        assert_eq!(f.copy(&RESULT, 1 << 20).expect("empty report"), Some(0));
    }

    #[test]
    fn a_symlinked_transcript_is_not_followed_out_of_the_workspace() {
        let f = Fixture::new();
        let outside = f.dir.path().join("outside-secret");
        std::fs::write(&outside, b"the guest's own file").expect("write");
        std::os::unix::fs::symlink(&outside, f.context().join("transcript.jsonl")).expect("link");
        let err = f.copy(&SESSION, 1 << 20).expect_err("refused");
        assert!(matches!(&err, Error::Link { path } if path == ".patchpilot/transcript.jsonl"), "{err:?}");
        assert!(!f.to("session").exists(), "nothing of the link's target was copied");
    }

    #[test]
    fn a_symlinked_context_folder_is_not_followed() {
        let f = Fixture::new();
        let elsewhere = f.dir.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).expect("dir");
        std::fs::write(elsewhere.join("transcript.jsonl"), b"{}\n").expect("write");
        std::os::unix::fs::symlink(&elsewhere, f.workspace().join(CONTEXT_DIR)).expect("link");
        let err = f.copy(&SESSION, 1 << 20).expect_err("refused");
        assert!(matches!(&err, Error::Link { path } if path == CONTEXT_DIR), "{err:?}");
        assert!(!f.to("session").exists());
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let f = Fixture::new();
        let fifo = f.context().join("transcript.jsonl");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let err = f.copy(&SESSION, 1 << 20).expect_err("refused");
        assert!(matches!(&err, Error::NotRegular { expected: "file", .. }), "{err:?}");
    }

    #[test]
    fn an_oversized_file_is_cut_one_byte_past_the_cap() {
        let f = Fixture::new();
        std::fs::write(f.context().join("transcript.jsonl"), vec![b'x'; 10_000]).expect("write");
        assert_eq!(f.copy(&SESSION, 100).expect("copied"), Some(101));
        assert_eq!(std::fs::metadata(f.to("session")).expect("copy").len(), 101);
    }

    #[test]
    fn collect_offers_what_is_there_and_says_why_the_rest_is_not() {
        let f = Fixture::new();
        std::fs::write(f.context().join("result.json"), b"{}").expect("write");
        std::os::unix::fs::symlink("/etc/hostname", f.context().join("transcript.jsonl")).expect("link");
        let (offered, refused) = collect(&f.workspace(), &f.dir.path().join("artifacts"), 1 << 20);
        assert_eq!(offered.iter().map(|(n, _)| *n).collect::<Vec<_>>(), ["result"]);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].starts_with("session: ") && refused[0].contains("symbolic link"), "{refused:?}");
    }
}
