//! Which findings become remediation work.
//!
//! A finding is actionable unless one of these says otherwise, checked in
//! this order (the first one names the reason):
//!
//! 1. its severity is below `min_severity`;
//! 2. `fixable_only` is set and no fixed version is known;
//! 3. an unexpired ignore rule names it (id or alias, optionally package and
//!    image pattern); an expired rule no longer applies;
//! 4. the latest applicable OpenVEX statement says `not_affected` or `fixed`.
//!
//! Every finding is stored whatever the verdict; policy only decides what
//! the remediation asks for, so a policy change takes effect on the next
//! assessment of the image.

use chrono::NaiveDate;
use patchpilot_model::{Finding, Severity};

use crate::config::{IgnoreRule, PolicySection};
use crate::mapping::{ImagePattern, ImageReference};
use crate::vex::{self, VexIndex};

/// Why a finding is not actionable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Suppression {
    /// Below the severity threshold.
    BelowSeverity(Severity),
    /// No fix published and `fixable_only` is on.
    NoFix,
    /// An accepted risk.
    Ignored {
        /// The rule's reason.
        reason: String,
        /// Its last day.
        until: NaiveDate,
    },
    /// A VEX statement.
    Vex {
        /// `not_affected` or `fixed`.
        status: vex::Status,
        /// The document.
        source: String,
    },
}

#[derive(Debug, Clone)]
struct CompiledIgnore {
    rule: IgnoreRule,
    image: Option<ImagePattern>,
}

/// The compiled policy.
#[derive(Debug, Clone)]
pub struct Policy {
    min_severity: Severity,
    fixable_only: bool,
    ignore: Vec<CompiledIgnore>,
    vex: VexIndex,
}

/// Why the policy could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An ignore rule's image pattern is invalid.
    #[error("planner.policy.ignore[{index}].image: {reason}")]
    Pattern {
        /// Index of the rule.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// A VEX document could not be loaded.
    #[error("planner.policy.vex")]
    Vex(#[source] vex::Error),
}

impl Policy {
    /// Compiles the configured policy, loading VEX documents from disk.
    pub fn load(config: &PolicySection) -> Result<Policy, Error> {
        let vex = VexIndex::load(&config.vex).map_err(Error::Vex)?;
        Policy::with_vex(config, vex)
    }

    /// Compiles the policy with an already loaded VEX index.
    pub fn with_vex(config: &PolicySection, vex: VexIndex) -> Result<Policy, Error> {
        let ignore = config
            .ignore
            .iter()
            .enumerate()
            .map(|(index, rule)| {
                let image = rule
                    .image
                    .as_deref()
                    .map(ImagePattern::parse)
                    .transpose()
                    .map_err(|reason| Error::Pattern { index, reason })?;
                Ok(CompiledIgnore { rule: rule.clone(), image })
            })
            .collect::<Result<_, Error>>()?;
        Ok(Policy { min_severity: config.min_severity, fixable_only: config.fixable_only, ignore, vex })
    }

    /// Ignore rules whose expiry is before `today`, for a start-up warning.
    pub fn expired_ignores(&self, today: NaiveDate) -> Vec<&IgnoreRule> {
        self.ignore.iter().filter(|i| i.rule.expires < today).map(|i| &i.rule).collect()
    }

    /// Number of VEX documents loaded.
    pub fn vex_documents(&self) -> usize {
        self.vex.documents()
    }

    /// `Ok` when `finding` in image `image_ref`@`digest` is actionable on
    /// `today`, else why not.
    pub fn evaluate(
        &self,
        image_ref: &str,
        digest: &str,
        finding: &Finding,
        today: NaiveDate,
    ) -> Result<(), Suppression> {
        if finding.severity < self.min_severity {
            return Err(Suppression::BelowSeverity(finding.severity));
        }
        if self.fixable_only && !finding.is_fixable() {
            return Err(Suppression::NoFix);
        }
        for ignore in &self.ignore {
            let rule = &ignore.rule;
            if rule.expires < today || !finding.is_known_as(&rule.id) {
                continue;
            }
            if rule.package.as_ref().is_some_and(|p| *p != finding.package.name) {
                continue;
            }
            if let Some(pattern) = &ignore.image
                && pattern.captures(&ImageReference::parse(image_ref)).is_none()
            {
                continue;
            }
            return Err(Suppression::Ignored { reason: rule.reason.clone(), until: rule.expires });
        }
        if let Some(verdict) = self.vex.verdict(image_ref, digest, finding)
            && verdict.status.suppresses()
        {
            return Err(Suppression::Vex {
                status: verdict.status,
                source: verdict.source.display().to_string(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use patchpilot_model::Package;

    fn finding(id: &str, severity: Severity, fixed: &[&str]) -> Finding {
        Finding {
            id: id.into(),
            aliases: vec!["GHSA-aaaa-bbbb-cccc".into()],
            package: Package {
                name: "libssl3".into(),
                version: "3.1.4-r5".into(),
                kind: "apk".into(),
                ecosystem: "Alpine:v3.19".into(),
                source_name: "openssl".into(),
                source_version: String::new(),
                path: String::new(),
                layer: String::new(),
                purl: String::new(),
            },
            fixed_versions: fixed.iter().map(|s| s.to_string()).collect(),
            severity,
            cvss: vec![],
            title: String::new(),
        }
    }

    fn day(s: &str) -> NaiveDate {
        s.parse().expect("date")
    }

    #[test]
    fn thresholds() {
        let policy = Policy::with_vex(
            &PolicySection {
                min_severity: Severity::Medium,
                fixable_only: true,
                ignore: vec![],
                vex: vec![],
            },
            VexIndex::default(),
        )
        .expect("policy");
        let today = day("2026-11-30");
        assert_eq!(
            policy.evaluate("a:1", "sha256:0", &finding("CVE-1", Severity::High, &["1"]), today),
            Ok(())
        );
        assert_eq!(
            policy.evaluate("a:1", "sha256:0", &finding("CVE-1", Severity::Low, &["1"]), today),
            Err(Suppression::BelowSeverity(Severity::Low))
        );
        assert_eq!(
            policy.evaluate("a:1", "sha256:0", &finding("CVE-1", Severity::Critical, &[]), today),
            Err(Suppression::NoFix)
        );
    }

    #[test]
    fn ignore_rules_expire_and_scope() {
        let rule = |package: Option<&str>, image: Option<&str>, expires: &str| IgnoreRule {
            id: "ghsa-AAAA-bbbb-cccc".into(),
            package: package.map(Into::into),
            image: image.map(Into::into),
            expires: day(expires),
            reason: "accepted: SEC-1".into(),
        };
        let f = finding("CVE-1", Severity::High, &["1"]);
        let today = day("2026-11-30");
        let policy = |r: IgnoreRule| {
            Policy::with_vex(
                &PolicySection {
                    min_severity: Severity::Low,
                    fixable_only: false,
                    ignore: vec![r],
                    vex: vec![],
                },
                VexIndex::default(),
            )
            .expect("policy")
        };
        // Alias match, case-insensitive, valid through its expiry day.
        assert!(matches!(
            policy(rule(None, None, "2026-11-30")).evaluate("a:1", "sha256:0", &f, today),
            Err(Suppression::Ignored { .. })
        ));
        // Expired yesterday: applies no more.
        let p = policy(rule(None, None, "2026-11-29"));
        assert_eq!(p.evaluate("a:1", "sha256:0", &f, today), Ok(()));
        assert_eq!(p.expired_ignores(today).len(), 1);
        // Scoped to another package or image: does not apply.
        assert_eq!(
            policy(rule(Some("libcrypto3"), None, "2027-01-01")).evaluate("a:1", "sha256:0", &f, today),
            Ok(())
        );
        assert_eq!(
            policy(rule(None, Some("ghcr.io/acme/*"), "2027-01-01")).evaluate(
                "ghcr.io/other/x:1",
                "sha256:0",
                &f,
                today
            ),
            Ok(())
        );
        assert!(
            policy(rule(None, Some("ghcr.io/acme/*"), "2027-01-01"))
                .evaluate("ghcr.io/acme/x:1", "sha256:0", &f, today)
                .is_err()
        );
    }
}
