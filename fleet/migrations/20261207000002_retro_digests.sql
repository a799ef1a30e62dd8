-- When the retro aggregator last published its periodic digest (one row
-- per digest; `periodic` today), so that a restart does not send a period
-- twice. The aggregator decides, publishes and records under this row's
-- lock (SELECT ... FOR UPDATE), so aggregators sharing a database send a
-- period once.
--
-- Ownership: written and read only by the retro aggregator.
CREATE TABLE retro_digests (
    name        text        PRIMARY KEY,
    -- NULL until the first digest is sent.
    last_sent   timestamptz,
    -- The last digest's id (`retro-digest-<period seconds>-<period number>`).
    digest_id   text        NOT NULL DEFAULT ''
);
