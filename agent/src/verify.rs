//! Verification: build the image with the sandbox's own Docker daemon,
//! rescan it with the scanner library, and say for each finding whether it
//! is fixed, still present, or newly introduced.
//!
//! The daemon is the one inside the microVM (`DOCKER_HOST`), never a host
//! socket. The build context is the task's context folder, filtered by its
//! `.dockerignore`, without the `.patchpilot/` folder; the Dockerfile is
//! sent with it. The classic builder is used: it needs no session and runs
//! on every daemon the guest image ships.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::{BuildImageOptions, RemoveImageOptions};
use futures::StreamExt as _;
use patchpilot_model::Finding;

use crate::remediate::{FindingRef, same_vulnerability};
use crate::scans::{ScannedImage, Scans};
use patchpilot_model::context::CONTEXT_DIR;

/// Why verification could not produce a verdict.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Docker daemon is not reachable.
    #[error("cannot reach the Docker daemon (DOCKER_HOST={host}): {reason}")]
    Daemon {
        /// Where it was looked for.
        host: String,
        /// What happened.
        reason: String,
    },
    /// The build context could not be packed.
    #[error("cannot pack the build context {path}: {reason}")]
    Context {
        /// The context folder.
        path: PathBuf,
        /// What happened.
        reason: String,
    },
    /// The build failed; `excerpt` has the first error lines.
    #[error("the build failed: {excerpt}")]
    Build {
        /// The first lines of the error.
        excerpt: String,
    },
    /// The built image could not be exported or scanned.
    #[error("cannot scan the built image: {0}")]
    Scan(String),
}

pub use patchpilot_model::{Verification, VerificationRow as Row, VerificationStatus as Status};

/// A built image, exported and scanned.
#[derive(Debug)]
pub struct Built {
    /// The tag.
    pub tag: String,
    /// The image id.
    pub id: String,
    /// Build time.
    pub build_time: Duration,
    /// Export and scan time.
    pub scan_time: Duration,
    /// The build's output (the classic builder's step lines and what the
    /// steps printed): untrusted, since the repository's commands and the
    /// packages they install wrote it.
    pub output: String,
    /// The scan.
    pub scanned: ScannedImage,
}

/// Builds and scans images with one daemon.
#[derive(Debug, Clone)]
pub struct Builder {
    docker: Docker,
    host: String,
    platform: Option<String>,
    scratch: PathBuf,
}

impl Builder {
    /// Connects to the daemon at `DOCKER_HOST` (a Unix socket), checking it
    /// answers. `scratch` holds the packed context and the exported image.
    pub async fn connect(platform: Option<String>, scratch: PathBuf) -> Result<Builder, Error> {
        let host = std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
        let daemon = |reason: String| Error::Daemon { host: host.clone(), reason };
        let docker = Docker::connect_with_local_defaults().map_err(|e| daemon(e.to_string()))?;
        // The guest's engine (Debian's) may speak an older API than the
        // client's default.
        let docker = docker.negotiate_version().await.map_err(|e| daemon(e.to_string()))?;
        docker.ping().await.map_err(|e| daemon(e.to_string()))?;
        Ok(Builder { docker, host, platform, scratch })
    }

    /// Where the daemon is.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Builds `dockerfile_text` with `context` as the context, tags it
    /// `tag`, exports and scans it.
    pub async fn build_and_scan(
        &self,
        context: &Path,
        dockerfile_text: &str,
        tag: &str,
        scans: &Scans,
    ) -> Result<Built, Error> {
        std::fs::create_dir_all(&self.scratch)
            .map_err(|e| Error::Context { path: self.scratch.clone(), reason: e.to_string() })?;
        let started = Instant::now();
        let tar_path = self.scratch.join("context.tar");
        let dockerfile_name = pack_context(context, dockerfile_text, &tar_path)?;
        let (id, output) = self.build(&tar_path, &dockerfile_name, tag).await?;
        let build_time = started.elapsed();
        let started = Instant::now();
        let archive = self.scratch.join("image.tar");
        self.export(tag, &archive).await?;
        let image = patchpilot_scanner::image::open_docker_archive(&archive)
            .map_err(|e| Error::Scan(patchpilot_model::error_chain(&e)))?;
        let mut scanned =
            scans.scan_local(image).await.map_err(|e| Error::Scan(patchpilot_model::error_chain(&e)))?;
        scanned.reference = tag.to_owned();
        let _ = std::fs::remove_file(&archive);
        let _ = std::fs::remove_file(&tar_path);
        Ok(Built { tag: tag.to_owned(), id, build_time, scan_time: started.elapsed(), output, scanned })
    }

    /// Builds; returns the image id and the build's output.
    async fn build(&self, tar_path: &Path, dockerfile: &str, tag: &str) -> Result<(String, String), Error> {
        let options = BuildImageOptions {
            dockerfile: dockerfile.to_owned(),
            t: Some(tag.to_owned()),
            rm: true,
            forcerm: true,
            platform: self.platform.clone().unwrap_or_default(),
            ..Default::default()
        };
        let file = tokio::fs::File::open(tar_path)
            .await
            .map_err(|e| Error::Context { path: tar_path.to_owned(), reason: e.to_string() })?;
        let body = futures::stream::unfold(file, |mut file| async move {
            use tokio::io::AsyncReadExt as _;
            let mut buf = vec![0u8; 256 << 10];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(bytes::Bytes::from(buf)), file))
                }
                Err(e) => Some((Err(e), file)),
            }
        });
        let mut stream = self.docker.build_image(options, None, Some(bollard::body_try_stream(body)));
        let mut output = String::new();
        let mut id = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(line) = &info.stream {
                        output.push_str(line);
                        keep_tail(&mut output, OUTPUT_KEPT);
                    }
                    if let Some(detail) = info.error_detail.and_then(|d| d.message) {
                        return Err(Error::Build { excerpt: build_excerpt(&output, &detail) });
                    }
                    if let Some(aux) = info.aux.and_then(|a| a.id) {
                        id = Some(aux);
                    }
                }
                Err(e) => return Err(Error::Build { excerpt: build_excerpt(&output, &e.to_string()) }),
            }
        }
        // The classic builder reports the id in its last line when no aux
        // message comes.
        let id = id
            .or_else(|| {
                output
                    .lines()
                    .rev()
                    .find_map(|l| l.trim().strip_prefix("Successfully built ").map(str::to_owned))
            })
            .unwrap_or_default();
        Ok((id, output))
    }

    async fn export(&self, tag: &str, to: &Path) -> Result<(), Error> {
        use tokio::io::AsyncWriteExt as _;
        let scan = |e: String| Error::Scan(format!("exporting {tag}: {e}"));
        let mut file = tokio::fs::File::create(to).await.map_err(|e| scan(e.to_string()))?;
        let mut stream = self.docker.export_image(tag);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| scan(e.to_string()))?;
            file.write_all(&chunk).await.map_err(|e| scan(e.to_string()))?;
        }
        file.flush().await.map_err(|e| scan(e.to_string()))
    }

    /// Removes a tag this run built.
    pub async fn remove(&self, tag: &str) {
        let options = RemoveImageOptions { force: true, ..Default::default() };
        if let Err(e) = self.docker.remove_image(tag, Some(options), None).await {
            tracing::debug!(tag, error = %e, "cannot remove a verification image");
        }
    }
}

/// How much of a build's output is kept: its end, where the last steps and
/// their messages are.
const OUTPUT_KEPT: usize = 64 << 10;

/// Cuts `text` to about its last `kept` bytes once it holds twice that, at a
/// line start, so a chatty build costs bounded memory.
fn keep_tail(text: &mut String, kept: usize) {
    if text.len() <= 2 * kept {
        return;
    }
    let mut cut = text.len() - kept;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let cut = text[cut..].find('\n').map_or(cut, |n| cut + n + 1);
    text.drain(..cut);
}

/// The build output's last step and the error, trimmed for a reason line.
fn build_excerpt(output: &str, error: &str) -> String {
    let step = output.lines().rev().find(|l| l.starts_with("Step ")).unwrap_or_default();
    let tail: Vec<&str> =
        output.lines().rev().filter(|l| !l.trim().is_empty() && !l.starts_with(" ---> ")).take(6).collect();
    let mut lines: Vec<&str> = tail.into_iter().rev().collect();
    if !step.is_empty() && !lines.contains(&step) {
        lines.insert(0, step);
    }
    lines.push(error.trim());
    crate::remediate::first_lines(&lines.join("\n"), 8)
}

/// Packs `context` into a tar at `to`, honouring its `.dockerignore` and
/// leaving out `.patchpilot/`, and adds the Dockerfile under a name the
/// context does not use. Returns that name.
pub fn pack_context(context: &Path, dockerfile_text: &str, to: &Path) -> Result<String, Error> {
    let fail = |reason: String| Error::Context { path: context.to_owned(), reason };
    let ignore = DockerIgnore::read(context).map_err(fail)?;
    let file = std::fs::File::create(to).map_err(|e| fail(e.to_string()))?;
    let mut builder = tar::Builder::new(std::io::BufWriter::new(file));
    builder.follow_symlinks(false);
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = context.join(&rel);
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| fail(format!("{}: {e}", dir.display())))?
            .filter_map(Result::ok)
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = rel.join(entry.file_name());
            let name_text = name.to_string_lossy().replace('\\', "/");
            if name_text == CONTEXT_DIR || ignore.excludes(&name_text) {
                continue;
            }
            let kind = entry.file_type().map_err(|e| fail(e.to_string()))?;
            if kind.is_dir() {
                builder.append_dir(&name, entry.path()).map_err(|e| fail(format!("{name_text}: {e}")))?;
                stack.push(name);
            } else {
                builder
                    .append_path_with_name(entry.path(), &name)
                    .map_err(|e| fail(format!("{name_text}: {e}")))?;
            }
        }
    }
    let dockerfile_name = ".patchpilot-verify.Dockerfile".to_owned();
    let mut header = tar::Header::new_gnu();
    header.set_size(dockerfile_text.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    builder
        .append_data(&mut header, &dockerfile_name, dockerfile_text.as_bytes())
        .map_err(|e| fail(e.to_string()))?;
    builder.into_inner().and_then(|mut w| std::io::Write::flush(&mut w)).map_err(|e| fail(e.to_string()))?;
    Ok(dockerfile_name)
}

/// `.dockerignore` patterns: Go `filepath.Match` globs with `**`, `!` to
/// re-include, the last matching pattern deciding, and a match on a folder
/// covering what is inside it.
#[derive(Debug, Default)]
pub struct DockerIgnore {
    patterns: Vec<(globset::GlobMatcher, bool)>,
}

impl DockerIgnore {
    /// Reads `context/.dockerignore`; empty when there is none.
    pub fn read(context: &Path) -> Result<DockerIgnore, String> {
        match std::fs::read_to_string(context.join(".dockerignore")) {
            Ok(text) => DockerIgnore::parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(DockerIgnore::default()),
            Err(e) => Err(format!(".dockerignore: {e}")),
        }
    }

    /// Parses the patterns.
    pub fn parse(text: &str) -> Result<DockerIgnore, String> {
        let mut patterns = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (negated, pattern) = match line.strip_prefix('!') {
                Some(p) => (true, p.trim()),
                None => (false, line),
            };
            let pattern = pattern.trim_start_matches('/').trim_start_matches("./").trim_end_matches('/');
            if pattern.is_empty() {
                continue;
            }
            let glob = globset::GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| format!(".dockerignore line {}: {e}", n + 1))?;
            patterns.push((glob.compile_matcher(), negated));
        }
        Ok(DockerIgnore { patterns })
    }

    /// Whether `path` (relative, `/`-separated) is left out.
    pub fn excludes(&self, path: &str) -> bool {
        let mut excluded = false;
        for (glob, negated) in &self.patterns {
            let hit = glob.is_match(path) || ancestors(path).any(|a| glob.is_match(a));
            if hit {
                excluded = !negated;
            }
        }
        excluded
    }
}

fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

/// Compares the rebuilt image with the assessment. `baseline` is what was
/// in the image before (the original rebuilt, or the assessment plus the
/// original base's findings).
pub fn compare(assessed: &[Finding], baseline: &[Finding], after: &ScannedImage) -> Vec<Row> {
    let versions: HashMap<&str, &str> =
        after.packages.iter().map(|p| (p.name.as_str(), p.version.as_str())).collect();
    let mut rows = Vec::new();
    for f in assessed {
        let present = after.assessment.findings.iter().any(|a| same_vulnerability(f, a));
        rows.push(Row {
            finding: FindingRef::from(f),
            severity: f.severity,
            status: if present { Status::Present } else { Status::Fixed },
            version_after: versions.get(f.package.name.as_str()).map(|v| (*v).to_owned()),
        });
    }
    let mut introduced: Vec<&Finding> = after
        .assessment
        .findings
        .iter()
        .filter(|a| !assessed.iter().chain(baseline).any(|b| same_vulnerability(b, a)))
        .collect();
    introduced.sort_by(|a, b| b.severity.cmp(&a.severity).then_with(|| a.id.cmp(&b.id)));
    introduced.dedup_by(|a, b| same_vulnerability(a, b));
    for f in introduced {
        rows.push(Row {
            finding: FindingRef::from(f),
            severity: f.severity,
            status: Status::Introduced,
            version_after: Some(f.package.version.clone()),
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_build_output_keeps_its_end_from_a_line_start() {
        let mut out = String::new();
        for i in 0..1000 {
            out.push_str(&format!("Step {i}: é output line\n"));
            keep_tail(&mut out, 1024);
            assert!(out.len() <= 2 * 1024 + 32, "{}", out.len());
        }
        assert!(out.ends_with("Step 999: é output line\n"));
        assert!(out.starts_with("Step "), "{out:.40}");
        let mut short = "one\ntwo\n".to_owned();
        keep_tail(&mut short, 1024);
        assert_eq!(short, "one\ntwo\n");
    }

    #[test]
    fn dockerignore_last_match_wins_and_folders_cover_their_contents() {
        let ignore =
            DockerIgnore::parse("# comment\nnode_modules\n**/*.log\n!keep.log\n/build/\ndocs/*.md\n")
                .expect("parses");
        assert!(ignore.excludes("node_modules"));
        assert!(ignore.excludes("node_modules/x/package.json"));
        assert!(ignore.excludes("a/b/c.log"));
        assert!(!ignore.excludes("keep.log"));
        assert!(ignore.excludes("build/out"));
        assert!(ignore.excludes("docs/a.md"));
        assert!(!ignore.excludes("docs/sub/a.md"), "one * does not cross folders");
        assert!(!ignore.excludes("src/main.go"));
        assert!(DockerIgnore::parse("[").is_err());
    }

    #[test]
    fn packed_context_leaves_out_ignored_files_and_the_context_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("ctx");
        std::fs::create_dir_all(root.join(".patchpilot")).expect("mkdir");
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        std::fs::write(root.join(".dockerignore"), "*.tmp\n").expect("write");
        std::fs::write(root.join("src/main.go"), "package main\n").expect("write");
        std::fs::write(root.join("junk.tmp"), "x").expect("write");
        std::fs::write(root.join(".patchpilot/task.json"), "{}").expect("write");
        let out = dir.path().join("ctx.tar");
        let name = pack_context(&root, "FROM scratch\n", &out).expect("packs");
        let mut names: Vec<String> = tar::Archive::new(std::fs::File::open(&out).expect("open"))
            .entries()
            .expect("entries")
            .map(|e| {
                e.expect("entry").path().expect("path").to_string_lossy().trim_end_matches('/').to_owned()
            })
            .collect();
        names.sort();
        assert_eq!(names, vec![".dockerignore".to_owned(), name, "src".into(), "src/main.go".into()]);
    }
}
