-- The latest patch-caused CI failure's checks whose command the forge
-- knows (`[{"name": …, "command": [argv]}]`), kept beside its fenced logs
-- for the next repair run to run again in its VM.
ALTER TABLE controller_remediations ADD COLUMN failing_checks jsonb NOT NULL DEFAULT '[]';
