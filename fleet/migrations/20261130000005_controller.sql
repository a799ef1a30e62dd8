-- The controller's durable state: one row per remediation it works on.
--
-- Ownership: written only by controllers. `machine` is the lifecycle state
-- machine (patchpilot_controller::lifecycle::Machine) as JSON; `job` the
-- latest RemediationJob (protobuf) it works from. A controller changes a row
-- only while it holds the lease (`lease_owner` until `lease_until`) and only
-- if `lease_epoch` is still the one it was granted: the epoch is the fencing
-- token that keeps a controller that stalled past its lease from writing
-- over the one that took the remediation over.

CREATE TABLE controller_remediations (
    remediation_id  text        PRIMARY KEY,
    revision        integer     NOT NULL,
    job             bytea       NOT NULL,
    machine         json        NOT NULL,
    -- Denormalised from `machine` for status queries and dashboards.
    state           text        NOT NULL,
    lease_owner     text,
    lease_until     timestamptz,
    lease_epoch     bigint      NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX controller_remediations_due ON controller_remediations (state, lease_until);

-- Every state change, for `patchpilot status` and post-mortems.
CREATE TABLE controller_transitions (
    id              bigserial   PRIMARY KEY,
    remediation_id  text        NOT NULL,
    revision        integer     NOT NULL,
    from_state      text        NOT NULL,
    to_state        text        NOT NULL,
    event           text        NOT NULL,
    at              timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX controller_transitions_remediation ON controller_transitions (remediation_id, id);
