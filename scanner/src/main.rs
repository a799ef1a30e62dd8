//! `patchpilot-scanner`: consumes scan requests, publishes assessments, and
//! optionally discovers images in registries. The start-up order is
//! `patchpilot_fleet::service_main`'s.

use std::process::ExitCode;

use patchpilot_fleet::service_main::{ServiceArgs, run_service};
use patchpilot_scanner::config::Config;
use patchpilot_scanner::service;

fn main() -> ExitCode {
    run_service(
        "patchpilot-scanner",
        ServiceArgs::parse_for(
            "patchpilot-scanner",
            "PatchPilot scanner: scan requests in, assessments out.",
        ),
        |c: &Config| &c.telemetry,
        service::run,
    )
}
