//! Shutdown as a value: a [`CancellationToken`] that the first SIGTERM or
//! SIGINT cancels. Loops take the token and drain when it fires; tests pass
//! their own token instead of sending signals. A second signal exits at once
//! with status 130, for operators who do not want to wait for a drain.

use tokio_util::sync::CancellationToken;

/// Returns a token cancelled by the first SIGTERM or SIGINT. A second signal
/// ends the process immediately.
///
/// Must be called inside a Tokio runtime.
pub fn on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested; draining (signal again to exit at once)");
        trigger.cancel();
        wait_for_signal().await;
        tracing::warn!("second signal; exiting without drain");
        std::process::exit(130);
    });
    token
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot install SIGTERM handler; relying on SIGINT");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    // Whichever comes first: service managers send SIGTERM, terminals SIGINT.
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
