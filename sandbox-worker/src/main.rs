//! `patchpilot-sandbox-worker`: runs sandbox runs in microVMs, inside the
//! fleet's service skeleton (`patchpilot_fleet::service`).

use std::process::ExitCode;

fn main() -> ExitCode {
    patchpilot_fleet::service::run_service(
        patchpilot_sandbox::worker::SERVICE,
        patchpilot_sandbox::worker::run,
    )
}
