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

use std::time::Duration;

use sqlx::PgPool;

use crate::lifecycle::{Machine, State};

/// What can go wrong with the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database failed.
    #[error("controller store: {0}")]
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

fn state_name(state: &State) -> String {
    match serde_json::to_value(state) {
        Ok(serde_json::Value::Object(map)) => {
            map.get("state").and_then(|s| s.as_str()).unwrap_or("unknown").to_owned()
        }
        _ => "unknown".to_owned(),
    }
}

/// The controllers' shared store.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
}

impl Store {
    /// A store on `pool` (migrated with the fleet's migrations).
    pub fn new(pool: PgPool) -> Self {
        Store { pool }
    }

    /// Records a job revision. A new remediation starts as a fresh machine;
    /// a newer revision of a known one is kept for the machine to pick up;
    /// a redelivered or older revision changes nothing.
    pub async fn record_job(
        &self,
        remediation_id: &str,
        revision: u32,
        job: &[u8],
    ) -> Result<JobOutcome, Error> {
        let machine = Machine::new(remediation_id, revision);
        let json = serde_json::to_string(&machine)
            .map_err(|e| Error::Corrupt { remediation_id: remediation_id.into(), reason: e.to_string() })?;
        let row: Option<(bool,)> = sqlx::query_as(
            "INSERT INTO controller_remediations (remediation_id, revision, job, machine, state) \
             VALUES ($1, $2, $3, $4::json, 'queued') \
             ON CONFLICT (remediation_id) DO UPDATE SET revision = EXCLUDED.revision, job = EXCLUDED.job, updated_at = now() \
             WHERE controller_remediations.revision < EXCLUDED.revision \
             RETURNING (xmax = 0)",
        )
        .bind(remediation_id)
        .bind(revision as i32)
        .bind(job)
        .bind(json)
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

    /// Remediations that are not finished and whose lease is free or
    /// expired, oldest first.
    pub async fn due(&self, limit: i64) -> Result<Vec<String>, Error> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT remediation_id FROM controller_remediations \
             WHERE state NOT IN ('succeeded', 'needs_human', 'failed', 'superseded') \
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
        .bind(state_name(&machine.state))
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
        .bind(state_name(from))
        .bind(state_name(&machine.state))
        .bind(event)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
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
