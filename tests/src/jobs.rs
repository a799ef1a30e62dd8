//! RemediationJobs as the planner publishes them, for tests and benchmarks
//! that drive the controller without a planner.

use patchpilot_model::{
    Finding, JobReason, Package, RemediationId, RemediationJob, RepositoryTarget, Severity,
};

/// An Alpine package finding `CVE-2024-0001` of `package` at `version`,
/// fixed in `fixed`, from source package `source` (may be empty).
pub fn apk_finding(package: &str, version: &str, fixed: &str, source: &str) -> Finding {
    Finding {
        id: "CVE-2024-0001".into(),
        aliases: vec![],
        package: Package {
            name: package.into(),
            version: version.into(),
            kind: "apk".into(),
            ecosystem: "Alpine:v3.19".into(),
            source_name: source.into(),
            source_version: String::new(),
            path: String::new(),
            layer: String::new(),
            purl: String::new(),
        },
        fixed_versions: vec![fixed.into()],
        severity: Severity::High,
        cvss: vec![],
        title: format!("{package}: overflow"),
    }
}

/// Revision 1 of a new remediation of `Dockerfile` on `main` of
/// `repo_url`, for `findings`.
pub fn new_job(repo_url: &str, findings: Vec<Finding>) -> RemediationJob {
    let target = RepositoryTarget {
        repo_url: repo_url.into(),
        dockerfile: "Dockerfile".into(),
        context: ".".into(),
        branch: "main".into(),
        revision: String::new(),
    };
    let remediation_id = RemediationId(uuid::Uuid::new_v4());
    let digest = format!("{:064x}", findings.len());
    RemediationJob {
        job_id: RemediationJob::job_id_for(remediation_id, 1, &target, &digest),
        remediation_id,
        revision: 1,
        target,
        findings,
        images: vec![],
        finding_set_digest: digest,
        reason: JobReason::New,
        created_at: chrono::Utc::now(),
    }
}
