//! A trace started by `patchpilot submit` continues in the planner and on the
//! job it publishes.

use std::time::Duration;

use patchpilot_e2e::{Stack, fixture};
use patchpilot_fleet::bus::{StreamName, trace};

use crate::support::arg;

/// `patchpilot submit` of the Trivy report of `localhost:*/alpine:3.10`;
/// returns the trace id it prints.
pub(crate) async fn submit_alpine_report(stack: &Stack) -> anyhow::Result<String> {
    let out = stack.cli(&["submit", arg(&fixture("reports/trivy-alpine-310-registry.json"))]).await?;
    anyhow::ensure!(out.code == Some(0), "submit failed: {}", out.stderr);
    out.stderr
        .lines()
        .find_map(|l| l.strip_prefix("trace_id="))
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("submit printed no trace id: {}", out.stderr))
}

#[tokio::test]
async fn submit_trace_continues_through_the_planner_to_the_job() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let _planner = stack.spawn_planner(
        "[planner.registry]\nlookup_labels = false\n[[planner.mappings]]\nimage = \"localhost:*/alpine:*\"\nrepo = \"https://github.com/acme/alpine-app\"\n",
    )?;
    let trace_id = submit_alpine_report(&stack).await?;
    assert_eq!(trace_id.len(), 32);

    // The assessment message carries it…
    let stored = stack.stream_contents(StreamName::Assessments).await?;
    let sent = trace::trace_id(&trace::extract(&stored[0].headers));
    assert_eq!(sent.as_deref(), Some(trace_id.as_str()));

    // …the planner's span for it has the same trace id…
    stack
        .wait_count(
            "SELECT count(*) FROM remediation_jobs WHERE published_at IS NOT NULL",
            1,
            Duration::from_secs(20),
        )
        .await?;
    let recorded: Option<String> =
        sqlx::query_scalar("SELECT trace_id FROM assessments").fetch_one(&stack.pool).await?;
    assert_eq!(recorded.as_deref(), Some(trace_id.as_str()));

    // …and so does the job it published, with a new span of its own.
    let jobs = stack.stream_contents(StreamName::Remediations).await?;
    let job_cx = trace::extract(&jobs[0].headers);
    assert_eq!(trace::trace_id(&job_cx).as_deref(), Some(trace_id.as_str()));
    let parent = stored[0].headers.get("traceparent").map(|v| v.as_str().to_owned());
    let child = jobs[0].headers.get("traceparent").map(|v| v.as_str().to_owned());
    assert_ne!(parent, child, "the job is published from the planner's own span");
    Ok(())
}

#[tokio::test]
async fn spans_are_exported_over_otlp_when_an_endpoint_is_set() -> anyhow::Result<()> {
    use tokio::io::AsyncReadExt as _;
    // A listener standing in for the collector: the test checks that the
    // exporter is switched on by the standard variable and speaks gRPC
    // (HTTP/2) to it; decoding OTLP is the collector's business.
    let collector = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", collector.local_addr()?);
    let stack = Stack::start().await?;
    let _planner = stack.spawn_planner_with_env(
        "[planner.registry]\nlookup_labels = false\n",
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "200")],
    )?;
    submit_alpine_report(&stack).await?;
    let (mut conn, _) = tokio::time::timeout(Duration::from_secs(20), collector.accept()).await??;
    let mut preface = [0u8; 24];
    tokio::time::timeout(Duration::from_secs(10), conn.read_exact(&mut preface)).await??;
    assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    Ok(())
}
