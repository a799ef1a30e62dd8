//! Crashes lose nothing and duplicate nothing; SIGTERM drains; bad config
//! stops the planner before it touches anything.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use patchpilot_e2e::synthetic::{SyntheticSpec, synthetic};
use patchpilot_e2e::{Service, Stack, binary, wait_for};
use patchpilot_fleet::bus::StreamName;
use patchpilot_planner::intake::native::Document;

use crate::support::{self, arg};

const PLANNER: &str = r#"
[planner]
batch_size = 32
outbox_sweep_secs = 1
[planner.registry]
lookup_labels = false
[[planner.mappings]]
image = "bench.local/svc-*"
repo = "https://git.bench.local/svc-{1}"
"#;

#[tokio::test]
async fn sigkill_mid_batch_loses_no_assessment_and_duplicates_no_job() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let total = 2_000;
    let assessments =
        synthetic(&SyntheticSpec { assessments: total as usize, findings: 10, repos: 200, seed: 7 })?;
    let doc = stack.dir.path().join("load.json");
    std::fs::write(&doc, serde_json::to_vec(&Document::new(assessments.clone()))?)?;
    let expected_findings: BTreeSet<(String, String, String)> = assessments
        .iter()
        .flat_map(|a| a.findings.iter().map(|f| (a.digest.to_string(), f.id.clone(), f.package.name.clone())))
        .collect();
    let submitted = stack.cli(&["submit", arg(&doc)]).await?;
    assert_eq!(submitted.code, Some(0), "{}", submitted.stderr);

    let processed = || stack.count("SELECT count(*) FROM assessments");
    let mut planner = stack.spawn_planner(PLANNER)?;
    let mut kills = Vec::new();
    for threshold in [150, 700, 1_300] {
        let at = wait_for(&format!("more than {threshold} assessments"), Duration::from_secs(60), || async {
            let n = processed().await?;
            Ok((n > threshold).then_some(n))
        })
        .await?;
        planner.kill();
        kills.push(at);
        planner = stack.spawn_planner(PLANNER)?;
    }
    let final_count = processed().await?;
    assert!(final_count < total, "the kills happened mid-way ({kills:?}, {final_count})");

    stack.wait_count("SELECT count(*) FROM assessments", total, Duration::from_secs(120)).await?;
    stack
        .wait_count(
            "SELECT count(*) FROM remediation_jobs WHERE published_at IS NULL AND NOT obsolete",
            0,
            Duration::from_secs(30),
        )
        .await?;
    wait_for("ASSESSMENTS to drain", Duration::from_secs(30), || async {
        Ok((stack.bus.stream_messages(StreamName::Assessments).await? == 0).then_some(()))
    })
    .await?;

    // Nothing lost.
    assert_eq!(stack.count("SELECT count(*) FROM findings").await?, expected_findings.len() as i64);
    assert_eq!(stack.count("SELECT count(*) FROM remediations").await?, 200);

    // Nothing duplicated: every job on the stream is distinct, and each
    // remediation's current state was published.
    let jobs = support::jobs(&stack).await?;
    let ids: BTreeSet<&str> = jobs.iter().map(|j| j.job_id.as_str()).collect();
    assert_eq!(ids.len(), jobs.len(), "a job was published twice");
    let revisions: BTreeSet<(uuid::Uuid, u32)> =
        jobs.iter().map(|j| (j.remediation_id.0, j.revision)).collect();
    assert_eq!(revisions.len(), jobs.len(), "two jobs for one revision");
    let current: Vec<(uuid::Uuid, i32, String)> =
        sqlx::query_as("SELECT id, revision, finding_set_digest FROM remediations")
            .fetch_all(&stack.pool)
            .await?;
    let published: HashMap<(uuid::Uuid, u32), &str> =
        jobs.iter().map(|j| ((j.remediation_id.0, j.revision), j.finding_set_digest.as_str())).collect();
    for (id, revision, digest) in current {
        assert_eq!(
            published.get(&(id, revision as u32)).copied(),
            Some(digest.as_str()),
            "latest job of {id} missing"
        );
    }
    assert_eq!(
        stack.count("SELECT count(*) FROM remediation_jobs WHERE published_at IS NOT NULL").await?,
        jobs.len() as i64
    );
    Ok(())
}

#[tokio::test]
async fn sigterm_drains_and_exits_cleanly() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let mut planner = stack.spawn_planner(PLANNER)?;
    wait_for("the planner to consume", Duration::from_secs(20), || async {
        Ok((!stack.bus.consumer_states(StreamName::Assessments).await?.is_empty()).then_some(()))
    })
    .await?;
    let status = planner.terminate(Duration::from_secs(15)).await?;
    assert!(status.success(), "{status:?}\n{}", planner.log_text());
    assert!(planner.log_text().contains("planner stopped"), "{}", planner.log_text());
    Ok(())
}

/// Starts a planner with `toml` and extra `env`; it must exit 2 naming `key`.
async fn check(stack: &Stack, toml: &str, env: Vec<(String, String)>, key: &str) -> anyhow::Result<()> {
    let config = stack.write_config(&format!("bad-{}.toml", key.replace(['.', '[', ']'], "_")), toml)?;
    let log = stack.dir.path().join(format!("bad-{}.log", key.replace(['.', '[', ']'], "_")));
    let mut all = stack.env();
    all.extend(env);
    let mut service = Service::spawn("patchpilot-planner", &config, &all, log)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = service.exited()? {
            break status;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "planner did not exit: {}", service.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(2), "{}", service.log_text());
    assert!(service.log_text().contains(key), "{key}: {}", service.log_text());
    Ok(())
}

#[tokio::test]
async fn bad_configuration_stops_the_planner_and_names_the_key() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    check(&stack, "[planner]\nbatch_size = 0\n", vec![], "planner.batch_size").await?;
    check(&stack, "[planner.policy]\nmin_severity = \"severe\"\n", vec![], "planner.policy.min_severity")
        .await?;
    check(
        &stack,
        "",
        vec![("PATCHPILOT_BUS__MAX_DELIVER".into(), "many".into())],
        "PATCHPILOT_BUS__MAX_DELIVER",
    )
    .await?;
    check(
        &stack,
        "[[planner.mappings]]\nimage = \"ghcr.io/acme/*\"\nrepo = \"https://github.com/acme/{2}\"\n",
        vec![],
        "planner.mappings[0].repo",
    )
    .await?;
    // The binary is the one under test, not a stale build.
    assert!(binary("patchpilot-planner")?.is_file());
    Ok(())
}
