//! Progress of the long steps of a scan: pulling layers, reading them,
//! importing advisory records. The library only reports; whoever calls it
//! decides how to show it. The CLI draws bars on a terminal; services and
//! the guest's agent pass [`Silent`].

/// Hears about a long step as it goes.
pub trait Progress: Sync {
    /// A step starts: `what` names it, `total` counts its units when known.
    fn begin(&self, _what: &str, _total: Option<u64>) {}
    /// `units` more are done.
    fn advance(&self, _units: u64) {}
    /// The step ended, done or not.
    fn end(&self) {}
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {}

/// Ends a step when dropped, so an early return or an error still ends it.
pub(crate) struct Step<'a>(&'a dyn Progress);

impl<'a> Step<'a> {
    /// Begins a step on `progress`.
    pub(crate) fn begin(progress: &'a dyn Progress, what: &str, total: Option<u64>) -> Step<'a> {
        progress.begin(what, total);
        Step(progress)
    }

    /// One more unit done.
    pub(crate) fn tick(&self) {
        self.0.advance(1);
    }
}

impl Drop for Step<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}
