-- PatchPilot's PostgreSQL roles: one login role per service, each granted
-- only the tables it writes (and the few it reads), so a compromised
-- service reaches no other service's state: the broker cannot read the
-- gateway's sealed secrets, the sandbox worker cannot touch the
-- controller's remediations, no service can change the schema.
--
-- Run it as a superuser (or a role with CREATEROLE) on the `patchpilot`
-- database: once before the first migration (it creates the roles and
-- lets the owner create tables), then after every migration (it grants
-- the tables). It is idempotent.
--
--   psql -d patchpilot -v ON_ERROR_STOP=1 -f deploy/postgres/roles.sql
--   PATCHPILOT_DATABASE__URL=postgres://patchpilot_owner@db/patchpilot \
--       patchpilot-planner --config planner.toml --migrate-only
--   psql -d patchpilot -v ON_ERROR_STOP=1 -f deploy/postgres/roles.sql
--
-- Each service then connects as its role with `database.migrate = false`
-- (deploy/README.md, "PostgreSQL"). Passwords or client certificates are
-- the operator's: `ALTER ROLE patchpilot_planner PASSWORD '…'`, or
-- `hostssl … cert` lines in pg_hba.conf.
--
-- The table list below is the contract; tests/tests/e2e/deploy.rs runs the
-- services under these roles and checks that each is refused the others'
-- tables.

DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY[
        -- Owns the schema: migrations run as it (`--migrate-only`).
        'patchpilot_owner',
        'patchpilot_planner', 'patchpilot_controller', 'patchpilot_sandbox',
        'patchpilot_broker', 'patchpilot_gateway', 'patchpilot_retro',
        -- The `patchpilot` CLI: reads everything, writes the local forge
        -- (`forge init`), imported retrospectives and `patchpilot eval`'s results.
        'patchpilot_operator'
    ] LOOP
        BEGIN
            EXECUTE format('CREATE ROLE %I LOGIN', r);
        EXCEPTION
            -- Already there (or created by a concurrent run of this script).
            WHEN duplicate_object OR unique_violation THEN NULL;
        END;
    END LOOP;
END
$$;

DO $$
DECLARE
    g record;
    t text;
    seq text;
    everything text[] := ARRAY(
        SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname <> '_sqlx_migrations');
BEGIN
    GRANT ALL ON SCHEMA public TO patchpilot_owner;
    IF to_regclass('public._sqlx_migrations') IS NULL THEN
        -- A new database: the owner may now migrate; the tables' grants
        -- come when this runs again after that.
        RAISE NOTICE 'roles.sql: the schema is not migrated yet; run this again after --migrate-only';
        RETURN;
    END IF;
    FOR g IN SELECT * FROM (VALUES
        ('patchpilot_planner', ARRAY['assessments', 'images', 'image_refs', 'findings', 'remediations',
                                     'remediation_history', 'remediation_jobs'], 'SELECT, INSERT, UPDATE, DELETE'),
        -- The controller runs the local forge and its CI in-process.
        ('patchpilot_controller', ARRAY['controller_remediations', 'controller_transitions', 'controller_runs',
                                        'local_forge_repositories', 'local_forge_checks',
                                        'local_forge_pull_requests', 'local_forge_comments',
                                        'local_forge_statuses', 'local_forge_check_runs'],
                                  'SELECT, INSERT, UPDATE, DELETE'),
        ('patchpilot_sandbox', ARRAY['sandbox_runs', 'egress_decisions'], 'SELECT, INSERT, UPDATE, DELETE'),
        ('patchpilot_broker', ARRAY['broker_capabilities', 'broker_calls'], 'SELECT, INSERT, UPDATE, DELETE'),
        ('patchpilot_gateway', ARRAY['gateway_secrets', 'gateway_access_tokens', 'gateway_refresh_leases'],
                               'SELECT, INSERT, UPDATE, DELETE'),
        ('patchpilot_retro', ARRAY['retrospectives', 'retro_digests'], 'SELECT, INSERT, UPDATE, DELETE'),
        -- A retrospective is stored with its run's remediation, repository
        -- and purpose, read from the other services' rows.
        ('patchpilot_retro', ARRAY['remediations', 'sandbox_runs', 'controller_runs'], 'SELECT'),
        ('patchpilot_operator', everything, 'SELECT'),
        ('patchpilot_operator', ARRAY['local_forge_repositories', 'local_forge_checks', 'retrospectives', 'eval_runs'],
                                'INSERT, UPDATE, DELETE')
    ) AS grants(role, tables, privileges) LOOP
        FOREACH t IN ARRAY g.tables LOOP
            IF to_regclass(format('public.%I', t)) IS NULL THEN
                RAISE EXCEPTION 'roles.sql: table % (granted to %) does not exist: migrate first', t, g.role;
            END IF;
            EXECUTE format('GRANT %s ON TABLE public.%I TO %I', g.privileges, t, g.role);
            IF g.privileges LIKE '%INSERT%' THEN
                FOR seq IN
                    SELECT pg_get_serial_sequence(format('public.%I', t), a.attname)
                    FROM pg_attribute a
                    WHERE a.attrelid = format('public.%I', t)::regclass AND a.attnum > 0 AND NOT a.attisdropped
                      AND pg_get_serial_sequence(format('public.%I', t), a.attname) IS NOT NULL
                LOOP
                    EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE %s TO %I', seq, g.role);
                END LOOP;
            END IF;
        END LOOP;
    END LOOP;
END
$$;
