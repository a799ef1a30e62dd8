//! One retrospective as the fleet keeps it: the run's own account (from
//! `RETROS`) with the facts the aggregator adds from the run's records
//! (repository, Dockerfile, purpose, outcome, model, duration), and the
//! line format of `patchpilot retros import`.

use chrono::{DateTime, Utc};
use patchpilot_model::{RetroCategory, Retrospective, RetrospectiveReport};
use serde::{Deserialize, Serialize};

/// A stored retrospective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RetroRecord {
    /// The run it describes; the key (stored once).
    pub run_id: String,
    /// The remediation the run worked for.
    pub remediation_id: String,
    /// The repository's URL, when known.
    pub repository: String,
    /// The Dockerfile's path in it, when known.
    pub dockerfile: String,
    /// `remediate` or `repair`, when known.
    pub purpose: String,
    /// The run's outcome (`completed`, `infra_error`…), when known.
    pub outcome: String,
    /// `rules` for the deterministic path, else the model (or `model` when
    /// its name is not known).
    pub model: String,
    /// The run's wall time, when known.
    pub duration_ms: Option<i64>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// What the agent said went well.
    pub went_well: Vec<String>,
    /// What went wrong.
    pub went_wrong: Vec<String>,
    /// Tools it needed and did not have.
    pub missing_tools: Vec<String>,
    /// Context it needed and did not have.
    pub missing_context: Vec<String>,
    /// The category the agent reported (untrusted: the classifier decides),
    /// read as leniently as the guest's report is.
    #[serde(rename = "category", deserialize_with = "RetroCategory::deserialize_lenient")]
    pub reported_category: RetroCategory,
    /// Its summary.
    pub summary: String,
}

impl Default for RetroRecord {
    fn default() -> Self {
        RetroRecord {
            run_id: String::new(),
            remediation_id: String::new(),
            repository: String::new(),
            dockerfile: String::new(),
            purpose: String::new(),
            outcome: String::new(),
            model: String::new(),
            duration_ms: None,
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            went_well: Vec::new(),
            went_wrong: Vec::new(),
            missing_tools: Vec::new(),
            missing_context: Vec::new(),
            reported_category: RetroCategory::Unspecified,
            summary: String::new(),
        }
    }
}

/// Where one item of a retrospective comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    /// `went_wrong`.
    WentWrong,
    /// `missing_tools`.
    MissingTool,
    /// `missing_context`.
    MissingContext,
}

impl RetroRecord {
    /// The record of a retrospective from the bus, before enrichment.
    pub fn from_retrospective(retro: &Retrospective) -> RetroRecord {
        let RetrospectiveReport {
            went_well,
            went_wrong,
            missing_tools,
            missing_context,
            category,
            summary,
            model,
        } = retro.report.clone();
        RetroRecord {
            run_id: retro.run_id.clone(),
            remediation_id: retro.remediation_id.clone(),
            created_at: retro.created_at,
            went_well,
            went_wrong,
            missing_tools,
            missing_context,
            reported_category: category,
            summary,
            // Empty when the run did not say: `store::enrich` then decides
            // between `model` and `rules` from the run's record.
            model: model.unwrap_or_default(),
            ..RetroRecord::default()
        }
    }

    /// Reads one line of an export; the error names the line and field.
    pub fn from_json_line(line: &str, number: usize) -> Result<RetroRecord, String> {
        let deserializer = &mut serde_json::Deserializer::from_str(line);
        let record: RetroRecord = serde_path_to_error::deserialize(deserializer)
            .map_err(|e| format!("line {number}: field `{}`: {}", e.path(), e.inner()))?;
        if record.run_id.trim().is_empty() {
            return Err(format!("line {number}: field `run_id`: missing or empty"));
        }
        if record.created_at == DateTime::<Utc>::UNIX_EPOCH {
            return Err(format!("line {number}: field `created_at`: missing"));
        }
        Ok(record)
    }

    /// The problem items: what went wrong, missing tools, missing context.
    pub fn items(&self) -> impl Iterator<Item = (ItemKind, &str)> {
        let kinds = [
            (ItemKind::WentWrong, &self.went_wrong),
            (ItemKind::MissingTool, &self.missing_tools),
            (ItemKind::MissingContext, &self.missing_context),
        ];
        kinds.into_iter().flat_map(|(kind, items)| {
            items.iter().map(String::as_str).filter(|t| !t.trim().is_empty()).map(move |t| (kind, t))
        })
    }

    /// Whether anything went wrong or was missing.
    pub fn has_problems(&self) -> bool {
        self.items().next().is_some()
    }
}
