-- depends: 0087_console_session_origin
-- Each match's processed watermark (issues 34 and 39): the highest match_events.seq whose processing
-- (Match.status rules, the question pipeline) committed. A listener run advances it in the same
-- fenced transaction as the question writes (or the status write) that processing made, so it
-- never claims a message whose effects were lost; a run that starts processes the match's rows past
-- it first (a predecessor logged them, then died before processing them: a SIGKILL between the
-- log's commit and the processing), each message's effects exactly once.
CREATE TABLE match_processed (
    match_id     UUID PRIMARY KEY REFERENCES matches (id) ON DELETE CASCADE,
    seq          BIGINT NOT NULL,
    fence_token  BIGINT,  -- the run's token that advanced it last
    processed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- What the log holds today was processed (or lost) by the runs before this migration: a run after
-- it replays only what is logged from now on.
INSERT INTO match_processed (match_id, seq)
SELECT e.match_id, max(e.seq) FROM match_events e JOIN matches m ON m.id = e.match_id GROUP BY e.match_id;
