//! The folder a check works in, as the controller prepares it: made under
//! the CI work folder, filled with the checkout as the controller, then
//! handed to the check's uid, which can reach nothing else of the
//! controller's.

use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// Gives `dir` and everything under it to `uid`:`gid`, never following a
/// symbolic link: a checkout's links are the repository's, and following
/// one would hand over whatever it points to.
pub(crate) fn hand_over(dir: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let mut pending = vec![dir.to_owned()];
    while let Some(path) = pending.pop() {
        std::os::unix::fs::lchown(&path, Some(uid), Some(gid))?;
        if std::fs::symlink_metadata(&path)?.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                pending.push(entry?.path());
            }
        }
    }
    Ok(())
}

/// The first folder on the way to `dir` (`dir` included) that `uid` with
/// the single group `gid` may not pass through, going by the mode bits
/// (access control lists aside); `None` when it can reach `dir`.
pub(crate) fn barrier_for(dir: &Path, uid: u32, gid: u32) -> io::Result<Option<PathBuf>> {
    let dir = std::path::absolute(dir)?;
    for folder in dir.ancestors() {
        let meta = std::fs::metadata(folder)?;
        let mode = meta.mode();
        // The kernel takes the owner's bits for the owner, the group's for
        // the group, and the others' for everyone else: never more than one.
        let searchable = if meta.uid() == uid {
            mode & 0o100 != 0
        } else if meta.gid() == gid {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        };
        if !searchable {
            return Ok(Some(folder.to_owned()));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn barriers_go_by_the_bits_that_apply() {
        let dir = tempfile::tempdir().expect("tempdir");
        let inner = dir.path().join("inner");
        std::fs::create_dir(&inner).expect("mkdir");
        let me = std::fs::metadata(dir.path()).expect("stat");
        let (uid, gid) = (me.uid(), me.gid());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
        // Owner bits for the owner; a stranger is stopped at the folder.
        assert_eq!(barrier_for(&inner, uid, gid).expect("walk"), None);
        let stranger = uid.wrapping_add(1);
        assert_eq!(
            barrier_for(&inner, stranger, gid.wrapping_add(1)).expect("walk"),
            Some(dir.path().into())
        );
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
        assert_eq!(barrier_for(&inner, stranger, gid.wrapping_add(1)).expect("walk"), None);
        // Others may pass, the group may not: the group's bits apply to it.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o701)).expect("chmod");
        assert_eq!(barrier_for(&inner, stranger, gid).expect("walk"), Some(dir.path().into()));
    }
}
