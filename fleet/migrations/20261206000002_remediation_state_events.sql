-- One truth about a remediation's state.
--
-- The controller's state machine decides it. Each stored transition is also
-- the outbox row of its `pp.event.remediation.<state>` event: written in
-- the same transaction as the state, published after commit, and marked
-- here once JetStream acknowledged it (the row id is the Nats-Msg-Id, so a
-- repeat after a crash inside the duplicate window is dropped).
ALTER TABLE controller_transitions ADD COLUMN published_at timestamptz;
CREATE INDEX controller_transitions_unpublished ON controller_transitions (id)
    WHERE published_at IS NULL AND from_state <> to_state;

-- The planner keeps `remediations.state` in step from those events.
-- `state_seq` is the id of the transition the state came from: an event
-- older than the one applied (a redelivery, or one published out of order
-- by two controllers) changes nothing.
ALTER TABLE remediations ADD COLUMN state_seq bigint NOT NULL DEFAULT 0;
-- The controller's vocabulary (patchpilot_model::RemediationState). The
-- first schema's `remediating`, `ci_failed` and `repairing` were never
-- written.
ALTER TABLE remediations DROP CONSTRAINT remediations_state_check;
ALTER TABLE remediations ADD CONSTRAINT remediations_state_check
    CHECK (state IN ('queued', 'preparing', 'running', 'vetting', 'publishing', 'ci_pending',
                     'succeeded', 'needs_human', 'failed', 'superseded'));
