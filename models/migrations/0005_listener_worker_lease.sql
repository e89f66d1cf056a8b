-- depends: 0004_matches_fillfactor
-- The lease of the listener worker process that runs a lifecycle row: when that lease is gone
-- from Redis, the worker is dead (it fences itself before its lease expires), so the row is
-- abandoned and its match started again without waiting for the heartbeat's stale threshold.
ALTER TABLE match_listener_records ADD COLUMN worker_lease TEXT;
-- The reaper asks for the distinct leases of open rows every few seconds in every listener worker.
CREATE INDEX match_listener_records_open_lease_idx ON match_listener_records (worker_lease)
    WHERE ended_at IS NULL;
