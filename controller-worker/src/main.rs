//! `patchpilot-controller`: remediation jobs and sandbox results in, pull
//! requests out, inside the fleet's service skeleton (`patchpilot_fleet::service`);
//! everything else is [`patchpilot_controller::service::run`].
//!
//! `patchpilot-controller git-credential …` is the in-memory credential
//! helper git calls back into while the controller pushes; it is not for
//! people.

use std::process::ExitCode;

use patchpilot_controller::service;
use patchpilot_forge::credential;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == credential::SUBCOMMAND) {
        return credential::credential_helper_main(args);
    }
    patchpilot_fleet::service::run_service(service::SERVICE, service::run)
}
