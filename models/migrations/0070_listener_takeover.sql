-- depends: 0045_trace_context
-- transactional: false
-- A run that took a match over records how (lifecycle.takeover: death_seen, lease_lapsed, handoff)
-- and the seconds from its predecessor's close to its own first live byte; the board shows the path
-- and /metrics reads them as kickoff_listener_takeover_seconds by path (a partial index: only
-- takeovers). NULL: not a takeover (a first start, a plain restart), or a run before this migration.
-- Nullable columns without a default: no table rewrite; the index is built CONCURRENTLY (outside a
-- transaction) while rows keep being written.
ALTER TABLE match_listener_records ADD COLUMN IF NOT EXISTS takeover_path TEXT;
ALTER TABLE match_listener_records ADD COLUMN IF NOT EXISTS takeover_seconds DOUBLE PRECISION;
CREATE INDEX CONCURRENTLY IF NOT EXISTS match_listener_records_takeover_idx
    ON match_listener_records (takeover_path, created_at)
    WHERE takeover_path IS NOT NULL;
