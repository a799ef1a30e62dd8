//! The versioned-download and lockfile remediators against real inputs.
//!
//! - Downloads: real Dockerfiles (sources in `fixtures/tools/SOURCES.md`)
//!   with release indexes written for the tests.
//! - Lockfiles, with the real tools and no network beyond loopback:
//!   - Go through a module proxy in a folder (`GOPROXY=file://…`) holding
//!     module zips built here in Go's module zip layout;
//!   - Cargo through a local registry (`local-registry` source
//!     replacement in the workspace's `.cargo/config.toml`);
//!   - npm through a registry served on 127.0.0.1 by this test;
//!   - pip on real requirements files (no tool: a text edit).
//!
//! Go and Cargo read their settings from the environment, and the
//! remediator's `run_command` passes the agent's own environment on; so
//! those tests run `apply` in a child process of this test binary started
//! with the environment the tools need (the test process itself never
//! changes its environment). A test whose tool is missing prints why and
//! skips.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use patchpilot_agent::dockerfile::{Dockerfile, apply as apply_edits};
use patchpilot_agent::remediate::downloads::{Binary, Release, ReleaseIndex, plan};
use patchpilot_agent::remediate::lockfiles;
use patchpilot_agent::remediate::{CommandRun, Refusal, RefusalCategory, Step, have};
use patchpilot_model::{Finding, Package, Severity};
use sha2::Digest as _;

fn fixture(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tools").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn finding(id: &str, ecosystem: &str, name: &str, version: &str, fixed: &[&str], path: &str) -> Finding {
    let mut package = Package::new(name, version, ecosystem);
    package.path = path.into();
    if ecosystem == "Go" {
        package.kind = "go-module".into();
    }
    Finding::new(id, package, Severity::High).fixed_in(fixed.iter().copied())
}

// ---------------------------------------------------------------------------
// Versioned downloads
// ---------------------------------------------------------------------------

fn release(version: &str, modules: &[(&str, &str)]) -> Release {
    Release {
        version: version.into(),
        modules: modules.iter().map(|(m, v)| ((*m).to_owned(), (*v).to_owned())).collect(),
    }
}

/// A release index for helm written for these tests (the module versions
/// are not Helm's real ones): the standard library moves one patch per
/// release, `golang.org/x/net` is fixed from 3.2.3 on, and 3.2.1-rc.1 is a
/// pre-release that already carries the fixed toolchain.
fn helm_index(path: &str) -> ReleaseIndex {
    ReleaseIndex {
        binaries: vec![Binary {
            name: "helm".into(),
            path: path.into(),
            releases: vec![
                release(
                    "v3.2.4",
                    &[("stdlib", "v1.14.6"), ("golang.org/x/net", "v0.0.0-20200602114024-627f9648deb9")],
                ),
                release(
                    "v3.2.0",
                    &[("stdlib", "v1.14.2"), ("golang.org/x/net", "v0.0.0-20200324143707-d3edc9973b7e")],
                ),
                release(
                    "v3.2.1",
                    &[("stdlib", "v1.14.3"), ("golang.org/x/net", "v0.0.0-20200324143707-d3edc9973b7e")],
                ),
                release(
                    "v3.2.1-rc.1",
                    &[("stdlib", "v1.14.4"), ("golang.org/x/net", "v0.0.0-20200324143707-d3edc9973b7e")],
                ),
                release(
                    "v3.2.2",
                    &[("stdlib", "v1.14.4"), ("golang.org/x/net", "v0.0.0-20200324143707-d3edc9973b7e")],
                ),
                release(
                    "v3.2.3",
                    &[("stdlib", "v1.14.4"), ("golang.org/x/net", "v0.0.0-20200520182314-0ba52f642ac2")],
                ),
            ],
        }],
    }
}

fn edited(text: &str, steps: &[Step]) -> String {
    let edits: Vec<_> = steps.iter().flat_map(|s| s.edits.clone()).collect();
    apply_edits(text, &edits).expect("edits apply")
}

#[test]
fn download_bumps_the_global_arg_to_the_smallest_fixing_release_not_the_newest() {
    let text = fixture("dockerfiles/openstack-magnum-helm-client.Dockerfile");
    let df = Dockerfile::parse(&text).expect("parses");
    let findings = vec![
        finding("GO-2020-0015", "Go", "stdlib", "v1.14.2", &["1.13.12", "1.14.4"], "usr/local/bin/helm"),
        // Someone else's binary: neither fixed nor refused here.
        finding("GO-2021-0001", "Go", "stdlib", "v1.14.2", &["1.14.4"], "usr/bin/other"),
    ];
    let (steps, refusals) = plan(&df, &findings, &helm_index("/usr/local/bin/helm"));
    assert!(refusals.is_empty(), "{refusals:?}");
    assert_eq!(steps.len(), 1);
    let step = &steps[0];
    assert_eq!(step.remediator, "download");
    // 3.2.1-rc.1 has the fix but is a pre-release; 3.2.4 is newer than needed.
    assert_eq!(step.summary, "helm v3.2.0 → v3.2.2");
    assert_eq!(step.fixes.len(), 1);
    assert_eq!(step.fixes[0].id, "GO-2020-0015");
    assert!(step.reason.contains("${HELM_VERSION} (ARG at line 1)"), "{}", step.reason);
    assert!(step.reason.contains("stdlib v1.14.4 ≥ 1.14.4 (GO-2020-0015)"), "{}", step.reason);
    // Only the default of the global ARG changes; the stage's bare ARG
    // inherits it and stays as written.
    assert_eq!(edited(&text, &steps), text.replacen("ARG HELM_VERSION=v3.2.0", "ARG HELM_VERSION=v3.2.2", 1));
}

#[test]
fn download_takes_the_smallest_release_fixing_every_finding_and_refuses_what_none_fixes() {
    let text = fixture("dockerfiles/openstack-magnum-helm-client.Dockerfile");
    let df = Dockerfile::parse(&text).expect("parses");
    let helm = "usr/local/bin/helm";
    let findings = vec![
        finding("GO-2020-0015", "Go", "stdlib", "v1.14.2", &["1.14.4"], helm),
        finding(
            "GO-2020-0009",
            "Go",
            "golang.org/x/net",
            "v0.0.0-20200324143707-d3edc9973b7e",
            &["0.0.0-20200520182314-0ba52f642ac2"],
            helm,
        ),
        finding("GO-2099-0001", "Go", "golang.org/x/crypto", "v0.1.0", &["0.2.0"], helm),
        finding("GO-2099-0002", "Go", "golang.org/x/text", "v0.3.0", &[], helm),
    ];
    let (steps, refusals) = plan(&df, &findings, &helm_index(helm));
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].summary, "helm v3.2.0 → v3.2.3");
    let fixed: Vec<&str> = steps[0].fixes.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(fixed, vec!["GO-2020-0009", "GO-2020-0015"]);
    let refused: BTreeMap<&str, &Refusal> = refusals.iter().map(|r| (r.finding.id.as_str(), r)).collect();
    assert_eq!(refused.len(), 2);
    let crypto = refused["GO-2099-0001"];
    assert_eq!(crypto.category, RefusalCategory::Policy);
    assert!(crypto.reason.contains("no release of helm after v3.2.0"), "{}", crypto.reason);
    let text_module = refused["GO-2099-0002"];
    assert_eq!(text_module.category, RefusalCategory::Policy);
    assert!(text_module.reason.contains("no fixed version"), "{}", text_module.reason);
}

#[test]
fn download_refuses_when_no_release_fixes_anything() {
    let text = fixture("dockerfiles/openstack-magnum-helm-client.Dockerfile");
    let df = Dockerfile::parse(&text).expect("parses");
    let findings =
        vec![finding("GO-2099-0003", "Go", "stdlib", "v1.14.2", &["1.15.0"], "usr/local/bin/helm")];
    let (steps, refusals) = plan(&df, &findings, &helm_index("usr/local/bin/helm"));
    assert!(steps.is_empty());
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].category, RefusalCategory::Policy);
    assert!(refusals[0].reason.contains("newest listed: v3.2.4 with v1.14.6"), "{}", refusals[0].reason);
}

#[test]
fn download_keeps_quotes_of_an_arg_fed_to_add() {
    let text = fixture("dockerfiles/ouest-france-cdp-kubectl.Dockerfile");
    let df = Dockerfile::parse(&text).expect("parses");
    let index = ReleaseIndex {
        binaries: vec![Binary {
            name: "kubectl".into(),
            path: "bin/kubectl".into(),
            releases: vec![
                release("1.10.13", &[("golang.org/x/net", "v0.0.0-20170809000501-1c05540f6879")]),
                release("1.10.14", &[("golang.org/x/net", "v0.0.0-20190328230028-74de082e2cca")]),
                release("1.11.0", &[("golang.org/x/net", "v0.0.0-20190328230028-74de082e2cca")]),
            ],
        }],
    };
    let findings = vec![finding(
        "GO-2020-0005",
        "Go",
        "golang.org/x/net",
        "v0.0.0-20170809000501-1c05540f6879",
        &["0.0.0-20190125091013-d26f9f9a57f3"],
        "/bin/kubectl",
    )];
    let (steps, refusals) = plan(&df, &findings, &index);
    assert!(refusals.is_empty(), "{refusals:?}");
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].summary, "kubectl v1.10.13 → v1.10.14");
    assert!(steps[0].reason.contains("${KUBE_VERSION}/bin/linux/amd64/kubectl"), "{}", steps[0].reason);
    assert_eq!(
        edited(&text, &steps),
        text.replace("ARG KUBE_VERSION=\"v1.10.13\"", "ARG KUBE_VERSION=\"v1.10.14\"")
    );
}

#[test]
fn download_edits_the_legacy_env_form_and_follows_pre_releases_only_from_one() {
    let text = fixture("dockerfiles/timzu-helm.Dockerfile");
    let df = Dockerfile::parse(&text).expect("parses");
    let index = ReleaseIndex {
        binaries: vec![Binary {
            name: "helm".into(),
            path: "usr/local/bin/helm".into(),
            releases: vec![
                release("v3.3.0-rc.1", &[("stdlib", "v1.14.4")]),
                release("v3.3.0-rc.2", &[("stdlib", "v1.14.6")]),
                release("v3.3.0", &[("stdlib", "v1.14.6")]),
            ],
        }],
    };
    let findings =
        vec![finding("GO-2020-0042", "Go", "stdlib", "v1.14.4", &["1.14.5"], "usr/local/bin/helm")];
    let (steps, refusals) = plan(&df, &findings, &index);
    assert!(refusals.is_empty(), "{refusals:?}");
    assert_eq!(steps[0].summary, "helm v3.3.0-rc.1 → v3.3.0-rc.2");
    assert!(steps[0].reason.contains("ENV at line 7"), "{}", steps[0].reason);
    assert_eq!(edited(&text, &steps), text.replace("ENV VERSION v3.3.0-rc.1", "ENV VERSION v3.3.0-rc.2"));
}

#[test]
fn download_follows_versions_through_other_env_values() {
    // ARG → ENV TAR_FILE → curl ${BASE_URL}/${TAR_FILE}
    let text = fixture("dockerfiles/basisai-helm-tiller.Dockerfile");
    let df = Dockerfile::parse(&text).expect("parses");
    let index = ReleaseIndex {
        binaries: vec![Binary {
            name: "helm".into(),
            path: "usr/bin/helm".into(),
            releases: vec![
                release("3.0.0", &[("k8s.io/apimachinery", "v0.16.1")]),
                release("3.0.1", &[("k8s.io/apimachinery", "v0.16.4")]),
                release("3.0.2", &[("k8s.io/apimachinery", "v0.16.4")]),
            ],
        }],
    };
    let findings =
        vec![finding("GO-2099-0010", "Go", "k8s.io/apimachinery", "v0.16.1", &["0.16.4"], "usr/bin/helm")];
    let (steps, _) = plan(&df, &findings, &index);
    assert_eq!(steps.len(), 1);
    assert_eq!(edited(&text, &steps), text.replace("ARG HELM_VERSION=3.0.0", "ARG HELM_VERSION=3.0.1"));

    // ENV TERRAFORM_VERSION → ENV TERRAFORM_URL → wget ${TERRAFORM_URL}
    let text = fixture("dockerfiles/mihaescuvlad-terraform-learning.Dockerfile");
    let df = Dockerfile::parse(&text).expect("parses");
    let index = ReleaseIndex {
        binaries: vec![Binary {
            name: "terraform".into(),
            path: "usr/bin/terraform".into(),
            releases: vec![
                release("1.5.3", &[("stdlib", "v1.20.5")]),
                release("1.5.4", &[("stdlib", "v1.20.6")]),
                release("1.5.5", &[("stdlib", "v1.20.7")]),
                release("1.5.7", &[("stdlib", "v1.21.1")]),
            ],
        }],
    };
    let findings = vec![finding(
        "GO-2023-1987",
        "Go",
        "stdlib",
        "v1.20.5",
        &["1.20.7", "1.21.0-rc.4"],
        "usr/bin/terraform",
    )];
    let (steps, refusals) = plan(&df, &findings, &index);
    assert!(refusals.is_empty(), "{refusals:?}");
    assert_eq!(steps[0].summary, "terraform 1.5.3 → 1.5.5");
    assert!(steps[0].reason.contains("${TERRAFORM_URL}"), "{}", steps[0].reason);
    assert_eq!(
        edited(&text, &steps),
        text.replace("ENV TERRAFORM_VERSION=1.5.3", "ENV TERRAFORM_VERSION=1.5.5")
    );
}

#[test]
fn download_of_tini_with_add_and_the_legacy_env() {
    let text = fixture("dockerfiles/krallin-tini-readme.Dockerfile");
    let df = Dockerfile::parse(&text).expect("parses");
    let index = ReleaseIndex {
        binaries: vec![Binary {
            name: "tini".into(),
            path: "tini".into(),
            releases: vec![
                release("v0.13.0", &[("tini", "0.13.0")]),
                release("v0.14.0", &[("tini", "0.14.0")]),
            ],
        }],
    };
    // A C binary: the finding compares with SemVer through its ecosystem.
    let findings = vec![finding("TEST-TINI-1", "crates.io", "tini", "0.13.0", &["0.14.0"], "/tini")];
    let (steps, refusals) = plan(&df, &findings, &index);
    assert!(refusals.is_empty(), "{refusals:?}");
    assert_eq!(edited(&text, &steps), text.replace("ENV TINI_VERSION v0.13.0", "ENV TINI_VERSION v0.14.0"));
}

#[test]
fn download_refuses_without_a_default_or_without_a_variable() {
    let helm = "usr/bin/helm";
    let findings = vec![finding("GO-2020-0015", "Go", "stdlib", "v1.14.2", &["1.14.4"], helm)];

    let text = fixture("dockerfiles/nandak522-helm-template-validator.Dockerfile");
    let (steps, refusals) = plan(&Dockerfile::parse(&text).expect("parses"), &findings, &helm_index(helm));
    assert!(steps.is_empty());
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].category, RefusalCategory::Repository);
    assert!(refusals[0].reason.contains("VERSION has no default"), "{}", refusals[0].reason);

    let text = fixture("dockerfiles/martinadolfi-helm.Dockerfile");
    let (steps, refusals) = plan(&Dockerfile::parse(&text).expect("parses"), &findings, &helm_index(helm));
    assert!(steps.is_empty());
    assert_eq!(refusals[0].category, RefusalCategory::Repository);
    assert!(refusals[0].reason.contains("no ARG or ENV version of helm"), "{}", refusals[0].reason);

    // The variable holds a version the index does not list.
    let text = fixture("dockerfiles/openstack-magnum-helm-client.Dockerfile").replace("v3.2.0", "v3.1.9");
    let (steps, refusals) = plan(&Dockerfile::parse(&text).expect("parses"), &findings, &helm_index(helm));
    assert!(steps.is_empty());
    assert!(refusals[0].reason.contains("has no release v3.1.9"), "{}", refusals[0].reason);
}

#[test]
fn download_pinned_by_a_checksum_is_refused_rather_than_broken() {
    // The digest is in an ARG used by the same RUN…
    let text = fixture("dockerfiles/int128-kubelogin-docker.Dockerfile");
    let index = ReleaseIndex {
        binaries: vec![Binary {
            name: "kubelogin".into(),
            path: "kubelogin".into(),
            releases: vec![
                release("v1.19.0", &[("golang.org/x/crypto", "v0.0.0-20200302210943-78000ba7a073")]),
                release("v1.19.1", &[("golang.org/x/crypto", "v0.0.0-20200622213623-75b288015ac9")]),
            ],
        }],
    };
    let findings = vec![finding(
        "GO-2020-0012",
        "Go",
        "golang.org/x/crypto",
        "v0.0.0-20200302210943-78000ba7a073",
        &["0.0.0-20200622213623-75b288015ac9"],
        "/kubelogin",
    )];
    let (steps, refusals) = plan(&Dockerfile::parse(&text).expect("parses"), &findings, &index);
    assert!(steps.is_empty(), "{steps:?}");
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].category, RefusalCategory::Repository);
    assert!(refusals[0].reason.contains("v1.19.0 → v1.19.1 would fix them"), "{}", refusals[0].reason);
    assert!(refusals[0].reason.contains("KUBELOGIN_SHA256"), "{}", refusals[0].reason);

    // …or in a later RUN of the same stage.
    let text = fixture("dockerfiles/jameslaverack-docker-kops.Dockerfile");
    let index = ReleaseIndex {
        binaries: vec![Binary {
            name: "kops".into(),
            path: "bin/kops".into(),
            releases: vec![
                release("1.8.1", &[("stdlib", "v1.9.3")]),
                release("1.9.0", &[("stdlib", "v1.10.1")]),
            ],
        }],
    };
    let findings = vec![finding("GO-2099-0200", "Go", "stdlib", "v1.9.3", &["1.10.0"], "bin/kops")];
    let (steps, refusals) = plan(&Dockerfile::parse(&text).expect("parses"), &findings, &index);
    assert!(steps.is_empty());
    assert!(refusals[0].reason.contains("kopsSha1, used by the RUN at line 11"), "{}", refusals[0].reason);
}

#[test]
fn a_task_carries_the_release_index_and_names_a_broken_field() {
    let task = serde_json::json!({
        "dockerfile": "Dockerfile",
        "findings": [{"id": "CVE-1", "package": {"name": "stdlib", "version": "v1.22.1", "ecosystem": "Go"}}],
        "releases": {"binaries": [{"name": "helm", "path": "usr/local/bin/helm",
            "releases": [{"version": "3.14.2", "modules": {"stdlib": "v1.22.1"}}]}]},
    });
    let parsed = patchpilot_model::Task::parse(task.to_string().as_bytes()).expect("parses");
    assert_eq!(parsed.releases.binaries[0].releases[0].modules["stdlib"], "v1.22.1");
    let mut broken = task.clone();
    broken["releases"]["binaries"][0]["name"] = serde_json::json!(1);
    let err = patchpilot_model::Task::parse(broken.to_string().as_bytes()).expect_err("rejects");
    assert_eq!(err.path, "releases.binaries[0].name", "{err}");
}

// ---------------------------------------------------------------------------
// Child process: runs lockfiles::apply with the environment it was given
// ---------------------------------------------------------------------------

const CHILD_TEST: &str = "child_applies_lockfiles_with_its_environment";

#[derive(serde::Serialize, serde::Deserialize)]
struct ChildOutput {
    steps: serde_json::Value,
    refusals: serde_json::Value,
    log: serde_json::Value,
}

/// Run by the Go and Cargo tests in a child process: reads the workspace,
/// the findings and the output path from `PP_CHILD_*`, runs `apply`, writes
/// what came back. Does nothing when run directly.
#[test]
#[ignore = "run by go_get_moves_go_mod_to_the_smallest_fix and cargo_update_moves_cargo_lock_to_the_smallest_fix"]
fn child_applies_lockfiles_with_its_environment() {
    let (Some(ws), Some(findings), Some(out)) = (
        std::env::var_os("PP_CHILD_WORKSPACE"),
        std::env::var_os("PP_CHILD_FINDINGS"),
        std::env::var_os("PP_CHILD_OUTPUT"),
    ) else {
        println!("not started by a parent test; nothing to do");
        return;
    };
    let findings: Vec<Finding> =
        serde_json::from_str(&std::fs::read_to_string(findings).expect("findings")).expect("findings json");
    let mut log: Vec<CommandRun> = Vec::new();
    let (steps, refusals) = lockfiles::apply(Path::new(&ws), &findings, &mut log);
    let output = ChildOutput {
        steps: serde_json::to_value(steps.iter().map(Step::record).collect::<Vec<_>>()).expect("steps"),
        refusals: serde_json::to_value(&refusals).expect("refusals"),
        log: serde_json::to_value(&log).expect("log"),
    };
    std::fs::write(out, serde_json::to_vec_pretty(&output).expect("encode")).expect("write output");
}

/// Runs [`child_applies_lockfiles_with_its_environment`] with `env` and
/// returns what `apply` produced.
fn apply_in_child(ws: &Path, findings: &[Finding], env: &[(&str, String)]) -> ChildOutput {
    let scratch = tempfile::tempdir().expect("tempdir");
    let findings_path = scratch.path().join("findings.json");
    let output_path = scratch.path().join("output.json");
    std::fs::write(&findings_path, serde_json::to_vec(findings).expect("encode")).expect("write");
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new(exe)
        .args([CHILD_TEST, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env("PP_CHILD_WORKSPACE", ws)
        .env("PP_CHILD_FINDINGS", &findings_path)
        .env("PP_CHILD_OUTPUT", &output_path)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("child runs");
    assert!(
        out.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&output_path).unwrap_or_else(|e| {
        panic!("the child wrote no output ({e}):\n{}", String::from_utf8_lossy(&out.stdout))
    });
    serde_json::from_str(&text).expect("child output")
}

fn commands(log: &serde_json::Value) -> Vec<(String, String, Option<i64>)> {
    log.as_array()
        .expect("log array")
        .iter()
        .map(|c| {
            (
                c["command"].as_str().unwrap_or_default().to_owned(),
                c["dir"].as_str().unwrap_or_default().to_owned(),
                c["exit_code"].as_i64(),
            )
        })
        .collect()
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(path, text).expect("write");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------
// Go
// ---------------------------------------------------------------------------

/// A zip archive with stored (uncompressed) entries, as `archive/zip` reads
/// them: local headers, central directory, end record (APPNOTE 4.3).
fn zip_stored(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let mut crc = flate2::Crc::new();
        crc.update(data);
        let crc = crc.sum();
        let offset = out.len() as u32;
        let size = data.len() as u32;
        let name_len = name.len() as u16;
        // Local file header.
        out.extend(0x0403_4b50u32.to_le_bytes());
        out.extend(20u16.to_le_bytes()); // version needed
        out.extend(0u16.to_le_bytes()); // flags
        out.extend(0u16.to_le_bytes()); // stored
        out.extend(0u16.to_le_bytes()); // time
        out.extend(0x21u16.to_le_bytes()); // date: 1980-01-01
        out.extend(crc.to_le_bytes());
        out.extend(size.to_le_bytes());
        out.extend(size.to_le_bytes());
        out.extend(name_len.to_le_bytes());
        out.extend(0u16.to_le_bytes()); // extra
        out.extend(name.as_bytes());
        out.extend(data);
        // Central directory header.
        central.extend(0x0201_4b50u32.to_le_bytes());
        central.extend(20u16.to_le_bytes()); // made by
        central.extend(20u16.to_le_bytes()); // needed
        central.extend(0u16.to_le_bytes());
        central.extend(0u16.to_le_bytes());
        central.extend(0u16.to_le_bytes());
        central.extend(0x21u16.to_le_bytes());
        central.extend(crc.to_le_bytes());
        central.extend(size.to_le_bytes());
        central.extend(size.to_le_bytes());
        central.extend(name_len.to_le_bytes());
        central.extend(0u16.to_le_bytes()); // extra
        central.extend(0u16.to_le_bytes()); // comment
        central.extend(0u16.to_le_bytes()); // disk
        central.extend(0u16.to_le_bytes()); // internal attributes
        central.extend(0u32.to_le_bytes()); // external attributes
        central.extend(offset.to_le_bytes());
        central.extend(name.as_bytes());
    }
    let central_offset = out.len() as u32;
    let central_size = central.len() as u32;
    out.extend(&central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend(central_size.to_le_bytes());
    out.extend(central_offset.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out
}

/// Adds `module@version` to a file-system module proxy (`go help goproxy`:
/// `<module>/@v/list`, `<version>.info`, `.mod`, `.zip`, the zip's files
/// under `<module>@<version>/`).
fn publish_go_module(proxy: &Path, module: &str, version: &str, go_mod: &str, files: &[(&str, String)]) {
    let dir = proxy.join(module).join("@v");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let prefix = format!("{module}@{version}/");
    let mut entries = vec![(format!("{prefix}go.mod"), go_mod.as_bytes().to_vec())];
    entries.extend(files.iter().map(|(name, text)| (format!("{prefix}{name}"), text.as_bytes().to_vec())));
    std::fs::write(dir.join(format!("{version}.zip")), zip_stored(&entries)).expect("zip");
    std::fs::write(dir.join(format!("{version}.mod")), go_mod).expect("mod");
    std::fs::write(
        dir.join(format!("{version}.info")),
        format!(r#"{{"Version":"{version}","Time":"2024-01-01T00:00:00Z"}}"#),
    )
    .expect("info");
    let mut list = std::fs::read_to_string(dir.join("list")).unwrap_or_default();
    list.push_str(version);
    list.push('\n');
    std::fs::write(dir.join("list"), list).expect("list");
}

fn go_env(root: &Path) -> Vec<(&'static str, String)> {
    let proxy = root.join("proxy");
    vec![
        ("GOPROXY", format!("file://{}", proxy.display())),
        ("GOSUMDB", "off".into()),
        ("GONOSUMDB", "*".into()),
        ("GONOSUMCHECK", "1".into()),
        ("GOFLAGS", "-mod=mod".into()),
        ("GOPATH", root.join("gopath").display().to_string()),
        ("GOMODCACHE", root.join("gopath/pkg/mod").display().to_string()),
        ("GOCACHE", root.join("gocache").display().to_string()),
        ("GOTOOLCHAIN", "local".into()),
        ("GO111MODULE", "on".into()),
    ]
}

fn go(dir: &Path, env: &[(&str, String)], args: &[&str]) -> String {
    let out = Command::new("go")
        .args(args)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("go runs");
    assert!(
        out.status.success(),
        "go {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn go_get_moves_go_mod_to_the_smallest_fix() {
    if !have("go") {
        println!("SKIPPED: `go` is not on PATH; the Go lockfile remediator cannot be run for real");
        return;
    }
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    let proxy = root.join("proxy");
    let env = go_env(root);
    let vuln_mod = "module example.com/vuln\n\ngo 1.17\n";
    for v in ["v1.0.0", "v1.1.0", "v1.2.0"] {
        publish_go_module(
            &proxy,
            "example.com/vuln",
            v,
            vuln_mod,
            &[("vuln.go", format!("package vuln\n\nconst Version = \"{v}\"\n"))],
        );
    }
    publish_go_module(
        &proxy,
        "example.com/wrapper",
        "v1.0.0",
        "module example.com/wrapper\n\ngo 1.17\n\nrequire example.com/vuln v1.0.0\n",
        &[("wrapper.go", "package wrapper\n\nimport \"example.com/vuln\"\n\nfunc Version() string { return vuln.Version }\n".into())],
    );

    let ws = root.join("ws");
    write(&ws.join("go.mod"), "module example.com/app\n\ngo 1.19\n\nrequire example.com/vuln v1.0.0\n");
    write(
        &ws.join("main.go"),
        "package main\n\nimport \"example.com/vuln\"\n\nfunc main() { println(vuln.Version) }\n",
    );
    write(
        &ws.join("svc/go.mod"),
        "module example.com/svc\n\ngo 1.19\n\nrequire example.com/wrapper v1.0.0\n",
    );
    write(
        &ws.join("svc/main.go"),
        "package main\n\nimport \"example.com/wrapper\"\n\nfunc main() { println(wrapper.Version()) }\n",
    );
    // A vendored copy of some module that also requires the vulnerable one:
    // not the repository's to change, and a `vendor/` folder Go would use
    // unless told -mod=mod.
    let decoy = "module example.com/decoy\n\ngo 1.19\n\nrequire example.com/vuln v1.0.0\n";
    write(&ws.join("vendor/example.com/decoy/go.mod"), decoy);
    go(&ws, &env, &["mod", "tidy"]);
    go(&ws.join("svc"), &env, &["mod", "tidy"]);
    let svc_before = read(&ws.join("svc/go.mod"));
    assert!(svc_before.contains("example.com/vuln v1.0.0 // indirect"), "{svc_before}");
    let sum_before = read(&ws.join("go.sum"));

    let findings = vec![
        finding("GO-2099-0100", "Go", "example.com/vuln", "v1.0.0", &["1.1.0"], "app"),
        finding("GO-2024-2687", "Go", "stdlib", "v1.22.1", &["1.21.9", "1.22.2"], "app"),
    ];
    let out = apply_in_child(&ws, &findings, &env);

    let go_mod = read(&ws.join("go.mod"));
    assert!(
        go_mod.contains("require example.com/vuln v1.1.0\n"),
        "the fix, not the newest v1.2.0:\n{go_mod}"
    );
    let sum_after = read(&ws.join("go.sum"));
    assert_ne!(sum_after, sum_before);
    assert!(sum_after.contains("example.com/vuln v1.1.0 h1:"), "{sum_after}");
    assert!(!sum_after.contains("v1.2.0"), "{sum_after}");
    let svc = read(&ws.join("svc/go.mod"));
    assert!(svc.contains("example.com/vuln v1.1.0 // indirect"), "{svc}");
    assert_eq!(read(&ws.join("vendor/example.com/decoy/go.mod")), decoy);
    // The build now resolves the fixed version.
    assert_eq!(go(&ws, &env, &["list", "-m", "example.com/vuln"]).trim(), "example.com/vuln v1.1.0");

    let steps = out.steps.as_array().expect("steps");
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0]["remediator"], "lockfile");
    assert_eq!(steps[0]["summary"], "example.com/vuln v1.0.0 → v1.1.0");
    let mut files: Vec<&str> =
        steps[0]["files"].as_array().expect("files").iter().filter_map(|f| f.as_str()).collect();
    files.sort();
    assert_eq!(files, vec!["go.mod", "go.sum", "svc/go.mod", "svc/go.sum"]);
    let ran = commands(&out.log);
    let get = "env GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local go get example.com/vuln@v1.1.0".to_owned();
    let tidy = "env GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local go mod tidy".to_owned();
    assert_eq!(
        ran,
        vec![
            (get.clone(), ".".to_owned(), Some(0)),
            (tidy.clone(), ".".to_owned(), Some(0)),
            (get, "svc".to_owned(), Some(0)),
            (tidy, "svc".to_owned(), Some(0)),
        ]
    );
    let refusals = out.refusals.as_array().expect("refusals");
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0]["finding"]["package"], "stdlib");
    assert!(refusals[0]["reason"].as_str().unwrap_or_default().contains("golang builder base image"));
}

// ---------------------------------------------------------------------------
// Cargo
// ---------------------------------------------------------------------------

/// A `.crate` (gzipped tar of `<name>-<version>/…`).
fn crate_file(name: &str, version: &str) -> Vec<u8> {
    let manifest = format!("[package]\nname = \"{name}\"\nversion = \"{version}\"\nedition = \"2021\"\n");
    let mut builder =
        tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()));
    for (path, data) in [("Cargo.toml", manifest.as_str()), ("src/lib.rs", "pub fn f() {}\n")] {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        builder.append_data(&mut header, format!("{name}-{version}/{path}"), data.as_bytes()).expect("tar");
    }
    builder.into_inner().expect("tar").finish().expect("gzip")
}

/// Adds a version to a cargo local registry: the `.crate` beside `index/`,
/// one JSON line in the index file (`index/ab/cd/abcd…` for names of four
/// or more characters).
fn publish_crate(registry: &Path, name: &str, version: &str) {
    let data = crate_file(name, version);
    std::fs::write(registry.join(format!("{name}-{version}.crate")), &data).expect("crate");
    let cksum = hex::encode(sha2::Sha256::digest(&data));
    let index = registry.join("index").join(&name[..2]).join(&name[2..4]).join(name);
    std::fs::create_dir_all(index.parent().expect("parent")).expect("mkdir");
    let mut lines = std::fs::read_to_string(&index).unwrap_or_default();
    lines.push_str(&format!(
        "{{\"name\":\"{name}\",\"vers\":\"{version}\",\"deps\":[],\"cksum\":\"{cksum}\",\"features\":{{}},\"yanked\":false}}\n"
    ));
    std::fs::write(index, lines).expect("index");
}

#[test]
fn cargo_update_moves_cargo_lock_to_the_smallest_fix() {
    if !have("cargo") {
        println!("SKIPPED: `cargo` is not on PATH");
        return;
    }
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    let registry = root.join("registry");
    std::fs::create_dir_all(&registry).expect("mkdir");
    publish_crate(&registry, "vulncrate", "1.0.0");
    publish_crate(&registry, "pinnedcrate", "1.0.0");
    let ws = root.join("ws");
    write(
        &ws.join(".cargo/config.toml"),
        &format!(
            "[source.crates-io]\nreplace-with = \"local\"\n\n[source.local]\nlocal-registry = \"{}\"\n",
            registry.display()
        ),
    );
    write(
        &ws.join("app/Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nvulncrate = \"1\"\n",
    );
    write(&ws.join("app/src/main.rs"), "fn main() {}\n");
    write(
        &ws.join("pinned/Cargo.toml"),
        "[package]\nname = \"pinned\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\npinnedcrate = \"=1.0.0\"\n",
    );
    write(&ws.join("pinned/src/main.rs"), "fn main() {}\n");
    let cargo_home = root.join("cargo-home");
    std::fs::create_dir_all(&cargo_home).expect("mkdir");
    let env =
        vec![("CARGO_HOME", cargo_home.display().to_string()), ("CARGO_NET_OFFLINE", "false".to_owned())];
    for dir in ["app", "pinned"] {
        let out = Command::new("cargo")
            .args(["generate-lockfile"])
            .current_dir(ws.join(dir))
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .expect("cargo runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // Newer releases appear after the lockfiles were made.
    for v in ["1.1.0", "1.2.0"] {
        publish_crate(&registry, "vulncrate", v);
    }
    publish_crate(&registry, "pinnedcrate", "1.0.1");
    let pinned_before = read(&ws.join("pinned/Cargo.lock"));
    assert!(read(&ws.join("app/Cargo.lock")).contains("name = \"vulncrate\"\nversion = \"1.0.0\""));

    let findings = vec![
        finding("RUSTSEC-2099-0001", "crates.io", "vulncrate", "1.0.0", &["1.1.0"], ""),
        finding("RUSTSEC-2099-0002", "crates.io", "pinnedcrate", "1.0.0", &["1.0.1"], ""),
    ];
    let out = apply_in_child(&ws, &findings, &env);

    let lock = read(&ws.join("app/Cargo.lock"));
    assert!(
        lock.contains("name = \"vulncrate\"\nversion = \"1.1.0\""),
        "the fix, not the newest 1.2.0:\n{lock}"
    );
    assert_eq!(
        read(&ws.join("pinned/Cargo.lock")),
        pinned_before,
        "a failed update leaves the lockfile as it was"
    );
    let steps = out.steps.as_array().expect("steps");
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0]["summary"], "vulncrate 1.0.0 → 1.1.0");
    assert_eq!(steps[0]["files"], serde_json::json!(["app/Cargo.lock"]));
    let refusals = out.refusals.as_array().expect("refusals");
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0]["finding"]["package"], "pinnedcrate");
    assert_eq!(refusals[0]["category"], "repository", "{}", refusals[0]["reason"]);
    assert!(refusals[0]["reason"].as_str().unwrap_or_default().contains("failed to select a version"));
    let ran = commands(&out.log);
    assert_eq!(ran.len(), 2);
    assert_eq!(
        ran[0],
        (
            "cargo update --package pinnedcrate@1.0.0 --precise 1.0.1".to_owned(),
            "pinned".to_owned(),
            Some(101)
        )
    );
    assert_eq!(
        ran[1],
        ("cargo update --package vulncrate@1.0.0 --precise 1.1.0".to_owned(), "app".to_owned(), Some(0))
    );
}

// ---------------------------------------------------------------------------
// npm
// ---------------------------------------------------------------------------

type Documents = Arc<Mutex<BTreeMap<String, Vec<u8>>>>;

/// A minimal npm registry on 127.0.0.1: `GET /<name>` answers the
/// packument, `GET /<name>/-/<file>.tgz` the tarball.
fn serve_registry(documents: Documents) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let documents = documents.clone();
            std::thread::spawn(move || answer(stream, &documents));
        }
    });
    port
}

fn answer(mut stream: std::net::TcpStream, documents: &Documents) {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&request);
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let body = documents.lock().expect("lock").get(&path).cloned();
    let response = match body {
        Some(body) => {
            let kind = if path.ends_with(".tgz") { "application/octet-stream" } else { "application/json" };
            let mut r = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes();
            r.extend(body);
            r
        }
        None => b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}".to_vec(),
    };
    let _ = stream.write_all(&response);
}

fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn npm_tarball(name: &str, version: &str, deps: &serde_json::Value) -> Vec<u8> {
    let manifest = serde_json::json!({"name": name, "version": version, "dependencies": deps}).to_string();
    let mut builder =
        tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()));
    let mut header = tar::Header::new_gnu();
    header.set_size(manifest.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_cksum();
    builder.append_data(&mut header, "package/package.json", manifest.as_bytes()).expect("tar");
    builder.into_inner().expect("tar").finish().expect("gzip")
}

/// Publishes `name` with `versions` (each with its dependencies).
fn publish_npm(documents: &Documents, port: u16, name: &str, versions: &[(&str, serde_json::Value)]) {
    let mut docs = documents.lock().expect("lock");
    let mut all = serde_json::Map::new();
    for (version, deps) in versions {
        let tgz = npm_tarball(name, version, deps);
        let file = format!("{name}-{version}.tgz");
        let integrity = format!("sha512-{}", base64(&sha2::Sha512::digest(&tgz)));
        // npm falls back to `shasum` only when `integrity` is missing.
        let dist = serde_json::json!({"tarball": format!("http://127.0.0.1:{port}/{name}/-/{file}"), "integrity": integrity});
        all.insert(
            (*version).to_owned(),
            serde_json::json!({"name": name, "version": version, "dependencies": deps, "dist": dist}),
        );
        docs.insert(format!("/{name}/-/{file}"), tgz);
    }
    let latest = versions.last().map(|(v, _)| *v).unwrap_or_default();
    let packument = serde_json::json!({"name": name, "dist-tags": {"latest": latest}, "versions": all});
    docs.insert(format!("/{name}"), packument.to_string().into_bytes());
}

fn npm(dir: &Path, args: &[&str]) {
    let out = Command::new("npm").args(args).current_dir(dir).output().expect("npm runs");
    assert!(out.status.success(), "npm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn npm_versions(lock: &str, name: &str) -> Vec<String> {
    let lock: serde_json::Value = serde_json::from_str(lock).expect("lock json");
    let mut out: Vec<String> = lock["packages"]
        .as_object()
        .expect("packages")
        .iter()
        .filter(|(k, _)| {
            k.as_str() == format!("node_modules/{name}") || k.ends_with(&format!("/node_modules/{name}"))
        })
        .filter_map(|(_, v)| v["version"].as_str().map(str::to_owned))
        .collect();
    out.sort();
    out
}

#[test]
fn npm_install_and_override_move_package_lock_to_the_smallest_fix() {
    if !have("npm") {
        println!("SKIPPED: `npm` is not on PATH");
        return;
    }
    let documents: Documents = Arc::default();
    let port = serve_registry(documents.clone());
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    let ws = root.join("ws");
    let npmrc = format!(
        "registry=http://127.0.0.1:{port}/\ncache={}\nprefer-online=true\naudit=false\nfund=false\nupdate-notifier=false\n",
        root.join("npm-cache").display()
    );
    let none = serde_json::json!({});
    publish_npm(&documents, port, "vulnpkg", &[("1.0.0", none.clone())]);
    publish_npm(&documents, port, "wrapper", &[("1.0.0", serde_json::json!({"vulnpkg": "^1.0.0"}))]);

    write(&ws.join("direct/.npmrc"), &npmrc);
    write(
        &ws.join("direct/package.json"),
        "{\n  \"name\": \"direct-app\",\n  \"version\": \"1.0.0\",\n  \"dependencies\": {\n    \"vulnpkg\": \"~1.0.0\"\n  }\n}\n",
    );
    write(&ws.join("transitive/.npmrc"), &npmrc);
    let transitive_manifest = "{\n  \"name\": \"transitive-app\",\n  \"version\": \"1.0.0\",\n  \"dependencies\": {\n    \"wrapper\": \"1.0.0\"\n  }\n}\n";
    write(&ws.join("transitive/package.json"), transitive_manifest);
    for dir in ["direct", "transitive"] {
        npm(&ws.join(dir), &["install", "--package-lock-only", "--ignore-scripts"]);
        assert_eq!(npm_versions(&read(&ws.join(dir).join("package-lock.json")), "vulnpkg"), vec!["1.0.0"]);
    }
    // A lockfile inside node_modules is a dependency's, not the project's.
    let decoy = read(&ws.join("transitive/package-lock.json"));
    write(&ws.join("node_modules/some-dep/package-lock.json"), &decoy);
    // The fix and a newer release appear.
    publish_npm(
        &documents,
        port,
        "vulnpkg",
        &[("1.0.0", none.clone()), ("1.1.0", none.clone()), ("1.2.0", none)],
    );

    let findings = vec![finding("GHSA-test-npm1", "npm", "vulnpkg", "1.0.0", &["1.1.0"], "")];
    let mut log = Vec::new();
    let (steps, refusals) = lockfiles::apply(&ws, &findings, &mut log);
    assert!(refusals.is_empty(), "{refusals:?}");
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].summary, "vulnpkg 1.0.0 → 1.1.0");
    let mut files = steps[0].files.clone();
    files.sort();
    assert_eq!(
        files,
        vec![
            "direct/package-lock.json",
            "direct/package.json",
            "transitive/package-lock.json",
            "transitive/package.json"
        ]
    );

    assert_eq!(npm_versions(&read(&ws.join("direct/package-lock.json")), "vulnpkg"), vec!["1.1.0"]);
    let direct: serde_json::Value =
        serde_json::from_str(&read(&ws.join("direct/package.json"))).expect("json");
    assert_eq!(direct["dependencies"]["vulnpkg"], "^1.1.0");
    assert_eq!(npm_versions(&read(&ws.join("transitive/package-lock.json")), "vulnpkg"), vec!["1.1.0"]);
    assert_eq!(
        read(&ws.join("transitive/package.json")),
        transitive_manifest
            .replace("  }\n}\n", "  },\n  \"overrides\": {\n    \"vulnpkg\": \"1.1.0\"\n  }\n}\n")
    );
    assert_eq!(read(&ws.join("node_modules/some-dep/package-lock.json")), decoy);

    let ran: Vec<(&str, &str, Option<i32>)> =
        log.iter().map(|c| (c.command.as_str(), c.dir.as_str(), c.exit_code)).collect();
    assert_eq!(
        ran,
        vec![
            (
                "npm install vulnpkg@1.1.0 --package-lock-only --ignore-scripts --no-audit --no-fund",
                "direct",
                Some(0)
            ),
            ("npm install --package-lock-only --ignore-scripts --no-audit --no-fund", "transitive", Some(0)),
        ]
    );
}

// ---------------------------------------------------------------------------
// pip
// ---------------------------------------------------------------------------

#[test]
fn pip_pins_move_in_place_and_hashed_pins_are_refused() {
    let ws = tempfile::tempdir().expect("tempdir");
    let ws = ws.path();
    let tuf = fixture("requirements/python-tuf-pinned.txt");
    let pydantic = fixture("requirements/pydantic-requirements-testing.txt");
    let hashed = fixture("requirements/cocotools-rs-requirements-hashed.txt");
    write(&ws.join("requirements.txt"), &tuf);
    write(&ws.join("tests/requirements-testing.txt"), &pydantic);
    write(&ws.join("stubs/requirements.txt"), &hashed);
    write(&ws.join("vendor/lib/requirements.txt"), &tuf);
    write(&ws.join("constraints.txt"), &tuf);

    let findings = vec![
        // Real advisories for the versions python-tuf pinned.
        finding("GHSA-79v4-65xg-pq4g", "PyPI", "cryptography", "44.0.0", &["44.0.1"], ""),
        finding("GHSA-9hjg-9r4m-mvj7", "PyPI", "requests", "2.32.3", &["2.32.4"], ""),
        // Illustrative ids (no real advisory): a marker line under another
        // spelling of the name, and a hashed pin.
        finding("TEST-PIP-MARKER", "PyPI", "importlib_metadata", "3.1.0", &["3.1.1", "4.0.0"], ""),
        finding("TEST-PIP-HASHED", "PyPI", "numpy", "1.24.3", &["1.24.4"], ""),
    ];
    let mut log = Vec::new();
    let (steps, refusals) = lockfiles::apply(ws, &findings, &mut log);
    assert!(log.is_empty(), "pip pins are edited, no tool runs");

    let summaries: Vec<&str> = steps.iter().map(|s| s.summary.as_str()).collect();
    assert_eq!(
        summaries,
        vec!["cryptography 44.0.0 → 44.0.1", "importlib_metadata 3.1.0 → 3.1.1", "requests 2.32.3 → 2.32.4"]
    );
    assert_eq!(
        read(&ws.join("requirements.txt")),
        tuf.replace("cryptography==44.0.0      # via", "cryptography==44.0.1      # via")
            .replace("requests==2.32.3\n", "requests==2.32.4\n")
    );
    assert_eq!(
        read(&ws.join("tests/requirements-testing.txt")),
        pydantic.replace(
            "importlib-metadata==3.1.0;python_version<\"3.8\"",
            "importlib-metadata==3.1.1;python_version<\"3.8\""
        )
    );
    assert_eq!(read(&ws.join("stubs/requirements.txt")), hashed);
    assert_eq!(read(&ws.join("vendor/lib/requirements.txt")), tuf);
    assert_eq!(read(&ws.join("constraints.txt")), tuf);

    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0].finding.id, "TEST-PIP-HASHED");
    assert_eq!(refusals[0].category, RefusalCategory::Repository);
    assert!(refusals[0].reason.contains("stubs/requirements.txt:7"), "{}", refusals[0].reason);
    assert!(refusals[0].reason.contains("--hash"), "{}", refusals[0].reason);
}

#[test]
fn findings_of_other_ecosystems_are_left_alone() {
    let ws = tempfile::tempdir().expect("tempdir");
    let findings =
        vec![finding("CVE-2024-2511", "Alpine:v3.19", "libcrypto3", "3.1.4-r5", &["3.1.4-r6"], "")];
    let mut log = Vec::new();
    let (steps, refusals) = lockfiles::apply(ws.path(), &findings, &mut log);
    assert!(steps.is_empty() && refusals.is_empty() && log.is_empty());
}
