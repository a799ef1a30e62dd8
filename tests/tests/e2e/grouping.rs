//! One open remediation per (repository, Dockerfile, branch); new findings
//! update it; a target whose findings are all gone gets a resolving job.

use std::time::Duration;

use patchpilot_e2e::Stack;
use patchpilot_model::{JobReason, RemediationJob};

use crate::support::{self, arg, assessment};

const PLANNER: &str = r#"
[planner.registry]
lookup_labels = false
[[planner.mappings]]
image = "registry.test/shop/web:*"
repo = "https://github.com/acme/shop.git"
dockerfile = "web/Dockerfile"
context = "web"
[[planner.mappings]]
image = "registry.test/shop/web-canary:*"
repo = "https://github.com/ACME/shop/"
dockerfile = "web/Dockerfile"
[[planner.mappings]]
image = "registry.test/shop/api:*"
repo = "https://github.com/acme/shop"
dockerfile = "api/Dockerfile"
"#;

async fn submit(stack: &Stack, name: &str, docs: Vec<serde_json::Value>) -> anyhow::Result<()> {
    let path = support::write_doc(stack, name, docs)?;
    let out = stack.cli(&["submit", arg(&path)]).await?;
    anyhow::ensure!(out.code == Some(0), "{}", out.stderr);
    Ok(())
}

/// Waits for the newest job of the `web/Dockerfile` target to have
/// `findings` findings (batching decides how many jobs lead there).
async fn latest_web_job(
    stack: &Stack,
    findings: usize,
    reasons: &[JobReason],
) -> anyhow::Result<Vec<RemediationJob>> {
    patchpilot_e2e::wait_for("the web remediation's next job", Duration::from_secs(20), || async {
        let jobs: Vec<RemediationJob> = support::jobs(stack)
            .await?
            .into_iter()
            .filter(|j| j.target.dockerfile == "web/Dockerfile")
            .collect();
        Ok(jobs
            .last()
            .is_some_and(|j| j.findings.len() == findings && reasons.contains(&j.reason))
            .then_some(jobs))
    })
    .await
}

#[tokio::test]
async fn findings_of_one_target_group_into_one_remediation() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let _planner = stack.spawn_planner(PLANNER)?;

    // Two images built from the same Dockerfile (the URL spelled two ways),
    // and one from another Dockerfile of the same repository.
    submit(
        &stack,
        "1.json",
        vec![
            assessment(
                "registry.test/shop/web:1.0",
                "web-1.0",
                &[("CVE-2026-1", "openssl", "3.1.4-r5", "3.1.4-r6", "high")],
            ),
            assessment(
                "registry.test/shop/web-canary:1.0",
                "canary-1.0",
                &[("CVE-2026-2", "busybox", "1.36.1-r1", "1.36.1-r2", "medium")],
            ),
            assessment(
                "registry.test/shop/api:7",
                "api-7",
                &[("CVE-2026-3", "zlib", "1.3-r0", "1.3-r1", "critical")],
            ),
        ],
    )
    .await?;
    stack.wait_count("SELECT count(*) FROM assessments", 3, Duration::from_secs(20)).await?;
    // The planner may see the two web images in one batch or two; either
    // way they end in one remediation with both findings.
    let web_jobs = latest_web_job(&stack, 2, &[JobReason::New, JobReason::FindingsChanged]).await?;
    let latest = web_jobs.last().expect("web job").clone();
    assert_eq!(latest.images.len(), 2);
    assert_eq!(latest.target.repo_url, "https://github.com/acme/shop");
    assert_eq!(stack.count("SELECT count(*) FROM remediations").await?, 2, "web and api");
    let revision = latest.revision;

    // A new finding in the canary updates the open remediation.
    submit(
        &stack,
        "2.json",
        vec![assessment(
            "registry.test/shop/web-canary:1.0",
            "canary-1.0-rebuilt",
            &[
                ("CVE-2026-2", "busybox", "1.36.1-r1", "1.36.1-r2", "medium"),
                ("CVE-2026-4", "curl", "8.5.0-r0", "8.6.0-r0", "high"),
            ],
        )],
    )
    .await?;
    let web_jobs = latest_web_job(&stack, 3, &[JobReason::FindingsChanged]).await?;
    let updated = web_jobs.last().expect("web job");
    assert_eq!(updated.revision, revision + 1);
    assert_eq!(updated.remediation_id, latest.remediation_id, "same remediation, next revision");
    assert_eq!(stack.count("SELECT count(*) FROM remediations").await?, 2);

    // Both web images rebuilt clean: the remediation's findings are gone.
    submit(
        &stack,
        "3.json",
        vec![
            assessment("registry.test/shop/web:1.0", "web-1.0-clean", &[]),
            assessment("registry.test/shop/web-canary:1.0", "canary-clean", &[]),
        ],
    )
    .await?;
    let web_jobs = latest_web_job(&stack, 0, &[JobReason::Resolved]).await?;
    let resolved = web_jobs.last().expect("web job");
    assert_eq!(resolved.remediation_id, latest.remediation_id);
    assert_eq!(stack.count("SELECT count(*) FROM remediations").await?, 2);
    assert_eq!(
        stack.count("SELECT count(*) FROM remediation_history").await?,
        2,
        "one 'queued' entry per remediation"
    );
    Ok(())
}
