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
    // Before anything else: this process's environment holds the database
    // URL, and its memory tokens. Non-dumpable, no process of the same uid
    // can read /proc/<pid>/environ or /proc/<pid>/mem, attach to it or take
    // its open files; the kernel leaves those to root. The local forge's CI
    // runs repository code, under its own uid when the controller is root,
    // under the controller's uid otherwise: then this is what keeps that
    // code out. It also means no core dumps.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("patchpilot-controller: making the process non-dumpable: {e}");
        return ExitCode::FAILURE;
    }
    patchpilot_fleet::service::run_service(service::SERVICE, service::run)
}
