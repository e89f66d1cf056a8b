-- depends: 0019_fence_tokens
-- transactional: false
-- A run cut from Redis fences itself and closes its row in PostgreSQL, but cannot release its start
-- lock or clear its pending key. Every listener worker's reaper (every LISTENER_REAPER_POLL_SECONDS)
-- asks for the rows closed within the stale threshold that ran under a worker lease, and frees the
-- start lock (and pending key) a row still holds once its lease is gone: the match starts again
-- elsewhere at once instead of after the lock's TTL. Built CONCURRENTLY (outside a transaction):
-- heartbeats and new rows keep being written while it builds on a large table.
CREATE INDEX CONCURRENTLY IF NOT EXISTS match_listener_records_closed_lease_idx
    ON match_listener_records (ended_at)
    WHERE worker_lease IS NOT NULL;
