//! `patchpilot-controller`: remediation jobs and sandbox results in, pull
//! requests out. The start-up order is `patchpilot_fleet::service_main`'s;
//! everything else is [`patchpilot_controller::service::run`].
//!
//! `patchpilot-controller git-credential …` is the in-memory credential
//! helper git calls back into while the controller pushes; it is not for
//! people.

use std::process::ExitCode;

use patchpilot_controller::config::Config;
use patchpilot_controller::forge::credential;
use patchpilot_controller::service;
use patchpilot_fleet::service_main::{ServiceArgs, run_service};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == credential::SUBCOMMAND) {
        return credential::credential_helper_main(args);
    }
    run_service(
        "patchpilot-controller",
        ServiceArgs::parse_for(
            "patchpilot-controller",
            "PatchPilot controller: the only writer to forges; turns remediation jobs into vetted, green pull requests.",
        ),
        |c: &Config| &c.telemetry,
        service::run,
    )
}
