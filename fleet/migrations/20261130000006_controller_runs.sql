-- What the controller's executor needs beyond the state machine.
--
-- Ownership: written only by controllers (the SANDBOX_RESULTS intake fills
-- in a run's result; the executor everything else, under the lease).
--
-- `wake_at` lets a remediation that waits (a sandbox run, CI) sleep without
-- holding a lease: it is due again at `wake_at`, or at once when a result
-- for it arrives. `branch` is chosen at the first publication and kept for
-- the pull request's life. `ci_evidence` is the latest patch-caused CI
-- failure's fenced logs, the input of the next repair run.

ALTER TABLE controller_remediations
    ADD COLUMN wake_at     timestamptz,
    ADD COLUMN branch      text,
    ADD COLUMN pr_number   bigint,
    ADD COLUMN pr_url      text,
    ADD COLUMN ci_evidence text;

-- Every sandbox run the controller requested and how it ended.
CREATE TABLE controller_runs (
    run_id            text        PRIMARY KEY,
    remediation_id    text        NOT NULL,
    revision          integer     NOT NULL,
    purpose           text        NOT NULL,
    -- The commit the run's workspace was cloned at: its patch applies there.
    base_sha          text        NOT NULL,
    requested_at      timestamptz NOT NULL DEFAULT now(),
    -- Filled in when the SandboxResult arrives.
    outcome           text,
    reason            text,
    exit_code         integer,
    patch_object      text,
    result_object     text,
    transcript_object text,
    egress_denied     integer,
    finished_at       timestamptz
);

CREATE INDEX controller_runs_remediation ON controller_runs (remediation_id, requested_at);

-- The W3C traceparent of the job's message, so the executor's work (and the
-- sandbox runs it requests) continues the assessment's trace.
ALTER TABLE controller_remediations ADD COLUMN traceparent text;
