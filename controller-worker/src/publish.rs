//! What a pull request says: its branch name, title, commit message and
//! body (findings table, verification evidence, what changed and why, and
//! the CI definition edits vetting let through).
//!
//! The run's `result.json` comes from the sandbox and is untrusted: only
//! the fields read here are used, every text is clipped and escaped so it
//! cannot ping people, smuggle links or break the Markdown, and numbers
//! come from the verification table, not from the agent's prose. Lines
//! quoted from the repository go into code spans they cannot leave
//! ([`code_span`]).

use std::collections::BTreeMap;

use patchpilot_model::report::{StepRecord, VerificationRow};
use patchpilot_model::{Finding, RunReport, Severity, VerificationStatus};
use patchpilot_vet::{CiVersionEdit, code_span};
use sha2::{Digest, Sha256};

/// The marker that makes the PR body recognisable as ours (and carries the
/// remediation it belongs to).
pub const BODY_MARKER: &str = "<!-- patchpilot:remediation=";

/// What the fix's run said about itself: its report (`result.json`,
/// [`RunReport`]), or why there is none. Untrusted: every text is clipped
/// and escaped where it is shown.
#[derive(Debug, Clone)]
pub enum RunAccount {
    /// The report, as parsed.
    Report(Box<RunReport>),
    /// The run stored no report.
    Missing,
    /// The report does not parse; the field and the reason.
    Unreadable(String),
}

impl RunAccount {
    /// Reads the stored bytes of a report.
    pub fn parse(bytes: &[u8]) -> RunAccount {
        match RunReport::parse(bytes) {
            Ok(report) => RunAccount::Report(Box::new(report)),
            Err(e) => RunAccount::Unreadable(e.to_string()),
        }
    }

    fn report(&self) -> Option<&RunReport> {
        match self {
            RunAccount::Report(r) => Some(r),
            _ => None,
        }
    }

    fn steps(&self) -> &[StepRecord] {
        self.report().map(|r| r.steps.as_slice()).unwrap_or_default()
    }
}

/// Escapes text from the sandbox for a Markdown table cell or line: no
/// HTML, no mentions, no links, no table breaks, no line breaks, clipped.
pub fn untrusted_text(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    for c in text.chars().take(max_chars) {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            '|' => out.push_str("\\|"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '[' => out.push_str("\\["),
            ']' => out.push_str("\\]"),
            '`' => out.push('\''),
            // A zero-width joiner after @ and # stops mentions and issue links.
            '@' => out.push_str("@\u{200d}"),
            '#' => out.push_str("#\u{200d}"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    if text.chars().count() > max_chars {
        out.push('…');
    }
    out
}

fn slug(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').chars().take(48).collect()
}

/// The finding set's identity: sorted vulnerability ids.
pub fn finding_ids(findings: &[Finding]) -> Vec<String> {
    let mut ids: Vec<String> = findings.iter().map(|f| f.id.clone()).collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The head branch: `patchpilot/<dockerfile>-<8 hex of the finding set>`.
/// Chosen when the PR is first opened and kept for its whole life (later
/// findings update that PR rather than opening another).
pub fn branch_name(dockerfile: &str, findings: &[Finding]) -> String {
    let mut h = Sha256::new();
    for id in finding_ids(findings) {
        h.update(id.as_bytes());
        h.update([0]);
    }
    let digest = hex::encode(h.finalize());
    let name = match slug(dockerfile).as_str() {
        "" => "dockerfile".to_owned(),
        s => s.to_owned(),
    };
    format!("patchpilot/{name}-{}", &digest[..8])
}

/// PR title.
pub fn title(dockerfile: &str, findings: &[Finding]) -> String {
    let ids = finding_ids(findings);
    match ids.as_slice() {
        [] => format!("Update {dockerfile}"),
        [one] => format!("Fix {one} in {dockerfile}"),
        [first, rest @ ..] => format!("Fix {first} and {} more in {dockerfile}", rest.len()),
    }
}

/// The commit message: a subject, the changes, and every CVE.
pub fn commit_message(dockerfile: &str, findings: &[Finding], account: &RunAccount) -> String {
    let mut msg = title(dockerfile, findings);
    msg.push_str("\n\n");
    for step in account.steps().iter().take(20) {
        msg.push_str(&format!("- {}\n", untrusted_text(&step.summary, 200)));
    }
    if !account.steps().is_empty() {
        msg.push('\n');
    }
    msg.push_str(&format!("Fixes: {}\n", finding_ids(findings).join(", ")));
    msg
}

fn severity_word(s: Severity) -> String {
    format!("{s:?}").to_ascii_lowercase()
}

/// Most CI definition edits listed in the body; the rest are counted.
const CI_EDITS_LISTED: usize = 20;

/// The PR body. `ci_edits` are the CI definition edits vetting passed in
/// the patch being published, listed for the reviewer.
pub fn body(
    remediation_id: &str,
    revision: u32,
    dockerfile: &str,
    findings: &[Finding],
    account: &RunAccount,
    ci_edits: &[CiVersionEdit],
) -> String {
    let report = account.report();
    let after: BTreeMap<(String, String), &VerificationRow> = report
        .and_then(|r| r.verification.as_ref())
        .into_iter()
        .flat_map(|v| v.rows.iter())
        .map(|r| ((r.finding.id.clone(), r.finding.package.clone()), r))
        .collect();
    let mut b = String::new();
    b.push_str(&format!(
        "PatchPilot fixes {} vulnerabilities in `{}`.\n\n",
        finding_ids(findings).len(),
        untrusted_text(dockerfile, 200)
    ));
    b.push_str("### Findings\n\n| CVE | package | from → to | severity |\n|---|---|---|---|\n");
    let mut sorted: Vec<&Finding> = findings.iter().collect();
    sorted.sort_by(|a, b| b.severity.cmp(&a.severity).then_with(|| a.id.cmp(&b.id)));
    for f in sorted {
        let to = after
            .get(&(f.id.clone(), f.package.name.clone()))
            .and_then(|r| r.version_after.clone())
            .or_else(|| f.fixed_versions.first().cloned())
            .unwrap_or_else(|| "—".into());
        b.push_str(&format!(
            "| {} | {} | {} → {} | {} |\n",
            untrusted_text(&f.id, 40),
            untrusted_text(&f.package.name, 80),
            untrusted_text(&f.package.version, 60),
            untrusted_text(&to, 60),
            severity_word(f.severity)
        ));
    }
    b.push_str("\n### Verification\n\n");
    match (account, report.and_then(|r| r.verification.as_ref())) {
        (_, Some(v)) => {
            let fixed = v.count(VerificationStatus::Fixed);
            let present = v.count(VerificationStatus::Present);
            let introduced = v.count(VerificationStatus::Introduced);
            b.push_str(&format!(
                "The image was rebuilt (`{}`, {:.1} s) and rescanned: **{fixed} fixed**, {present} still present, {introduced} introduced (before: {} assessed).\n",
                untrusted_text(&v.image, 120),
                v.build_time.as_secs_f64(),
                fixed + present
            ));
        }
        (RunAccount::Missing, None) => b.push_str("The run left no report (`result.json`).\n"),
        (RunAccount::Unreadable(why), None) => b.push_str(&format!(
            "The run's report (`result.json`) could not be read: {}.\n",
            untrusted_text(why, 300)
        )),
        (RunAccount::Report(_), None) => b.push_str("The run did not report a build and rescan.\n"),
    }
    b.push_str("\n### What changed and why\n\n");
    if let Some(r) = report
        && r.steps.is_empty()
    {
        b.push_str(&format!("{}\n", untrusted_text(&r.summary, 500)));
    }
    for step in account.steps().iter().take(20) {
        b.push_str(&format!(
            "- **{}**: {}\n",
            untrusted_text(&step.summary, 200),
            untrusted_text(&step.reason, 600)
        ));
    }
    if let Some(r) = report
        && !r.refusals.is_empty()
    {
        b.push_str(&format!(
            "\n{} finding(s) could not be fixed; see the run's result for why.\n",
            r.refusals.len()
        ));
    }
    if !ci_edits.is_empty() {
        // CI decides whether the change is good, so an edit to it is shown
        // on its own, not left to be found in the diff.
        b.push_str("\n### CI definition edits (version only)\n\n");
        b.push_str("This push changes CI definitions. Vetting let each line through because it only moves pinned versions forward; please check them.\n\n");
        for e in ci_edits.iter().take(CI_EDITS_LISTED) {
            b.push_str(&format!(
                "- {}: {} → {}\n",
                code_span(&format!("{}:{}", e.path, e.line), 200),
                code_span(&e.old, 200),
                code_span(&e.new, 200)
            ));
        }
        if ci_edits.len() > CI_EDITS_LISTED {
            b.push_str(&format!("- and {} more\n", ci_edits.len() - CI_EDITS_LISTED));
        }
    }
    b.push_str(&format!("\n{BODY_MARKER}{remediation_id} revision={revision} -->\n"));
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use patchpilot_model::Package;

    fn finding(id: &str, package: &str, version: &str, fixed: &str, severity: Severity) -> Finding {
        Finding::new(id, Package::new(package, version, "Alpine:v3.19"), severity).fixed_in([fixed])
    }

    #[test]
    fn branch_names_come_from_the_dockerfile_and_the_finding_set() {
        let a = [finding("CVE-2024-2511", "libssl3", "3.1.4-r5", "3.1.4-r6", Severity::High)];
        let b = [finding("CVE-2024-0727", "libssl3", "3.1.4-r5", "3.1.4-r6", Severity::Medium)];
        let name = branch_name("services/api/Dockerfile", &a);
        assert!(name.starts_with("patchpilot/services-api-dockerfile-"), "{name}");
        assert_eq!(name, branch_name("services/api/Dockerfile", &a));
        assert_ne!(name, branch_name("services/api/Dockerfile", &b));
        assert_ne!(name, branch_name("Dockerfile", &a));
    }

    #[test]
    fn the_body_has_the_table_the_evidence_and_no_live_markup_from_the_run() {
        let findings = [
            finding("CVE-2024-2511", "libssl3", "3.1.4-r5", "3.1.4-r6", Severity::High),
            finding("CVE-2024-0727", "libcrypto3", "3.1.4-r5", "3.1.4-r6", Severity::Medium),
        ];
        let result = serde_json::json!({
            "summary": "bumped",
            "steps": [{"summary": "bump golang 1.22.1-alpine3.19 → 1.22.2-alpine3.19", "reason": "fixes openssl @security-team see [here](http://evil) <img src=x>"}],
            "verification": {"image": "pp-verify:1", "build_time": 12345, "rows": [
                {"finding": {"id": "CVE-2024-2511", "package": "libssl3"}, "status": "fixed", "version_after": "3.1.4-r6"},
                {"finding": {"id": "CVE-2024-0727", "package": "libcrypto3"}, "status": "fixed", "version_after": "3.1.4-r6"}
            ]}
        });
        let account = RunAccount::parse(result.to_string().as_bytes());
        let body = body("rem-1", 2, "Dockerfile", &findings, &account, &[]);
        assert!(body.contains("| CVE-2024-2511 | libssl3 | 3.1.4-r5 → 3.1.4-r6 | high |"), "{body}");
        assert!(body.contains("**2 fixed**, 0 still present, 0 introduced"), "{body}");
        assert!(body.contains("bump golang 1.22.1-alpine3.19 → 1.22.2-alpine3.19"));
        assert!(
            !body.contains("@security-team") && !body.contains("[here](http") && !body.contains("<img"),
            "{body}"
        );
        assert!(body.contains("<!-- patchpilot:remediation=rem-1 revision=2 -->"));
        assert!(!body.contains("### CI definition edits"), "no edits, no section: {body}");
        // High before medium.
        assert!(body.find("CVE-2024-2511").unwrap_or(usize::MAX) < body.find("CVE-2024-0727").unwrap_or(0));
    }

    #[test]
    fn an_unreadable_report_is_said_so_with_the_field() {
        let findings = [finding("CVE-2024-2511", "libssl3", "1", "2", Severity::High)];
        let account = RunAccount::parse(br#"{"verification":{"rows":[{"finding":{},"status":"gone"}]}}"#);
        let body = body("rem-1", 1, "Dockerfile", &findings, &account, &[]);
        assert!(body.contains("could not be read: verification.rows\\[0\\].status"), "{body}");
        let body = super::body("rem-1", 1, "Dockerfile", &findings, &RunAccount::Missing, &[]);
        assert!(body.contains("left no report"), "{body}");
    }

    #[test]
    fn ci_definition_edits_get_their_own_section_and_cannot_leave_their_code_spans() {
        let findings = [finding("CVE-2024-2511", "libssl3", "1", "2", Severity::High)];
        let edit = |line: u32, old: &str, new: &str| CiVersionEdit {
            path: ".github/workflows/lint.yml".into(),
            line,
            old: old.into(),
            new: new.into(),
            versions: Vec::new(),
        };
        let edits = [
            edit(14, "version: v1.55.2", "version: v1.59.1"),
            // A crafted line: its backticks must not close the span.
            edit(20, "run: echo `x` @team v1.0", "run: echo `x` @team v1.1"),
        ];
        let body = body("rem-1", 1, "Dockerfile", &findings, &RunAccount::Missing, &edits);
        let section = body.split("### CI definition edits (version only)\n").nth(1).expect("the section");
        assert!(
            section.contains("- `.github/workflows/lint.yml:14`: `version: v1.55.2` → `version: v1.59.1`\n"),
            "{body}"
        );
        assert!(
            section.contains("- `.github/workflows/lint.yml:20`: ``run: echo `x` @team v1.0`` → ``run: echo `x` @team v1.1``\n"),
            "{body}"
        );
        assert!(
            body.find("### CI definition edits").unwrap_or(0)
                > body.find("### What changed").unwrap_or(usize::MAX)
        );
        assert!(body.ends_with("<!-- patchpilot:remediation=rem-1 revision=1 -->\n"), "{body}");
    }

    #[test]
    fn commit_messages_list_every_cve() {
        let findings = [
            finding("CVE-2024-2511", "libssl3", "1", "2", Severity::High),
            finding("CVE-2024-0727", "libcrypto3", "1", "2", Severity::Medium),
        ];
        let msg = commit_message("Dockerfile", &findings, &RunAccount::Missing);
        assert!(msg.starts_with("Fix CVE-2024-0727 and 1 more in Dockerfile\n"));
        assert!(msg.ends_with("Fixes: CVE-2024-0727, CVE-2024-2511\n"));
    }
}
