//! Progress bars for `scan` and `db import`, drawn on stderr only when it
//! is a terminal and `--quiet` is off: a pipe, a CI log or a file gets the
//! same plain lines as before.

use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use patchpilot_scanner::progress::Progress;

/// Bars on stderr, one step at a time; silent when off.
#[derive(Debug)]
pub struct Bars {
    on: bool,
    current: Mutex<Option<ProgressBar>>,
}

impl Bars {
    /// Bars that draw when stderr is a terminal and `quiet` is off, and say
    /// nothing otherwise.
    pub fn for_stderr(quiet: bool) -> Bars {
        Bars { on: !quiet && std::io::stderr().is_terminal(), current: Mutex::new(None) }
    }
}

impl Progress for Bars {
    fn begin(&self, what: &str, total: Option<u64>) {
        if !self.on {
            return;
        }
        let bar = match total {
            Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()).with_style(
                ProgressStyle::with_template("{msg:>22} [{bar:30}] {pos}/{len} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            ),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(
                ProgressStyle::with_template("{msg:>22} {spinner} {pos} {per_sec} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            ),
        };
        bar.set_message(what.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        if let Some(old) = self.current.lock().unwrap_or_else(|e| e.into_inner()).replace(bar) {
            old.finish_and_clear();
        }
    }

    fn advance(&self, units: u64) {
        if let Some(bar) = self.current.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            bar.inc(units);
        }
    }

    fn end(&self) {
        if let Some(bar) = self.current.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}
