-- What `patchpilot runs show` reads beside the result: the model session's
-- transcript and when the worker began the run.
--
-- Ownership: written only by controllers (the SANDBOX_RESULTS intake, with
-- the rest of the result). Both stay NULL for runs recorded before this
-- migration, runs without a model session, and runs that never reached a VM.

ALTER TABLE controller_runs
    -- Object-store key of .patchpilot/transcript.jsonl (SandboxResult.session_object).
    ADD COLUMN session_object text,
    -- When the sandbox worker started the run (SandboxResult.started_at);
    -- requested_at is when the controller asked, finished_at when it heard back.
    ADD COLUMN started_at     timestamptz;
