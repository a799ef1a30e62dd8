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
