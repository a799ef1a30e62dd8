//! `patchpilot-sandbox-worker`: sandbox runs in, one microVM each, results
//! and retrospectives out. The start-up order is
//! `patchpilot_fleet::service_main`'s; everything else is
//! [`patchpilot_sandbox::worker::run`].

use std::process::ExitCode;

use patchpilot_fleet::service_main::{ServiceArgs, run_service};
use patchpilot_sandbox::config::Config;
use patchpilot_sandbox::worker;

fn main() -> ExitCode {
    run_service(
        "patchpilot-sandbox-worker",
        ServiceArgs::parse_for(
            "patchpilot-sandbox-worker",
            "PatchPilot sandbox worker: runs agent tasks in microVMs with per-run egress policy.",
        ),
        |c: &Config| &c.telemetry,
        worker::run,
    )
}
