//! Remediation planning benchmark: a repository with 10 Dockerfiles and 50
//! findings, planned by the deterministic agent against a real registry.
//!
//! ```text
//! scripts/services up && eval "$(scripts/services env)"
//! cargo bench -p patchpilot-e2e --bench remediate -- [--iterations 5] [--json-out FILE]
//! ```
//!
//! The registry holds three base repositories (golang, alpine and python,
//! all Alpine 3.19 variants) with several tags each; the fix arrives a few
//! tags above the ones the Dockerfiles use, so the agent has to walk
//! candidates. Each Dockerfile carries five findings (openssl, musl and
//! zlib packages of its base), 50 in all, and some pin the vulnerable
//! packages.
//!
//! Each Dockerfile is planned as one sandbox run would plan it: its own
//! run, a cold blob cache, no image build (`dry_run`). Reported: the time
//! for all ten, the candidate images scanned, and the share spent in
//! registry requests. The baseline, measured in the same run on the same
//! registry, scans what a remediator without the smallest-first walk would
//! have to: the current base and every newer tag of its variant.
//!
//! Benchmarks report; they never assert.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use patchpilot_agent::remediate::base_image;
use patchpilot_agent::run::{self, Options};
use patchpilot_agent::scans::Scans;
use patchpilot_e2e::Registry;
use patchpilot_e2e::alpine::{self, ApkPackage, push_base};
use patchpilot_model::{Finding, Severity, Task, TaskPolicy, TaskRegistry};
use patchpilot_registry::oci::PlatformChoice;
use patchpilot_registry::{Registry as RegistryClient, RegistryConfig};
use serde::Serialize;

struct Args {
    iterations: usize,
    json_out: Option<PathBuf>,
}

impl Args {
    fn parse() -> anyhow::Result<Args> {
        let mut args = Args { iterations: 5, json_out: None };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "--bench" {
                continue;
            }
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--iterations" => args.iterations = value()?.parse()?,
                "--json-out" => args.json_out = Some(value()?.into()),
                other => anyhow::bail!("unknown flag {other}"),
            }
        }
        Ok(args)
    }
}

/// (repository, tags in order, index of the first fixed tag).
const BASES: &[(&str, &[&str], usize)] = &[
    (
        "library/golang",
        &[
            "1.22.1-alpine3.19",
            "1.22.2-alpine3.19",
            "1.22.3-alpine3.19",
            "1.22.4-alpine3.19",
            "1.22.5-alpine3.19",
            "1.22.6-alpine3.19",
        ],
        3,
    ),
    ("library/alpine", &["3.19.1", "3.19.2", "3.19.3", "3.19.4"], 2),
    (
        "library/python",
        &["3.12.1-alpine3.19", "3.12.2-alpine3.19", "3.12.3-alpine3.19", "3.12.4-alpine3.19"],
        2,
    ),
];

fn packages(fixed: bool) -> Vec<ApkPackage> {
    let (openssl, musl, zlib) = if fixed {
        ("3.1.4-r6", "1.2.4_git20230717-r5", "1.3.1-r0")
    } else {
        ("3.1.4-r5", "1.2.4_git20230717-r4", "1.3-r2")
    };
    let mut p = alpine::openssl(openssl);
    p.push(ApkPackage { name: "musl", version: musl.into(), origin: "musl" });
    p.push(ApkPackage { name: "musl-utils", version: musl.into(), origin: "musl" });
    p.push(ApkPackage { name: "zlib", version: zlib.into(), origin: "zlib" });
    p
}

/// The ten Dockerfiles: (folder, text), `{r}` the registry.
fn dockerfiles(r: &str) -> Vec<(String, String)> {
    let go = |tag: &str, pins: bool| {
        let pin = if pins { "RUN apk add --no-cache libcrypto3=3.1.4-r5 libssl3=3.1.4-r5\n" } else { "" };
        format!(
            "ARG GO_VERSION={}\nFROM {r}/library/golang:${{GO_VERSION}}-alpine3.19 AS build\nWORKDIR /src\nCOPY . .\nRUN go build -o /app ./cmd/app\n\nFROM {r}/library/golang:{tag}\n{pin}COPY --from=build /app /app\nENTRYPOINT [\"/app\"]\n",
            tag.trim_end_matches("-alpine3.19")
        )
    };
    let alpine = |tag: &str| {
        format!(
            "FROM {r}/library/alpine:{tag}\nRUN apk add --no-cache \\\n      zlib=1.3-r2 \\\n      musl=1.2.4_git20230717-r4 \\\n && adduser -D app\nUSER app\n"
        )
    };
    let python = |tag: &str| {
        format!(
            "FROM {r}/library/python:{tag}\nWORKDIR /srv\nCOPY requirements.txt .\nRUN pip install -r requirements.txt\nCMD [\"python\", \"-m\", \"svc\"]\n"
        )
    };
    vec![
        ("api".into(), go("1.22.1-alpine3.19", true)),
        ("worker".into(), go("1.22.1-alpine3.19", false)),
        ("gateway".into(), go("1.22.2-alpine3.19", true)),
        ("scheduler".into(), go("1.22.3-alpine3.19", false)),
        ("billing".into(), go("1.22.2-alpine3.19", false)),
        ("edge".into(), alpine("3.19.1")),
        ("proxy".into(), alpine("3.19.2")),
        ("tools".into(), alpine("3.19.1")),
        ("ml".into(), python("3.12.1-alpine3.19")),
        ("reports".into(), python("3.12.2-alpine3.19")),
    ]
}

#[derive(Debug, Default, Clone, Serialize)]
struct Iteration {
    planning_ms: f64,
    registry_ms: f64,
    scanning_ms: f64,
    images_scanned: usize,
    findings_planned: usize,
    findings_refused: usize,
    baseline_ms: f64,
    baseline_images: usize,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(bench(args))
}

async fn bench(args: Args) -> anyhow::Result<()> {
    patchpilot_fleet::telemetry::install_crypto_provider();
    let registry = Registry::start().await?;
    let r = registry.addr.clone();
    for (repository, tags, first_fixed) in BASES {
        for (i, tag) in tags.iter().enumerate() {
            push_base(&registry, repository, tag, &packages(i >= *first_fixed), &[]).await?;
        }
    }
    let dir = tempfile::tempdir()?;
    let db = alpine::advisory_db(
        &dir.path().join("db"),
        &[
            alpine::cve_2024_2511(),
            // Alpine secdb v3.19/main: musl 1.2.4_git20230717-r5 fixes CVE-2025-26519.
            alpine::alpine_osv(
                "CVE-2025-26519",
                "musl",
                Some("1.2.4_git20230717-r5"),
                Some("CVSS:3.1/AV:N/AC:H/PR:N/UI:N/S:U/C:H/I:H/A:H"),
                "musl iconv EUC-KR decoder out-of-bounds write",
            ),
            // Made for this benchmark: a zlib advisory fixed in 1.3.1-r0.
            alpine::alpine_osv(
                "PPBENCH-ZLIB-1",
                "zlib",
                Some("1.3.1-r0"),
                Some("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H"),
                "benchmark advisory",
            ),
        ],
    )?;
    let registry_config = RegistryConfig { insecure: vec![r.clone()], ..Default::default() };

    // The repository and its assessment: each Dockerfile's findings are its
    // final base's (scanned once, untimed).
    let repo = dir.path().join("repo");
    let mut tasks = Vec::new();
    let setup = Scans::new(
        RegistryClient::new(&registry_config)?,
        db.clone(),
        dir.path().join("setup-cache"),
        PlatformChoice::default(),
    );
    for (name, text) in dockerfiles(&r) {
        let folder = repo.join(&name);
        std::fs::create_dir_all(&folder)?;
        std::fs::write(folder.join("Dockerfile"), &text)?;
        let df = patchpilot_agent::dockerfile::Dockerfile::parse(&text)
            .map_err(|e| anyhow::anyhow!("{name}: {e:?}"))?;
        let base = match &df.final_chain().last().context("no FROM")?.base {
            patchpilot_agent::dockerfile::Base::Image(i) => i.render(),
            other => anyhow::bail!("{name}: base {other:?}"),
        };
        let scanned = setup.scan(&base).await?;
        let findings: Vec<Finding> = scanned.assessment.findings.clone();
        tasks.push((
            name.clone(),
            Task {
                run_id: name.clone(),
                context: name.clone(),
                policy: TaskPolicy { block_at: Severity::High },
                registry: TaskRegistry { insecure: vec![r.clone()], ..TaskRegistry::default() },
                db: Some(db.clone()),
                ..Task::new(format!("{name}/Dockerfile"), findings)
            },
        ));
    }
    let total_findings: usize = tasks.iter().map(|(_, t)| t.findings.len()).sum();
    println!("repository: {} Dockerfiles, {total_findings} findings; registry {r}", tasks.len());

    let mut iterations = Vec::new();
    for i in 0..=args.iterations {
        let mut it = Iteration::default();
        // The plan, one cold run per Dockerfile.
        for (name, task) in &tasks {
            let cache = dir.path().join(format!("cache-{i}-{name}"));
            let options = Options {
                verify: false,
                dry_run: true,
                cache_dir: cache.clone(),
                db_dir: db.clone(),
                image_prefix: "unused/x".into(),
                registry: None,
            };
            let started = Instant::now();
            let result = run::remediate(&repo, task, &options).await;
            it.planning_ms += ms(started.elapsed());
            it.registry_ms += ms(result.stats.registry);
            it.scanning_ms += ms(result.stats.scanning);
            it.images_scanned += result.stats.images_scanned;
            it.findings_refused += result.refusals.len();
            it.findings_planned += task.findings.len() - result.refusals.len();
            let _ = std::fs::remove_dir_all(&cache);
        }
        // Baseline: the current base and every newer tag of its variant,
        // cold, per Dockerfile.
        for (name, task) in &tasks {
            let cache = dir.path().join(format!("base-{i}-{name}"));
            let text = std::fs::read_to_string(repo.join(&task.dockerfile))?;
            let df = patchpilot_agent::dockerfile::Dockerfile::parse(&text)
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let Some(patchpilot_agent::dockerfile::Base::Image(base)) =
                df.final_chain().last().map(|s| s.base.clone())
            else {
                continue;
            };
            let started = Instant::now();
            let scans = Scans::new(
                RegistryClient::new(&registry_config)?,
                db.clone(),
                cache.clone(),
                PlatformChoice::default(),
            );
            scans.scan(&base.render()).await?;
            let tags = scans.tags(&base.repository).await?;
            for candidate in base_image::candidates(base.tag.as_deref().unwrap_or_default(), &tags) {
                scans.scan(&format!("{}:{candidate}", base.repository)).await?;
            }
            it.baseline_ms += ms(started.elapsed());
            it.baseline_images += scans.stats().images_scanned;
            let _ = std::fs::remove_dir_all(&cache);
        }
        if i == 0 {
            println!(
                "warm-up: plan {:.0} ms, baseline {:.0} ms (not counted)",
                it.planning_ms, it.baseline_ms
            );
            continue;
        }
        println!(
            "iteration {i}: plan {:.0} ms ({:.0} ms registry, {:.0} ms scanning, {} images), baseline {:.0} ms ({} images)",
            it.planning_ms,
            it.registry_ms,
            it.scanning_ms,
            it.images_scanned,
            it.baseline_ms,
            it.baseline_images
        );
        iterations.push(it);
    }
    let plan = median(iterations.iter().map(|i| i.planning_ms).collect());
    let registry_share = median(iterations.iter().map(|i| i.registry_ms / i.planning_ms).collect());
    let baseline = median(iterations.iter().map(|i| i.baseline_ms).collect());
    let last = iterations.last().cloned().unwrap_or_default();
    println!();
    println!(
        "planning, 10 Dockerfiles / {total_findings} findings (median of {}): {plan:.0} ms (target < 2000 ms)",
        iterations.len()
    );
    println!("  registry I/O share: {:.0} %", registry_share * 100.0);
    println!(
        "  images scanned: {} ({} current bases + {} candidates), findings planned {}, refused {}",
        last.images_scanned,
        tasks.len(),
        last.images_scanned.saturating_sub(tasks.len()),
        last.findings_planned,
        last.findings_refused
    );
    println!("baseline, scan every newer tag: {baseline:.0} ms, {} images", last.baseline_images);
    println!("  ratio plan / baseline: {:.2}", plan / baseline.max(f64::EPSILON));
    if let Some(path) = &args.json_out {
        std::fs::write(
            path,
            serde_json::to_vec_pretty(&serde_json::json!({
                "plan_ms_median": plan,
                "registry_share_median": registry_share,
                "baseline_ms_median": baseline,
                "iterations": iterations,
            }))?,
        )?;
    }
    Ok(())
}
