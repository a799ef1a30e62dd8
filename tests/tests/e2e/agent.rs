//! The remediation agent end to end, against a real registry and a real
//! Docker daemon (`DOCKER_HOST`, the private dockerd `scripts/services up`
//! starts — the stand-in for the one inside each sandbox VM):
//!
//! - the headline case: a Go service on `golang:1.22.1-alpine3.19` that
//!   pins vulnerable libcrypto3/libssl3 gets the smallest fixing tag and
//!   loses both pins, builds, and rescans clean — through `patchpilot
//!   remediate`, and the diff holds nothing else;
//! - when no base tag fixes it, the sandbox command raises the pins to the
//!   smallest fixing version of a package index served locally;
//! - an index that lists a version the mirror does not have ends in a
//!   failed build, no patch, and the build's first error lines;
//! - a finding with no fix, and a candidate that brings a worse finding,
//!   are refused and explained in the result and the retrospective.
//!
//! The base images are built in the test (see the harness's `alpine`
//! module); the advisory is CVE-2024-2511 as Alpine records it.

use std::path::{Path, PathBuf};

use patchpilot_e2e::alpine::{
    self, ApkPackage, FileServer, apkindex_archive, cve_2024_2511, openssl, push_base,
};
use patchpilot_e2e::{CliOutput, Registry, run_binary};
use patchpilot_model::{RetroCategory, RetrospectiveReport};
use serde_json::{Value, json};

/// One test's registry, advisory DB, config and scratch folder (also the
/// model agent's tests, `remediate_model.rs`).
pub(crate) struct Fixture {
    pub(crate) registry: Registry,
    pub(crate) dir: tempfile::TempDir,
    db: PathBuf,
    config: PathBuf,
}

impl Fixture {
    pub(crate) async fn new(records: &[Value]) -> anyhow::Result<Fixture> {
        let registry = Registry::start().await?;
        let dir = tempfile::tempdir()?;
        let db = alpine::advisory_db(&dir.path().join("db"), records)?;
        let config = dir.path().join("patchpilot.toml");
        std::fs::write(
            &config,
            format!(
                "[scanner]\ncache_dir = \"{}\"\n[scanner.registry]\ninsecure = [\"{}\"]\n",
                dir.path().join("cache").display(),
                registry.addr
            ),
        )?;
        Ok(Fixture { registry, dir, db, config })
    }

    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![("PATCHPILOT_CONFIG".to_owned(), self.config.display().to_string())];
        if let Ok(host) = std::env::var("DOCKER_HOST") {
            env.push(("DOCKER_HOST".into(), host));
        }
        env.push((
            "PATCHPILOT_AGENT_CACHE".into(),
            self.dir.path().join("agent-cache").display().to_string(),
        ));
        env
    }

    /// A checkout with `Dockerfile` and a Go source file.
    pub(crate) fn workspace(&self, name: &str, dockerfile: &str) -> anyhow::Result<PathBuf> {
        let ws = self.dir.path().join(name);
        std::fs::create_dir_all(&ws)?;
        std::fs::write(ws.join("Dockerfile"), dockerfile)?;
        std::fs::write(ws.join("main.go"), "package main\n\nfunc main() { println(\"api\") }\n")?;
        Ok(ws)
    }

    async fn cli(&self, args: &[&str]) -> anyhow::Result<CliOutput> {
        run_binary("patchpilot", args, &self.env()).await
    }

    /// `patchpilot remediate` of `ws` for `assessment`, with `extra` flags.
    async fn remediate(&self, ws: &Path, assessment: &Path, extra: &[&str]) -> anyhow::Result<CliOutput> {
        self.remediate_with(ws, assessment, extra, &[]).await
    }

    /// The same, with `env` added to the fixture's environment.
    pub(crate) async fn remediate_with(
        &self,
        ws: &Path,
        assessment: &Path,
        extra: &[&str],
        env: &[(String, String)],
    ) -> anyhow::Result<CliOutput> {
        let mut args = vec![
            "remediate",
            "--workspace",
            path(ws),
            "--assessment",
            path(assessment),
            "--db",
            path(&self.db),
        ];
        args.extend_from_slice(extra);
        let mut all = self.env();
        all.extend_from_slice(env);
        run_binary("patchpilot", &args, &all).await
    }

    /// `patchpilot scan REF --format json` into a file.
    pub(crate) async fn assess(&self, reference: &str) -> anyhow::Result<PathBuf> {
        let out = self.dir.path().join(format!("assessment-{}.json", reference.replace(['/', ':'], "_")));
        let scan = self
            .cli(&["scan", reference, "--format", "json", "--db", path(&self.db), "-o", path(&out)])
            .await?;
        anyhow::ensure!(scan.code == Some(0), "scan failed: {}", scan.stderr);
        Ok(out)
    }

    /// The findings of `assessment` (a PatchPilot document with one image).
    pub(crate) fn findings(assessment: &Path) -> anyhow::Result<Value> {
        let doc: Value = serde_json::from_slice(&std::fs::read(assessment)?)?;
        Ok(doc["assessments"][0]["findings"].clone())
    }
}

pub(crate) fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

/// Runs `docker` against the test daemon.
fn docker(args: &[&str], dir: &Path) -> anyhow::Result<()> {
    let out = std::process::Command::new("docker").args(args).current_dir(dir).output()?;
    anyhow::ensure!(
        out.status.success(),
        "docker {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Every file of a folder and its bytes (the context folder excluded).
pub(crate) fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(Result::ok).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.file_name() != ".patchpilot" && e.path().is_file())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap_or_default()))
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headline_bumps_the_golang_base_and_drops_the_pins_it_makes_obsolete() -> anyhow::Result<()> {
    alpine::docker_host()?;
    let fx = Fixture::new(&[cve_2024_2511()]).await?;
    let reg = fx.registry.addr.clone();
    let available = [("libcrypto3", "3.1.4-r5"), ("libssl3", "3.1.4-r5")];
    // Only the newer tags carry the fixed libraries; the bookworm variant
    // and the older tag must never be considered.
    push_base(&fx.registry, "library/golang", "1.21.9-alpine3.19", &openssl("3.1.4-r4"), &available).await?;
    push_base(&fx.registry, "library/golang", "1.22.1-alpine3.19", &openssl("3.1.4-r5"), &available).await?;
    push_base(&fx.registry, "library/golang", "1.22.2-alpine3.19", &openssl("3.1.4-r6"), &available).await?;
    push_base(&fx.registry, "library/golang", "1.22.3-alpine3.19", &openssl("3.1.5-r0"), &available).await?;
    push_base(&fx.registry, "library/golang", "1.22.2-bookworm", &[], &[]).await?;

    let original = format!(
        "FROM {reg}/library/golang:1.22.1-alpine3.19 AS build\n\
         WORKDIR /src\n\
         COPY main.go ./\n\
         # The base has no Go toolchain; this stands in for `go build`.\n\
         RUN cp main.go /src/api\n\
         \n\
         FROM {reg}/library/golang:1.22.1-alpine3.19\n\
         RUN apk add --no-cache libcrypto3=3.1.4-r5 libssl3=3.1.4-r5\n\
         COPY --from=build /src/api /usr/local/bin/api\n\
         CMD [\"/usr/local/bin/api\"]\n"
    );
    let ws = fx.workspace("api", &original)?;
    // The service image as CI built and pushed it, scanned as a user would.
    let image = format!("{reg}/acme/api:1.0");
    docker(&["build", "-q", "-t", &image, "."], &ws)?;
    docker(&["push", &image], &ws)?;
    let assessment = fx.assess(&image).await?;
    let findings = Fixture::findings(&assessment)?;
    let mut assessed: Vec<(String, String, String)> = findings
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| {
                    (
                        f["id"].as_str().unwrap_or_default().to_owned(),
                        f["package"]["name"].as_str().unwrap_or_default().to_owned(),
                        f["package"]["version"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assessed.sort();
    assert_eq!(
        assessed,
        vec![
            ("CVE-2024-2511".into(), "libcrypto3".into(), "3.1.4-r5".into()),
            ("CVE-2024-2511".into(), "libssl3".into(), "3.1.4-r5".into())
        ]
    );
    let before = tree(&ws);

    // A dry run prints the plan and the diff and leaves the checkout alone.
    let dry = fx.remediate(&ws, &assessment, &["--dry-run"]).await?;
    assert_eq!(dry.code, Some(0), "{}\n{}", dry.stdout, dry.stderr);
    assert!(dry.stdout.contains(&format!("+FROM {reg}/library/golang:1.22.2-alpine3.19")), "{}", dry.stdout);
    assert!(
        dry.stdout.contains("-RUN apk add --no-cache libcrypto3=3.1.4-r5 libssl3=3.1.4-r5"),
        "{}",
        dry.stdout
    );
    assert_eq!(tree(&ws), before, "a dry run changed the checkout");

    let result_path = fx.dir.path().join("result.json");
    let run = fx.remediate(&ws, &assessment, &["--result", path(&result_path)]).await?;
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("outcome: fixed"), "{}", run.stdout);

    // The diff holds the two FROM lines and the dropped RUN, nothing else.
    let expected = original
        .replace("golang:1.22.1-alpine3.19", "golang:1.22.2-alpine3.19")
        .replace("RUN apk add --no-cache libcrypto3=3.1.4-r5 libssl3=3.1.4-r5\n", "");
    assert_eq!(std::fs::read_to_string(ws.join("Dockerfile"))?, expected);
    let after = tree(&ws);
    let changed: Vec<&String> =
        after.iter().zip(&before).filter(|(a, b)| a != b).map(|(a, _)| &a.0).collect();
    assert_eq!(changed, vec!["Dockerfile"]);
    assert_eq!(after.len(), before.len(), "files were added or removed");

    let result: Value = serde_json::from_slice(&std::fs::read(&result_path)?)?;
    assert_eq!(result["outcome"], "fixed");
    assert_eq!(result["base"]["chosen"], format!("{reg}/library/golang:1.22.2-alpine3.19"));
    assert_eq!(
        result["base"]["candidates_scanned"],
        json!(["1.22.2-alpine3.19"]),
        "the smallest bump is tried first and is enough"
    );
    let steps: Vec<&str> = result["steps"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["remediator"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(steps, vec!["base-image", "os-pin"]);
    assert_eq!(result["edits"].as_array().map(Vec::len), Some(3), "{}", result["edits"]);
    let rows = result["verification"]["rows"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in &rows {
        assert_eq!(row["status"], "fixed", "{row}");
        assert_eq!(row["version_after"], "3.1.4-r6", "{row}");
    }
    assert!(result["refusals"].as_array().is_some_and(Vec::is_empty), "{}", result["refusals"]);
    // The rebuilt image is gone from the daemon; the original is still there.
    docker(&["image", "inspect", &image], &ws)?;

    // The same task with a model configured: the rules fix everything, so
    // the agent in the VM's shape makes no model call at all.
    std::fs::write(ws.join("Dockerfile"), &original)?;
    let double =
        patchpilot_provider_double::ProviderDouble::start(patchpilot_provider_double::Scripted::new(vec![]))
            .await?;
    let mut with_model = task(&fx, findings.clone(), json!({}));
    with_model["model"] = json!({"provider": "openai", "base_url": double.base_url(), "model": "double"});
    let (_, result, _) = run_agent(&fx, &ws, with_model).await?;
    assert_eq!(result["outcome"], "fixed", "{}", result["summary"]);
    assert_eq!(result["agent"]["driver"], "rules");
    assert_eq!(result["agent"]["model_calls"], 0);
    assert_eq!(double.calls(), 0, "a run the rules fully fix calls no model");
    assert_eq!(std::fs::read_to_string(ws.join("Dockerfile"))?, expected);

    // And through the CLI's model path: the rules' change, made in the
    // session's copy, comes back to the checkout; still no model call.
    std::fs::write(ws.join("Dockerfile"), &original)?;
    let flags = ["--agent", "model", "--base-url", &double.base_url(), "--model", "double"];
    let cli =
        fx.remediate_with(&ws, &assessment, &flags, &[("OPENAI_API_KEY".into(), String::new())]).await?;
    assert_eq!(cli.code, Some(0), "{}\n{}", cli.stdout, cli.stderr);
    assert!(cli.stdout.contains("agent: rules — no model session, and no model call"), "{}", cli.stdout);
    assert_eq!(double.calls(), 0, "a run the rules fully fix calls no model");
    assert_eq!(std::fs::read_to_string(ws.join("Dockerfile"))?, expected);
    Ok(())
}

/// Writes `.patchpilot/task.json` and runs the sandbox command.
async fn run_agent(
    fx: &Fixture,
    ws: &Path,
    task: Value,
) -> anyhow::Result<(CliOutput, Value, RetrospectiveReport)> {
    std::fs::create_dir_all(ws.join(".patchpilot"))?;
    std::fs::write(ws.join(".patchpilot/task.json"), serde_json::to_vec_pretty(&task)?)?;
    let out = run_binary("patchpilot-agent", &["--workspace", path(ws)], &fx.env()).await?;
    anyhow::ensure!(out.code == Some(0), "patchpilot-agent: {}\n{}", out.stdout, out.stderr);
    let result: Value = serde_json::from_slice(&std::fs::read(ws.join(".patchpilot/result.json"))?)?;
    // The agent's own account; the host stamps the run's identifiers.
    let retro: RetrospectiveReport =
        serde_json::from_slice(&std::fs::read(ws.join(".patchpilot/retrospective.json"))?)?;
    Ok((out, result, retro))
}

fn task(fx: &Fixture, findings: Value, indexes: Value) -> Value {
    json!({
        "run_id": format!("run-e2e-{}", fx.registry.addr.replace([':', '.'], "-")),
        "remediation_id": "rem-e2e",
        "dockerfile": "Dockerfile",
        "findings": findings,
        "package_indexes": indexes,
        "registry": { "insecure": [fx.registry.addr] },
        "db": fx.db,
    })
}

/// The base has no fixing tag; the index lists r5, r6 and r7.
async fn pinned_without_base_fix(
    fx: &Fixture,
    mirror_has_r6: bool,
) -> anyhow::Result<(PathBuf, String, Value)> {
    let reg = fx.registry.addr.clone();
    let mut available = vec![
        ("libcrypto3", "3.1.4-r5"),
        ("libssl3", "3.1.4-r5"),
        ("libcrypto3", "3.1.4-r7"),
        ("libssl3", "3.1.4-r7"),
    ];
    if mirror_has_r6 {
        available.extend([("libcrypto3", "3.1.4-r6"), ("libssl3", "3.1.4-r6")]);
    }
    push_base(&fx.registry, "library/alpine", "3.19.1", &openssl("3.1.4-r5"), &available).await?;
    // A newer tag that still has the old libraries: scanned, passed over.
    push_base(&fx.registry, "library/alpine", "3.19.2", &openssl("3.1.4-r5"), &available).await?;
    let original = format!(
        "FROM {reg}/library/alpine:3.19.1\nRUN apk add --no-cache \\\n      libssl3=3.1.4-r5 \\\n      libcrypto3=3.1.4-r5 \\\n && echo installed\n"
    );
    let ws = fx.workspace(if mirror_has_r6 { "raise" } else { "raise-broken" }, &original)?;
    let findings = Fixture::findings(&fx.assess(&format!("{reg}/library/alpine:3.19.1")).await?)?;
    Ok((ws, original, findings))
}

fn index_packages() -> Vec<(&'static str, &'static str, &'static str)> {
    let mut p = Vec::new();
    for v in ["3.1.4-r5", "3.1.4-r6", "3.1.4-r7"] {
        p.push(("libcrypto3", v, "openssl"));
        p.push(("libssl3", v, "openssl"));
    }
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_base_fix_the_pins_rise_to_the_smallest_fixed_version_in_the_index() -> anyhow::Result<()> {
    alpine::docker_host()?;
    let fx = Fixture::new(&[cve_2024_2511()]).await?;
    let index = FileServer::start(vec![(
        "v3.19/main/x86_64/APKINDEX.tar.gz".into(),
        apkindex_archive(&index_packages()),
    )])
    .await?;
    let (ws, original, findings) = pinned_without_base_fix(&fx, true).await?;
    let url = format!("{}/v3.19/main/x86_64/APKINDEX.tar.gz", index.url);
    let (out, result, retro) =
        run_agent(&fx, &ws, task(&fx, findings, json!({ "Alpine:v3.19": [url] }))).await?;
    assert_eq!(result["outcome"], "fixed", "{}", out.stdout);
    // r6 fixes it; r7 is newer and not wanted.
    assert_eq!(std::fs::read_to_string(ws.join("Dockerfile"))?, original.replace("=3.1.4-r5", "=3.1.4-r6"));
    assert_eq!(result["base"]["candidates_scanned"], json!(["3.19.2"]));
    let notes = result["notes"].to_string();
    assert!(notes.contains("3.19.2: still has CVE-2024-2511"), "{notes}");
    assert!(notes.contains("package index for Alpine:v3.19: 2 packages"), "{notes}");
    let rows = result["verification"]["rows"].as_array().cloned().unwrap_or_default();
    assert!(rows.iter().all(|r| r["status"] == "fixed" && r["version_after"] == "3.1.4-r6"), "{rows:?}");
    assert!(
        result["verification"]["baseline"].as_str().is_some_and(|b| b.contains("rebuilt")),
        "{}",
        result["verification"]["baseline"]
    );
    assert!(result["patch"].as_bool() == Some(true));
    assert!(retro.went_well.iter().any(|w| w.contains("raise")), "{:?}", retro.went_well);
    assert!(retro.went_wrong.is_empty(), "{:?}", retro.went_wrong);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_the_mirror_lacks_fails_the_build_and_leaves_no_patch() -> anyhow::Result<()> {
    alpine::docker_host()?;
    let fx = Fixture::new(&[cve_2024_2511()]).await?;
    let index =
        FileServer::start(vec![("APKINDEX.tar.gz".into(), apkindex_archive(&index_packages()))]).await?;
    let (ws, original, findings) = pinned_without_base_fix(&fx, false).await?;
    let (out, result, retro) = run_agent(
        &fx,
        &ws,
        task(&fx, findings, json!({ "Alpine": [format!("{}/APKINDEX.tar.gz", index.url)] })),
    )
    .await?;
    assert_eq!(result["outcome"], "build_failed", "{}", out.stdout);
    assert_eq!(std::fs::read_to_string(ws.join("Dockerfile"))?, original, "the working tree is put back");
    assert_eq!(result["patch"], false);
    assert_eq!(result["diff"], "");
    let problems = result["problems"].to_string();
    assert!(problems.contains("unable to select packages"), "{problems}");
    assert!(retro.went_wrong.iter().any(|w| w.contains("libssl3-3.1.4-r6")), "{:?}", retro.went_wrong);
    assert_eq!(retro.category, RetroCategory::RepositoryComplexity);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_fix_and_worse_candidates_are_refused_and_explained() -> anyhow::Result<()> {
    alpine::docker_host()?;
    // Two advisories made for this test (ids say so): one with no fix, one
    // critical in a package only the candidate brings.
    let no_fix = alpine::alpine_osv(
        "PPTEST-NOFIX-1",
        "musl",
        None,
        Some("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N"),
        "test advisory without a fix",
    );
    let critical = alpine::alpine_osv(
        "PPTEST-CRIT-1",
        "zlib",
        Some("1.3.1-r0"),
        Some("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"),
        "test advisory, critical",
    );
    let fx = Fixture::new(&[cve_2024_2511(), no_fix, critical]).await?;
    let reg = fx.registry.addr.clone();
    let musl = ApkPackage { name: "musl", version: "1.2.4_git20230717-r4".into(), origin: "musl" };
    let zlib = ApkPackage { name: "zlib", version: "1.3-r2".into(), origin: "zlib" };
    let mut old = openssl("3.1.4-r5");
    old.push(musl.clone());
    let mut worse = openssl("3.1.4-r6");
    worse.extend([musl, zlib]);
    push_base(&fx.registry, "library/golang", "1.22.1-alpine3.19", &old, &[]).await?;
    push_base(&fx.registry, "library/golang", "1.22.2-alpine3.19", &worse, &[]).await?;
    let original = format!("FROM {reg}/library/golang:1.22.1-alpine3.19\nCOPY main.go /src/\n");
    let ws = fx.workspace("refuse", &original)?;
    let findings = Fixture::findings(&fx.assess(&format!("{reg}/library/golang:1.22.1-alpine3.19")).await?)?;
    assert_eq!(findings.as_array().map(Vec::len), Some(3), "{findings}");
    let (out, result, retro) = run_agent(&fx, &ws, task(&fx, findings, json!({}))).await?;
    assert_eq!(result["outcome"], "not_fixed", "{}", out.stdout);
    assert_eq!(std::fs::read_to_string(ws.join("Dockerfile"))?, original);
    assert_eq!(result["patch"], false);
    let refusals = result["refusals"].as_array().cloned().unwrap_or_default();
    let reason = |id: &str, package: &str| {
        refusals.iter().find(|r| r["finding"]["id"] == id && r["finding"]["package"] == package).map(|r| {
            (
                r["reason"].as_str().unwrap_or_default().to_owned(),
                r["category"].as_str().unwrap_or_default().to_owned(),
            )
        })
    };
    let (nofix, category) = reason("PPTEST-NOFIX-1", "musl").expect("the no-fix finding is refused");
    assert!(nofix.contains("no fixed version of musl is published"), "{nofix}");
    assert_eq!(category, "policy");
    for package in ["libcrypto3", "libssl3"] {
        let (why, category) = reason("CVE-2024-2511", package).expect("the openssl findings are refused");
        assert!(why.contains("1.22.2-alpine3.19: brings PPTEST-CRIT-1 in zlib (critical)"), "{why}");
        assert_eq!(category, "policy");
    }
    let wrong = retro.went_wrong.join("\n");
    assert!(wrong.contains("PPTEST-NOFIX-1") && wrong.contains("brings PPTEST-CRIT-1"), "{wrong}");
    assert_eq!(retro.category, RetroCategory::Policy);
    assert!(retro.summary.contains("nothing to change"), "{}", retro.summary);
    Ok(())
}
