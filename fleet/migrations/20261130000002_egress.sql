-- Sandbox egress decisions.
--
-- Ownership: written only by the sandbox worker's egress forwarder
-- (PgRecorder), one row per DNS lookup or TCP connection it allowed or
-- denied; nothing updates or deletes rows except retention jobs.

CREATE TABLE egress_decisions (
    id       bigserial   PRIMARY KEY,
    run_id   text        NOT NULL,
    at       timestamptz NOT NULL,
    verdict  text        NOT NULL CHECK (verdict IN ('allow', 'deny')),
    -- 'dns' or 'connect'.
    kind     text        NOT NULL,
    -- The queried name, or the name behind a synthetic address.
    name     text,
    -- DNS: the synthetic address answered. connect: the address asked for.
    ip       inet,
    port     integer,
    -- The matched allow rule ("host:…", "preset:…", "cidr:…") or the deny
    -- rule ("private", "host-not-allowed", …).
    rule     text        NOT NULL,
    -- DNS: what the host resolved. connect: the addresses dialled.
    answers  text[]
);
CREATE INDEX egress_decisions_run_id ON egress_decisions (run_id);
