//! What the command line reads: the shared connection sections. It uses the
//! same file and `PATCHPILOT_…` variables as the services, and ignores the
//! sections it does not need (a full service config file works).

use patchpilot_fleet::config::{self, BusConfig, DatabaseConfig, NatsConfig, TelemetryConfig, Validate};
use serde::{Deserialize, Serialize};

/// The CLI's view of the configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CliConfig {
    /// NATS connection.
    pub nats: NatsConfig,
    /// Postgres connection (status, remediations).
    pub database: DatabaseConfig,
    /// Logs and tracing.
    pub telemetry: TelemetryConfig,
    /// Stream settings, used when the CLI creates streams.
    pub bus: BusConfig,
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
        self.nats.validate("nats")?;
        self.database.validate("database")?;
        self.telemetry.validate("telemetry")?;
        self.bus.validate("bus")?;
        self.scanner.validate("scanner")?;
        self.sandbox.validate("sandbox")?;
        self.controller.validate("controller")
    }
}
