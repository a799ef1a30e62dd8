//! `patchpilot-guest`: PatchPilot's agent inside the sandbox microVM.
//! `init` runs as PID 1 (started by the initramfs); `serve` is the control
//! service it starts. Not meant to run on a host.

use std::process::ExitCode;

use patchpilot_sandbox_guest::{init, serve};

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("init") => init::run(),
        Some("serve") => {
            let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("patchpilot-guest: cannot start the runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(serve::run()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("patchpilot-guest: {}", serve::describe(&e));
                    ExitCode::FAILURE
                }
            }
        }
        _ => {
            eprintln!("usage: patchpilot-guest init|serve (runs inside the PatchPilot sandbox VM only)");
            ExitCode::from(2)
        }
    }
}
