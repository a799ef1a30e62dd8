//! Remediation jobs: what the planner asks the controller to fix.

use std::fmt;

use chrono::{DateTime, Utc};
use patchpilot_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use uuid::Uuid;

use crate::ValidationError;
use crate::assessment::{Finding, FindingKey};
use crate::time::{from_timestamp, timestamp};

/// Id of a remediation, stable across its revisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RemediationId(pub Uuid);

impl RemediationId {
    /// A fresh random id.
    pub fn new() -> Self {
        RemediationId(Uuid::new_v4())
    }
}

impl Default for RemediationId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for RemediationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One Dockerfile on one branch of one repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RepositoryTarget {
    /// Normalised repository URL.
    pub repo_url: String,
    /// Dockerfile path relative to the repository root.
    pub dockerfile: String,
    /// Build context relative to the repository root.
    pub context: String,
    /// Target branch.
    pub branch: String,
    /// Commit the image was built from, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revision: String,
}

impl RepositoryTarget {
    /// The grouping key: at most one open remediation per value.
    pub fn group_key(&self) -> (String, String, String) {
        (self.repo_url.clone(), self.dockerfile.clone(), self.branch.clone())
    }
}

/// An image whose findings a remediation includes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ImageSummary {
    /// Image reference.
    pub image_ref: String,
    /// Manifest digest.
    pub image_digest: String,
    /// How it was mapped.
    pub mapped_by: String,
}

crate::named_enum! {
    /// Where a remediation is in its lifecycle: the controller's state
    /// machine decides it, announces each change as
    /// `pp.event.remediation.<state>`, and the planner keeps its
    /// `remediations.state` in step from those events, so every view of a
    /// remediation reads one state.
    pub enum RemediationState("remediation state") {
        /// A job arrived; nothing done yet.
        Queued = "queued",
        /// Cloning and packing the workspace for a run.
        Preparing = "preparing",
        /// A sandbox run is working.
        Running = "running",
        /// The run's patch is being vetted.
        Vetting = "vetting",
        /// Committing, pushing, opening or updating the PR.
        Publishing = "publishing",
        /// Watching CI on the PR's head commit.
        CiPending = "ci_pending",
        /// CI is green.
        Succeeded = "succeeded",
        /// Handed to a person.
        NeedsHuman = "needs_human",
        /// Gave up.
        Failed = "failed",
        /// The findings are gone or a newer revision replaced this work.
        Superseded = "superseded",
    }
}

impl RemediationState {
    /// The states in which a remediation is closed: new findings for its
    /// target open a new remediation rather than a new revision of it.
    pub const CLOSED: [RemediationState; 3] =
        [RemediationState::Succeeded, RemediationState::Failed, RemediationState::Superseded];

    /// Whether the remediation is closed.
    pub fn is_closed(self) -> bool {
        Self::CLOSED.contains(&self)
    }

    /// The event kind announcing a change to this state:
    /// `remediation.<state>`.
    pub fn event_kind(self) -> String {
        format!("remediation.{}", self.as_str())
    }
}

/// Why a job was published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobReason {
    /// First job of a new remediation.
    New,
    /// The finding set of an open remediation changed.
    FindingsChanged,
    /// Every finding of an open remediation is gone.
    Resolved,
}

impl JobReason {
    /// Numeric code stored in the outbox.
    pub fn code(self) -> i16 {
        match self {
            JobReason::New => 1,
            JobReason::FindingsChanged => 2,
            JobReason::Resolved => 3,
        }
    }

    /// Inverse of [`JobReason::code`].
    pub fn from_code(code: i16) -> JobReason {
        match code {
            2 => JobReason::FindingsChanged,
            3 => JobReason::Resolved,
            _ => JobReason::New,
        }
    }
}

/// A request to remediate one target at one revision of its finding set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemediationJob {
    /// Derived from the target and the finding set; the Nats-Msg-Id.
    pub job_id: String,
    /// The remediation.
    pub remediation_id: RemediationId,
    /// Revision of the finding set, from 1.
    pub revision: u32,
    /// What to change.
    pub target: RepositoryTarget,
    /// Actionable findings, sorted by set key.
    pub findings: Vec<Finding>,
    /// Contributing images.
    pub images: Vec<ImageSummary>,
    /// Hex SHA-256 over the sorted finding keys.
    pub finding_set_digest: String,
    /// Why it was published.
    pub reason: JobReason,
    /// When the planner created it.
    pub created_at: DateTime<Utc>,
}

impl RemediationJob {
    /// Digest of a finding set: order-independent, by set key.
    pub fn finding_set_digest<'a>(keys: impl IntoIterator<Item = &'a FindingKey>) -> String {
        let mut keys: Vec<&FindingKey> = keys.into_iter().collect();
        keys.sort();
        keys.dedup();
        let mut hasher = Sha256::new();
        for k in keys {
            for part in [&k.vulnerability_id, &k.package_name, &k.installed_version] {
                hasher.update(part.as_bytes());
                hasher.update([0u8]);
            }
            hasher.update([1u8]);
        }
        hex::encode(hasher.finalize())
    }

    /// Job id from the target's group key and the finding set digest, plus
    /// the remediation and its revision: a finding set can recur (A → B → A)
    /// and a closed target can be reopened with the same set, and each of
    /// those is a new job that must not be taken for a duplicate.
    pub fn job_id_for(
        remediation_id: RemediationId,
        revision: u32,
        target: &RepositoryTarget,
        finding_set_digest: &str,
    ) -> String {
        let mut hasher = Sha256::new();
        hasher.update(remediation_id.0.as_bytes());
        hasher.update(revision.to_be_bytes());
        for part in [&target.repo_url, &target.dockerfile, &target.branch] {
            hasher.update(part.as_bytes());
            hasher.update([0u8]);
        }
        hasher.update(finding_set_digest.as_bytes());
        format!("job-{}", &hex::encode(hasher.finalize())[..40])
    }

    /// Encodes for the bus.
    pub fn to_proto(&self) -> pb::RemediationJob {
        pb::RemediationJob {
            job_id: self.job_id.clone(),
            remediation_id: self.remediation_id.to_string(),
            revision: self.revision,
            target: Some(pb::RepositoryTarget {
                repo_url: self.target.repo_url.clone(),
                dockerfile: self.target.dockerfile.clone(),
                context: self.target.context.clone(),
                branch: self.target.branch.clone(),
                revision: self.target.revision.clone(),
            }),
            findings: self.findings.iter().map(pb::Finding::from).collect(),
            images: self
                .images
                .iter()
                .map(|i| pb::ImageSummary {
                    image_ref: i.image_ref.clone(),
                    image_digest: i.image_digest.clone(),
                    mapped_by: i.mapped_by.clone(),
                })
                .collect(),
            finding_set_digest: self.finding_set_digest.clone(),
            reason: match self.reason {
                JobReason::New => pb::JobReason::New,
                JobReason::FindingsChanged => pb::JobReason::FindingsChanged,
                JobReason::Resolved => pb::JobReason::Resolved,
            } as i32,
            created_at: Some(timestamp(self.created_at)),
        }
    }

    /// Decodes and validates a bus message.
    pub fn from_proto(m: pb::RemediationJob) -> Result<RemediationJob, ValidationError> {
        let remediation_id = Uuid::parse_str(&m.remediation_id)
            .map(RemediationId)
            .map_err(|e| ValidationError::new("remediation_id", e.to_string()))?;
        let target = m.target.ok_or_else(|| ValidationError::new("target", "missing"))?;
        if target.repo_url.is_empty() {
            return Err(ValidationError::new("target.repo_url", "must not be empty"));
        }
        if target.dockerfile.is_empty() {
            return Err(ValidationError::new("target.dockerfile", "must not be empty"));
        }
        if m.revision == 0 {
            return Err(ValidationError::new("revision", "must be at least 1"));
        }
        let reason = match pb::JobReason::try_from(m.reason).unwrap_or(pb::JobReason::Unspecified) {
            pb::JobReason::FindingsChanged => JobReason::FindingsChanged,
            pb::JobReason::Resolved => JobReason::Resolved,
            pb::JobReason::New | pb::JobReason::Unspecified => JobReason::New,
        };
        Ok(RemediationJob {
            job_id: m.job_id,
            remediation_id,
            revision: m.revision,
            target: RepositoryTarget {
                repo_url: target.repo_url,
                dockerfile: target.dockerfile,
                context: target.context,
                branch: target.branch,
                revision: target.revision,
            },
            findings: m.findings.into_iter().map(Finding::from).collect(),
            images: m
                .images
                .into_iter()
                .map(|i| ImageSummary {
                    image_ref: i.image_ref,
                    image_digest: i.image_digest,
                    mapped_by: i.mapped_by,
                })
                .collect(),
            finding_set_digest: m.finding_set_digest,
            reason,
            created_at: m.created_at.and_then(from_timestamp).unwrap_or_else(Utc::now),
        })
    }
}

impl crate::wire::Wire for RemediationJob {
    type Proto = pb::RemediationJob;
    const PROTO_NAME: &'static str = "patchpilot.v1.RemediationJob";
    fn to_wire(&self) -> pb::RemediationJob {
        self.to_proto()
    }
    fn from_wire(m: pb::RemediationJob) -> Result<RemediationJob, ValidationError> {
        RemediationJob::from_proto(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(v: &str, p: &str) -> FindingKey {
        FindingKey { vulnerability_id: v.into(), package_name: p.into(), installed_version: "1".into() }
    }

    #[test]
    fn finding_set_digest_ignores_order_and_duplicates() {
        let a = [key("CVE-1", "a"), key("CVE-2", "b")];
        let b = [key("CVE-2", "b"), key("CVE-1", "a"), key("CVE-1", "a")];
        assert_eq!(
            RemediationJob::finding_set_digest(a.iter()),
            RemediationJob::finding_set_digest(b.iter())
        );
        let c = [key("CVE-1", "a")];
        assert_ne!(
            RemediationJob::finding_set_digest(a.iter()),
            RemediationJob::finding_set_digest(c.iter())
        );
    }

    #[test]
    fn job_id_depends_on_target_and_set() {
        let t = RepositoryTarget {
            repo_url: "https://github.com/acme/api".into(),
            dockerfile: "Dockerfile".into(),
            context: ".".into(),
            branch: "main".into(),
            revision: String::new(),
        };
        let mut other = t.clone();
        other.branch = "release".into();
        let r = RemediationId::new();
        let id = |rid, rev, t: &RepositoryTarget, d: &str| RemediationJob::job_id_for(rid, rev, t, d);
        assert_ne!(id(r, 1, &t, "d1"), id(r, 1, &other, "d1"));
        assert_ne!(id(r, 1, &t, "d1"), id(r, 1, &t, "d2"));
        assert_ne!(id(r, 1, &t, "d1"), id(r, 3, &t, "d1"), "a recurring set is a new job");
        assert_ne!(id(r, 1, &t, "d1"), id(RemediationId::new(), 1, &t, "d1"));
        assert_eq!(id(r, 1, &t, "d1"), id(r, 1, &t, "d1"));
    }
}
