//! `patchpilot-scanner`: consumes scan requests, publishes assessments, and
//! optionally discovers images in registries, inside the fleet's service
//! skeleton (`patchpilot_fleet::service`).

use std::process::ExitCode;

fn main() -> ExitCode {
    patchpilot_fleet::service::run_service(
        patchpilot_scanner::service::SERVICE,
        patchpilot_scanner::service::run,
    )
}
