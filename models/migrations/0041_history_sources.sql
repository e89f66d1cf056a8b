-- depends: 0040_history
-- transactional: false
-- What the Matches board and the history rollup read by time: matches by scheduled start (the
-- board's window), listener runs by start and end (takeovers, ends per minute), outbox rows by
-- publish time and job runs by end time (the per-minute rates). Built CONCURRENTLY (outside a
-- transaction) so writes go on while they build on large tables.
CREATE INDEX CONCURRENTLY IF NOT EXISTS matches_scheduled_idx ON matches (scheduled);
CREATE INDEX CONCURRENTLY IF NOT EXISTS match_listener_records_created_idx
    ON match_listener_records (created_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS match_listener_records_ended_idx
    ON match_listener_records (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_messages_published_idx
    ON outbox_messages (published_at) WHERE published_at IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS run_log_ended_idx ON run_log (ended_at) WHERE ended_at IS NOT NULL;
