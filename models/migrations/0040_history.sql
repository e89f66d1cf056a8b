-- depends: 0020_hosts_closed_leased_rows
-- History: per-minute points of the series the console draws (models/history_series.py declares
-- them): one row per series, key and minute. Counters written by the processes that count them
-- (listener workers' events and gaps, the trigger answers of API and CLI processes) are added to
-- the minute's value; the rollup job (every minute) writes the snapshots (listeners by badge,
-- outbox depth) and the series it derives from PostgreSQL tables (takeovers, listener ends,
-- outbox publishes, job runs). Rows older than HISTORY_RETENTION_DAYS are deleted by the same job.
CREATE TABLE history_points (
    series  TEXT NOT NULL,
    key     TEXT NOT NULL DEFAULT '',
    minute  TIMESTAMPTZ NOT NULL,
    value   DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (series, minute, key)
);
-- The prune (minute < cut-off) without a scan of every series.
CREATE INDEX history_points_minute_idx ON history_points (minute);
