//! Ignore files: `.patchpilotignore`, in the line format of Trivy's
//! `.trivyignore`, which is read as it is.
//!
//! ```text
//! # Not reachable: the service never parses untrusted XML.
//! CVE-2024-56171
//! GHSA-8q59-q68h-6hv4 exp:2027-01-31   # accepted until the next base image
//! ```
//!
//! One vulnerability id per line (it matches a finding's id or any of its
//! aliases, case-insensitively), optionally `exp:YYYY-MM-DD` (the rule
//! stops applying after that day, and a scan says so), and a reason: the
//! comment after the id, or else the comment lines just above it. Blank
//! lines end a comment block. Anything else on a line is an error naming
//! the file, the line and the token: an ignore file that is not read as
//! its author meant would hide findings silently.

use std::fmt;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use patchpilot_model::Finding;

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoreRule {
    /// The vulnerability id, as written.
    pub id: String,
    /// The last day it applies, when it has one.
    pub expires: Option<NaiveDate>,
    /// Why, when the file says.
    pub reason: String,
    /// Its line, from 1.
    pub line: usize,
}

impl IgnoreRule {
    /// Whether it applies on `today`.
    pub fn applies_on(&self, today: NaiveDate) -> bool {
        self.expires.is_none_or(|last| today <= last)
    }
}

/// A parsed ignore file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IgnoreFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its rules, in file order.
    pub rules: Vec<IgnoreRule>,
}

/// Why an ignore file was refused.
#[derive(Debug, thiserror::Error)]
pub enum IgnoreError {
    /// It could not be read.
    #[error("{path}: cannot read the ignore file")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a rule.
    #[error("{path} line {line}: {reason}")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
}

impl IgnoreFile {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<IgnoreFile, IgnoreError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| IgnoreError::Read { path: path.to_owned(), source })?;
        IgnoreFile::parse(path, &text)
    }

    /// Parses `text`, read from `path` (for messages).
    pub fn parse(path: &Path, text: &str) -> Result<IgnoreFile, IgnoreError> {
        let mut rules = Vec::new();
        let mut comment: Vec<&str> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() {
                comment.clear();
                continue;
            }
            if let Some(text) = trimmed.strip_prefix('#') {
                comment.push(text.trim());
                continue;
            }
            let (rule_text, inline) = match trimmed.split_once('#') {
                Some((rule, reason)) => (rule.trim(), Some(reason.trim())),
                None => (trimmed, None),
            };
            let mut tokens = rule_text.split_whitespace();
            let id = tokens.next().unwrap_or_default();
            let error = |reason: String| IgnoreError::Line { path: path.to_owned(), line, reason };
            if !id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c)) {
                return Err(error(format!("{id:?} is not a vulnerability id")));
            }
            let mut expires = None;
            for token in tokens {
                match token.strip_prefix("exp:") {
                    Some(date) => {
                        let day = NaiveDate::parse_from_str(date, "%Y-%m-%d")
                            .map_err(|e| error(format!("`exp:{date}` is not a date (YYYY-MM-DD): {e}")))?;
                        expires = Some(day);
                    }
                    None => {
                        return Err(error(format!(
                            "unknown {token:?} after {id}: only `exp:YYYY-MM-DD` and a `#` comment may follow"
                        )));
                    }
                }
            }
            let reason = match inline {
                Some(reason) if !reason.is_empty() => reason.to_owned(),
                _ => comment.join(" "),
            };
            comment.clear();
            rules.push(IgnoreRule { id: id.to_owned(), expires, reason, line });
        }
        Ok(IgnoreFile { path: path.to_owned(), rules })
    }

    /// The rule that ignores `finding` on `today`, if any.
    pub fn rule_for(&self, finding: &Finding, today: NaiveDate) -> Option<&IgnoreRule> {
        self.rules.iter().filter(|rule| rule.applies_on(today)).find(|rule| {
            std::iter::once(&finding.id).chain(&finding.aliases).any(|id| id.eq_ignore_ascii_case(&rule.id))
        })
    }

    /// Rules past their expiry on `today`.
    pub fn expired(&self, today: NaiveDate) -> impl Iterator<Item = &IgnoreRule> {
        self.rules.iter().filter(move |rule| !rule.applies_on(today))
    }
}

impl fmt::Display for IgnoreRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (line {}", self.id, self.line)?;
        if let Some(day) = self.expires {
            write!(f, ", until {day}")?;
        }
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use patchpilot_model::{Package, Severity};

    use super::*;

    fn day(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("date")
    }

    #[test]
    fn trivy_lines_with_expiry_and_reasons() {
        let text = "# Not reachable: we never parse XML.\nCVE-2024-56171\n\nghsa-8q59-q68h-6hv4 exp:2027-01-31 # until the base bump\n# orphan comment\n\nCVE-2020-1 exp:2021-01-01\n";
        let file = IgnoreFile::parse(Path::new(".trivyignore"), text).expect("parse");
        assert_eq!(file.rules.len(), 3);
        assert_eq!(file.rules[0].reason, "Not reachable: we never parse XML.");
        assert_eq!(
            (file.rules[1].expires, file.rules[1].reason.as_str()),
            (Some(day("2027-01-31")), "until the base bump")
        );
        assert_eq!(file.rules[2].reason, "", "a comment block ends at a blank line");

        let mut finding = Finding::new("CVE-2099-1", Package::new("pyyaml", "5.3", "pypi"), Severity::High);
        finding.aliases = vec!["GHSA-8q59-q68h-6hv4".into()];
        let today = day("2026-12-06");
        assert_eq!(file.rule_for(&finding, today).map(|r| r.line), Some(4), "by alias, any case");
        assert_eq!(file.rule_for(&finding, day("2027-02-01")), None, "past its expiry");
        let expired: Vec<usize> = file.expired(today).map(|r| r.line).collect();
        assert_eq!(expired, [7]);
    }

    #[test]
    fn what_is_not_a_rule_is_an_error_naming_the_line() {
        let error = IgnoreFile::parse(Path::new("x"), "CVE-1\nCVE-2 exp:2027-13-01\n").expect_err("bad date");
        assert!(error.to_string().starts_with("x line 2: `exp:2027-13-01` is not a date"), "{error}");
        let error = IgnoreFile::parse(Path::new("x"), "CVE-1 openssl\n").expect_err("unknown token");
        assert!(error.to_string().contains("unknown \"openssl\" after CVE-1"), "{error}");
        let error = IgnoreFile::parse(Path::new("x"), "CVE-1,CVE-2\n").expect_err("not an id");
        assert!(error.to_string().contains("is not a vulnerability id"), "{error}");
    }
}
