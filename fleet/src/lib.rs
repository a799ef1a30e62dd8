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
//! - [`store`]: the Postgres pool and embedded migrations.
//! - [`telemetry`]: `tracing` + OpenTelemetry setup and the Prometheus
//!   endpoint.
//! - [`shutdown`]: a cancellation token fired by SIGTERM/SIGINT.
//! - [`service_main`]: the `main` every service binary shares.

pub mod artifacts;
pub mod bus;
pub mod config;
pub mod service_main;
pub mod shutdown;
pub mod store;
pub mod telemetry;

pub use bus::Bus;

/// An error and its whole `source()` chain on one line, `outer: cause: root`,
/// for logs and dead-letter reasons (the error policy: causes live in
/// `#[source]`, and the whole chain is logged).
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
