//! `patchpilot-planner`: consumes assessments, publishes remediation jobs.
//! The start-up order is `patchpilot_fleet::service_main`'s.

use std::process::ExitCode;

use patchpilot_fleet::service_main::{ServiceArgs, run_service};
use patchpilot_planner::{Config, service};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    run_service(
        "patchpilot-planner",
        ServiceArgs::parse_for(
            "patchpilot-planner",
            "PatchPilot planner: assessments in, remediation jobs out.",
        ),
        |c: &Config| &c.telemetry,
        service::run,
    )
}
