-- Every run's retrospective, stored once by run id (the retro aggregator's
-- intake from RETROS, and `patchpilot retros import`), with the facts the
-- aggregator adds from the run's records and its classification.
--
-- Ownership: written only by the retro aggregator (and the CLI's import);
-- read by `patchpilot retros`.
CREATE TABLE retrospectives (
    run_id              text        PRIMARY KEY,
    remediation_id      text        NOT NULL DEFAULT '',
    repository          text        NOT NULL DEFAULT '',
    dockerfile          text        NOT NULL DEFAULT '',
    purpose             text        NOT NULL DEFAULT '',
    outcome             text        NOT NULL DEFAULT '',
    -- `rules`, a model's name, or `model` when the name is not known.
    model               text        NOT NULL DEFAULT '',
    duration_ms         bigint,
    created_at          timestamptz NOT NULL,
    -- The record as JSON (patchpilot_retro::RetroRecord): the four lists,
    -- the summary and the agent's own category.
    record              json        NOT NULL,
    -- patchpilot_retro::Category, and the rule that decided it.
    category            text        NOT NULL,
    rule                text        NOT NULL,
    -- `bus`, or `import:<file>`.
    source              text        NOT NULL,
    stored_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX retrospectives_created_at ON retrospectives (created_at);
