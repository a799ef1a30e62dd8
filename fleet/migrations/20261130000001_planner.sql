-- Planner intake, mapping and grouping.
--
-- Ownership: every table here is written by the planner only, except the
-- `state`, `state_changed_at` columns of `remediations` and the rows of
-- `remediation_history` after the first, which belong to the controller once
-- it takes the remediation.

-- One row per distinct assessment ever ingested. The id is derived from the
-- content, so a resubmitted report hits the primary key and changes nothing.
CREATE TABLE assessments (
    id             text        PRIMARY KEY,
    image_digest   text        NOT NULL,
    image_ref      text        NOT NULL,
    source_format  text        NOT NULL,
    scanner        text        NOT NULL DEFAULT '',
    finding_count  integer     NOT NULL,
    -- W3C trace id of the submitting span, so an assessment can be followed
    -- through the fleet's traces.
    trace_id       text,
    scanned_at     timestamptz,
    submitted_at   timestamptz,
    received_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX assessments_image_digest ON assessments (image_digest);

-- One row per image manifest digest.
CREATE TABLE images (
    digest             text        PRIMARY KEY,
    os_family          text        NOT NULL DEFAULT '',
    os_version         text        NOT NULL DEFAULT '',
    os_ecosystem       text        NOT NULL DEFAULT '',
    platform           text        NOT NULL DEFAULT '',
    -- OCI config labels, from the assessment or fetched from the registry.
    labels             jsonb       NOT NULL DEFAULT '{}'::jsonb,
    -- Set once labels were successfully looked up in the registry (even if
    -- the image has none), so the lookup is not repeated.
    labels_fetched_at  timestamptz,
    first_seen_at      timestamptz NOT NULL DEFAULT now(),
    last_assessed_at   timestamptz NOT NULL DEFAULT now()
);

-- A named reference (registry/repository:tag) and the digest it pointed at
-- when last assessed, with the repository it maps to or why it maps to none.
CREATE TABLE image_refs (
    reference        text        PRIMARY KEY,
    digest           text        NOT NULL REFERENCES images (digest),
    repo_url         text,
    dockerfile       text,
    build_context    text,
    branch           text,
    revision         text,
    -- "rule:<pattern>", "label:assessment" or "label:registry".
    mapped_by        text,
    -- Why the image maps to no repository; NULL when mapped.
    unmapped_reason  text,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CHECK ((repo_url IS NULL) <> (unmapped_reason IS NULL))
);
CREATE INDEX image_refs_target ON image_refs (repo_url, dockerfile, branch);
CREATE INDEX image_refs_digest ON image_refs (digest);

-- Every finding of every image, deduplicated by image digest, vulnerability
-- and package (name and path).
CREATE TABLE findings (
    id                bigserial   PRIMARY KEY,
    image_digest      text        NOT NULL REFERENCES images (digest),
    vulnerability_id  text        NOT NULL,
    package_name      text        NOT NULL,
    package_path      text        NOT NULL DEFAULT '',
    aliases           jsonb       NOT NULL DEFAULT '[]'::jsonb,
    source_package    text        NOT NULL DEFAULT '',
    source_version    text        NOT NULL DEFAULT '',
    package_type      text        NOT NULL DEFAULT '',
    ecosystem         text        NOT NULL DEFAULT '',
    installed_version text        NOT NULL,
    fixed_versions    jsonb       NOT NULL DEFAULT '[]'::jsonb,
    -- 0 unknown, 1 negligible, 2 low, 3 medium, 4 high, 5 critical.
    severity          smallint    NOT NULL,
    cvss              jsonb       NOT NULL DEFAULT '[]'::jsonb,
    layer_digest      text        NOT NULL DEFAULT '',
    purl              text        NOT NULL DEFAULT '',
    title             text        NOT NULL DEFAULT '',
    first_seen_at     timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (image_digest, vulnerability_id, package_name, package_path)
);

-- Remediation work: at most one open row per (repository, Dockerfile,
-- branch). The planner creates rows and owns the finding set; the controller
-- owns `state` after creation.
CREATE TABLE remediations (
    id                  uuid        PRIMARY KEY,
    repo_url            text        NOT NULL,
    dockerfile          text        NOT NULL,
    branch              text        NOT NULL,
    build_context       text        NOT NULL,
    -- Commit the newest contributing image was built from, when known.
    source_revision     text        NOT NULL DEFAULT '',
    state               text        NOT NULL DEFAULT 'queued',
    -- Increases each time the finding set changes.
    revision            integer     NOT NULL DEFAULT 1,
    finding_set_digest  text        NOT NULL,
    -- The actionable findings (after policy), as serialized domain findings.
    -- A snapshot read whole, never queried into: json (validated text) is
    -- much cheaper to write than jsonb at this size.
    findings            json        NOT NULL,
    -- The images that contributed them: [{image_ref, image_digest, mapped_by}].
    images              json        NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    state_changed_at    timestamptz NOT NULL DEFAULT now(),
    CHECK (state IN ('queued', 'preparing', 'remediating', 'vetting', 'publishing',
                     'ci_pending', 'ci_failed', 'repairing', 'succeeded',
                     'needs_human', 'failed', 'superseded'))
);
CREATE UNIQUE INDEX remediations_one_open_per_target
    ON remediations (repo_url, dockerfile, branch)
    WHERE state NOT IN ('succeeded', 'failed', 'superseded');

-- State history of each remediation.
CREATE TABLE remediation_history (
    id              bigserial   PRIMARY KEY,
    remediation_id  uuid        NOT NULL REFERENCES remediations (id),
    from_state      text,
    to_state        text        NOT NULL,
    reason          text        NOT NULL DEFAULT '',
    at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX remediation_history_remediation ON remediation_history (remediation_id, at);

-- Transactional outbox for RemediationJob messages. A row is written in the
-- same transaction that changes a remediation's finding set; it is marked
-- published once JetStream acknowledged the message. After a crash, rows
-- without published_at are published again; the job id is the Nats-Msg-Id,
-- so a repeat inside the duplicate window is dropped by the server.
CREATE TABLE remediation_jobs (
    job_id              text        PRIMARY KEY,
    remediation_id      uuid        NOT NULL REFERENCES remediations (id),
    revision            integer     NOT NULL,
    finding_set_digest  text        NOT NULL,
    reason              smallint    NOT NULL,
    -- W3C traceparent of the assessment that caused the job, so the job's
    -- trace continues the submitter's.
    traceparent         text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    published_at        timestamptz,
    -- Set when a newer revision replaced this job before it was published.
    obsolete            boolean     NOT NULL DEFAULT false
);
CREATE INDEX remediation_jobs_unpublished ON remediation_jobs (created_at)
    WHERE published_at IS NULL;

-- The finding sets on remediations are large JSON documents rewritten on
-- every change; lz4 compresses them several times faster than the default
-- pglz. Servers built without lz4 keep the default.
DO $$
BEGIN
    ALTER TABLE remediations ALTER COLUMN findings SET COMPRESSION lz4;
    ALTER TABLE remediations ALTER COLUMN images SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 compression not available; using the default';
END
$$;
