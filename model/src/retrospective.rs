//! Retrospectives: every run's account of itself.
//!
//! The agent writes a [`RetrospectiveReport`] into
//! `.patchpilot/retrospective.json` (the four questions, a category and a
//! summary). It comes from the guest and is untrusted: parsing is lenient
//! (unknown fields ignored, a missing field empty), and
//! [`Retrospective::from_report`] clips it and takes the identifiers and
//! the time from the run, never from the guest. The [`Retrospective`] is
//! what travels on `RETROS` and is stored for the fleet.

use chrono::{DateTime, Utc};
use patchpilot_proto::v1;
use serde::{Deserialize, Serialize};

use crate::time::{from_timestamp, timestamp};

/// Entries kept per list of a retrospective from a guest.
pub const MAX_ITEMS: usize = 64;
/// Characters kept per entry (and of the summary).
pub const MAX_CHARS: usize = 2000;
/// Characters kept of a model's name: enough for any provider's, short
/// enough for a label (the broker's spans cut them alike).
pub const MAX_MODEL_CHARS: usize = 128;
/// The model name of a run the deterministic rules did alone.
pub const RULES: &str = "rules";

crate::named_enum! {
    /// Broad cause of a run's trouble, for fleet-wide condensing.
    #[derive(Default)]
    pub enum RetroCategory("retrospective category") {
        /// Nothing went wrong, or not classified.
        #[default]
        Unspecified = "unspecified",
        /// Network, registries, the VM, runners, permissions.
        Infrastructure = "infrastructure",
        /// The repository's build is unusual or hard to follow.
        RepositoryComplexity = "repository_complexity",
        /// A tool the agent needed was missing or broken.
        Tooling = "tooling",
        /// Policy (egress, severity, vetting) stopped the work.
        Policy = "policy",
    }
}

impl RetroCategory {
    /// Reads a category as an agent may write it (`infra`, `repository`,
    /// `RETRO_CATEGORY_TOOLING`, any case); anything else is unspecified.
    pub fn lenient(text: &str) -> RetroCategory {
        let t = text.trim().to_ascii_lowercase().replace('-', "_");
        let t = t.strip_prefix("retro_category_").unwrap_or(&t);
        match t {
            "infra" => RetroCategory::Infrastructure,
            "repository" => RetroCategory::RepositoryComplexity,
            other => other.parse().unwrap_or_default(),
        }
    }
}

impl RetroCategory {
    /// Serde's `deserialize_with` for a category as an agent may write it:
    /// [`RetroCategory::lenient`] of a string, unspecified for `null`.
    pub fn deserialize_lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<RetroCategory, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        Ok(text.map(|t| RetroCategory::lenient(&t)).unwrap_or_default())
    }
}

impl From<RetroCategory> for v1::RetroCategory {
    fn from(c: RetroCategory) -> v1::RetroCategory {
        match c {
            RetroCategory::Unspecified => v1::RetroCategory::Unspecified,
            RetroCategory::Infrastructure => v1::RetroCategory::Infrastructure,
            RetroCategory::RepositoryComplexity => v1::RetroCategory::RepositoryComplexity,
            RetroCategory::Tooling => v1::RetroCategory::Tooling,
            RetroCategory::Policy => v1::RetroCategory::Policy,
        }
    }
}

impl From<v1::RetroCategory> for RetroCategory {
    fn from(c: v1::RetroCategory) -> RetroCategory {
        match c {
            v1::RetroCategory::Unspecified => RetroCategory::Unspecified,
            v1::RetroCategory::Infrastructure => RetroCategory::Infrastructure,
            v1::RetroCategory::RepositoryComplexity => RetroCategory::RepositoryComplexity,
            v1::RetroCategory::Tooling => RetroCategory::Tooling,
            v1::RetroCategory::Policy => RetroCategory::Policy,
        }
    }
}

/// `.patchpilot/retrospective.json`, as the agent writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RetrospectiveReport {
    /// What went well, one item per entry.
    pub went_well: Vec<String>,
    /// What went wrong, with first error lines where relevant.
    pub went_wrong: Vec<String>,
    /// Tools the agent needed and did not have.
    pub missing_tools: Vec<String>,
    /// Context the agent needed and did not have.
    pub missing_context: Vec<String>,
    /// Broad cause, read with [`RetroCategory::lenient`].
    #[serde(deserialize_with = "RetroCategory::deserialize_lenient")]
    pub category: RetroCategory,
    /// A short summary.
    pub summary: String,
    /// What drove the run, as the agent reports it: the model's name
    /// (`gpt-4.1-mini`), or [`RULES`] when the rules alone did. `None`
    /// when not said (an older agent, or a report built from the outcome).
    /// A label to count runs by, not evidence: it comes from the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl RetrospectiveReport {
    /// Whether it says nothing at all.
    pub fn is_empty(&self) -> bool {
        self.summary.trim().is_empty()
            && self.went_well.is_empty()
            && self.went_wrong.is_empty()
            && self.missing_tools.is_empty()
            && self.missing_context.is_empty()
    }

    /// Parses a guest's report; `None` when it is not JSON of this shape.
    pub fn parse(bytes: &[u8]) -> Option<RetrospectiveReport> {
        serde_json::from_slice(bytes).ok()
    }
}

/// One run's retrospective, as the fleet keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retrospective {
    /// The run it describes.
    pub run_id: String,
    /// The remediation the run worked for.
    pub remediation_id: String,
    /// The four answers, the category and the summary.
    #[serde(flatten)]
    pub report: RetrospectiveReport,
    /// When it was written.
    pub created_at: DateTime<Utc>,
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn clip_all(items: &[String]) -> Vec<String> {
    items.iter().filter(|s| !s.trim().is_empty()).take(MAX_ITEMS).map(|s| clip(s)).collect()
}

/// A model's name as the fleet keeps it: without control characters (it is
/// printed in tables and logs), trimmed, at most [`MAX_MODEL_CHARS`]
/// characters; `None` when nothing is left.
pub fn model_label(name: &str) -> Option<String> {
    let clean: String = name.chars().filter(|c| !c.is_control()).collect();
    let label: String = clean.trim().chars().take(MAX_MODEL_CHARS).collect();
    let label = label.trim_end().to_owned();
    (!label.is_empty()).then_some(label)
}

impl Retrospective {
    /// The fleet's record of `report` for a run: every list cut to
    /// [`MAX_ITEMS`] non-empty entries of at most [`MAX_CHARS`] characters.
    pub fn from_report(
        run_id: impl Into<String>,
        remediation_id: impl Into<String>,
        report: &RetrospectiveReport,
        created_at: DateTime<Utc>,
    ) -> Retrospective {
        Retrospective {
            run_id: run_id.into(),
            remediation_id: remediation_id.into(),
            report: RetrospectiveReport {
                went_well: clip_all(&report.went_well),
                went_wrong: clip_all(&report.went_wrong),
                missing_tools: clip_all(&report.missing_tools),
                missing_context: clip_all(&report.missing_context),
                category: report.category,
                summary: clip(&report.summary),
                model: report.model.as_deref().and_then(model_label),
            },
            created_at,
        }
    }
}

impl From<&Retrospective> for v1::Retrospective {
    fn from(r: &Retrospective) -> v1::Retrospective {
        v1::Retrospective {
            run_id: r.run_id.clone(),
            remediation_id: r.remediation_id.clone(),
            went_well: r.report.went_well.clone(),
            went_wrong: r.report.went_wrong.clone(),
            missing_tools: r.report.missing_tools.clone(),
            missing_context: r.report.missing_context.clone(),
            category: v1::RetroCategory::from(r.report.category) as i32,
            summary: r.report.summary.clone(),
            created_at: Some(timestamp(r.created_at)),
            model: r.report.model.clone().unwrap_or_default(),
        }
    }
}

impl From<v1::Retrospective> for Retrospective {
    fn from(m: v1::Retrospective) -> Retrospective {
        let category = v1::RetroCategory::try_from(m.category).map(RetroCategory::from).unwrap_or_default();
        Retrospective {
            run_id: m.run_id,
            remediation_id: m.remediation_id,
            report: RetrospectiveReport {
                went_well: m.went_well,
                went_wrong: m.went_wrong,
                missing_tools: m.missing_tools,
                missing_context: m.missing_context,
                category,
                summary: m.summary,
                // Empty from a sender that predates the field: not known.
                model: model_label(&m.model),
            },
            created_at: m.created_at.and_then(from_timestamp).unwrap_or_default(),
        }
    }
}

impl crate::wire::Wire for Retrospective {
    type Proto = v1::Retrospective;
    const PROTO_NAME: &'static str = "patchpilot.v1.Retrospective";
    fn to_wire(&self) -> v1::Retrospective {
        v1::Retrospective::from(self)
    }
    fn from_wire(m: v1::Retrospective) -> Result<Retrospective, crate::ValidationError> {
        if m.run_id.is_empty() {
            return Err(crate::ValidationError::new("run_id", "must not be empty"));
        }
        Ok(Retrospective::from(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_report_is_read_leniently_and_clipped() {
        let long = "x".repeat(MAX_CHARS + 10);
        let json = serde_json::json!({
            "went_well": ["built", ""],
            "went_wrong": vec![long.clone(); MAX_ITEMS + 5],
            "category": "RETRO_CATEGORY_TOOLING",
            "summary": "s",
            "something_new": 1,
        });
        let report = RetrospectiveReport::parse(json.to_string().as_bytes()).expect("parses");
        assert_eq!(report.category, RetroCategory::Tooling);
        let retro = Retrospective::from_report("run-1", "rem-1", &report, Utc::now());
        assert_eq!(retro.report.went_well, vec!["built"]);
        assert_eq!(retro.report.went_wrong.len(), MAX_ITEMS);
        assert_eq!(retro.report.went_wrong[0].chars().count(), MAX_CHARS + 1);
        assert!(RetrospectiveReport::parse(b"not json").is_none());
        assert_eq!(retro.report.model, None, "not said");
        assert!(RetrospectiveReport::default().is_empty());
    }

    #[test]
    fn categories_read_as_agents_write_them() {
        assert_eq!(RetroCategory::lenient("infra"), RetroCategory::Infrastructure);
        assert_eq!(RetroCategory::lenient("Repository-Complexity"), RetroCategory::RepositoryComplexity);
        assert_eq!(RetroCategory::lenient("weather"), RetroCategory::Unspecified);
    }

    #[test]
    fn the_wire_keeps_everything() {
        let report = RetrospectiveReport {
            went_well: vec!["a".into()],
            went_wrong: vec!["b".into()],
            missing_tools: vec!["make".into()],
            missing_context: vec!["c".into()],
            category: RetroCategory::Policy,
            summary: "d".into(),
            model: Some("gpt-4.1-mini".into()),
        };
        let at = DateTime::from_timestamp(1_700_000_000, 0).expect("time");
        let retro = Retrospective::from_report("run-1", "rem-1", &report, at);
        assert_eq!(Retrospective::from(v1::Retrospective::from(&retro)), retro);
    }

    /// A model's name is a label: control characters out, cut to its
    /// length; a message from before the field reads as not known.
    #[test]
    fn model_names_are_labels_and_old_messages_have_none() {
        let report = RetrospectiveReport {
            model: Some(format!(" gpt-4.1\u{1b}[31m-mini\n{}", "x".repeat(500))),
            ..RetrospectiveReport::default()
        };
        let retro = Retrospective::from_report("run-1", "rem-1", &report, Utc::now());
        let label = retro.report.model.clone().expect("kept");
        assert!(label.starts_with("gpt-4.1[31m-mini") && !label.chars().any(char::is_control), "{label}");
        assert_eq!(label.chars().count(), MAX_MODEL_CHARS);
        assert_eq!(model_label(" \t "), None);
        let mut old = v1::Retrospective::from(&retro);
        old.model = String::new();
        assert_eq!(Retrospective::from(old).report.model, None);
    }
}
