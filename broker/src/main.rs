//! `patchpilot-broker`: the capability broker, inside the fleet's service
//! skeleton (`patchpilot_fleet::service`).

use std::process::ExitCode;

fn main() -> ExitCode {
    patchpilot_fleet::service::run_service(patchpilot_broker::SERVICE, patchpilot_broker::run)
}
