-- depends: 0002_publisher
-- Job runs: one run_log row per run (published, chained, scheduled or recorded by run_scope)
-- and the run outbox that carries RunCommands to the job_runs queue.

CREATE TABLE run_log (
    id               UUID PRIMARY KEY,
    job              TEXT NOT NULL,
    trigger          TEXT NOT NULL,
    dedupe_key       TEXT NOT NULL,
    params           JSONB NOT NULL DEFAULT '{}'::jsonb,
    status           TEXT NOT NULL DEFAULT 'queued',
    reason           TEXT,
    attempt          INTEGER NOT NULL DEFAULT 1,
    retry_budget     INTEGER NOT NULL DEFAULT 0,
    parent_id        UUID REFERENCES run_log (id) ON DELETE SET NULL,
    chain_root       UUID,
    queued_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at       TIMESTAMPTZ,
    claimed_at       TIMESTAMPTZ,
    started_at       TIMESTAMPTZ,
    first_started_at TIMESTAMPTZ,
    ended_at         TIMESTAMPTZ,
    duration_seconds DOUBLE PRECISION,
    exit_code        INTEGER,
    log_path         TEXT,
    host             TEXT,
    pid              INTEGER,
    error            TEXT
);
-- One run per dedupe key, however many callers race (duplicate otherwise).
CREATE UNIQUE INDEX run_log_dedupe_key_idx ON run_log (dedupe_key);
-- The launcher's rebuild: queued rows, oldest first.
CREATE INDEX run_log_queued_idx ON run_log (queued_at) WHERE status = 'queued';
-- Overlap checks and recovery: running rows by job and by host.
CREATE INDEX run_log_running_idx ON run_log (job, host) WHERE status = 'running';
CREATE INDEX run_log_job_idx ON run_log (job, queued_at DESC);
CREATE INDEX run_log_parent_idx ON run_log (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE job_run_outbox (
    id            BIGSERIAL PRIMARY KEY,
    run_id        UUID NOT NULL REFERENCES run_log (id) ON DELETE CASCADE,
    attempt       INTEGER NOT NULL,
    payload       JSONB NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    published_at  TIMESTAMPTZ,
    tries         INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT
);
-- drain_job_runs: unpublished rows, oldest first.
CREATE INDEX job_run_outbox_unpublished_idx ON job_run_outbox (id) WHERE published_at IS NULL;
