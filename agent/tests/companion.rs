//! Companion bumps through the public API on small workspaces
//! (`fixtures/companion/<case>/workspace`): each case is copied to a temp
//! folder, planned and applied, and then every file is compared whole —
//! with `<case>/expected/<path>` where the case expects a change, with the
//! original bytes everywhere else. Each case also runs with CRLF line
//! endings, which must survive.

use std::path::{Path, PathBuf};

use patchpilot_agent::companion::table::Table;
use patchpilot_agent::companion::version::Version;
use patchpilot_agent::companion::{CompanionPlan, apply, plan};

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/companion").join(case)
}

/// Every file under `root`, relative, `/`-separated, sorted.
fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let rel = path.strip_prefix(root).expect("under root");
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn crlf(text: &str) -> String {
    text.replace('\n', "\r\n")
}

/// A case's workspace copied to a temp folder (with CRLF endings when
/// asked), planned and applied.
struct Run {
    dir: tempfile::TempDir,
    case: String,
    crlf: bool,
    plan: CompanionPlan,
    changed: Vec<String>,
}

fn run(case: &str, crlf_endings: bool) -> Run {
    let source = case_dir(case).join("workspace");
    let dir = tempfile::tempdir().expect("tempdir");
    for rel in files_under(&source) {
        let to = dir.path().join(&rel);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        let text = read(&source.join(&rel));
        std::fs::write(&to, if crlf_endings { crlf(&text) } else { text }).expect("write");
    }
    let plan = plan(dir.path());
    let changed = apply(dir.path(), &plan).unwrap_or_else(|e| panic!("{case}: apply: {e}"));
    Run { dir, case: case.into(), crlf: crlf_endings, plan, changed }
}

impl Run {
    /// Every file is the expected one where the case has one, else
    /// byte-identical to the original; and `changed` names exactly the
    /// files with an expected version.
    fn check_files(&self) {
        let case = case_dir(&self.case);
        let expected_dir = case.join("expected");
        let expected: Vec<String> =
            if expected_dir.is_dir() { files_under(&expected_dir) } else { Vec::new() };
        for rel in files_under(&case.join("workspace")) {
            let got = read(&self.dir.path().join(&rel));
            let want = if expected.contains(&rel) {
                read(&expected_dir.join(&rel))
            } else {
                read(&case.join("workspace").join(&rel))
            };
            let want = if self.crlf { crlf(&want) } else { want };
            assert_eq!(
                got,
                want,
                "{} ({}): {rel}\nplan: {:#?}",
                self.case,
                if self.crlf { "CRLF" } else { "LF" },
                self.plan
            );
        }
        assert_eq!(self.changed, expected, "{}: files changed", self.case);
    }

    fn bumps(&self) -> Vec<(String, usize, String, String)> {
        self.plan.bumps.iter().map(|b| (b.path.clone(), b.line, b.from.clone(), b.to.clone())).collect()
    }

    fn has_note(&self, parts: &[&str]) -> bool {
        self.plan.notes.iter().any(|n| parts.iter().all(|p| n.contains(p)))
    }
}

fn bump(path: &str, line: usize, from: &str, to: &str) -> (String, usize, String, String) {
    (path.into(), line, from.into(), to.into())
}

#[test]
fn go_service_bumps_the_makefile_pin_to_the_go_1_22_minimum() {
    for crlf in [false, true] {
        let r = run("go-makefile", crlf);
        assert_eq!(r.bumps(), vec![bump("Makefile", 2, "v1.55.2", "v1.56.0")]);
        let b = &r.plan.bumps[0];
        assert_eq!(b.companion, "golangci-lint");
        assert_eq!(b.because, "go 1.22 needs golangci-lint ≥ v1.56.0: first release with go1.22 support");
        assert!(b.source.starts_with("https://github.com/golangci/golangci-lint/"), "{}", b.source);
        let go: Vec<&str> = r.plan.toolchains.iter().map(|t| t.version.as_str()).collect();
        assert_eq!(go, vec!["1.22.5", "1.21"], "the image and go.mod");
        r.check_files();
    }
}

#[test]
fn workflow_version_input_of_the_lint_action_only() {
    for crlf in [false, true] {
        let r = run("workflow", crlf);
        let wf = ".github/workflows/ci.yml";
        assert_eq!(r.bumps(), vec![bump(wf, 16, "v1.55.2", "v1.60.1"), bump(wf, 25, "v1.59.1", "v1.60.1")]);
        assert!(r.plan.bumps.iter().all(|b| b.because.starts_with("go 1.23 needs golangci-lint ≥ v1.60.1")));
        r.check_files();
    }
}

#[test]
fn a_pin_already_newer_is_left_alone_and_noted() {
    let r = run("newer-pin", false);
    assert!(r.plan.bumps.is_empty(), "{:#?}", r.plan.bumps);
    assert!(
        r.has_note(&["Makefile:1 golangci-lint v1.57.2", "already admits v1.56.0"]),
        "{:#?}",
        r.plan.notes
    );
    assert!(r.has_note(&[".tool-versions:2 golangci-lint 1.59.0", "already admits"]), "{:#?}", r.plan.notes);
    r.check_files();
}

#[test]
fn a_v1_pin_is_not_moved_to_v2() {
    let r = run("v1-to-v2", false);
    assert!(r.plan.bumps.is_empty(), "{:#?}", r.plan.bumps);
    for at in ["Makefile:1 golangci-lint v1.64.8", "Dockerfile:3 golangci-lint v1.64.8"] {
        assert!(
            r.has_note(&[
                at,
                "below v2.4.0",
                "go 1.25 needs golangci-lint",
                "version: \"2\"",
                "migrate",
                ".golangci.yml"
            ]),
            "{at}: {:#?}",
            r.plan.notes
        );
    }
    r.check_files();
}

#[test]
fn vendored_trees_are_neither_read_nor_written() {
    let r = run("vendored", false);
    // third_party/lib/Dockerfile names go 1.26; were it read, the minimum
    // would be v2.9.0 and the v1 pin would not be bumped at all.
    assert_eq!(r.bumps(), vec![bump("Makefile", 1, "v1.55.2", "v1.56.0")]);
    assert!(r.plan.toolchains.iter().all(|t| !t.path.contains("third_party")), "{:#?}", r.plan.toolchains);
    r.check_files();
}

#[test]
fn node_bumps_npm_pins_to_the_node_22_npm() {
    for crlf in [false, true] {
        let r = run("node", crlf);
        assert_eq!(
            r.bumps(),
            vec![
                bump("Dockerfile", 4, "9", "10"),
                bump("package.json", 6, "9.0.0", "10.5.1"),
                bump("package.json", 8, "9.8.1", "10.5.1")
            ]
        );
        assert!(
            r.plan.bumps.iter().all(|b| b.because.starts_with("node 22 needs npm ≥ 10.5.1")),
            "{:#?}",
            r.plan.bumps
        );
        // The npm rules are a policy floor, and the plan says so.
        assert!(r.has_note(&["npm ≥ 10.5.1 for node 22", "policy floor"]), "{:#?}", r.plan.notes);
        r.check_files();
    }
}

#[test]
fn python_3_12_bumps_pip_and_setuptools() {
    for crlf in [false, true] {
        let r = run("python", crlf);
        assert_eq!(
            r.bumps(),
            vec![
                bump("Dockerfile", 3, "22.3.1", "23.1.2"),
                bump("Dockerfile", 3, "66", "67"),
                bump("pyproject.toml", 2, "66", "67"),
                bump("requirements-build.txt", 2, "22.0", "23.1.2"),
                bump("requirements-build.txt", 3, "66", "67"),
            ]
        );
        // The lower bound `setuptools>=40` already admits 66.1.0.
        assert!(
            r.has_note(&["requirements-build.txt:3 setuptools 40", "already admits 66.1.0"]),
            "{:#?}",
            r.plan.notes
        );
        r.check_files();
    }
}

#[test]
fn a_second_apply_changes_nothing() {
    let r = run("go-makefile", false);
    let again = plan(r.dir.path());
    assert!(again.bumps.is_empty(), "{:#?}", again.bumps);
    assert!(apply(r.dir.path(), &again).expect("apply").is_empty());
}

#[test]
fn every_rule_cites_a_source_and_minimums_never_go_down() {
    let table = Table::embedded().expect("the shipped table parses and validates");
    assert!(table.rules.len() >= 10);
    for r in &table.rules {
        let at = format!("{} {} → {}", r.toolchain, r.since, r.companion);
        assert!(r.source.starts_with("https://") && !r.source.contains(' '), "{at}: {}", r.source);
        assert!(!r.quote.trim().is_empty(), "{at}: no quote");
        assert!(Version::parse(&r.min).is_some(), "{at}: {}", r.min);
        assert!(Version::parse(&r.since).is_some(), "{at}: {}", r.since);
    }
    for c in &table.companions {
        let mut rules: Vec<(Version, Version)> = table
            .rules
            .iter()
            .filter(|r| r.companion == c.name)
            .filter_map(|r| Some((Version::parse(&r.since)?, Version::parse(&r.min)?)))
            .collect();
        rules.sort_by(|a, b| a.0.compare(&b.0));
        for w in rules.windows(2) {
            assert!(
                w[0].1.compare(&w[1].1).is_le(),
                "{}: {} ({}) then {} ({})",
                c.name,
                w[0].1,
                w[0].0,
                w[1].1,
                w[1].0
            );
        }
    }
}
