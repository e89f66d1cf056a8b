-- depends: 0013_late_action_results
-- A run outbox row whose RunCommand cannot be built or encoded is set aside: dead_at is set, the
-- reason is in last_error, and drain_job_runs never takes it again (the run itself stays queued
-- in run_log, so a launcher's rescan still starts it).
ALTER TABLE job_run_outbox ADD COLUMN dead_at TIMESTAMPTZ;
DROP INDEX job_run_outbox_unpublished_idx;
CREATE INDEX job_run_outbox_unpublished_idx ON job_run_outbox (id) WHERE published_at IS NULL AND dead_at IS NULL;
