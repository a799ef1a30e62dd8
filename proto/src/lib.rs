//! PatchPilot's wire format: the protobuf messages of package `patchpilot.v1`
//! that travel on the JetStream bus, generated at build time from
//! `proto/patchpilot/v1/*.proto`.
//!
//! This crate owns the `.proto` files and the generated code, nothing else.
//! It must never grow behaviour: services convert these types into their own
//! domain types at the bus edge (see `patchpilot-fleet`'s `model` module) and
//! work with those. Field meanings are documented in the `.proto` files and
//! carried into the generated docs.
//!
//! | message | stream | subject |
//! |---|---|---|
//! | [`v1::ScanRequest`] | `SCAN_REQUESTS` | `pp.scan.request` |
//! | [`v1::Assessment`] | `ASSESSMENTS` | `pp.assessment.<source>` |
//! | [`v1::RemediationJob`] | `REMEDIATIONS` | `pp.remediation.job` |
//! | [`v1::SandboxRun`] | `SANDBOX_RUNS` | `pp.sandbox.run` |
//! | [`v1::SandboxResult`] | `SANDBOX_RESULTS` | `pp.sandbox.result.<run>` |
//! | [`v1::Retrospective`] | `RETROS` | `pp.retro` |
//! | [`v1::RetroDigest`] | `RETRO_DIGESTS` | `pp.retro.digest` |
//! | [`v1::Event`] | `EVENTS` | `pp.event.<kind>` |

/// Package `patchpilot.v1`.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/patchpilot.v1.rs"));
}

pub use prost::Message;
pub use prost_types::Timestamp;
