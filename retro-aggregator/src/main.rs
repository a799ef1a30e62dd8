//! `patchpilot-retro`: stores every run's retrospective, inside the fleet's
//! service skeleton (`patchpilot_fleet::service`).

use std::process::ExitCode;

fn main() -> ExitCode {
    patchpilot_fleet::service::run_service(patchpilot_retro::service::SERVICE, patchpilot_retro::service::run)
}
