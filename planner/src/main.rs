//! `patchpilot-planner`: consumes assessments, publishes remediation jobs,
//! inside the fleet's service skeleton (`patchpilot_fleet::service`).

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    patchpilot_fleet::service::run_service(
        patchpilot_planner::service::SERVICE,
        patchpilot_planner::service::run,
    )
}
