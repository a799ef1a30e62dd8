//! The gateway's error: what went wrong issuing a token or storing a
//! secret, with a [`ErrorKind`] to branch on and the [`GatewayRefusal`] the
//! broker is told.
//!
//! No variant carries a secret, a token or an upstream body: errors end up
//! in logs. An upstream's OAuth error code is kept only when it is one of
//! RFC 6749's fixed codes.

use std::time::Duration;

use patchpilot_model::ErrorKind;
use patchpilot_model::broker::{ConnectionName, GatewayRefusal};

use crate::seal::OpenError;

/// Why the gateway could not issue a token or store a secret.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No secret is stored for the connection.
    #[error("no secret is stored for the connection {connection}")]
    UnknownConnection {
        /// The connection.
        connection: ConnectionName,
    },
    /// Postgres failed.
    #[error("the gateway's database failed")]
    Database(#[source] sqlx::Error),
    /// A stored blob did not open under the configured key (wrong key, or
    /// a row moved from another connection).
    #[error("the sealed data stored for {connection} does not open under the configured key")]
    Unseal {
        /// The connection.
        connection: ConnectionName,
        /// Why.
        #[source]
        source: OpenError,
    },
    /// A blob opened but does not hold what it should.
    #[error("the sealed data stored for {connection} is not a valid {what}")]
    Corrupt {
        /// The connection.
        connection: ConnectionName,
        /// What it should have held.
        what: &'static str,
    },
    /// A secret given to [`crate::secrets::put`] is unusable. The reason
    /// never quotes the secret.
    #[error("the secret for {connection} is invalid: {reason}")]
    InvalidSecret {
        /// The connection.
        connection: ConnectionName,
        /// What is wrong.
        reason: &'static str,
    },
    /// The upstream could not be reached.
    #[error("cannot reach {url} for {connection}")]
    Transport {
        /// The connection.
        connection: ConnectionName,
        /// The token endpoint.
        url: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// The upstream refused. Its body is never kept, only an RFC 6749
    /// error code.
    #[error("{url} answered {status} for {connection}{}", code.map(|c| format!(" ({c})")).unwrap_or_default())]
    Upstream {
        /// The connection.
        connection: ConnectionName,
        /// The token endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The OAuth error code, when it is one of RFC 6749's.
        code: Option<&'static str>,
    },
    /// The upstream answered with something that is not a token response.
    #[error("{url} answered {connection}'s request with a body that is not {what}")]
    UpstreamBody {
        /// The connection.
        connection: ConnectionName,
        /// The token endpoint.
        url: String,
        /// What was expected.
        what: &'static str,
    },
    /// Another gateway held the refresh lease and no fresh token appeared
    /// in time.
    #[error("another gateway is refreshing {connection} and no fresh token appeared within {waited:?}")]
    LeaseWait {
        /// The connection.
        connection: ConnectionName,
        /// How long this request waited.
        waited: Duration,
    },
    /// This gateway's lease was taken over before it wrote: the fenced
    /// write changed nothing.
    #[error(
        "the refresh lease for {connection} (fence {fence}) was taken over; the refreshed tokens were not written"
    )]
    StaleLease {
        /// The connection.
        connection: ConnectionName,
        /// The fence this gateway held.
        fence: i64,
    },
    /// The GitHub App JWT could not be signed.
    #[error("cannot sign the GitHub App JWT for {connection}")]
    Sign {
        /// The connection.
        connection: ConnectionName,
    },
}

/// RFC 6749 §5.2's error codes: the only part of an upstream error body the
/// gateway keeps.
const OAUTH_CODES: [&str; 6] = [
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
];

/// `code` as one of RFC 6749's fixed error codes, or none.
pub(crate) fn oauth_code(code: &str) -> Option<&'static str> {
    OAUTH_CODES.iter().copied().find(|c| *c == code)
}

impl Error {
    /// Whether asking again later can help.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Database(_)
            | Error::Transport { .. }
            | Error::LeaseWait { .. }
            | Error::StaleLease { .. } => ErrorKind::Transient,
            Error::Upstream { status, .. } if *status >= 500 || *status == 429 || *status == 408 => {
                ErrorKind::Transient
            }
            Error::UnknownConnection { .. }
            | Error::Unseal { .. }
            | Error::Corrupt { .. }
            | Error::InvalidSecret { .. }
            | Error::Upstream { .. }
            | Error::UpstreamBody { .. }
            | Error::Sign { .. } => ErrorKind::Permanent,
        }
    }

    /// What the broker is told.
    pub fn refusal(&self) -> GatewayRefusal {
        match self {
            Error::UnknownConnection { .. } => GatewayRefusal::UnknownConnection,
            Error::InvalidSecret { .. } => GatewayRefusal::BadRequest,
            _ => GatewayRefusal::RefreshFailed,
        }
    }
}
