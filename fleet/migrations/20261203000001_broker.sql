-- The capability broker's state: one capability per run, its grant frozen at
-- mint time, what the run has spent, and the provenance of every call.
--
-- Ownership: written only by patchpilot-broker. A capability is minted when
-- the sandbox worker starts a run and revoked when the run ends (or by the
-- worker's start-up sweep); the token itself is never stored, only its
-- sha256.

CREATE TABLE broker_capabilities (
    -- The sandbox run (SandboxRun.run_id, or a CLI run id).
    run_id              text PRIMARY KEY,
    -- sha256 of the 256-bit token the guest holds.
    token_sha256        bytea NOT NULL UNIQUE,
    -- The sandbox worker that minted it: its start-up sweep revokes these.
    worker              text NOT NULL,
    -- patchpilot_model::broker::Grant as JSON: the connections, their
    -- methods and routes, frozen; later config changes never widen it.
    grant_json          jsonb NOT NULL,
    -- The budget (also inside grant_json), as columns for the atomic checks.
    requests_limit      bigint NOT NULL,
    bytes_limit         bigint NOT NULL,
    model_tokens_limit  bigint NOT NULL,
    requests_used       bigint NOT NULL DEFAULT 0,
    bytes_used          bigint NOT NULL DEFAULT 0,
    model_tokens_used   bigint NOT NULL DEFAULT 0,
    minted_at           timestamptz NOT NULL DEFAULT now(),
    revoked_at          timestamptz
);

CREATE INDEX broker_capabilities_live_by_worker ON broker_capabilities (worker) WHERE revoked_at IS NULL;

-- Every call a guest made through the broker, refused ones included: the
-- record at the boundary, independent of the agent's own log.
CREATE TABLE broker_calls (
    id               bigserial PRIMARY KEY,
    -- As the terminator stamped it from the VM's socket, not as the guest said.
    run_id           text NOT NULL,
    -- The connection the guest named (it may not exist).
    connection       text NOT NULL,
    method           text NOT NULL,
    -- The grant's route pattern that allowed the call; NULL when refused
    -- before one matched.
    route            text,
    -- The status the guest got.
    status           integer NOT NULL,
    -- patchpilot_model::broker::BrokerRefusal; NULL when relayed.
    refusal          text,
    -- Why, for operators (never shown to the guest).
    reason           text,
    -- The upstream's own status, when it was called.
    upstream_status  integer,
    request_sha256   bytea NOT NULL,
    response_sha256  bytea,
    request_bytes    bigint NOT NULL,
    response_bytes   bigint NOT NULL DEFAULT 0,
    latency_us       bigint NOT NULL,
    model_tokens     bigint NOT NULL DEFAULT 0,
    at               timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX broker_calls_by_run ON broker_calls (run_id, id);
