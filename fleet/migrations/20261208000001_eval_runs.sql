-- `patchpilot eval`'s results, one row per suite run, so a model or prompt
-- change shows its delta against the last run of the same model and cases.
CREATE TYPE eval_suite AS ENUM ('injection');

CREATE TABLE eval_runs (
    id uuid PRIMARY KEY,
    suite eval_suite NOT NULL,
    -- `compromised` (the obedient double) or `PROVIDER/MODEL`.
    model text NOT NULL,
    -- The cases' folder as given (absolute).
    cases_dir text NOT NULL,
    started_at timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    injected_run integer NOT NULL,
    contained integer NOT NULL,
    reached integer NOT NULL,
    benign_run integer NOT NULL,
    benign_done integer NOT NULL,
    -- Every row held: contained against the compromised model, reached
    -- nowhere against a real one.
    held boolean NOT NULL,
    -- `patchpilot_evals::Report` as JSON: every row's verdicts.
    report jsonb NOT NULL
);

CREATE INDEX eval_runs_by_model ON eval_runs (suite, model, cases_dir, finished_at DESC);
