-- Sandbox run bookkeeping.
--
-- Ownership: written only by the sandbox worker. One row per SandboxRun
-- ever received. The row is what makes the worker's handler idempotent:
--
-- - a redelivered run whose row is 'finished' re-publishes the stored
--   `result` (same Nats-Msg-Id, so JetStream drops it if the first publish
--   got through) instead of booting a second VM;
-- - a redelivered run whose row is 'running' was abandoned by a crashed or
--   stuck worker (in-progress acks stopped): the next worker takes it over
--   and bumps `attempt`. `attempt` is also the fencing token: a worker only
--   finishes a row whose attempt is still its own, so a worker that lost
--   the run never overwrites the result of the one that took it.
--
-- The result and retrospective are stored before they are published, so a
-- crash between the two publishes them again on redelivery, unchanged.

CREATE TABLE sandbox_runs (
    run_id          text        PRIMARY KEY,
    remediation_id  text        NOT NULL DEFAULT '',
    -- Which worker (host name and pid) holds or held the run last.
    worker          text        NOT NULL,
    -- 1 for the first worker to take the run, +1 per takeover.
    attempt         integer     NOT NULL DEFAULT 1,
    state           text        NOT NULL CHECK (state IN ('running', 'finished')),
    -- The RunOutcome name ('completed', 'agent_failed', 'timed_out',
    -- 'limit_exceeded', 'infra_error'), once finished.
    outcome         text,
    reason          text,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    -- The encoded patchpilot.v1.SandboxResult that was published.
    result          bytea,
    -- The encoded patchpilot.v1.Retrospective that was published with it.
    retrospective   bytea,
    CHECK (state = 'running' OR (outcome IS NOT NULL AND result IS NOT NULL))
);
CREATE INDEX sandbox_runs_remediation_id ON sandbox_runs (remediation_id);
CREATE INDEX sandbox_runs_running ON sandbox_runs (state) WHERE state = 'running';
