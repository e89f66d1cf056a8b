-- depends: 0020_hosts_closed_leased_rows
-- The W3C trace context each unit of work was created in (config.spans), so the console links it to
-- its trace and a later hop continues it: a job run's (run_log, its publish and the launcher's run of
-- it), a trade claim's and a reported action result's (execution_log: the verification continues
-- it), a listener run's (match_listener_records: a stop or sweep links to its span). NULL: created
-- while tracing was off. An activity action keeps its context in activity_actions.traceparent.
-- Nullable columns without a default: no table rewrite.
ALTER TABLE run_log ADD COLUMN IF NOT EXISTS traceparent TEXT;
ALTER TABLE execution_log ADD COLUMN IF NOT EXISTS traceparent TEXT;
ALTER TABLE match_listener_records ADD COLUMN IF NOT EXISTS traceparent TEXT;
