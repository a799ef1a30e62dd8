//! Vetting a 70,000-line vendored dependency diff (target: under 1 s),
//! with `git apply --index` alone on the same patch as the baseline.
//!
//! `cargo bench -p patchpilot-vet --bench vet`

#[path = "../tests/fixtures/vendored.rs"]
mod vendored;

use std::path::Path;
use std::time::{Duration, Instant};

use patchpilot_git::Git;
use patchpilot_vet::{VetContext, VetPolicy, vet_patch};

const RUNS: usize = 5;

async fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    Git::new(dir).run(args).await.unwrap_or_else(|e| panic!("{e}")).stdout
}

fn write(root: &Path, rel: &str, data: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, data).expect("write");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn reset(dir: &Path) {
    git(dir, &["reset", "-q", "--hard", "HEAD"]).await;
    git(dir, &["clean", "-qffdx"]).await;
}

async fn run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("webapp");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]).await;
    write(&repo, "go.mod", b"module github.com/acme/webapp\n\ngo 1.22\n\nrequire golang.org/x/net v0.21.0\n");
    write(&repo, "Dockerfile", b"FROM golang:1.22.1-alpine3.19 AS build\n");
    write(&repo, "cmd/webapp/main.go", b"package main\n\nfunc main() {}\n");
    // A vendor folder with the old dependency already in it.
    for i in 0..40 {
        write(&repo, &format!("vendor/golang.org/x/net/http2/file{i}.go"), b"package http2\n\nconst x = 1\n");
    }
    write(&repo, "vendor/modules.txt", b"# golang.org/x/net v0.21.0\n## explicit; go 1.18\n");
    git(&repo, &["add", "-A"]).await;
    git(&repo, &["commit", "-qm", "initial"]).await;

    // The sandbox's side: add a vendored module, bump go.mod, diff.
    let (files, lines) = vendored::write_vendored_module(&repo, 70_000);
    write(&repo, "go.mod", b"module github.com/acme/webapp\n\ngo 1.22\n\nrequire (\n\tgolang.org/x/net v0.23.0\n\tgithub.com/acme-oss/netkit/v3 v3.4.1\n)\n");
    write(&repo, "vendor/modules.txt", b"# golang.org/x/net v0.23.0\n## explicit; go 1.18\n# github.com/acme-oss/netkit/v3 v3.4.1\n## explicit; go 1.21\n");
    git(&repo, &["add", "-A"]).await;
    let patch = git(&repo, &["diff", "--cached", "--binary", "HEAD"]).await;
    reset(&repo).await;
    println!(
        "patch: {} vendored files, {lines} generated lines, {:.1} MiB",
        files.len(),
        patch.len() as f64 / (1024.0 * 1024.0)
    );

    let policy = VetPolicy { allow_vendor: true, ..VetPolicy::default() };
    let context = VetContext::remediate();
    let mut vet_times = Vec::new();
    let mut apply_times = Vec::new();
    // Interleaved so both see the same page-cache and disk conditions.
    for _ in 0..RUNS {
        let start = Instant::now();
        let report = vet_patch(&repo, &patch, &policy, &context).await.expect("vet");
        vet_times.push(start.elapsed());
        assert!(report.accepted, "{report}");
        reset(&repo).await;

        let start = Instant::now();
        Git::new(&repo).run_with_input(&["apply", "--index", "--binary", "-"], &patch).await.expect("apply");
        apply_times.push(start.elapsed());
        reset(&repo).await;
    }
    let (vet, apply) = (median(vet_times.clone()), median(apply_times.clone()));
    println!("vet_patch, {RUNS} runs: {:?}", vet_times);
    println!("git apply, {RUNS} runs: {:?}", apply_times);
    println!(
        "median vet_patch {:.1} ms, git apply alone {:.1} ms, ratio {:.2}x; target < 1000 ms: {}",
        vet.as_secs_f64() * 1e3,
        apply.as_secs_f64() * 1e3,
        vet.as_secs_f64() / apply.as_secs_f64(),
        if vet < Duration::from_secs(1) { "met" } else { "MISSED" }
    );
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent; the timing
    // is only worth doing when asked for.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run());
}
