//! Why a registry operation failed, and whether trying again may help.

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The reference does not parse.
    #[error("`{reference}` is not a valid image reference")]
    Reference {
        /// The reference.
        reference: String,
        /// The parser's error.
        #[source]
        source: oci_client::ParseError,
    },
    /// The registry refused or failed the request.
    #[error("{operation} {reference} failed")]
    Registry {
        /// What was being done.
        operation: &'static str,
        /// The reference or registry.
        reference: String,
        /// oci-client's error.
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    /// The request did not finish in time.
    #[error("{operation} {reference} timed out after {secs}s")]
    Timeout {
        /// What was being done.
        operation: &'static str,
        /// The reference.
        reference: String,
        /// The timeout.
        secs: u64,
    },
    /// A local file (credentials, blob cache) could not be read or written.
    #[error("{path}")]
    File {
        /// The file.
        path: String,
        /// The I/O or parse error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A document from the registry is not what it should be.
    #[error("{reference}: {reason}")]
    Invalid {
        /// The reference.
        reference: String,
        /// What is wrong.
        reason: String,
    },
}

impl Error {
    /// Whether trying again later may help (`patchpilot_model::ErrorKind::Transient`
    /// to callers that speak it; this crate does not link the model, whose
    /// protobuf types bring gRPC code into the sandbox's agent).
    ///
    /// A reference that does not parse never will, and a document the
    /// registry served malformed is refused the same way again. Anything
    /// else may pass: a registry answer changes (a tag pushed later, a
    /// token renewed, a 5xx or a rate limit over), a timeout is load, and a
    /// local file may become readable or its disk free again.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Reference { .. } | Error::Invalid { .. } => false,
            Error::Registry { .. } | Error::Timeout { .. } | Error::File { .. } => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_cannot_change_is_permanent() {
        let source = "Not A Reference".parse::<oci_client::Reference>().expect_err("refused");
        let reference = Error::Reference { reference: "Not A Reference".into(), source };
        assert!(!reference.is_transient());
        let invalid = Error::Invalid { reference: "r".into(), reason: "manifest has no config".into() };
        assert!(!invalid.is_transient());
        let timeout = Error::Timeout { operation: "pulling manifest", reference: "r".into(), secs: 30 };
        assert!(timeout.is_transient());
        let file =
            Error::File { path: "/cache".into(), source: Box::new(std::io::Error::other("disk full")) };
        assert!(file.is_transient());
    }
}
