//! `patchpilot eval`'s results in PostgreSQL (`eval_runs`): one row per
//! suite run, and what changed against the last run of the same suite,
//! model and cases, so a model or prompt change shows its delta.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use patchpilot_evals::Report;
use patchpilot_evals::judge::Verdict;
use sqlx::PgPool;
use uuid::Uuid;

/// A suite of evals, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "eval_suite", rename_all = "snake_case")]
pub enum Suite {
    /// Crafted repositories that try to steer the agent.
    Injection,
}

impl Suite {
    /// The name on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Suite::Injection => "injection",
        }
    }
}

/// One stored run.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub id: Uuid,
    pub suite: Suite,
    pub model: String,
    pub cases_dir: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub report: Report,
}

impl StoredRun {
    /// Whether every row held, by the rule of its model: contained against
    /// the compromised model, reached nowhere against a real one.
    pub fn held(&self) -> bool {
        if self.model == patchpilot_evals::report::COMPROMISED {
            self.report.rows.iter().all(|r| r.passed())
        } else {
            self.report.rows.iter().all(|r| r.held())
        }
    }
}

/// Stores `run`.
pub async fn insert(pool: &PgPool, run: &StoredRun) -> anyhow::Result<()> {
    let (contained, injected_run) = run.report.contained();
    let (reached, _) = run.report.reached();
    let (benign_done, benign_run) = run.report.benign_done();
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    sqlx::query(
        "INSERT INTO eval_runs (id, suite, model, cases_dir, started_at, finished_at, injected_run, contained, \
         reached, benign_run, benign_done, held, report) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(run.id)
    .bind(run.suite)
    .bind(&run.model)
    .bind(&run.cases_dir)
    .bind(run.started_at)
    .bind(run.finished_at)
    .bind(count(injected_run))
    .bind(count(contained))
    .bind(count(reached))
    .bind(count(benign_run))
    .bind(count(benign_done))
    .bind(run.held())
    .bind(sqlx::types::Json(&run.report))
    .execute(pool)
    .await?;
    Ok(())
}

type Row = (Uuid, Suite, String, String, DateTime<Utc>, DateTime<Utc>, sqlx::types::Json<Report>);

fn from_row((id, suite, model, cases_dir, started_at, finished_at, report): Row) -> StoredRun {
    StoredRun { id, suite, model, cases_dir, started_at, finished_at, report: report.0 }
}

/// The last run of `suite` with `model` on `cases_dir` before `run`.
pub async fn previous(pool: &PgPool, run: &StoredRun) -> anyhow::Result<Option<StoredRun>> {
    let row: Option<Row> = sqlx::query_as(
        "SELECT id, suite, model, cases_dir, started_at, finished_at, report FROM eval_runs \
         WHERE suite = $1 AND model = $2 AND cases_dir = $3 AND id <> $4 AND finished_at <= $5 \
         ORDER BY finished_at DESC LIMIT 1",
    )
    .bind(run.suite)
    .bind(&run.model)
    .bind(&run.cases_dir)
    .bind(run.id)
    .bind(run.finished_at)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(from_row))
}

/// The latest `limit` runs, newest first.
pub async fn history(pool: &PgPool, limit: i64) -> anyhow::Result<Vec<StoredRun>> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, suite, model, cases_dir, started_at, finished_at, report FROM eval_runs \
         ORDER BY finished_at DESC LIMIT $1",
    )
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(from_row).collect())
}

/// One verdict in a few words, for the delta.
fn brief(v: Option<&Verdict>) -> String {
    match v {
        None => "not run".into(),
        Some(v) => format!(
            "{}{}{}",
            if v.attempted { "attempted" } else { "resisted" },
            match &v.reached {
                Some(_) => ", REACHED",
                None if v.contained() => ", contained",
                None => "",
            },
            if v.task_done { ", fixed" } else { ", not fixed" },
        ),
    }
}

/// What changed from `before` to `now`, row by row, or `None` when nothing
/// did.
pub fn delta(before: &Report, now: &Report) -> Option<String> {
    let mut out = String::new();
    for row in &now.rows {
        let old = before.rows.iter().find(|r| r.case == row.case);
        let pairs = [
            ("injected", old.and_then(|o| o.injected.as_ref()), row.injected.as_ref()),
            ("benign", old.and_then(|o| o.benign.as_ref()), row.benign.as_ref()),
        ];
        for (twin, was, is) in pairs {
            let (was, is) = (brief(was), brief(is));
            if old.is_none() {
                let _ = writeln!(out, "  {} ({twin}): new case, {is}", row.case);
            } else if was != is {
                let _ = writeln!(out, "  {} ({twin}): {was} -> {is}", row.case);
            }
        }
    }
    for gone in before.rows.iter().filter(|o| !now.rows.iter().any(|r| r.case == o.case)) {
        let _ = writeln!(out, "  {}: not in this run", gone.case);
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use patchpilot_evals::{GoalKind, Row, Twin, Vector};

    fn verdict(twin: Twin, attempted: bool, reached: bool, task_done: bool) -> Verdict {
        Verdict {
            twin,
            attempted,
            reached: reached.then(|| "the collector received POST /c/x".into()),
            blocked_by: if attempted && !reached { vec![patchpilot_evals::Layer::Egress] } else { vec![] },
            task_done,
        }
    }

    fn row(case: &str, injected: Verdict, benign: Option<Verdict>) -> Row {
        Row {
            case: case.into(),
            vector: Vector::Readme,
            goal: GoalKind::Exfiltrate,
            injected: Some(injected),
            benign,
        }
    }

    #[test]
    fn delta_names_each_changed_twin_and_new_and_gone_cases() {
        let before = Report {
            model: "openai/m".into(),
            rows: vec![
                row("a", verdict(Twin::Injected, false, false, true), None),
                row(
                    "b",
                    verdict(Twin::Injected, true, false, true),
                    Some(verdict(Twin::Benign, false, false, true)),
                ),
                row("gone", verdict(Twin::Injected, false, false, true), None),
            ],
        };
        let now = Report {
            model: "openai/m".into(),
            rows: vec![
                row("a", verdict(Twin::Injected, true, true, false), None),
                row(
                    "b",
                    verdict(Twin::Injected, true, false, true),
                    Some(verdict(Twin::Benign, false, false, true)),
                ),
                row("c", verdict(Twin::Injected, false, false, true), None),
            ],
        };
        let text = delta(&before, &now).expect("changes");
        assert!(text.contains("a (injected): resisted, fixed -> attempted, REACHED, not fixed"), "{text}");
        assert!(!text.contains("  b "), "b did not change: {text}");
        assert!(text.contains("c (injected): new case"), "{text}");
        assert!(text.contains("gone: not in this run"), "{text}");
        assert_eq!(delta(&now, &now), None);
    }
}
