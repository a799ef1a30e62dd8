-- The version of the classifier's rules that decided each row's category
-- (patchpilot_retro::classify::RULES_VERSION), so that rows decided by
-- older rules are found and classified again after an upgrade: by
-- `patchpilot-retro` when it starts, or `patchpilot retros reclassify`.
-- Rows stored before this column were classified by version 1.
ALTER TABLE retrospectives ADD COLUMN rules_version integer NOT NULL DEFAULT 1;
CREATE INDEX retrospectives_rules_version ON retrospectives (rules_version);
