//! `patchpilot-local-ci`: runs ONE check of the local forge's CI and
//! reports how it ended. The local CI runner starts it for each check run;
//! it is not for people. It is the only process that runs a repository's
//! code, so it holds nothing of the controller's: the controller starts it
//! with an empty environment but `PATH`, and it becomes the check's user
//! before it touches the checkout.
//!
//! Protocol (see `patchpilot_forge_local::check`): one line of JSON, a
//! `CheckRequest`, on stdin; stdin then stays open, and its end stops the
//! check. One `CheckReport` as JSON on stdout and exit 0; or a reason on
//! stderr and exit 1 when the check could not be run at all.

use std::io::{BufRead as _, Read as _, Write as _};
use std::process::ExitCode;

use anyhow::Context as _;
use patchpilot_forge_local::check::CheckRequest;
use patchpilot_forge_local::runner;
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("patchpilot-local-ci: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    runner::close_inherited_files().context("closing inherited files")?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).context("reading the check request")?;
    let request: CheckRequest = serde_json::from_str(&line).context("parsing the check request")?;
    // First, while the process is still one thread: nothing of the
    // repository runs or is read with the controller's identity.
    runner::drop_privileges(request.user).context("becoming the check's user")?;

    let stop = CancellationToken::new();
    // A thread rather than tokio's stdin, which would hold the runtime's
    // shutdown until stdin ends; this one is simply left behind at exit.
    std::thread::spawn({
        let stop = stop.clone();
        move || {
            // The end of stdin, or anything more on it, means stop.
            let _ = std::io::stdin().read(&mut [0u8; 1]);
            stop.cancel();
        }
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let report = runtime.block_on(runner::run(&request, stop));
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &report).context("writing the report")?;
    out.write_all(b"\n").and_then(|()| out.flush()).context("writing the report")?;
    Ok(())
}
