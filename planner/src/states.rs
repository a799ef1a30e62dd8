//! Keeping `remediations.state` in step with the controller.
//!
//! The controller decides a remediation's state and announces each change
//! as `pp.event.remediation.<state>` (see `patchpilot_controller::events`).
//! This consumer applies them to the planner's row, with a history line,
//! so that `patchpilot status`, `patchpilot remediations` and the planner's
//! own open/closed decisions read one state. Each event carries the
//! controller's transition id as `seq`; the row keeps the highest applied
//! (`state_seq`), so a redelivered or reordered event changes nothing.
//!
//! Two cases are acknowledged without a change: a remediation this planner
//! never created (work submitted to the controller directly), and an event
//! that would reopen a closed remediation while a newer one is open for the
//! same target (the newer one owns the target; the unique index says so).

use patchpilot_fleet::bus::{BatchHandler, Delivery, HandlerError};
use patchpilot_model::{Event, RemediationState};
use sqlx::PgPool;
use uuid::Uuid;

/// The subjects this consumer reads.
pub const FILTER: &str = "pp.event.remediation.>";

/// One state change to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateChange {
    /// The remediation.
    pub remediation_id: Uuid,
    /// Its new state.
    pub state: RemediationState,
    /// The controller's transition id: orders changes.
    pub seq: i64,
    /// When the controller stored it.
    pub at: chrono::DateTime<chrono::Utc>,
    /// The history line.
    pub reason: String,
}

impl StateChange {
    /// Reads a change from a controller's event; the error names the field.
    pub fn from_event(event: &Event) -> Result<StateChange, String> {
        let remediation_id = Uuid::parse_str(&event.remediation_id)
            .map_err(|e| format!("remediation_id {:?}: {e}", event.remediation_id))?;
        let state: RemediationState = event.state.parse().map_err(|e| format!("state: {e}"))?;
        if event.kind != state.event_kind() {
            return Err(format!("kind {:?} does not match state {state}", event.kind));
        }
        let seq = event
            .attributes
            .get("seq")
            .ok_or("attribute seq is missing")?
            .parse::<i64>()
            .map_err(|e| format!("attribute seq: {e}"))?;
        Ok(StateChange {
            remediation_id,
            state,
            seq,
            at: event.occurred_at,
            reason: format!("{}: {}", event.source, event.message),
        })
    }
}

/// What applying a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The row took the new state.
    Changed,
    /// The row already had this or a later change.
    Stale,
    /// No such remediation here.
    Unknown,
    /// Reopening it would make two open remediations for one target.
    TargetTaken,
}

/// Applies one change, with its history line, in one transaction.
pub async fn apply(pool: &PgPool, change: &StateChange) -> Result<Applied, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let current: Option<(RemediationState, i64)> =
        sqlx::query_as("SELECT state, state_seq FROM remediations WHERE id = $1 FOR UPDATE")
            .bind(change.remediation_id)
            .fetch_optional(&mut *tx)
            .await?;
    let Some((from, seq)) = current else { return Ok(Applied::Unknown) };
    if seq >= change.seq {
        return Ok(Applied::Stale);
    }
    let updated = sqlx::query(
        "UPDATE remediations SET state = $2, state_seq = $3, state_changed_at = $4, updated_at = now() WHERE id = $1",
    )
    .bind(change.remediation_id)
    .bind(change.state)
    .bind(change.seq)
    .bind(change.at)
    .execute(&mut *tx)
    .await;
    match updated {
        Ok(_) => {}
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => return Ok(Applied::TargetTaken),
        Err(e) => return Err(e),
    }
    sqlx::query(
        "INSERT INTO remediation_history (remediation_id, from_state, to_state, reason, at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(change.remediation_id)
    .bind(from)
    .bind(change.state)
    .bind(&change.reason)
    .bind(change.at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Applied::Changed)
}

/// The consumer of the controller's state events.
#[derive(Debug, Clone)]
pub struct StateSync {
    pool: PgPool,
}

impl StateSync {
    /// A consumer writing to `pool`.
    pub fn new(pool: PgPool) -> Self {
        StateSync { pool }
    }

    async fn handle_one(&self, delivery: &Delivery) -> Result<(), HandlerError> {
        let event: Event = delivery.decode()?;
        if event.source != "controller" {
            return Ok(());
        }
        let change = StateChange::from_event(&event)
            .map_err(|reason| HandlerError::Permanent(format!("event {}: {reason}", event.event_id)))?;
        let applied = apply(&self.pool, &change).await.map_err(|e| HandlerError::retryable(&e))?;
        match applied {
            Applied::Changed => {
                tracing::debug!(remediation = %change.remediation_id, state = %change.state, seq = change.seq, "state applied")
            }
            Applied::Stale | Applied::Unknown => {}
            Applied::TargetTaken => tracing::warn!(
                remediation = %change.remediation_id, state = %change.state,
                "not reopened: a newer remediation is open for the same target"
            ),
        }
        Ok(())
    }
}

impl BatchHandler for StateSync {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        // In order: the changes of one remediation arrive in sequence.
        let mut out = Vec::with_capacity(batch.len());
        for delivery in batch {
            out.push(self.handle_one(delivery).await);
        }
        out
    }
}
