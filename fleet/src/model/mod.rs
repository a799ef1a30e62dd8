//! Domain types shared by services, and their conversions to and from the
//! wire messages. Services work with these; `patchpilot_proto` types appear
//! only where a message is encoded or decoded.

mod assessment;
mod remediation;

pub use assessment::{
    ASSESSMENT_SCHEMA, Assessment, AssessmentDocument, Cvss, Finding, FindingKey, ImageDigest,
    OperatingSystem, Package, Platform, Severity, ValidationError,
};
pub use remediation::{ImageSummary, JobReason, RemediationId, RemediationJob, RepositoryTarget};
