//! Scan requests: an image reference that discovery or the CLI wants
//! scanned (`SCAN_REQUESTS`).

use chrono::{DateTime, Utc};
use patchpilot_proto::v1;

use crate::time::{from_timestamp, timestamp};
use crate::{ImageDigest, Platform, ValidationError};

/// A request to scan one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanRequest {
    /// Unique id; the message id.
    pub request_id: String,
    /// Image reference, e.g. `registry.local:5000/acme/api:1.4.2`.
    pub image_ref: String,
    /// The digest discovery saw; `None` to resolve at scan time.
    pub image_digest: Option<ImageDigest>,
    /// Platform to pick from a multi-platform index; `None` for the
    /// scanner's own.
    pub platform: Option<Platform>,
    /// Why: `new-digest`, `db-update`, `manual`.
    pub reason: String,
    /// When it was asked for.
    pub requested_at: Option<DateTime<Utc>>,
}

impl From<&ScanRequest> for v1::ScanRequest {
    fn from(r: &ScanRequest) -> v1::ScanRequest {
        v1::ScanRequest {
            request_id: r.request_id.clone(),
            image_ref: r.image_ref.clone(),
            image_digest: r.image_digest.as_ref().map(ToString::to_string).unwrap_or_default(),
            platform: r.platform.as_ref().map(|p| v1::Platform {
                os: p.os.clone(),
                architecture: p.architecture.clone(),
                variant: p.variant.clone(),
            }),
            reason: r.reason.clone(),
            requested_at: r.requested_at.map(timestamp),
        }
    }
}

impl TryFrom<v1::ScanRequest> for ScanRequest {
    type Error = ValidationError;
    fn try_from(m: v1::ScanRequest) -> Result<ScanRequest, ValidationError> {
        if m.image_ref.trim().is_empty() {
            return Err(ValidationError::new("image_ref", "must not be empty"));
        }
        let image_digest = match m.image_digest.as_str() {
            "" => None,
            d => Some(
                d.parse::<ImageDigest>().map_err(|reason| ValidationError::new("image_digest", reason))?,
            ),
        };
        Ok(ScanRequest {
            request_id: m.request_id,
            image_ref: m.image_ref,
            image_digest,
            platform: m.platform.filter(|p| !p.architecture.is_empty()).map(|p| Platform {
                os: p.os,
                architecture: p.architecture,
                variant: p.variant,
            }),
            reason: m.reason,
            requested_at: m.requested_at.and_then(from_timestamp),
        })
    }
}

crate::wire::wire_by_conversions!(ScanRequest, v1::ScanRequest, "patchpilot.v1.ScanRequest");
