-- depends: 0018_key_roles
-- Fencing at the data: every listener run of a match takes the next token of its match
-- (`matches.fence_token`, only ever incremented, in the transaction that inserts its open row) and
-- keeps it on its row; every write the run makes carries it, and the store refuses a write whose
-- token is older than its match's current one (a paused run that wakes up after its successor
-- started writes nothing). NULL on the rows of runs from before this migration (never fenced).
ALTER TABLE matches ADD COLUMN fence_token BIGINT NOT NULL DEFAULT 0;
ALTER TABLE match_listener_records ADD COLUMN fence_token BIGINT;
