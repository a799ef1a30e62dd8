//! Streams, subjects and the typed topics that say which domain type
//! travels where.

use std::marker::PhantomData;
use std::time::Duration;

use patchpilot_model::{
    Event, RemediationJob, RetroDigest, Retrospective, SandboxResult, SandboxRun, ScanRequest,
    SubmittedAssessment, Wire,
};

use async_nats::jetstream::stream::{Config, DiscardPolicy, RetentionPolicy, StorageType};

use crate::config::BusConfig;

/// Subject names and builders.
pub mod subjects {
    /// Scan requests from discovery and the CLI.
    pub const SCAN_REQUEST: &str = "pp.scan.request";
    /// Remediation jobs from the planner.
    pub const REMEDIATION_JOB: &str = "pp.remediation.job";
    /// Sandbox run requests from the controller.
    pub const SANDBOX_RUN: &str = "pp.sandbox.run";
    /// Agent retrospectives.
    pub const RETRO: &str = "pp.retro";
    /// The retro aggregator's periodic digest, for the controller's
    /// notifiers.
    pub const RETRO_DIGEST: &str = "pp.retro.digest";

    /// `pp.assessment.<source>`; `source` is e.g. `cli`, `scanner`.
    pub fn assessment(source: &str) -> String {
        format!("pp.assessment.{source}")
    }

    /// `pp.sandbox.result.<run>`.
    pub fn sandbox_result(run_id: &str) -> String {
        format!("pp.sandbox.result.{run_id}")
    }

    /// `pp.event.<kind>`, e.g. `pp.event.remediation.created`.
    pub fn event(kind: &str) -> String {
        format!("pp.event.{kind}")
    }

    /// `pp.dlq.<stream>`, lowercased stream name.
    pub fn dead_letter(stream: &str) -> String {
        format!("pp.dlq.{}", stream.to_ascii_lowercase())
    }
}

/// Where one domain type travels: its stream and subject. A keyed topic's
/// subject is `<prefix>.<key>` (the assessment's source, the run id).
#[derive(Debug)]
pub struct Topic<M> {
    stream: StreamName,
    subject: &'static str,
    keyed: bool,
    message: PhantomData<fn() -> M>,
}

impl<M> Clone for Topic<M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for Topic<M> {}

impl<M: Wire> Topic<M> {
    const fn fixed(stream: StreamName, subject: &'static str) -> Topic<M> {
        Topic { stream, subject, keyed: false, message: PhantomData }
    }

    const fn keyed(stream: StreamName, prefix: &'static str) -> Topic<M> {
        Topic { stream, subject: prefix, keyed: true, message: PhantomData }
    }

    /// The stream that holds it.
    pub fn stream(&self) -> StreamName {
        self.stream
    }

    /// The subject to publish to. A keyed topic needs `key` (a NATS token:
    /// no dots or spaces); a fixed one ignores it.
    pub fn subject(&self, key: Option<&str>) -> String {
        match (self.keyed, key) {
            (true, Some(key)) => format!("{}.{key}", self.subject),
            (true, None) => format!("{}.unknown", self.subject),
            (false, _) => self.subject.to_owned(),
        }
    }

    /// The subjects a consumer of every message of this topic filters on.
    pub fn filter(&self) -> String {
        if self.keyed { format!("{}.>", self.subject) } else { self.subject.to_owned() }
    }
}

/// The fleet's topics.
pub mod topics {
    use super::*;

    /// Scan requests from discovery and the CLI.
    pub const SCAN_REQUESTS: Topic<ScanRequest> =
        Topic::fixed(StreamName::ScanRequests, subjects::SCAN_REQUEST);
    /// Assessments from the scanner and the CLI; keyed by source.
    pub const ASSESSMENTS: Topic<SubmittedAssessment> =
        Topic::keyed(StreamName::Assessments, "pp.assessment");
    /// Remediation jobs from the planner.
    pub const REMEDIATIONS: Topic<RemediationJob> =
        Topic::fixed(StreamName::Remediations, subjects::REMEDIATION_JOB);
    /// Sandbox run requests from the controller.
    pub const SANDBOX_RUNS: Topic<SandboxRun> = Topic::fixed(StreamName::SandboxRuns, subjects::SANDBOX_RUN);
    /// Sandbox results from the workers; keyed by run id.
    pub const SANDBOX_RESULTS: Topic<SandboxResult> =
        Topic::keyed(StreamName::SandboxResults, "pp.sandbox.result");
    /// Retrospectives from the workers.
    pub const RETROS: Topic<Retrospective> = Topic::fixed(StreamName::Retros, subjects::RETRO);
    /// Digests of the retrospectives, from the retro aggregator to the
    /// controller's notifiers.
    pub const RETRO_DIGESTS: Topic<RetroDigest> =
        Topic::fixed(StreamName::RetroDigests, subjects::RETRO_DIGEST);
    /// Fleet events; keyed by kind.
    pub const EVENTS: Topic<Event> = Topic::keyed(StreamName::Events, "pp.event");
}

/// The fleet's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamName {
    /// `SCAN_REQUESTS`: discovery, CLI → scanner.
    ScanRequests,
    /// `ASSESSMENTS`: scanner, CLI → planner.
    Assessments,
    /// `REMEDIATIONS`: planner → controller.
    Remediations,
    /// `SANDBOX_RUNS`: controller → sandbox worker.
    SandboxRuns,
    /// `SANDBOX_RESULTS`: sandbox worker → controller.
    SandboxResults,
    /// `RETROS`: sandbox worker → retro aggregator.
    Retros,
    /// `RETRO_DIGESTS`: retro aggregator → controller (its notifiers).
    RetroDigests,
    /// `EVENTS`: everyone → notifications, dashboards (limits retention).
    Events,
    /// `DEAD_LETTERS`: bus → operators (limits retention).
    DeadLetters,
}

impl StreamName {
    /// Every stream, in pipeline order.
    pub const ALL: [StreamName; 9] = [
        StreamName::ScanRequests,
        StreamName::Assessments,
        StreamName::Remediations,
        StreamName::SandboxRuns,
        StreamName::SandboxResults,
        StreamName::Retros,
        StreamName::RetroDigests,
        StreamName::Events,
        StreamName::DeadLetters,
    ];

    /// The JetStream stream name.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamName::ScanRequests => "SCAN_REQUESTS",
            StreamName::Assessments => "ASSESSMENTS",
            StreamName::Remediations => "REMEDIATIONS",
            StreamName::SandboxRuns => "SANDBOX_RUNS",
            StreamName::SandboxResults => "SANDBOX_RESULTS",
            StreamName::Retros => "RETROS",
            StreamName::RetroDigests => "RETRO_DIGESTS",
            StreamName::Events => "EVENTS",
            StreamName::DeadLetters => "DEAD_LETTERS",
        }
    }

    /// The subjects the stream captures.
    pub fn subjects(self) -> &'static [&'static str] {
        match self {
            StreamName::ScanRequests => &["pp.scan.request"],
            StreamName::Assessments => &["pp.assessment.>"],
            StreamName::Remediations => &["pp.remediation.>"],
            StreamName::SandboxRuns => &["pp.sandbox.run"],
            StreamName::SandboxResults => &["pp.sandbox.result.>"],
            StreamName::Retros => &["pp.retro"],
            StreamName::RetroDigests => &["pp.retro.digest"],
            StreamName::Events => &["pp.event.>"],
            StreamName::DeadLetters => &["pp.dlq.>"],
        }
    }

    /// Whether messages leave the stream once acknowledged.
    pub fn is_work_queue(self) -> bool {
        !matches!(self, StreamName::Events | StreamName::DeadLetters)
    }

    /// The stream's configuration under `bus`.
    pub fn config(self, bus: &BusConfig) -> Config {
        let day = Duration::from_secs(24 * 3600);
        let (retention, max_age) = match self {
            StreamName::Events => (RetentionPolicy::Limits, day * bus.events_max_age_days),
            StreamName::DeadLetters => (RetentionPolicy::Limits, day * bus.dead_letter_max_age_days),
            _ => (RetentionPolicy::WorkQueue, Duration::ZERO),
        };
        Config {
            name: self.as_str().to_owned(),
            description: Some(format!("PatchPilot {}", self.as_str())),
            subjects: self.subjects().iter().map(|s| (*s).to_owned()).collect(),
            retention,
            max_age,
            storage: StorageType::File,
            // Refuse new messages rather than silently dropping old work.
            discard: DiscardPolicy::New,
            num_replicas: bus.replicas,
            duplicate_window: Duration::from_secs(bus.duplicate_window_secs),
            allow_direct: true,
            ..Default::default()
        }
    }
}
