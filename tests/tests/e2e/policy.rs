//! Severity threshold, fixable-only, accepted risks with expiry, OpenVEX.

use std::time::Duration;

use patchpilot_e2e::{Stack, fixture};

use crate::support::{self, arg, assessment};

#[tokio::test]
async fn policy_decides_what_is_remediated_and_keeps_every_finding() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let today = chrono::Utc::now().date_naive();
    let vex = fixture("reports/openvex-trivy-oci-not-affected.json");
    let config = format!(
        r#"
[planner.registry]
lookup_labels = false
[planner.policy]
min_severity = "medium"
fixable_only = true
vex = ["{vex}"]
[[planner.policy.ignore]]
id = "CVE-2026-100"
expires = "{tomorrow}"
reason = "accepted: SEC-1"
[[planner.policy.ignore]]
id = "CVE-2026-200"
expires = "{yesterday}"
reason = "was accepted until yesterday"
[[planner.mappings]]
image = "ghcr.io/aquasecurity/trivy:*"
repo = "https://github.com/aquasecurity/trivy"
"#,
        vex = vex.display(),
        tomorrow = today + chrono::Days::new(1),
        yesterday = today - chrono::Days::new(1),
    );
    let planner = stack.spawn_planner(&config)?;
    let mut trivy_image = assessment(
        "ghcr.io/aquasecurity/trivy:0.50.1",
        "trivy-0.50.1",
        &[
            ("CVE-2026-001", "zlib", "1.3-r0", "1.3-r1", "low"), // below threshold
            ("CVE-2026-002", "musl", "1.2.4-r2", "", "critical"), // no fix
            ("CVE-2026-100", "curl", "8.5.0-r0", "8.6.0-r0", "high"), // accepted risk
            ("CVE-2026-200", "curl", "8.5.0-r0", "8.6.0-r0", "high"), // acceptance expired
            ("CVE-2023-42363", "busybox", "1.36.1-r15", "1.36.1-r16", "medium"), // VEX not_affected
            ("CVE-2026-300", "openssl", "3.1.4-r5", "3.1.4-r6", "critical"),
        ],
    );
    // Aqua's statement names the package's arch: it suppresses a finding
    // whose purl says the same (as a scanner's does), never one of unknown
    // arch.
    trivy_image["findings"][4]["package"]["purl"] =
        "pkg:apk/alpine/busybox@1.36.1-r15?arch=x86_64&distro=alpine-3.19.1".into();
    let doc = support::write_doc(&stack, "trivy-image.json", vec![trivy_image])?;
    let out = stack.cli(&["submit", arg(&doc)]).await?;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    stack
        .wait_count(
            "SELECT count(*) FROM remediation_jobs WHERE published_at IS NOT NULL",
            1,
            Duration::from_secs(20),
        )
        .await?;
    assert_eq!(stack.count("SELECT count(*) FROM findings").await?, 6, "every finding is stored");
    let jobs = support::jobs(&stack).await?;
    let ids: Vec<&str> = jobs[0].findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, vec!["CVE-2026-200", "CVE-2026-300"]);
    assert!(
        planner.log_text().contains("vex_documents\":1") || planner.log_text().contains("vex_documents=1"),
        "{}",
        planner.log_text()
    );
    Ok(())
}
