//! The one validation error of the contracts: a value that failed, named
//! by its path.

/// A value that failed validation, named by its path inside the message or
/// document, e.g. `findings[3].package.version`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
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
