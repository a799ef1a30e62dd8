-- Where a run's request sits in SANDBOX_RUNS, so the controller can tell a
-- run still queued or being worked on (the work queue still holds its
-- request) from one that was lost: only a lost run times out.
--
-- Ownership: written only by controllers, right after they publish the
-- request. NULL for runs recorded before this migration and for a request
-- recorded but not yet published (a crash in between): those time out from
-- requested_at, as before.

ALTER TABLE controller_runs
    -- JetStream stream sequence of the SandboxRun request (its PubAck).
    ADD COLUMN request_seq bigint;
