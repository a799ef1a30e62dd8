//! The error vocabulary every crate shares: the validation error of the
//! contracts (a value that failed, named by its path), and how an error is
//! printed with its causes.

/// A value that failed validation, named by its path inside the message or
/// document, e.g. `findings[3].package.version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// Path of the offending field.
    pub path: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ValidationError {
    /// Builds an error for `path`.
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { path: path.into(), reason: reason.into() }
    }

    /// Prefixes the path with `parent`, e.g. `assessments[2]`.
    pub fn within(self, parent: &str) -> Self {
        let path = if self.path.is_empty() {
            parent.to_owned()
        } else if self.path.starts_with('[') {
            format!("{parent}{}", self.path)
        } else {
            format!("{parent}.{}", self.path)
        };
        Self { path, reason: self.reason }
    }
}

impl std::fmt::Display for ValidationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
}

impl std::error::Error for ValidationError {}

/// Whether trying again later may help: what every error a service acts on
/// says of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Outside the work itself (a service down, a timeout): retry later.
    Transient,
    /// Retrying cannot help (bad input, refused, missing): stop and say why.
    Permanent,
}

/// An error and its whole `source()` chain on one line, `outer: cause: root`,
/// for logs, results and dead-letter reasons (the error policy: a cause
/// lives in `#[source]`, not in its parent's message, and the whole chain is
/// printed once, here).
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// An I/O error and what was being done. Each crate's error has one
/// `#[error(transparent)] Io(#[from] IoError)` variant, and call sites
/// write `.map_err(io("reading {path}"))?`: one helper, the cause kept
/// in `#[source]`.
#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct IoError {
    /// What was being done: "writing /run/x/config.json".
    pub context: String,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    /// `source` met while doing `context`.
    pub fn new(context: impl Into<String>, source: std::io::Error) -> IoError {
        IoError { context: context.into(), source }
    }

    /// The underlying error's kind.
    pub fn kind(&self) -> std::io::ErrorKind {
        self.source.kind()
    }
}

/// Wraps an I/O error with what was being done, for `map_err`.
pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> IoError {
    let context = context.into();
    move |source| IoError { context, source }
}
