//! The `retrospectives` table: each run's retrospective stored once, in
//! batches, and read back for the fleet view.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

use crate::classify::{Category, Classification, RULES_VERSION, classify};
use crate::record::RetroRecord;

/// What went wrong with the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database failed.
    #[error("retrospective store")]
    Database(#[from] sqlx::Error),
    /// A stored row does not read back.
    #[error("stored retrospective {run_id}: {reason}")]
    Corrupt {
        /// The run.
        run_id: String,
        /// Why.
        reason: String,
    },
}

impl Error {
    /// Whether trying again may work.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Database(e) if !matches!(e, sqlx::Error::Database(_) | sqlx::Error::ColumnDecode { .. }))
    }
}

/// Stores `records` (classifying each) in one transaction; a run already
/// stored is left as it is. Returns how many were new.
pub async fn insert(pool: &PgPool, records: &[RetroRecord], source: &str) -> Result<u64, Error> {
    if records.is_empty() {
        return Ok(0);
    }
    let mut columns = Columns::default();
    for record in records {
        let classification = classify(record);
        columns.push(record, classification)?;
    }
    let inserted = sqlx::query(
        "INSERT INTO retrospectives (run_id, remediation_id, repository, dockerfile, purpose, outcome, model,
                                     duration_ms, created_at, record, category, rule, source, rules_version)
         SELECT r, m, repo, d, p, o, model, dur, at, rec::json, c, rule, $13, $14
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                     $8::int8[], $9::timestamptz[], $10::text[], $11::text[], $12::text[])
              AS t(r, m, repo, d, p, o, model, dur, at, rec, c, rule)
         ON CONFLICT (run_id) DO NOTHING",
    )
    .bind(&columns.run_id)
    .bind(&columns.remediation_id)
    .bind(&columns.repository)
    .bind(&columns.dockerfile)
    .bind(&columns.purpose)
    .bind(&columns.outcome)
    .bind(&columns.model)
    .bind(&columns.duration_ms)
    .bind(&columns.created_at)
    .bind(&columns.record)
    .bind(&columns.category)
    .bind(&columns.rule)
    .bind(source)
    .bind(RULES_VERSION)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(inserted)
}

#[derive(Default)]
struct Columns {
    run_id: Vec<String>,
    remediation_id: Vec<String>,
    repository: Vec<String>,
    dockerfile: Vec<String>,
    purpose: Vec<String>,
    outcome: Vec<String>,
    model: Vec<String>,
    duration_ms: Vec<Option<i64>>,
    created_at: Vec<DateTime<Utc>>,
    record: Vec<String>,
    category: Vec<String>,
    rule: Vec<String>,
}

impl Columns {
    fn push(&mut self, record: &RetroRecord, classification: Classification) -> Result<(), Error> {
        let json = serde_json::to_string(record)
            .map_err(|e| Error::Corrupt { run_id: record.run_id.clone(), reason: e.to_string() })?;
        self.run_id.push(record.run_id.clone());
        self.remediation_id.push(record.remediation_id.clone());
        self.repository.push(record.repository.clone());
        self.dockerfile.push(record.dockerfile.clone());
        self.purpose.push(record.purpose.clone());
        self.outcome.push(record.outcome.clone());
        self.model.push(record.model.clone());
        self.duration_ms.push(record.duration_ms);
        self.created_at.push(record.created_at);
        self.record.push(json);
        self.category.push(classification.category.as_str().to_owned());
        self.rule.push(classification.rule.to_owned());
        Ok(())
    }
}

/// The stored retrospectives written at or after `since` (all when
/// `None`), with their stored classification, oldest first.
pub async fn load(
    pool: &PgPool,
    since: Option<DateTime<Utc>>,
) -> Result<Vec<(RetroRecord, Classification)>, Error> {
    let rows: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT run_id, record::text, category, rule FROM retrospectives
         WHERE $1::timestamptz IS NULL OR created_at >= $1 ORDER BY created_at, run_id",
    )
    .bind(since)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|(run_id, json, category, rule)| {
            let record: RetroRecord = serde_json::from_str(&json)
                .map_err(|e| Error::Corrupt { run_id: run_id.clone(), reason: e.to_string() })?;
            let category: Category = category
                .parse()
                .map_err(|e| Error::Corrupt { run_id: run_id.clone(), reason: format!("{e}") })?;
            // The rule names are static; a stored one this build no longer
            // has is reported as such.
            let rule = crate::classify::rule_name(&rule).unwrap_or("retired-rule");
            Ok((record, Classification { category, rule }))
        })
        .collect()
}

/// Which stored rows [`reclassify`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every row (`patchpilot retros reclassify`).
    All,
    /// Rows classified by rules older than [`RULES_VERSION`] (the service's
    /// start after an upgrade). Rows of a newer version, written by a newer
    /// build during a rolling upgrade, are left to it.
    Outdated,
}

/// What [`reclassify`] found (and, unless a dry run, changed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reclassified {
    /// Rows classified again.
    pub examined: u64,
    /// Rows whose category changes, by (stored category → new category).
    /// The stored one is kept as text: a category a newer or older build
    /// had and this one has not is exactly what reclassifying mends.
    pub changed: BTreeMap<(String, Category), u64>,
    /// Rows keeping their category but decided by another rule now.
    pub rule_changed: u64,
    /// Rows written (category, rule or rules version); 0 in a dry run.
    pub updated: u64,
}

impl Reclassified {
    /// Rows whose category changes.
    pub fn category_changes(&self) -> u64 {
        self.changed.values().sum()
    }
}

/// Rows read and updated per transaction by [`reclassify`].
const RECLASSIFY_BATCH: i64 = 5000;

/// Classifies stored rows again with this build's rules: their category,
/// the rule that decided it and the rules version are updated where they
/// differ. Deterministic, so running it twice changes nothing the second
/// time; a `dry_run` only counts. Rows are read in run-id order in batches,
/// each batch updated in one statement, so a large store never sits in
/// memory and an interrupted run leaves every row either old or new.
pub async fn reclassify(pool: &PgPool, scope: Scope, dry_run: bool) -> Result<Reclassified, Error> {
    let mut report = Reclassified::default();
    let mut after = String::new();
    let below = match scope {
        Scope::All => None,
        Scope::Outdated => Some(RULES_VERSION),
    };
    loop {
        let rows: Vec<(String, String, String, String, i32)> = sqlx::query_as(
            "SELECT run_id, record::text, category, rule, rules_version FROM retrospectives
             WHERE run_id > $1 AND ($2::int4 IS NULL OR rules_version < $2)
             ORDER BY run_id LIMIT $3",
        )
        .bind(&after)
        .bind(below)
        .bind(RECLASSIFY_BATCH)
        .fetch_all(pool)
        .await?;
        let Some(last) = rows.last() else { break };
        after = last.0.clone();
        let (mut runs, mut categories, mut rules) = (Vec::new(), Vec::new(), Vec::new());
        for (run_id, json, stored_category, stored_rule, version) in rows {
            let record: RetroRecord = serde_json::from_str(&json)
                .map_err(|e| Error::Corrupt { run_id: run_id.clone(), reason: e.to_string() })?;
            let now = classify(&record);
            report.examined += 1;
            if now.category.as_str() != stored_category {
                *report.changed.entry((stored_category, now.category)).or_default() += 1;
            } else if now.rule != stored_rule {
                report.rule_changed += 1;
            } else if version == RULES_VERSION {
                continue;
            }
            runs.push(run_id);
            categories.push(now.category.as_str());
            rules.push(now.rule);
        }
        if dry_run || runs.is_empty() {
            continue;
        }
        report.updated += sqlx::query(
            "UPDATE retrospectives AS r SET category = u.c, rule = u.rule, rules_version = $4
             FROM unnest($1::text[], $2::text[], $3::text[]) AS u(run, c, rule)
             WHERE r.run_id = u.run",
        )
        .bind(&runs)
        .bind(&categories)
        .bind(&rules)
        .bind(RULES_VERSION)
        .execute(pool)
        .await?
        .rows_affected();
    }
    Ok(report)
}

/// Adds what the runs' records know to retrospectives from the bus, in one
/// query for the batch: outcome, duration and, when the retrospective did
/// not name its model, whether a model ran (from `sandbox_runs`), the purpose (from `controller_runs`), the repository and
/// Dockerfile (from the planner's `remediations`). Missing rows leave
/// fields empty.
pub async fn enrich(pool: &PgPool, records: &mut [RetroRecord]) -> Result<(), Error> {
    if records.is_empty() {
        return Ok(());
    }
    type Facts =
        (i32, Option<String>, Option<i64>, Option<Vec<u8>>, Option<String>, Option<String>, Option<String>);
    let run_ids: Vec<&str> = records.iter().map(|r| r.run_id.as_str()).collect();
    let remediation_ids: Vec<&str> = records.iter().map(|r| r.remediation_id.as_str()).collect();
    let facts: Vec<Facts> = sqlx::query_as(
        "SELECT (b.n - 1)::int4, s.outcome,
                (EXTRACT(EPOCH FROM (s.finished_at - s.started_at)) * 1000)::int8,
                s.result, c.purpose, p.repo_url, p.dockerfile
         FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS b(run_id, remediation_id, n)
         LEFT JOIN sandbox_runs s ON s.run_id = b.run_id
         LEFT JOIN controller_runs c ON c.run_id = b.run_id
         LEFT JOIN remediations p ON p.id::text = b.remediation_id",
    )
    .bind(&run_ids)
    .bind(&remediation_ids)
    .fetch_all(pool)
    .await?;
    for (index, outcome, duration_ms, result, purpose, repository, dockerfile) in facts {
        let Some(record) = usize::try_from(index).ok().and_then(|i| records.get_mut(i)) else { continue };
        record.outcome = outcome.unwrap_or_default();
        record.duration_ms = duration_ms;
        record.purpose = purpose.unwrap_or_default();
        record.repository = repository.unwrap_or_default();
        record.dockerfile = dockerfile.unwrap_or_default();
        if let Some(result) = result
            && record.model.is_empty()
        {
            use patchpilot_model::Wire as _;
            if let Ok(result) = patchpilot_model::SandboxResult::decode(&result) {
                // The retrospective did not name its model (a sender older
                // than the field): a model session was recorded only when
                // a model ran.
                record.model = if result.session_object.is_some() { "model" } else { "rules" }.to_owned();
            }
        }
    }
    Ok(())
}
