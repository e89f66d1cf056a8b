-- depends: 0012_console_sessions
-- A reported action result that came after its action was settled (failed as unreported,
-- skipped, finished by hand) is kept beside the action with ``late = true``: the verification
-- checks it and records what it found, and never changes the settled action.
ALTER TABLE execution_log ADD COLUMN late BOOLEAN NOT NULL DEFAULT false;
