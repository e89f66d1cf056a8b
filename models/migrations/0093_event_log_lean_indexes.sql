-- depends: 0087_console_session_origin
-- The event log's write path keeps only the indexes a reader or the de-duplication uses
-- (bench/stream_ingest.py; docs/scaling.md, "The event log"):
--
-- * match_events' primary key (match_id, message_key, arrived_at) went: no reader looks a row up
--   by it, and it could not keep a second copy out (two copies differ in arrived_at). What keeps a
--   message unique is match_event_keys' primary key, inserted in the same statement. It cost a
--   wide b-tree entry per message.
-- * match_event_keys' arrived_at index becomes a BRIN index: its readers (a prune's
--   DELETE ... WHERE arrived_at < cutoff, the prune's check for live matches in range) scan ranges of
--   arrival, which follow insertion order; a b-tree entry per message was the cost.
--
-- match_events (match_id, seq), the index of every reader, stays.
ALTER TABLE match_events DROP CONSTRAINT match_events_pkey;
DROP INDEX match_event_keys_arrived_idx;
CREATE INDEX match_event_keys_arrived_idx ON match_event_keys USING brin (arrived_at);
