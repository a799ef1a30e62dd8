//! Rules decided by a path alone: names git or the controller must never
//! write, CI definitions, build output and vendor trees.

use super::{RejectReason, VetPolicy};

/// Code points HFS+ ignores when comparing names, so `.g\u{200c}it` is
/// `.git` on a Mac; git's own `is_hfs_dotgit` drops the same ones.
fn hfs_ignorable(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

/// A component as the most forgiving file system would see it: lower
/// case, HFS-ignorable code points dropped, NTFS's trailing dots and spaces
/// and alternate-stream suffix (`.git::$INDEX_ALLOCATION`) removed.
fn normalise(component: &str) -> String {
    let mut s: String = component.chars().filter(|&c| !hfs_ignorable(c)).collect::<String>().to_lowercase();
    if let Some(i) = s.find(':') {
        s.truncate(i);
    }
    s.trim_end_matches([' ', '.']).to_owned()
}

/// `name~N`: an NTFS 8.3 short name for a longer name starting `name`.
fn short_name(s: &str, stem: &str) -> bool {
    s.strip_prefix(stem)
        .and_then(|r| r.strip_prefix('~'))
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Why a path may not be written at all, if it may not. Such findings
/// stop the patch before git applies it.
pub(crate) fn unsafe_path(path: &str) -> Option<(RejectReason, String)> {
    if path.is_empty() {
        return Some((RejectReason::Malformed, "empty path".into()));
    }
    if path.chars().any(|c| c.is_control()) {
        return Some((RejectReason::UnsafePath, "control character in the path".into()));
    }
    let bytes = path.as_bytes();
    if bytes[0] == b'/'
        || bytes[0] == b'\\'
        || (bytes.len() > 1 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic())
    {
        return Some((RejectReason::UnsafePath, "absolute path".into()));
    }
    // Backslashes count as separators too: the same tree may be checked
    // out on Windows.
    for component in path.split(['/', '\\']) {
        if component.is_empty() || component == "." {
            return Some((RejectReason::UnsafePath, "empty or `.` path component".into()));
        }
        if component == ".." {
            return Some((RejectReason::UnsafePath, "`..` path component".into()));
        }
        if let Some(finding) = git_name(component) {
            return Some(finding);
        }
    }
    None
}

/// Components that are git's own: the repository folder, submodule and
/// attribute files.
fn git_name(component: &str) -> Option<(RejectReason, String)> {
    let n = normalise(component);
    if n == ".git" || short_name(&n, "git") {
        return Some((
            RejectReason::GitMetadata,
            "a `.git` path: git's own data, never part of a change".into(),
        ));
    }
    if n == ".gitmodules" || short_name(&n, "gitmod") {
        return Some((
            RejectReason::GitMetadata,
            "`.gitmodules`: submodules fetch code from elsewhere".into(),
        ));
    }
    // All `.gitattributes` changes are refused, not only those naming a
    // filter/diff/merge driver: a remediation never needs one, and the
    // attribute syntax (macros, `[attr]` lines) is too wide to vet safely.
    if n == ".gitattributes" || short_name(&n, "gitatt") {
        return Some((
            RejectReason::GitMetadata,
            "`.gitattributes`: attributes can route files through filters and drivers".into(),
        ));
    }
    None
}

/// The `diff --git` line when names contain spaces can be split more than
/// one way; every space- or slash-separated fragment of it is checked, so
/// no reading of it hides a `.git` component.
pub(crate) fn unsafe_header(header: &str) -> Option<(RejectReason, String)> {
    for fragment in header.split([' ', '\t', '/', '\\']) {
        if fragment == ".." {
            return Some((RejectReason::UnsafePath, "`..` in the diff header".into()));
        }
        if let Some(finding) = git_name(fragment) {
            return Some(finding);
        }
    }
    None
}

/// CI definitions, matched case-insensitively (a case-folding checkout
/// would run `.GitHub/Workflows` too).
pub fn ci_definition(path: &str) -> Option<&'static str> {
    const PREFIXES: &[(&str, &str)] = &[
        (".github/workflows/", "GitHub Actions workflow"),
        (".github/actions/", "GitHub Actions action"),
        (".circleci/", "CircleCI configuration"),
        (".buildkite/", "Buildkite pipeline"),
        (".gitlab/ci/", "GitLab CI include"),
        (".azure-pipelines/", "Azure Pipelines definition"),
        (".woodpecker/", "Woodpecker pipeline"),
    ];
    const FILES: &[(&str, &str)] = &[
        (".gitlab-ci.yml", "GitLab CI definition"),
        (".gitlab-ci.yaml", "GitLab CI definition"),
        ("azure-pipelines.yml", "Azure Pipelines definition"),
        ("azure-pipelines.yaml", "Azure Pipelines definition"),
        (".travis.yml", "Travis CI definition"),
        ("bitbucket-pipelines.yml", "Bitbucket Pipelines definition"),
        (".drone.yml", "Drone definition"),
        (".woodpecker.yml", "Woodpecker pipeline"),
    ];
    let lower = path.to_lowercase();
    if let Some((_, what)) = PREFIXES.iter().find(|(p, _)| lower.starts_with(p)) {
        return Some(what);
    }
    if let Some((_, what)) = FILES.iter().find(|(f, _)| lower == *f) {
        return Some(what);
    }
    // A Jenkinsfile runs wherever a job points at it, so any folder counts.
    let name = lower.rsplit('/').next().unwrap_or("");
    if name == "jenkinsfile" || name.starts_with("jenkinsfile.") {
        return Some("Jenkins pipeline");
    }
    None
}

/// The index of the first component below a vendor root (`vendor/x/…` →
/// 1), if the path is in a vendor tree.
pub(crate) fn vendor_depth(path: &str, policy: &VetPolicy) -> Option<usize> {
    let components: Vec<&str> = path.split('/').collect();
    // The last component is the file itself: a file named `vendor` is not
    // a vendor tree.
    let folders = components.len().saturating_sub(1);
    components[..folders].iter().position(|c| policy.vendor_dirs.iter().any(|v| v == c)).map(|i| i + 1)
}

/// Build output by path: a build-output folder anywhere outside a vendor
/// tree, or a compiled-file extension anywhere.
pub(crate) fn build_output(path: &str, policy: &VetPolicy) -> Option<String> {
    let components: Vec<&str> = path.split('/').collect();
    let folders = &components[..components.len().saturating_sub(1)];
    // Inside a vendor tree, folder names belong to the vendored project (a
    // Go package called `build` is source), so only the part above the
    // vendor root is looked at; compiled extensions count everywhere.
    let searched = match vendor_depth(path, policy) {
        Some(depth) => &folders[..depth.min(folders.len())],
        None => folders,
    };
    if let Some(dir) = searched.iter().find(|c| policy.build_output_dirs.iter().any(|d| d == *c)) {
        return Some(format!("under a `{dir}/` build-output folder"));
    }
    let name = components.last().copied().unwrap_or("").to_lowercase();
    if let Some(ext) =
        policy.build_output_extensions.iter().find(|e| name.ends_with(&format!(".{}", e.to_lowercase())))
    {
        return Some(format!("a compiled `.{ext}` file"));
    }
    // Versioned shared libraries: `libfoo.so.1.2`.
    if let Some((_, version)) = name.split_once(".so.")
        && !version.is_empty()
        && version.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    {
        return Some("a versioned shared library".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_names_in_all_their_spellings_are_unsafe() {
        for p in [
            ".git/config",
            "a/.GIT/hooks/x",
            ".git /config",
            ".git./x",
            "GIT~1/config",
            "x/.g\u{200c}it/config",
            ".git::$INDEX_ALLOCATION/x",
            "sub\\.git\\config",
            ".gitmodules",
            "lib/.gitattributes",
        ] {
            assert_eq!(unsafe_path(p).map(|f| f.0), Some(RejectReason::GitMetadata), "{p}");
        }
        for p in ["/etc/passwd", "C:/x", "../x", "a/../../x", "a//b", "./a"] {
            assert_eq!(unsafe_path(p).map(|f| f.0), Some(RejectReason::UnsafePath), "{p}");
        }
        for p in [".github/x", ".gitignore", "src/git.rs", "docs/.gitkeep", "gitlab/x"] {
            assert_eq!(unsafe_path(p), None, "{p}");
        }
    }

    #[test]
    fn build_output_skips_vendored_package_folders_but_not_extensions() {
        let policy = VetPolicy::default();
        assert!(build_output("target/release/app", &policy).is_some());
        assert!(build_output("web/node_modules/x/index.js", &policy).is_some());
        assert!(build_output("vendor/github.com/x/build/build.go", &policy).is_none());
        assert!(build_output("vendor/github.com/x/y.o", &policy).is_some());
        assert!(build_output("lib/libz.so.1.2.13", &policy).is_some());
        assert!(build_output("src/build.rs", &policy).is_none());
    }
}
