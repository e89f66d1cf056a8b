-- depends: 0045_trace_context
-- The match event log (issue 34): every distinct message of a match once, whatever host, run or
-- path (live, resume replay, play-by-play backfill, import) brought it.
--
-- match_event_keys is the unique key: one row per (match, message identity of listener.events),
-- a plain table because a unique index of a partitioned table must contain its partition key.
-- match_events holds the messages, partitioned by month of arrival; a row is only ever inserted
-- together with its key row (one statement, models/event_log.py), which also checks the writing
-- run's fencing token against the match's current one under the match row's share lock.
CREATE TABLE match_event_keys (
    match_id     UUID NOT NULL,
    message_key  TEXT NOT NULL,
    arrived_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (match_id, message_key)
);
CREATE INDEX match_event_keys_arrived_idx ON match_event_keys (arrived_at);

CREATE SEQUENCE match_events_seq;
CREATE TABLE match_events (
    match_id     UUID NOT NULL,
    seq          BIGINT NOT NULL DEFAULT nextval('match_events_seq'),
    arrived_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    message_key  TEXT NOT NULL,
    record_id    UUID,
    fence_token  BIGINT,
    kind         TEXT NOT NULL
        CHECK (kind IN ('live', 'resumed', 'backfilled', 'imported', 'marker', 'unreadable')),
    message      JSONB NOT NULL,
    -- The bytes as received, when jsonb cannot hold them (a NUL, invalid UTF-8): readers use these.
    raw          BYTEA,
    PRIMARY KEY (match_id, message_key, arrived_at)
) PARTITION BY RANGE (arrived_at);
ALTER SEQUENCE match_events_seq OWNED BY match_events.seq;
-- A match's messages in arrival order (export, resume, verification).
CREATE INDEX match_events_match_seq_idx ON match_events (match_id, seq);

-- The partition of the month holding ``at`` (created when missing); the writer calls it ahead of time.
CREATE FUNCTION kickoff_match_events_partition(at TIMESTAMPTZ) RETURNS TEXT
LANGUAGE plpgsql AS $$
DECLARE
    first DATE := date_trunc('month', at AT TIME ZONE 'UTC')::DATE;
    name TEXT := 'match_events_' || to_char(first, 'YYYY_MM');
BEGIN
    EXECUTE format(
        'CREATE TABLE IF NOT EXISTS %I PARTITION OF match_events FOR VALUES FROM (%L) TO (%L)',
        name, (first::TIMESTAMP AT TIME ZONE 'UTC'),
        ((first + INTERVAL '1 month')::TIMESTAMP AT TIME ZONE 'UTC'));
    RETURN name;
END $$;

-- (PERFORM in a DO block: a bare SELECT's result would be printed by `kickoff db migrate`.)
DO $$
BEGIN
    PERFORM kickoff_match_events_partition(now() - INTERVAL '1 month');
    PERFORM kickoff_match_events_partition(now());
    PERFORM kickoff_match_events_partition(now() + INTERVAL '1 month');
    PERFORM kickoff_match_events_partition(now() + INTERVAL '2 month');
END $$;
-- Nothing is lost when the writer did not create a month in time.
CREATE TABLE match_events_default PARTITION OF match_events DEFAULT;
