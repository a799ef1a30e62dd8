//! The planner: turns assessments into remediation work.
//!
//! It owns assessment intake (the report formats `patchpilot submit` reads
//! and the `ASSESSMENTS` consumer), image → repository mapping, the policy
//! that decides which findings are actionable (severity, fixable-only,
//! accepted risks, OpenVEX), grouping into at most one open remediation per
//! (repository, Dockerfile, branch), and publishing `RemediationJob`s
//! through a transactional outbox. It follows each remediation's state from
//! the controller's lifecycle events, so the fleet has one state per
//! remediation.
//!
//! It must never touch a repository, a forge or a sandbox: it decides *what*
//! to fix, and the controller alone acts. It holds registry credentials for
//! reading image labels only. Report text is data, never instructions.
//!
//! # Layout
//!
//! - [`intake`]: Trivy, Grype and native report parsers.
//! - [`mapping`]: image patterns, rules, label mapping, URL normalisation.
//! - [`registry`]: reading image config labels with oci-client.
//! - [`policy`] and [`vex`]: which findings are actionable.
//! - [`store`]: the batch transaction and the outbox.
//! - [`states`]: remediation states kept in step with the controller's
//!   lifecycle events.
//! - [`service`]: the bus handler, the outbox publisher, and [`service::run`].
//! - [`config`]: `[planner]` configuration.

pub mod config;
pub mod intake;
pub mod mapping;
pub mod policy;
pub mod registry;
pub mod service;
pub mod states;
pub mod store;
pub mod vex;

pub use config::Config;

/// A file under `tests/fixtures/reports`, for unit tests.
#[cfg(test)]
pub(crate) fn report_fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/reports").join(name)
}

/// The bytes of a file under `tests/fixtures/reports`, for unit tests.
#[cfg(test)]
pub(crate) fn read_report_fixture(name: &str) -> Vec<u8> {
    let path = report_fixture(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
