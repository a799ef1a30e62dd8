//! The controller's state in Postgres: one row per remediation holding its
//! state machine and latest job, and a lease so that only one controller
//! works on a remediation at a time.
//!
//! The lease is granted with an epoch that only grows. Every write names
//! the epoch it was granted under and is refused once another controller
//! has taken the lease over, so a controller that stalled (a long GC pause,
//! a frozen VM) can never overwrite newer state when it wakes up. A crashed
//! controller's lease simply runs out and the next one resumes from the
//! stored state.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use patchpilot_model::{FailingCheck, RemediationState, RunOutcome, RunPurpose, SandboxResult};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row as _};
use tokio::sync::Notify;

use crate::lifecycle::{Machine, State};

/// What can go wrong with the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database failed.
    #[error("controller store")]
    Database(#[from] sqlx::Error),
    /// A stored machine does not parse (a newer controller wrote it?).
    #[error("remediation {remediation_id}: stored state does not parse: {reason}")]
    Corrupt {
        /// The remediation.
        remediation_id: String,
        /// Why.
        reason: String,
    },
    /// The lease was lost: another controller owns the remediation now.
    #[error("remediation {remediation_id}: lease lost to another controller")]
    LeaseLost {
        /// The remediation.
        remediation_id: String,
    },
}

/// A granted lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The remediation.
    pub remediation_id: String,
    /// Who holds it.
    pub owner: String,
    /// The fencing token.
    pub epoch: i64,
}

/// What a job did to the stored row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// A new remediation.
    Created,
    /// A newer revision of a known one.
    Updated,
    /// The same or an older revision: nothing changed (redelivery).
    Ignored,
}

/// What the executor keeps beside the machine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Details {
    /// The PR's branch, once chosen.
    pub branch: Option<String>,
    /// The PR's number, once opened.
    pub pr_number: Option<u64>,
    /// The PR's link.
    pub pr_url: Option<String>,
    /// The latest patch-caused CI failure's fenced logs.
    pub ci_evidence: Option<String>,
    /// Its checks whose command the forge knows.
    pub failing_checks: Vec<FailingCheck>,
    /// Seconds since the machine last changed state.
    pub in_state_secs: f64,
}

/// A requested run and, once it arrived, its result.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// The run.
    pub run_id: String,
    /// The remediation it worked for.
    pub remediation_id: String,
    /// The job revision it was requested for.
    pub revision: u32,
    /// Remediate or repair.
    pub purpose: RunPurpose,
    /// The commit the run's workspace was cloned at.
    pub base_sha: String,
    /// When it was requested.
    pub requested_at: DateTime<Utc>,
    /// Seconds since it was requested.
    pub age_secs: f64,
    /// Stream sequence of its request in `SANDBOX_RUNS`, once published.
    pub request_seq: Option<u64>,
    /// The result, once it arrived.
    pub result: Option<SandboxResult>,
}

impl<'r> sqlx::FromRow<'r, PgRow> for RunRecord {
    fn from_row(row: &'r PgRow) -> Result<Self, sqlx::Error> {
        let run_id: String = row.try_get("run_id")?;
        let outcome: Option<RunOutcome> = row.try_get("outcome")?;
        // A stored empty key is an absent one (rows written before keys
        // were nullable).
        let key = |column: &str| -> Result<Option<String>, sqlx::Error> {
            Ok(row.try_get::<Option<String>, _>(column)?.filter(|k| !k.is_empty()))
        };
        let result = match outcome {
            Some(outcome) => Some(SandboxResult {
                run_id: run_id.clone(),
                remediation_id: row.try_get("remediation_id")?,
                outcome,
                reason: row.try_get::<Option<String>, _>("reason")?.unwrap_or_default(),
                exit_code: row.try_get("exit_code")?,
                patch_object: key("patch_object")?,
                transcript_object: key("transcript_object")?,
                result_object: key("result_object")?,
                session_object: key("session_object")?,
                egress_denied: row.try_get::<Option<i32>, _>("egress_denied")?.unwrap_or_default().max(0)
                    as u32,
                started_at: row.try_get("started_at")?,
                finished_at: row.try_get("finished_at")?,
            }),
            None => None,
        };
        Ok(RunRecord {
            run_id,
            remediation_id: row.try_get("remediation_id")?,
            revision: row.try_get::<i32, _>("revision")?.max(0) as u32,
            purpose: row.try_get("purpose")?,
            base_sha: row.try_get("base_sha")?,
            requested_at: row.try_get("requested_at")?,
            age_secs: row.try_get("age_secs")?,
            request_seq: row
                .try_get::<Option<i64>, _>("request_seq")?
                .and_then(|seq| u64::try_from(seq).ok()),
            result,
        })
    }
}

/// The columns a [`RunRecord`] is read from.
const RUN_COLUMNS: &str = "run_id, remediation_id, revision, purpose, base_sha, requested_at, \
    EXTRACT(EPOCH FROM (now() - requested_at))::float8 AS age_secs, request_seq, outcome, reason, exit_code, \
    patch_object, result_object, transcript_object, session_object, egress_denied, started_at, finished_at";

/// A stored state change not yet announced on the bus.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Transition {
    /// The row id: increases with every stored transition, so it orders
    /// them across controllers.
    pub id: i64,
    /// The remediation.
    pub remediation_id: String,
    /// The job revision the machine worked on.
    pub revision: i32,
    /// The state left.
    pub from_state: RemediationState,
    /// The state entered.
    pub to_state: RemediationState,
    /// What caused it.
    pub event: String,
    /// When it was stored.
    pub at: DateTime<Utc>,
    /// The remediation's pull request, once it has one.
    pub pr_url: Option<String>,
    /// When the remediation entered the state it left: its previous state
    /// change, or its creation.
    pub entered_at: DateTime<Utc>,
    /// The remediation's trace (its job's `traceparent`), which its events
    /// continue.
    pub traceparent: Option<String>,
}

/// The controllers' shared store.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
    /// Woken after each stored state change, for the event publisher.
    transition_saved: Arc<Notify>,
}

impl Store {
    /// A store on `pool` (migrated with the fleet's migrations).
    pub fn new(pool: PgPool) -> Self {
        Store { pool, transition_saved: Arc::new(Notify::new()) }
    }

    /// Waits until a state change is stored (at once if one was stored
    /// since the last call).
    pub async fn transition_saved(&self) {
        self.transition_saved.notified().await;
    }

    /// Stored state changes (`from_state` ≠ `to_state`) not yet announced,
    /// oldest first.
    pub async fn unpublished_transitions(&self, limit: i64) -> Result<Vec<Transition>, Error> {
        Ok(sqlx::query_as(
            "SELECT t.id, t.remediation_id, t.revision, t.from_state, t.to_state, t.event, t.at, r.pr_url, \
                    COALESCE((SELECT max(p.at) FROM controller_transitions p \
                              WHERE p.remediation_id = t.remediation_id AND p.id < t.id \
                                AND p.from_state <> p.to_state), \
                             r.created_at, t.at) AS entered_at, r.traceparent \
             FROM controller_transitions t LEFT JOIN controller_remediations r USING (remediation_id) \
             WHERE t.published_at IS NULL AND t.from_state <> t.to_state ORDER BY t.id LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// How many remediations are in each state.
    pub async fn count_by_state(&self) -> Result<Vec<(RemediationState, i64)>, Error> {
        Ok(sqlx::query_as("SELECT state, count(*) FROM controller_remediations GROUP BY state")
            .fetch_all(&self.pool)
            .await?)
    }

    /// Marks state changes as announced.
    pub async fn mark_transitions_published(&self, ids: &[i64]) -> Result<(), Error> {
        sqlx::query("UPDATE controller_transitions SET published_at = now() WHERE id = ANY($1)")
            .bind(ids)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records a job revision with the trace context of its message (W3C
    /// `traceparent`), if it had one. A new remediation starts as a fresh
    /// machine; a newer revision of a known one is kept for the machine to
    /// pick up; a redelivered or older revision changes nothing.
    ///
    /// The trace context is written in the same statement as the job: the
    /// executor may take the remediation as soon as it is stored, and its
    /// first turn (which requests the sandbox run) must already continue
    /// the job's trace.
    pub async fn record_job(
        &self,
        remediation_id: &str,
        revision: u32,
        job: &[u8],
        traceparent: Option<&str>,
    ) -> Result<JobOutcome, Error> {
        let machine = Machine::new(remediation_id, revision);
        let json = serde_json::to_string(&machine)
            .map_err(|e| Error::Corrupt { remediation_id: remediation_id.into(), reason: e.to_string() })?;
        let row: Option<(bool,)> = sqlx::query_as(
            "INSERT INTO controller_remediations (remediation_id, revision, job, machine, state, traceparent) \
             VALUES ($1, $2, $3, $4::json, 'queued', $5) \
             ON CONFLICT (remediation_id) DO UPDATE SET revision = EXCLUDED.revision, job = EXCLUDED.job, wake_at = NULL, updated_at = now(), \
                 traceparent = COALESCE(EXCLUDED.traceparent, controller_remediations.traceparent) \
             WHERE controller_remediations.revision < EXCLUDED.revision \
             RETURNING (xmax = 0)",
        )
        .bind(remediation_id)
        .bind(revision as i32)
        .bind(job)
        .bind(json)
        .bind(traceparent)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            Some((true,)) => JobOutcome::Created,
            Some((false,)) => JobOutcome::Updated,
            None => JobOutcome::Ignored,
        })
    }

    /// Takes the lease on `remediation_id` for `ttl` if it is free, expired
    /// or already `owner`'s. A takeover of someone else's lease gets a new
    /// epoch; a renewal keeps it.
    pub async fn acquire(
        &self,
        remediation_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, Error> {
        let row: Option<(i64,)> = sqlx::query_as(
            "UPDATE controller_remediations SET \
                lease_epoch = CASE WHEN lease_owner IS DISTINCT FROM $2 THEN lease_epoch + 1 ELSE lease_epoch END, \
                lease_owner = $2, \
                lease_until = now() + make_interval(secs => $3) \
             WHERE remediation_id = $1 \
               AND (lease_owner IS NULL OR lease_owner = $2 OR lease_until < now()) \
             RETURNING lease_epoch",
        )
        .bind(remediation_id)
        .bind(owner)
        .bind(ttl.as_secs_f64())
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(epoch,)| Lease { remediation_id: remediation_id.into(), owner: owner.into(), epoch }))
    }

    /// Remediations with work to do whose lease is free or expired, oldest
    /// first: unfinished ones that are not asleep, and finished ones a
    /// newer job revision arrived for or whose side effects are not done.
    pub async fn due(&self, limit: i64) -> Result<Vec<String>, Error> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT remediation_id FROM controller_remediations \
             WHERE (state NOT IN ('succeeded', 'needs_human', 'failed', 'superseded') \
                    OR revision > (machine->>'revision')::integer \
                    OR json_array_length(machine->'outbox') > 0) \
               AND (wake_at IS NULL OR wake_at <= now()) \
               AND (lease_until IS NULL OR lease_until < now()) \
             ORDER BY updated_at LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    /// The stored machine, job revision and job.
    pub async fn load(&self, remediation_id: &str) -> Result<Option<(Machine, u32, Vec<u8>)>, Error> {
        let row: Option<(String, i32, Vec<u8>)> = sqlx::query_as(
            "SELECT machine::text, revision, job FROM controller_remediations WHERE remediation_id = $1",
        )
        .bind(remediation_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some((machine, revision, job)) = row else { return Ok(None) };
        let machine: Machine = serde_json::from_str(&machine)
            .map_err(|e| Error::Corrupt { remediation_id: remediation_id.into(), reason: e.to_string() })?;
        Ok(Some((machine, revision.max(0) as u32, job)))
    }

    /// Stores `machine` under `lease`, with the transition that led to it.
    /// Refused with [`Error::LeaseLost`] if another controller holds the
    /// remediation now.
    pub async fn save(
        &self,
        lease: &Lease,
        from: &State,
        machine: &Machine,
        event: &str,
    ) -> Result<(), Error> {
        let json = serde_json::to_string(machine).map_err(|e| Error::Corrupt {
            remediation_id: lease.remediation_id.clone(),
            reason: e.to_string(),
        })?;
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE controller_remediations SET machine = $4::json, state = $5, updated_at = now() \
             WHERE remediation_id = $1 AND lease_owner = $2 AND lease_epoch = $3",
        )
        .bind(&lease.remediation_id)
        .bind(&lease.owner)
        .bind(lease.epoch)
        .bind(json)
        .bind(machine.state.kind())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if updated == 0 {
            return Err(Error::LeaseLost { remediation_id: lease.remediation_id.clone() });
        }
        sqlx::query(
            "INSERT INTO controller_transitions (remediation_id, revision, from_state, to_state, event) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&lease.remediation_id)
        .bind(machine.revision as i32)
        .bind(from.kind())
        .bind(machine.state.kind())
        .bind(event)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        if from.kind() != machine.state.kind() {
            self.transition_saved.notify_one();
        }
        Ok(())
    }

    /// Wakes the remediations watching CI on `head_sha` (a CI webhook
    /// arrived); returns how many.
    pub async fn wake_ci(&self, head_sha: &str) -> Result<u64, Error> {
        Ok(sqlx::query(
            "UPDATE controller_remediations SET wake_at = NULL \
             WHERE state = 'ci_pending' AND machine->'state'->>'head_sha' = $1",
        )
        .bind(head_sha)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    /// The stored trace context of the latest job.
    pub async fn traceparent(&self, remediation_id: &str) -> Result<Option<String>, Error> {
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT traceparent FROM controller_remediations WHERE remediation_id = $1")
                .bind(remediation_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.and_then(|(t,)| t))
    }

    /// Puts the remediation to sleep for `wait` (waiting for a run or CI);
    /// a sandbox result for it or a new job wakes it earlier.
    pub async fn snooze(&self, lease: &Lease, wait: Duration) -> Result<(), Error> {
        sqlx::query(
            "UPDATE controller_remediations SET wake_at = now() + make_interval(secs => $4) \
             WHERE remediation_id = $1 AND lease_owner = $2 AND lease_epoch = $3",
        )
        .bind(&lease.remediation_id)
        .bind(&lease.owner)
        .bind(lease.epoch)
        .bind(wait.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// What the executor keeps beside the machine.
    pub async fn details(&self, remediation_id: &str) -> Result<Details, Error> {
        type DetailsRow = (
            Option<String>,
            Option<i64>,
            Option<String>,
            Option<String>,
            Option<sqlx::types::Json<Vec<FailingCheck>>>,
            Option<f64>,
        );
        let row: Option<DetailsRow> = sqlx::query_as(
            "SELECT branch, pr_number, pr_url, ci_evidence, failing_checks, \
                    (SELECT EXTRACT(EPOCH FROM (now() - max(at)))::float8 FROM controller_transitions t \
                     WHERE t.remediation_id = r.remediation_id AND t.to_state <> t.from_state) \
             FROM controller_remediations r WHERE remediation_id = $1",
        )
        .bind(remediation_id)
        .fetch_optional(&self.pool)
        .await?;
        let (branch, pr_number, pr_url, ci_evidence, failing_checks, in_state) = row.unwrap_or_default();
        Ok(Details {
            branch,
            pr_number: pr_number.map(|n| n.max(0) as u64),
            pr_url,
            ci_evidence,
            failing_checks: failing_checks.map(|j| j.0).unwrap_or_default(),
            in_state_secs: in_state.unwrap_or(0.0).max(0.0),
        })
    }

    /// Records the branch (kept once set: the PR's branch never changes)
    /// and the pull request.
    pub async fn set_pull_request(
        &self,
        lease: &Lease,
        branch: &str,
        number: u64,
        url: &str,
    ) -> Result<(), Error> {
        self.fenced(
            lease,
            "UPDATE controller_remediations SET branch = COALESCE(branch, $4), pr_number = $5, pr_url = $6 \
             WHERE remediation_id = $1 AND lease_owner = $2 AND lease_epoch = $3",
            |q| q.bind(branch.to_owned()).bind(number as i64).bind(url.to_owned()),
        )
        .await
    }

    /// Keeps the latest patch-caused CI failure's fenced logs, and its
    /// checks' commands, for the next repair run.
    pub async fn set_ci_evidence(
        &self,
        lease: &Lease,
        evidence: &str,
        failing_checks: &[FailingCheck],
    ) -> Result<(), Error> {
        self.fenced(
            lease,
            "UPDATE controller_remediations SET ci_evidence = $4, failing_checks = $5 \
             WHERE remediation_id = $1 AND lease_owner = $2 AND lease_epoch = $3",
            |q| q.bind(evidence.to_owned()).bind(sqlx::types::Json(failing_checks.to_vec())),
        )
        .await
    }

    async fn fenced<'q>(
        &self,
        lease: &'q Lease,
        sql: &'static str,
        bind: impl FnOnce(
            sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
        ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<(), Error> {
        let q = sqlx::query(sql).bind(&lease.remediation_id).bind(&lease.owner).bind(lease.epoch);
        if bind(q).execute(&self.pool).await?.rows_affected() == 0 {
            return Err(Error::LeaseLost { remediation_id: lease.remediation_id.clone() });
        }
        Ok(())
    }

    /// Records that run `run_id` was requested (again, after a crash:
    /// nothing changes).
    pub async fn record_run_request(
        &self,
        run_id: &str,
        remediation_id: &str,
        revision: u32,
        purpose: RunPurpose,
        base_sha: &str,
    ) -> Result<(), Error> {
        sqlx::query(
            "INSERT INTO controller_runs (run_id, remediation_id, revision, purpose, base_sha) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id) DO NOTHING",
        )
        .bind(run_id)
        .bind(remediation_id)
        .bind(revision as i32)
        .bind(purpose)
        .bind(base_sha)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records where run `run_id`'s request sits in `SANDBOX_RUNS`.
    pub async fn record_run_published(&self, run_id: &str, seq: u64) -> Result<(), Error> {
        sqlx::query("UPDATE controller_runs SET request_seq = $2 WHERE run_id = $1")
            .bind(run_id)
            .bind(i64::try_from(seq).unwrap_or(i64::MAX))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records a run's result (the first one wins: a redelivered result
    /// changes nothing) and wakes its remediation. Returns false for a run
    /// this controller never requested.
    pub async fn record_run_result(&self, result: &SandboxResult) -> Result<bool, Error> {
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE controller_runs SET outcome = $2, reason = $3, exit_code = $4, patch_object = $5, \
                 result_object = $6, transcript_object = $7, egress_denied = $8, session_object = $9, \
                 started_at = $10, finished_at = now() \
             WHERE run_id = $1 AND outcome IS NULL",
        )
        .bind(&result.run_id)
        .bind(result.outcome)
        .bind(&result.reason)
        .bind(result.exit_code)
        .bind(&result.patch_object)
        .bind(&result.result_object)
        .bind(&result.transcript_object)
        .bind(i32::try_from(result.egress_denied).unwrap_or(i32::MAX))
        .bind(&result.session_object)
        .bind(result.started_at)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let known: Option<(String,)> =
            sqlx::query_as("SELECT remediation_id FROM controller_runs WHERE run_id = $1")
                .bind(&result.run_id)
                .fetch_optional(&mut *tx)
                .await?;
        if updated > 0
            && let Some((remediation_id,)) = &known
        {
            sqlx::query("UPDATE controller_remediations SET wake_at = NULL WHERE remediation_id = $1")
                .bind(remediation_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(known.is_some())
    }

    /// Every run of a remediation, oldest first, as (run id, purpose,
    /// outcome): what a hand-off comment lists.
    pub async fn runs_of(
        &self,
        remediation_id: &str,
    ) -> Result<Vec<(String, RunPurpose, Option<RunOutcome>)>, Error> {
        Ok(sqlx::query_as(
            "SELECT run_id, purpose, outcome FROM controller_runs WHERE remediation_id = $1 ORDER BY requested_at",
        )
        .bind(remediation_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The most recently requested runs, newest first, of one remediation
    /// or of all: what `patchpilot runs list` shows.
    pub async fn recent_runs(
        &self,
        remediation_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<RunRecord>, Error> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM controller_runs WHERE $1::text IS NULL OR remediation_id = $1 \
             ORDER BY requested_at DESC, run_id DESC LIMIT $2"
        )))
        .bind(remediation_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A requested run: when, and its result once it arrived.
    pub async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, Error> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM controller_runs WHERE run_id = $1"
        )))
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The latest remediation run of `revision` that came back with a patch
    /// (the fix a PR carries, whose account its body gives).
    pub async fn latest_fix(&self, remediation_id: &str, revision: u32) -> Result<Option<RunRecord>, Error> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM controller_runs \
             WHERE remediation_id = $1 AND revision = $2 AND purpose = $3 AND outcome = $4 \
               AND patch_object <> '' \
             ORDER BY requested_at DESC LIMIT 1"
        )))
        .bind(remediation_id)
        .bind(revision as i32)
        .bind(RunPurpose::Remediate)
        .bind(RunOutcome::Completed)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Gives the lease back (the next controller may start at once).
    pub async fn release(&self, lease: &Lease) -> Result<(), Error> {
        sqlx::query(
            "UPDATE controller_remediations SET lease_owner = NULL, lease_until = NULL \
             WHERE remediation_id = $1 AND lease_owner = $2 AND lease_epoch = $3",
        )
        .bind(&lease.remediation_id)
        .bind(&lease.owner)
        .bind(lease.epoch)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
