//! PatchPilot's contracts: the domain types that services, the CLI and the
//! agent in the sandbox exchange, and their conversions to and from the
//! protobuf messages of `patchpilot-proto`.
//!
//! Services work with these types; protobuf appears only where a message is
//! encoded or decoded at the bus edge (`From`/`TryFrom` impls here, a
//! missing or malformed field becoming a [`ValidationError`] that names
//! it). The crate is pure data: no I/O beyond reading a task file, no bus,
//! no database (the `sqlx` feature only adds column types for the enums).
//! That is what lets the agent inside the VM link it without linking the
//! host's service stack.
//!
//! # Layout
//!
//! - [`agent`]: how the reasoning agent reaches a model, its limits, and
//!   what its report says about the session.
//! - [`broker`]: connections, the per-run grant, the broker's fixed errors
//!   and the broker ↔ gateway exchange.
//! - [`assessment`]: findings, packages, images and assessments.
//! - [`scan`]: scan requests.
//! - [`remediation`]: the planner's remediation jobs.
//! - [`sandbox`]: sandbox run requests, their egress and limits, results.
//! - [`retrospective`]: every run's account of itself.
//! - [`digest`]: the fleet's retrospectives of a period, for the notifiers.
//! - [`task`]: what the agent is asked to do (`.patchpilot/task.json`).
//! - [`report`]: what the agent says it did (`.patchpilot/result.json`).
//! - [`credential`]: long-lived credentials recognised by their shape.
//! - [`context`]: the file names of the `.patchpilot/` folder.
//! - [`event`]: fleet events.
//! - [`wire`]: the [`Wire`] trait every bus message implements.
//! - [`names`]: enums with one stable name per variant ([`named_enum!`]).
//! - [`package_names`]: package names in each ecosystem's canonical form
//!   (PyPI's normalisation, the purl types' case rules).
//! - [`purl`]: package URLs in PatchPilot's canonical form, and how two
//!   compare (epochs, `distro`, vendors).

pub mod agent;
pub mod assessment;
pub mod broker;
pub mod context;
pub mod credential;
pub mod digest;
mod error;
pub mod event;
pub mod names;
pub mod package_names;
pub mod purl;
pub mod remediation;
pub mod report;
pub mod retrospective;
pub mod sandbox;
pub mod scan;
pub mod task;
pub mod time;
pub mod wire;

pub use agent::{AgentDriver, AgentLimits, AgentRecord, GateRecord, ProviderWire, SessionEnd, TaskModel};
pub use assessment::{
    ASSESSMENT_SCHEMA, Assessment, AssessmentDocument, Cvss, Finding, FindingKey, ImageDigest,
    OperatingSystem, Package, Platform, Severity, SubmittedAssessment,
};
pub use digest::{
    DigestCluster, DigestHotSpot, DigestSummary, DigestTool, DigestTrend, MAX_DIGEST_ROWS, MAX_SUMMARY_CHARS,
    RetroDigest,
};
pub use error::{ErrorKind, IoError, ValidationError, error_chain, io};
pub use event::Event;
pub use remediation::{
    ImageSummary, JobReason, RemediationId, RemediationJob, RemediationState, RepositoryTarget,
};
pub use report::{
    AgentOutcome, BaseRecord, CommandRun, EditRecord, FindingRef, PlanStats, Refusal, RefusalCategory,
    RunReport, StepRecord, Verification, VerificationRow, VerificationStatus,
};
pub use retrospective::{RetroCategory, Retrospective, RetrospectiveReport};
pub use sandbox::{EgressPolicy, RunLimits, RunOutcome, RunPurpose, SandboxResult, SandboxRun};
pub use scan::ScanRequest;
pub use task::{Binary, FailingCheck, Release, ReleaseIndex, Task, TaskPolicy, TaskRegistry};
pub use wire::Wire;

#[doc(hidden)]
pub mod __private {
    pub use serde;
    #[cfg(feature = "sqlx")]
    pub use sqlx;
}
