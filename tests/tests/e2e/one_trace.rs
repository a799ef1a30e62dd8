//! One remediation is one trace, from `patchpilot submit` to its pull
//! request, as a tracing backend receives it over OTLP.
//!
//! Every process the test starts (the `patchpilot` CLI, the planner, the
//! controller and the sandbox worker) exports its spans over OTLP/gRPC to a
//! receiver in this test, which decodes them with the OpenTelemetry
//! protobuf definitions (`opentelemetry-proto`'s collector service) and
//! keeps them by the resource's `service.name`. One remediation goes
//! through the whole fleet: the CLI submits a Trivy report, the planner maps
//! its image to a local forge repository and publishes a job, the
//! controller requests a run, the sandbox worker runs the scripted agent in
//! a QEMU microVM, and the controller vets the patch, opens the PR and
//! watches CI to green. The services stop gracefully, which flushes their
//! exporters.
//!
//! It proves that all of it carries the trace id `submit` printed, each hop
//! parented on the span that handed the work over:
//!
//! ```text
//! patchpilot-cli         patchpilot.submit                    (root)
//! patchpilot-planner     └ bus.receive (ASSESSMENTS)
//! patchpilot-planner       └ planner.publish_job
//! patchpilot-controller      └ bus.receive (REMEDIATIONS)      job intake; its context is stored
//! patchpilot-planner           ├ bus.receive (EVENTS)          a lifecycle event, from the stored context
//! patchpilot-controller        └ controller.remediation        every executor turn, from the stored context
//! patchpilot-controller          ├ step (request_run)
//! patchpilot-sandbox-worker      │ └ bus.receive (SANDBOX_RUNS)
//! patchpilot-sandbox-worker      │   └ sandbox.run
//! patchpilot-controller          │     └ bus.receive (SANDBOX_RESULTS)
//! patchpilot-controller          └ step (publish)              the PR
//! ```
//!
//! A failure prints every span received (service, name, trace, span and
//! parent ids), so the broken link shows.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use patchpilot_e2e::sandbox::{VM_LOCK, WORKER_TOML, skip_reason};
use patchpilot_e2e::{Stack, wait_for};
use tokio_util::sync::CancellationToken;

use crate::controller::{CI, Loop};

const CLI: &str = "patchpilot-cli";
const PLANNER: &str = "patchpilot-planner";
const CONTROLLER: &str = "patchpilot-controller";
const WORKER: &str = "patchpilot-sandbox-worker";

/// The report's image (`localhost:PORT/alpine:3.10`) is the scripted
/// agent's `green` repository on the local forge.
const PLANNER_TOML: &str = "[planner.registry]\nlookup_labels = false\n\
     [[planner.mappings]]\nimage = \"localhost:*/alpine:*\"\nrepo = \"local://acme/green\"\n";

/// Attributes shown when spans are printed: the ones that tell apart spans
/// of the same name.
const SHOWN: &[&str] = &["stream", "action", "remediation_id", "run_id"];

/// One span as the receiver decoded it.
#[derive(Debug, Clone)]
struct Received {
    /// The resource's `service.name`.
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    /// Empty for a root span.
    parent_id: String,
    /// Every attribute, its value as text.
    attributes: BTreeMap<String, String>,
    start_unix_nano: u64,
}

impl Received {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

impl fmt::Display for Received {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parent = if self.parent_id.is_empty() { "-" } else { &self.parent_id };
        write!(
            f,
            "{:<26} {:<24} trace {} span {} parent {:<16}",
            self.service, self.name, self.trace_id, self.span_id, parent
        )?;
        for key in SHOWN {
            if let Some(value) = self.attribute(key) {
                write!(f, " {key}={value}")?;
            }
        }
        Ok(())
    }
}

/// The OTLP trace service: keeps every span it is sent, by service.
#[derive(Debug, Clone, Default)]
struct Collector {
    by_service: Arc<Mutex<BTreeMap<String, Vec<Received>>>>,
}

impl Collector {
    /// Every span received so far, by service, then start time.
    fn spans(&self) -> Vec<Received> {
        let by_service = self.by_service.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<Received> = by_service.values().flatten().cloned().collect();
        all.sort_by(|a, b| (&a.service, a.start_unix_nano).cmp(&(&b.service, b.start_unix_nano)));
        all
    }
}

fn text(value: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter().map(|kv| (kv.key.clone(), text(&kv.value))).collect()
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut by_service = self.by_service.lock().unwrap_or_else(|e| e.into_inner());
        for resource_spans in request.into_inner().resource_spans {
            let resource = resource_spans.resource.map(|r| attributes(&r.attributes)).unwrap_or_default();
            let service =
                resource.get("service.name").cloned().unwrap_or_else(|| "(no service.name)".to_owned());
            let received = by_service.entry(service.clone()).or_default();
            for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
                received.push(Received {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_id: hex::encode(&span.parent_span_id),
                    attributes: attributes(&span.attributes),
                    start_unix_nano: span.start_time_unix_nano,
                });
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

/// An OTLP/gRPC receiver on a loopback port it bound itself.
struct Receiver {
    collector: Collector,
    /// `http://127.0.0.1:PORT`, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    endpoint: String,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Receiver {
    async fn start() -> anyhow::Result<Receiver> {
        // Bound here and served from this socket: the port handed to the
        // services is the one listening.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let collector = Collector::default();
        let stop = CancellationToken::new();
        let server = tokio::spawn({
            let service = TraceServiceServer::new(collector.clone());
            let stop = stop.clone();
            async move {
                tonic::transport::Server::builder()
                    .serve_with_incoming_shutdown(
                        service,
                        tonic::transport::server::TcpIncoming::from(listener),
                        stop.cancelled_owned(),
                    )
                    .await
            }
        });
        Ok(Receiver { collector, endpoint, stop, server })
    }

    /// Stops serving; fails if the server had failed.
    async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        self.server.await?.context("the OTLP receiver failed")
    }
}

/// The spans of the chain in the module's doc, each found with its parent.
#[derive(Debug)]
struct Chain {
    links: Vec<(String, Received)>,
}

/// Spans of `service` named `name` with `attribute` = value, if given.
fn named<'a>(
    spans: &'a [Received],
    service: &str,
    name: &str,
    attribute: Option<(&str, &str)>,
) -> Vec<&'a Received> {
    spans
        .iter()
        .filter(|s| s.service == service && s.name == name)
        .filter(|s| attribute.is_none_or(|(k, v)| s.attribute(k) == Some(v)))
        .collect()
}

/// Those of `candidates` whose parent is one of `parents`; an error naming
/// the link (`what`) and the candidates when there are none.
fn children<'a>(
    what: &str,
    candidates: Vec<&'a Received>,
    parents: &[&Received],
) -> Result<Vec<&'a Received>, String> {
    if candidates.is_empty() {
        return Err(format!("{what}: no such span received"));
    }
    let linked: Vec<&Received> = candidates
        .iter()
        .copied()
        .filter(|c| parents.iter().any(|p| p.span_id == c.parent_id && p.trace_id == c.trace_id))
        .collect();
    if linked.is_empty() {
        let parent_ids: Vec<&str> = parents.iter().map(|p| p.span_id.as_str()).collect();
        return Err(format!(
            "{what}: {} such span(s) received, none parented on {parent_ids:?}:\n{}",
            candidates.len(),
            candidates.iter().map(|c| format!("  {c}\n")).collect::<String>()
        ));
    }
    Ok(linked)
}

/// The chain of the module's doc in trace `trace_id` for remediation
/// `remediation_id`, or the first link missing.
fn chain(all: &[Received], trace_id: &str, remediation_id: &str) -> Result<Chain, String> {
    let trace: Vec<Received> = all.iter().filter(|s| s.trace_id == trace_id).cloned().collect();
    let spans = trace.as_slice();
    let remediation = Some(("remediation_id", remediation_id));
    let mut links = Vec::new();
    let mut keep = |label: &str, found: &[&Received]| {
        for s in found {
            links.push((label.to_owned(), (*s).clone()));
        }
    };

    let submit = named(spans, CLI, "patchpilot.submit", None);
    let roots: Vec<&Received> = submit.iter().copied().filter(|s| s.parent_id.is_empty()).collect();
    if submit.len() != 1 || roots.len() != 1 {
        return Err(format!(
            "the CLI's patchpilot.submit: want one root span, found {}:\n{}",
            submit.len(),
            submit.iter().map(|c| format!("  {c}\n")).collect::<String>()
        ));
    }
    keep("submit", &roots);
    let assessment = children(
        "the planner's bus.receive of the assessment (ASSESSMENTS) under patchpilot.submit",
        named(spans, PLANNER, "bus.receive", Some(("stream", "ASSESSMENTS"))),
        &roots,
    )?;
    keep("planner intake", &assessment);
    let job = children(
        "the planner's planner.publish_job under its bus.receive of the assessment",
        named(spans, PLANNER, "planner.publish_job", remediation),
        &assessment,
    )?;
    keep("planner publish", &job);
    let intake = children(
        "the controller's job intake, bus.receive (REMEDIATIONS), under planner.publish_job",
        named(spans, CONTROLLER, "bus.receive", Some(("stream", "REMEDIATIONS"))),
        &job,
    )?;
    keep("controller intake", &intake);
    // The controller's lifecycle events continue the job's trace: the
    // planner's handling of one (it keeps its state in step) joins it.
    let events = children(
        "the planner's bus.receive of a lifecycle event (EVENTS) under the controller's job intake",
        named(spans, PLANNER, "bus.receive", Some(("stream", "EVENTS"))),
        &intake,
    )?;
    keep("planner event intake", &events);
    // Every executor turn on the remediation, wherever its trace: each one
    // must continue the stored context of the job intake.
    let turns = named(all, CONTROLLER, "controller.remediation", remediation);
    let linked = children(
        "the controller's executor turns, controller.remediation, under its job intake",
        turns.clone(),
        &intake,
    )?;
    if linked.len() != turns.len() {
        let strays: String = turns
            .iter()
            .filter(|t| !linked.iter().any(|l| l.span_id == t.span_id))
            .map(|t| format!("  {t}\n"))
            .collect();
        return Err(format!(
            "{} of {} controller.remediation spans of {remediation_id} are not parented on the job intake:\n{strays}",
            turns.len() - linked.len(),
            turns.len()
        ));
    }
    keep("controller turn", &linked);
    let request = children(
        "the controller's step (action=request_run) under a controller.remediation turn",
        named(spans, CONTROLLER, "step", Some(("action", "request_run"))),
        &linked,
    )?;
    keep("controller request_run", &request);
    let delivery = children(
        "the sandbox worker's bus.receive (SANDBOX_RUNS) under the controller's request_run step",
        named(spans, WORKER, "bus.receive", Some(("stream", "SANDBOX_RUNS"))),
        &request,
    )?;
    keep("worker intake", &delivery);
    let run = children(
        "the sandbox worker's sandbox.run under its bus.receive of the run request",
        named(spans, WORKER, "sandbox.run", remediation),
        &delivery,
    )?;
    keep("sandbox run", &run);
    let result = children(
        "the controller's bus.receive of the result (SANDBOX_RESULTS) under sandbox.run",
        named(spans, CONTROLLER, "bus.receive", Some(("stream", "SANDBOX_RESULTS"))),
        &run,
    )?;
    keep("controller result intake", &result);
    let publish = children(
        "the controller's step (action=publish), the PR, under a controller.remediation turn",
        named(spans, CONTROLLER, "step", Some(("action", "publish"))),
        &linked,
    )?;
    keep("controller publish", &publish);
    Ok(Chain { links })
}

#[tokio::test]
async fn submit_planner_controller_sandbox_run_and_pr_are_one_trace() -> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("submit_planner_controller_sandbox_run_and_pr_are_one_trace").is_some() {
        return Ok(());
    }
    let receiver = Receiver::start().await?;
    let mut stack = Stack::start().await?;
    // As deploy/README.md deploys it: each service (and the CLI) under its
    // own Postgres role, granted only its tables, with migrations off.
    stack.use_service_roles().await?;
    // Every service and CLI run of this stack exports to the receiver,
    // with a short batch delay so spans arrive while the work goes on.
    stack.add_env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint);
    stack.add_env("OTEL_BSP_SCHEDULE_DELAY", "200");
    let (seeds, scripted) = Loop::scripted(&["green"]);
    let lp = Loop::start_on(stack, &seeds, CI, &scripted, WORKER_TOML).await?;
    let mut controller = lp.spawn_controller(0)?;
    let mut planner = lp.stack.spawn_planner(PLANNER_TOML)?;

    let trace_id = crate::tracing_context::submit_alpine_report(&lp.stack).await?;
    let remediation_id =
        wait_for("the planner's job to reach the controller", Duration::from_secs(60), || {
            let pool = lp.stack.pool.clone();
            async move {
                let ids: Vec<String> =
                    sqlx::query_scalar("SELECT remediation_id FROM controller_remediations")
                        .fetch_all(&pool)
                        .await?;
                anyhow::ensure!(ids.len() <= 1, "one image, one remediation: {ids:?}");
                Ok(ids.into_iter().next())
            }
        })
        .await
        .map_err(|e| e.context(lp.logs()))?;
    let ends = lp.wait_terminal(std::slice::from_ref(&remediation_id), Duration::from_secs(600)).await?;
    assert_eq!(ends[0].0, "succeeded", "{}\n{}", ends[0].1, lp.logs());
    assert_eq!(lp.pull_requests("green").await?.len(), 1, "one PR");

    // A graceful stop flushes each exporter.
    for (name, service) in [("controller", &mut controller), ("planner", &mut planner)] {
        let status = service.terminate(Duration::from_secs(30)).await?;
        anyhow::ensure!(status.success(), "{name}: {status:?}\n{}", service.log_text());
    }
    lp.stop().await?;

    let last = Mutex::new(String::new());
    let found = wait_for("one trace from submit to the PR", Duration::from_secs(30), || async {
        Ok(match chain(&receiver.collector.spans(), &trace_id, &remediation_id) {
            Ok(chain) => Some(chain),
            Err(missing) => {
                *last.lock().unwrap_or_else(|e| e.into_inner()) = missing;
                None
            }
        })
    })
    .await;
    let spans = receiver.collector.spans();
    receiver.stop().await?;
    let chain = match found {
        Ok(chain) => chain,
        Err(e) => {
            let missing = last.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let services: Vec<String> = spans
                .iter()
                .map(|s| s.service.clone())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            anyhow::bail!(
                "{e}\nsubmit's trace id: {trace_id}, remediation {remediation_id}\nmissing: {missing}\n\
                 services heard from: {services:?}\nevery span received ({}):\n{}",
                spans.len(),
                spans.iter().map(|s| format!("  {s}\n")).collect::<String>()
            );
        }
    };
    eprintln!("trace {trace_id}:");
    for (label, span) in &chain.links {
        eprintln!("  {label:<26} {span}");
    }
    Ok(())
}
