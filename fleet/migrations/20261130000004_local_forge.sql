-- The local forge: pull requests, comments, commit statuses and check runs
-- for the bare git repositories of PatchPilot's single-machine default and
-- its end-to-end tests. The repositories themselves live on disk; these
-- tables hold what GitHub would hold in its own database.
--
-- Ownership: written only by the controller's local forge
-- (`controller-worker/src/forge/local/`) and its local CI runner. Nothing
-- here exists in a GitHub deployment.

CREATE TABLE local_forge_repositories (
    owner           text        NOT NULL,
    repo            text        NOT NULL,
    default_branch  text        NOT NULL,
    -- Pull request numbers are per repository, like GitHub's; the row lock
    -- taken to bump this serialises openings in one repository.
    next_number     bigint      NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, repo)
);

-- The check commands the local CI runner runs for each open pull request's
-- head commit, one check run per row. Operator configuration, never taken
-- from the repository.
CREATE TABLE local_forge_checks (
    owner       text   NOT NULL,
    repo        text   NOT NULL,
    name        text   NOT NULL,
    -- argv, e.g. {sh,-c,./ci.sh}; run in a checkout of the head commit.
    command     text[] NOT NULL CHECK (cardinality(command) > 0),
    PRIMARY KEY (owner, repo, name),
    FOREIGN KEY (owner, repo) REFERENCES local_forge_repositories (owner, repo)
);

CREATE TABLE local_forge_pull_requests (
    id          serial      PRIMARY KEY,
    owner       text        NOT NULL,
    repo        text        NOT NULL,
    number      bigint      NOT NULL,
    head        text        NOT NULL,
    base        text        NOT NULL,
    -- The head commit when the pull request was opened; reads prefer the
    -- branch's live head and fall back to this once the branch is gone.
    head_sha    text        NOT NULL,
    title       text        NOT NULL,
    body        text        NOT NULL,
    state       text        NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed', 'merged')),
    labels      text[]      NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner, repo, number),
    FOREIGN KEY (owner, repo) REFERENCES local_forge_repositories (owner, repo)
);
-- At most one open pull request per head branch, as on GitHub.
CREATE UNIQUE INDEX local_forge_pull_requests_open_head
    ON local_forge_pull_requests (owner, repo, head) WHERE state = 'open';

CREATE TABLE local_forge_comments (
    id          bigserial   PRIMARY KEY,
    owner       text        NOT NULL,
    repo        text        NOT NULL,
    number      bigint      NOT NULL,
    body        text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (owner, repo, number) REFERENCES local_forge_pull_requests (owner, repo, number)
);
CREATE INDEX local_forge_comments_pr ON local_forge_comments (owner, repo, number, id);

-- Commit statuses keep their history, like GitHub's; the latest row per
-- (sha, context) is the status.
CREATE TABLE local_forge_statuses (
    id          bigserial   PRIMARY KEY,
    owner       text        NOT NULL,
    repo        text        NOT NULL,
    sha         text        NOT NULL,
    context     text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('pending', 'success', 'failure', 'error')),
    description text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX local_forge_statuses_sha ON local_forge_statuses (owner, repo, sha, context, id);

-- One row per attempt of a check on a commit. A re-run is a new row with
-- the next attempt number; the highest attempt per (sha, name) is the check.
CREATE TABLE local_forge_check_runs (
    id          bigserial   PRIMARY KEY,
    owner       text        NOT NULL,
    repo        text        NOT NULL,
    sha         text        NOT NULL,
    name        text        NOT NULL,
    attempt     integer     NOT NULL CHECK (attempt >= 1),
    status      text        NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'in_progress', 'completed')),
    conclusion  text        CHECK (conclusion IN ('success', 'failure', 'timed_out', 'cancelled')),
    summary     text        NOT NULL DEFAULT '',
    -- Combined stdout and stderr, capped to its tail; untrusted text.
    log         text        NOT NULL DEFAULT '',
    -- Which runner (host and pid) holds or held the run.
    runner      text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz,
    -- Set by the runner that claims the run: past it, with the run still
    -- in progress, the runner is presumed dead and the run is cancelled
    -- ("runner lost") by whichever runner notices.
    deadline    timestamptz,
    UNIQUE (owner, repo, sha, name, attempt),
    CHECK ((status = 'completed') = (conclusion IS NOT NULL)),
    FOREIGN KEY (owner, repo) REFERENCES local_forge_repositories (owner, repo)
);
CREATE INDEX local_forge_check_runs_queued ON local_forge_check_runs (id) WHERE status = 'queued';
CREATE INDEX local_forge_check_runs_running ON local_forge_check_runs (deadline) WHERE status = 'in_progress';
