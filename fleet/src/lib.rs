//! What every PatchPilot service shares: configuration, the JetStream bus,
//! the Postgres store, telemetry, shutdown handling and the service skeleton.
//!
//! This crate owns the *mechanics* of being a fleet service: how messages
//! are published, consumed, retried and dead-lettered, how trace context
//! crosses the bus, how the schema is migrated. It must never hold business
//! logic of one service (what an assessment means for a remediation belongs
//! to the planner), and it never holds credentials beyond what the service
//! configuring it passes in.
//!
//! # Layout
//!
//! - [`config`]: layered TOML + environment configuration with key-naming
//!   errors, and the sections every service shares.
//! - [`bus`]: streams, publishing with `Nats-Msg-Id` dedup and W3C trace
//!   headers, the durable consumer loop, dead letters and their replay.
//! - [`mtls`]: mutual TLS between the trusted zones (terminator, broker,
//!   gateway) and the local PKI `patchpilot broker init` writes.
//! - [`store`]: the Postgres pool and embedded migrations.
//! - [`telemetry`]: `tracing` + OpenTelemetry setup and the Prometheus
//!   endpoint.
//! - [`shutdown`]: a cancellation token fired by SIGTERM/SIGINT.
//! - [`service`]: the skeleton every service binary runs in, and the
//!   [`service::FleetContext`] it hands the service.

pub mod artifacts;
pub mod bus;
pub mod config;
pub mod mtls;
pub mod service;
pub mod shutdown;
pub mod store;
pub mod telemetry;

pub use bus::Bus;

/// Printing an error with its causes; shared with the agent, which links
/// no fleet mechanics.
pub use patchpilot_model::error_chain;
