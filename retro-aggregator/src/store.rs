//! The `retrospectives` table: each run's retrospective stored once, in
//! batches, and read back for the fleet view.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::classify::{Category, Classification, classify};
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
                                     duration_ms, created_at, record, category, rule, source)
         SELECT r, m, repo, d, p, o, model, dur, at, rec::json, c, rule, $13
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

/// Adds what the runs' records know to retrospectives from the bus, in one
/// query for the batch: outcome, duration and whether a model ran (from
/// `sandbox_runs`), the purpose (from `controller_runs`), the repository and
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
        if let Some(result) = result {
            use patchpilot_model::Wire as _;
            if let Ok(result) = patchpilot_model::SandboxResult::decode(&result) {
                // A model session was recorded only when a model ran.
                record.model = if result.session_object.is_some() { "model" } else { "rules" }.to_owned();
            }
        }
    }
    Ok(())
}
