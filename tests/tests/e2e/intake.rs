//! Reports → findings, remediations and jobs; resubmission; bad files.

use std::collections::BTreeSet;
use std::time::Duration;

use patchpilot_e2e::{Stack, fixture, workspace_root};
use patchpilot_fleet::bus::StreamName;
use patchpilot_model::{Assessment, Severity};
use patchpilot_planner::intake;

use crate::support::{self, arg};

const PLANNER: &str = r#"
[planner.registry]
lookup_labels = false
[[planner.mappings]]
image = "localhost:*/alpine:*"
repo = "https://github.com/acme/alpine-app"
[[planner.mappings]]
image = "registry.example.com/payments/*"
repo = "https://github.com/example-org/payments-{1}"
"#;

fn read(path: &std::path::Path) -> anyhow::Result<Vec<Assessment>> {
    Ok(intake::parse(&std::fs::read(path)?, None, None)?.1)
}

/// The actionable set under the default policy (severity ≥ low, fixable),
/// computed independently of the planner.
fn actionable(a: &Assessment) -> usize {
    a.findings
        .iter()
        .filter(|f| f.severity >= Severity::Low && !f.fixed_versions.is_empty())
        .map(|f| (f.id.clone(), f.package.name.clone(), f.package.version.clone()))
        .collect::<BTreeSet<_>>()
        .len()
}

#[tokio::test]
async fn trivy_grype_and_native_reports_become_findings_remediations_and_jobs() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    // Port 0: the planner binds a port of its own and logs it.
    let planner =
        stack.spawn_planner(&format!("{PLANNER}\n[telemetry]\nmetrics_addr = \"127.0.0.1:0\"\n"))?;
    let metrics = planner.logged_field("metrics endpoint listening", "addr", Duration::from_secs(30)).await?;
    let trivy = fixture("reports/trivy-alpine-310-registry.json");
    let grype = fixture("reports/grype-chainguard-rabbitmq-image.json");
    let native = workspace_root().join("examples/assessments/payments.json");

    let out = stack.cli(&["submit", arg(&trivy), arg(&grype), arg(&native)]).await?;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("published 2 assessment(s) with 10 finding(s)"), "{}", out.stderr);
    stack.wait_count("SELECT count(*) FROM assessments", 4, Duration::from_secs(30)).await?;

    let mut expected_jobs = 0;
    for (path, rows) in [(&trivy, vec![4]), (&grype, vec![24]), (&native, vec![7, 3])] {
        let assessments = read(path)?;
        for (a, want) in assessments.iter().zip(rows) {
            // Every entry of these reports has a distinct (vulnerability,
            // package, path), so rows = report entries.
            let got: i64 = sqlx::query_scalar("SELECT count(*) FROM findings WHERE image_digest = $1")
                .bind(a.digest.as_str())
                .fetch_one(&stack.pool)
                .await?;
            assert_eq!(got, want, "{} findings of {}", path.display(), a.image);
            assert_eq!(a.findings.len() as i64, want);
            if actionable(a) > 0 {
                expected_jobs += 1;
            }
        }
    }
    // Report-specific facts that pin the conversion, not just the counts.
    let (severity, fixed): (i16, serde_json::Value) = sqlx::query_as(
        "SELECT severity, fixed_versions FROM findings WHERE vulnerability_id = 'CVE-2019-1551' AND package_name = 'libssl1.1'",
    )
    .fetch_one(&stack.pool)
    .await?;
    assert_eq!((Severity::from_rank(severity), fixed), (Severity::Medium, serde_json::json!(["1.1.1d-r2"])));

    stack
        .wait_count(
            "SELECT count(*) FROM remediation_jobs WHERE published_at IS NOT NULL",
            expected_jobs,
            Duration::from_secs(15),
        )
        .await?;
    let jobs = support::jobs(&stack).await?;
    assert_eq!(jobs.len() as i64, expected_jobs);
    let remediations: i64 = stack.count("SELECT count(*) FROM remediations").await?;
    assert_eq!(remediations, expected_jobs);

    let by_repo = |repo: &str| jobs.iter().find(|j| j.target.repo_url == repo).cloned();
    let alpine = by_repo("https://github.com/acme/alpine-app").expect("alpine job");
    assert_eq!(alpine.findings.len(), 4);
    assert_eq!(alpine.revision, 1);
    let chainguard = by_repo("https://github.com/chainguard-images/images-private")
        .expect("chainguard job (mapped by label)");
    assert_eq!(chainguard.findings.len(), actionable(&read(&grype)?[0]));
    assert_eq!(chainguard.findings.len(), 7, "the 7 high findings with fixes");
    assert_eq!(chainguard.images[0].mapped_by, "label:assessment");
    let api = by_repo("https://github.com/example-org/payments-api").expect("payments-api job");
    assert_eq!(api.findings.len(), 7);
    assert_eq!(api.target.revision, "", "rule mapping sets no revision");
    let worker = by_repo("https://github.com/example-org/payments-worker").expect("payments-worker job");
    assert_eq!(worker.findings.len(), 2, "zlib has no fix and is left out");
    // The planner's Prometheus endpoint counts what happened.
    let exposition = patchpilot_e2e::http_get(&metrics, "/metrics").await?;
    assert!(exposition.contains("pp_planner_assessments_total{result=\"new\"} 4"), "{exposition}");
    assert!(exposition.contains(&format!("pp_planner_jobs_published_total {expected_jobs}")), "{exposition}");
    assert!(
        exposition.contains(
            "pp_bus_messages_total{stream=\"ASSESSMENTS\",consumer=\"planner\",outcome=\"acked\"} 4"
        ),
        "{exposition}"
    );
    for job in &jobs {
        assert_eq!(
            job.job_id,
            patchpilot_model::RemediationJob::job_id_for(
                job.remediation_id,
                job.revision,
                &job.target,
                &job.finding_set_digest
            )
        );
    }
    Ok(())
}

#[tokio::test]
async fn resubmitting_the_same_report_changes_nothing() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let _planner = stack.spawn_planner(PLANNER)?;
    let trivy = fixture("reports/trivy-alpine-310-registry.json");
    assert_eq!(stack.cli(&["submit", arg(&trivy)]).await?.code, Some(0));
    stack
        .wait_count(
            "SELECT count(*) FROM remediation_jobs WHERE published_at IS NOT NULL",
            1,
            Duration::from_secs(20),
        )
        .await?;
    let snapshot = || async {
        let row: (i64, i64, i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM assessments), (SELECT count(*) FROM findings),
                    (SELECT count(*) FROM remediations), (SELECT max(revision)::int8 FROM remediations),
                    (SELECT count(*) FROM remediation_jobs)",
        )
        .fetch_one(&stack.pool)
        .await?;
        anyhow::Ok(row)
    };
    let before = snapshot().await?;

    // Inside the duplicate window the bus drops it…
    let again = stack.cli(&["submit", arg(&trivy)]).await?;
    assert!(again.stderr.contains("1 already queued"), "{}", again.stderr);
    // …and outside it (a new message id) the planner recognises the content.
    let a = &read(&trivy)?[0];
    let message = a.to_proto(chrono::Utc::now());
    stack
        .bus
        .publish_raw(
            "pp.assessment.cli".into(),
            "different-msg-id",
            Default::default(),
            prost::Message::encode_to_vec(&message).into(),
        )
        .await?;
    patchpilot_e2e::wait_for("the planner to take the resubmission", Duration::from_secs(20), || async {
        let states = stack.bus.consumer_states(StreamName::Assessments).await?;
        Ok(states.iter().all(|c| c.pending == 0 && c.in_flight == 0).then_some(()))
    })
    .await?;
    assert_eq!(snapshot().await?, before);
    assert_eq!(support::jobs(&stack).await?.len(), 1);
    Ok(())
}

#[tokio::test]
async fn a_bad_file_publishes_nothing_and_names_the_field() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let good = support::write_doc(
        &stack,
        "good.json",
        vec![support::assessment("r.test/a:1", "a", &[("CVE-1", "zlib", "1.0", "1.1", "high")])],
    )?;
    // The second image of this document has a bad severity: the first must
    // not be published either.
    let bad = support::write_doc(
        &stack,
        "bad.json",
        vec![
            support::assessment("r.test/b:1", "b", &[("CVE-2", "zlib", "1.0", "1.1", "high")]),
            support::assessment("r.test/c:1", "c", &[("CVE-3", "zlib", "1.0", "1.1", "severe")]),
        ],
    )?;
    let mut trivy: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("reports/trivy-alpine-310-registry.json"))?)?;
    trivy["Results"][0]["Vulnerabilities"][3]["InstalledVersion"] = serde_json::Value::Null;
    let bad_trivy = stack.dir.path().join("bad-trivy.json");
    std::fs::write(&bad_trivy, trivy.to_string())?;
    let not_json = stack.dir.path().join("not.json");
    std::fs::write(&not_json, "{ \"schema\": ")?;

    let out = stack.cli(&["submit", arg(&good), arg(&bad), arg(&bad_trivy), arg(&not_json)]).await?;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{}: assessments[1].findings[0].severity: unknown severity `severe`",
            bad.display()
        )),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains(&format!("{}: Results[0].Vulnerabilities[3].InstalledVersion", bad_trivy.display())),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&format!("{}: not valid JSON", not_json.display())), "{}", out.stderr);
    let stored = stack.stream_contents(StreamName::Assessments).await?;
    assert_eq!(stored.len(), 1, "only the good file is published");

    // --dry-run prints the normalised document and publishes nothing.
    let dry =
        stack.cli(&["submit", "--dry-run", arg(&fixture("reports/trivy-alpine-310-registry.json"))]).await?;
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    let doc: serde_json::Value = serde_json::from_str(&dry.stdout)?;
    assert_eq!(doc["schema"], "patchpilot/assessment/v1");
    assert_eq!(doc["assessments"][0]["findings"].as_array().map(Vec::len), Some(4));
    assert_eq!(stack.stream_contents(StreamName::Assessments).await?.len(), 1);
    Ok(())
}
