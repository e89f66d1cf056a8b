-- depends: 0010_teams_seasons
-- The Dramatiq message id of a match's queued start gets its own column instead of a key inside
-- the listener_start_settings JSON (which now holds listener settings only). Existing ids move.
-- Not indexed: storing it stays a HOT update on matches (fillfactor 70).
ALTER TABLE matches ADD COLUMN start_message_id TEXT;

UPDATE matches
   SET start_message_id = listener_start_settings ->> 'message_id',
       listener_start_settings = listener_start_settings - 'message_id'
 WHERE listener_start_settings ? 'message_id';
