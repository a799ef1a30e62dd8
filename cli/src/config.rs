//! What the command line reads: the shared connection sections. It uses the
//! same file and `PATCHPILOT_…` variables as the services, and ignores the
//! sections it does not need (a full service config file works).

use patchpilot_fleet::config::{self, FleetSections, Validate};
use serde::{Deserialize, Serialize};

/// The CLI's view of the configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CliConfig {
    /// The sections every service shares: NATS, Postgres (status,
    /// remediations), telemetry, and the stream settings used when the CLI
    /// creates streams.
    #[serde(flatten)]
    pub fleet: FleetSections,
    /// Scanner settings (`scan`, `db`).
    pub scanner: patchpilot_scanner::config::ScannerSection,
    /// Sandbox settings (`sandbox image build`, `sandbox run`).
    pub sandbox: patchpilot_sandbox::config::SandboxConfig,
    /// Controller settings (`forge`: where the local forge's repositories are).
    pub controller: patchpilot_controller::config::ControllerConfig,
    /// Other services' sections, accepted and ignored.
    #[serde(flatten, skip_serializing)]
    #[allow(dead_code)]
    pub other: std::collections::BTreeMap<String, toml::Value>,
}

impl Validate for CliConfig {
    fn validate(&self, _: &str) -> Result<(), config::Error> {
        self.fleet.validate("")?;
        self.scanner.validate("scanner")?;
        self.sandbox.validate("sandbox")?;
        self.controller.validate("controller")
    }
}
