//! The weekly digest of the fleet's retrospectives: built by the retro
//! aggregator, carried on `RETRO_DIGESTS`, passed on by the controller
//! through its notifiers. Only the controller holds the notifiers' secrets,
//! so the aggregator never needs them.
//!
//! Its text comes from guests (the clusters' wordings): receivers escape
//! it as they would a run's summary.

use chrono::{DateTime, Utc};
use patchpilot_proto::v1;
use serde::{Deserialize, Serialize};

use crate::ValidationError;
use crate::time::{from_timestamp, timestamp};

/// Most clusters, hot spots and tools a digest carries: a message, not an
/// export.
pub const MAX_DIGEST_ROWS: usize = 50;

crate::named_enum! {
    /// Where a cluster is heading, against its earlier rate.
    pub enum DigestTrend("digest trend") {
        /// Nothing of it before the period.
        New = "new",
        /// At least twice the earlier rate.
        Rising = "rising",
        /// Neither rising nor falling.
        Steady = "steady",
        /// At most half the earlier rate.
        Falling = "falling",
    }
}

/// One period's retrospectives, condensed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetroDigest {
    /// `retro-digest-<period number>`: the same for a resend of one period.
    pub digest_id: String,
    /// The period's start.
    pub since: DateTime<Utc>,
    /// Its end.
    pub until: DateTime<Utc>,
    /// Runs in the period.
    pub runs: u64,
    /// Of those, with problems.
    pub troubled_runs: u64,
    /// The top clusters, by count, then trend.
    pub clusters: Vec<DigestCluster>,
    /// The repositories where trouble concentrated.
    pub hot_spots: Vec<DigestHotSpot>,
    /// Tools to consider for the guest image.
    pub tools: Vec<DigestTool>,
    /// A model's summary of the rest, when the aggregator's summary is on
    /// and the model answered.
    pub summary: Option<DigestSummary>,
}

/// Most characters of a digest's summary.
pub const MAX_SUMMARY_CHARS: usize = 4_000;

/// A model's summary of a digest: model output over guest text, shown as
/// such, never acted on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestSummary {
    /// The model that wrote it.
    pub model: String,
    /// Plain text, at most [`MAX_SUMMARY_CHARS`] characters.
    pub text: String,
}

/// A cluster in a digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DigestCluster {
    /// Its most frequent wording.
    pub representative: String,
    /// The fleet category's name (`infrastructure.network`): the retro
    /// aggregator owns the categories; a digest only shows it.
    pub category: String,
    /// Items in the period.
    pub count: u64,
    /// Runs in the period.
    pub runs: u64,
    /// Where it is heading.
    pub trend: DigestTrend,
    /// The known problem's signature that merged its wordings.
    pub signature: Option<String>,
}

/// A repository in a digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestHotSpot {
    /// Its URL.
    pub repository: String,
    /// Runs in the period.
    pub runs: u64,
    /// Of those, with problems.
    pub troubled_runs: u64,
    /// Its most common problem.
    pub top_problem: String,
}

/// A tool runs kept missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestTool {
    /// The tool.
    pub tool: String,
    /// Runs that missed it.
    pub runs: u64,
}

impl From<&RetroDigest> for v1::RetroDigest {
    fn from(d: &RetroDigest) -> v1::RetroDigest {
        v1::RetroDigest {
            digest_id: d.digest_id.clone(),
            since: Some(timestamp(d.since)),
            until: Some(timestamp(d.until)),
            runs: d.runs,
            troubled_runs: d.troubled_runs,
            clusters: d
                .clusters
                .iter()
                .map(|c| v1::RetroDigestCluster {
                    representative: c.representative.clone(),
                    category: c.category.clone(),
                    count: c.count,
                    runs: c.runs,
                    trend: c.trend.as_str().to_owned(),
                    signature: c.signature.clone().unwrap_or_default(),
                })
                .collect(),
            hot_spots: d
                .hot_spots
                .iter()
                .map(|h| v1::RetroDigestHotSpot {
                    repository: h.repository.clone(),
                    runs: h.runs,
                    troubled_runs: h.troubled_runs,
                    top_problem: h.top_problem.clone(),
                })
                .collect(),
            tools: d
                .tools
                .iter()
                .map(|t| v1::RetroDigestTool { tool: t.tool.clone(), runs: t.runs })
                .collect(),
            summary: d
                .summary
                .as_ref()
                .map(|s| v1::RetroDigestSummary { model: s.model.clone(), text: s.text.clone() }),
        }
    }
}

impl TryFrom<v1::RetroDigest> for RetroDigest {
    type Error = ValidationError;

    fn try_from(m: v1::RetroDigest) -> Result<RetroDigest, ValidationError> {
        if m.digest_id.trim().is_empty() {
            return Err(ValidationError::new("digest_id", "must not be empty"));
        }
        let time = |field: &str, t: Option<patchpilot_proto::Timestamp>| {
            t.and_then(from_timestamp).ok_or_else(|| ValidationError::new(field, "missing or out of range"))
        };
        let (since, until) = (time("since", m.since)?, time("until", m.until)?);
        if until < since {
            return Err(ValidationError::new("until", "is before `since`"));
        }
        for (field, n) in
            [("clusters", m.clusters.len()), ("hot_spots", m.hot_spots.len()), ("tools", m.tools.len())]
        {
            if n > MAX_DIGEST_ROWS {
                return Err(ValidationError::new(field, format!("{n} rows; at most {MAX_DIGEST_ROWS}")));
            }
        }
        let clusters = m
            .clusters
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let trend = c
                    .trend
                    .parse::<DigestTrend>()
                    .map_err(|e| ValidationError::new(format!("clusters[{i}].trend"), e.to_string()))?;
                Ok(DigestCluster {
                    representative: c.representative,
                    category: c.category,
                    count: c.count,
                    runs: c.runs,
                    trend,
                    signature: (!c.signature.is_empty()).then_some(c.signature),
                })
            })
            .collect::<Result<Vec<_>, ValidationError>>()?;
        if let Some(s) = &m.summary {
            let n = s.text.chars().count();
            if n > MAX_SUMMARY_CHARS {
                return Err(ValidationError::new(
                    "summary.text",
                    format!("{n} characters; at most {MAX_SUMMARY_CHARS}"),
                ));
            }
            if s.model.trim().is_empty() {
                return Err(ValidationError::new("summary.model", "must not be empty"));
            }
        }
        Ok(RetroDigest {
            digest_id: m.digest_id,
            since,
            until,
            runs: m.runs,
            troubled_runs: m.troubled_runs,
            clusters,
            hot_spots: m
                .hot_spots
                .into_iter()
                .map(|h| DigestHotSpot {
                    repository: h.repository,
                    runs: h.runs,
                    troubled_runs: h.troubled_runs,
                    top_problem: h.top_problem,
                })
                .collect(),
            tools: m.tools.into_iter().map(|t| DigestTool { tool: t.tool, runs: t.runs }).collect(),
            summary: m.summary.map(|s| DigestSummary { model: s.model, text: s.text }),
        })
    }
}

crate::wire::wire_by_conversions!(RetroDigest, v1::RetroDigest, "patchpilot.v1.RetroDigest");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Wire as _;

    fn digest() -> RetroDigest {
        RetroDigest {
            digest_id: "retro-digest-2900".into(),
            since: DateTime::from_timestamp(1_700_000_000, 0).expect("time"),
            until: DateTime::from_timestamp(1_700_604_800, 0).expect("time"),
            runs: 40,
            troubled_runs: 12,
            clusters: vec![DigestCluster {
                representative: "proxy.golang.org: i/o timeout".into(),
                category: "infrastructure.network".into(),
                count: 9,
                runs: 8,
                trend: DigestTrend::Rising,
                signature: Some("go module proxy unreachable".into()),
            }],
            hot_spots: vec![DigestHotSpot {
                repository: "https://github.com/acme/api".into(),
                runs: 10,
                troubled_runs: 6,
                top_problem: "make: command not found".into(),
            }],
            tools: vec![DigestTool { tool: "make".into(), runs: 4 }],
            summary: Some(DigestSummary {
                model: "gpt-test".into(),
                text: "The Go module proxy timed out in most failed runs.".into(),
            }),
        }
    }

    #[test]
    fn the_wire_keeps_a_digest() {
        let d = digest();
        assert_eq!(RetroDigest::decode(&d.encode()).expect("decodes"), d);
    }

    #[test]
    fn bad_digests_name_their_field() {
        let mut m = v1::RetroDigest::from(&digest());
        m.clusters[0].trend = "sideways".into();
        assert_eq!(RetroDigest::from_wire(m).expect_err("refused").path, "clusters[0].trend");
        let mut m = v1::RetroDigest::from(&digest());
        m.digest_id.clear();
        assert_eq!(RetroDigest::from_wire(m).expect_err("refused").path, "digest_id");
        let mut m = v1::RetroDigest::from(&digest());
        std::mem::swap(&mut m.since, &mut m.until);
        assert_eq!(RetroDigest::from_wire(m).expect_err("refused").path, "until");
        let mut m = v1::RetroDigest::from(&digest());
        if let Some(s) = m.summary.as_mut() {
            s.text = "x".repeat(MAX_SUMMARY_CHARS + 1);
        }
        assert_eq!(RetroDigest::from_wire(m).expect_err("refused").path, "summary.text");
        let mut m = v1::RetroDigest::from(&digest());
        m.summary = None;
        assert_eq!(RetroDigest::from_wire(m).expect("no summary is fine").summary, None);
    }
}
