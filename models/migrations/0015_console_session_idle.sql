-- depends: 0014_job_run_outbox_dead
-- A console session also ends after CONSOLE_SESSION_IDLE_MINUTES without a request: each request
-- the browser makes moves last_seen_at. Existing sessions count as seen when they were made.
-- The (api_key_id, created_at) index finds a key's oldest sessions when it signs in once too many.
ALTER TABLE console_sessions ADD COLUMN last_seen_at TIMESTAMPTZ;
UPDATE console_sessions SET last_seen_at = created_at;
ALTER TABLE console_sessions ALTER COLUMN last_seen_at SET NOT NULL;

DROP INDEX console_sessions_api_key_idx;
CREATE INDEX console_sessions_api_key_idx ON console_sessions (api_key_id, created_at);
