//! Which toolchain versions the workspace builds with after the fix: the
//! Dockerfile's `FROM golang|node|python:X.Y…` stages (through the agent's
//! Dockerfile model, so `ARG` defaults in the image are resolved), `go.mod`
//! `go` and `toolchain` directives, `.nvmrc`/`.node-version`,
//! `.python-version`, `.go-version`, `.tool-versions`, and workflow
//! `go-version:`/`node-version:`/`python-version:` values (matrix lists
//! included).

use serde::{Deserialize, Serialize};

use super::text::{self, YamlLine};
use super::tree::{File, Kind};
use super::version::Version;
use crate::dockerfile::{Base, Dockerfile};

/// One place that names a toolchain version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolchainVersion {
    /// `go`, `node` or `python`.
    pub toolchain: String,
    /// The version as far as it is written: `1.22.5`, `22`, `3.12`.
    pub version: String,
    /// The file, relative to the workspace.
    pub path: String,
    /// 1-based line.
    pub line: usize,
    /// Where it comes from: "FROM golang:1.22.5-alpine", "go.mod go directive".
    pub origin: String,
}

/// The version a tag, a directive or a setup value starts with: `1.22.5`
/// from `1.22.5-alpine`, `1.22` from `^1.22.x`, `20` from `v20.11.0`.
pub fn leading_version(text: &str) -> Option<Version> {
    let rest = text.trim().trim_start_matches(['^', '~', '>', '=', '<', ' ']);
    let rest = rest.strip_prefix('v').unwrap_or(rest);
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let run = rest[..end].trim_end_matches('.');
    Version::parse(run)
}

/// The toolchain an official image is for, by the last part of its
/// repository (`golang`, `docker.io/library/golang`, `mirror/…/golang`).
fn image_toolchain(repository: &str) -> Option<&'static str> {
    match repository.rsplit('/').next()? {
        "golang" => Some("go"),
        "node" => Some("node"),
        "python" => Some("python"),
        _ => None,
    }
}

/// The toolchain a `.tool-versions` name is for.
fn tool_versions_toolchain(name: &str) -> Option<&'static str> {
    match name {
        "golang" | "go" => Some("go"),
        "nodejs" | "node" => Some("node"),
        "python" => Some("python"),
        _ => None,
    }
}

/// Every toolchain version the files name.
pub fn detect(files: &[File], notes: &mut Vec<String>) -> Vec<ToolchainVersion> {
    let mut out = Vec::new();
    for file in files {
        let mut push = |toolchain: &str, version: &Version, line: usize, origin: String| {
            out.push(ToolchainVersion {
                toolchain: toolchain.to_owned(),
                version: version.render(false),
                path: file.path.clone(),
                line,
                origin,
            });
        };
        match file.kind {
            Kind::Dockerfile => match Dockerfile::parse(&file.text) {
                Ok(df) => {
                    for stage in df.stages() {
                        let Base::Image(image) = &stage.base else { continue };
                        let Some(toolchain) = image_toolchain(&image.repository) else { continue };
                        let Some(version) = image.tag.as_deref().and_then(leading_version) else { continue };
                        let line = text::line_of(&file.text, stage.image.span.start);
                        push(toolchain, &version, line, format!("FROM {}", image.render()));
                    }
                }
                Err(e) => notes.push(format!("{}: not read as a Dockerfile: {e}", file.path)),
            },
            Kind::GoMod => {
                for line in text::lines(&file.text) {
                    let code = line.text.split("//").next().unwrap_or_default().trim();
                    if let Some(v) = code.strip_prefix("go ").and_then(leading_version) {
                        push("go", &v, line.number, "go.mod go directive".into());
                    } else if let Some(v) = code.strip_prefix("toolchain go").and_then(leading_version) {
                        push("go", &v, line.number, "go.mod toolchain directive".into());
                    }
                }
            }
            Kind::NodeVersion | Kind::PythonVersion | Kind::GoVersion => {
                let toolchain = match file.kind {
                    Kind::NodeVersion => "node",
                    Kind::PythonVersion => "python",
                    _ => "go",
                };
                for line in text::lines(&file.text) {
                    let value = line.text.trim();
                    if value.is_empty() || value.starts_with('#') {
                        continue;
                    }
                    if let Some(v) = leading_version(value) {
                        push(toolchain, &v, line.number, file.name.clone());
                    }
                }
            }
            Kind::ToolVersions => {
                for line in text::lines(&file.text) {
                    let mut words = line.text.split('#').next().unwrap_or_default().split_whitespace();
                    let (Some(name), Some(value)) = (words.next(), words.next()) else { continue };
                    let Some(toolchain) = tool_versions_toolchain(name) else { continue };
                    if let Some(v) = leading_version(value) {
                        push(toolchain, &v, line.number, format!(".tool-versions {name}"));
                    }
                }
            }
            Kind::Workflow => {
                let doc = text::yaml_lines(&file.text);
                for (i, l) in doc.iter().enumerate() {
                    let Some((key, col)) = l.key else { continue };
                    let toolchain = match key {
                        "go-version" => "go",
                        "node-version" => "node",
                        "python-version" => "python",
                        _ => continue,
                    };
                    for (value, line) in setup_values(&doc, i, col) {
                        if let Some(v) = leading_version(value) {
                            push(toolchain, &v, line, format!("workflow {key}: {value}"));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The values of a `key:` line: its scalar, its flow list, or the items of
/// the block list under it.
fn setup_values<'a>(doc: &[YamlLine<'a>], i: usize, col: usize) -> Vec<(&'a str, usize)> {
    let l = &doc[i];
    if let Some((v, _)) = &l.value {
        return vec![(*v, l.line.number)];
    }
    let flow = text::flow_list(&l.line, col);
    if !flow.is_empty() {
        return flow.into_iter().map(|(v, _)| (v, l.line.number)).collect();
    }
    doc[text::children(doc, i)]
        .iter()
        .filter(|c| c.dash && c.key.is_none())
        .filter_map(|c| c.value.as_ref().map(|(v, _)| (*v, c.line.number)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> File {
        File::for_test(path, text)
    }

    fn found(files: &[File]) -> Vec<(String, String, usize)> {
        let mut notes = Vec::new();
        detect(files, &mut notes).into_iter().map(|t| (t.toolchain, t.version, t.line)).collect()
    }

    #[test]
    fn versions_from_every_source() {
        let files = [
            file(
                "Dockerfile",
                "ARG GO=1.22.5\nFROM golang:${GO}-alpine AS build\nFROM node:20-slim\nFROM python:3.12-slim-bookworm\nFROM golang:alpine\nFROM build\n",
            ),
            file("go.mod", "module x\n\ngo 1.21 // floor\n\ntoolchain go1.22.5\n"),
            file(".nvmrc", "v20.11.0\n"),
            file(".python-version", "3.12.1\n"),
            file(".tool-versions", "golang 1.23.0\nnodejs 22.1.0 # pinned\nterraform 1.5.0\n"),
            file(
                ".github/workflows/ci.yml",
                "jobs:\n  t:\n    strategy:\n      matrix:\n        python-version: ['3.11', \"3.12\"]\n        node-version:\n          - 18.x\n          - '22'\n    steps:\n      - uses: actions/setup-go@v5\n        with:\n          go-version: '1.22'\n      - uses: actions/setup-go@v5\n        with:\n          go-version-file: go.mod\n",
            ),
        ];
        let got = found(&files);
        let expect = [
            ("go", "1.23.0", 1),
            ("node", "22.1.0", 2),
            ("node", "20.11.0", 1),
            ("python", "3.12.1", 1),
            ("python", "3.11", 5),
            ("python", "3.12", 5),
            ("node", "18", 7),
            ("node", "22", 8),
            ("go", "1.22", 12),
            ("go", "1.22.5", 2),
            ("node", "20", 3),
            ("python", "3.12", 4),
            ("go", "1.21", 3),
            ("go", "1.22.5", 5),
        ];
        for (tc, v, line) in expect {
            assert!(
                got.iter().any(|g| g == &(tc.to_owned(), v.to_owned(), line)),
                "{tc} {v} line {line} in {got:?}"
            );
        }
        assert_eq!(got.len(), expect.len(), "{got:?}");
    }

    #[test]
    fn leading_versions() {
        assert_eq!(leading_version("1.22.5-alpine3.19").map(|v| v.to_string()).as_deref(), Some("1.22.5"));
        assert_eq!(leading_version("^1.22.x").map(|v| v.to_string()).as_deref(), Some("1.22"));
        assert_eq!(leading_version("v20.11.0").map(|v| v.to_string()).as_deref(), Some("20.11.0"));
        assert_eq!(leading_version("lts/*"), None);
        assert_eq!(leading_version("bookworm"), None);
    }
}
