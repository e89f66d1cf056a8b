-- depends: 0070_listener_takeover
-- A trade claim's key is unique within its league (issue 35): (league_id, queue, claim_key), so a key
-- one league claimed neither blocks nor reveals the same key in another league, and a league limit
-- holds for claims. Reported action results share the table (claim key result:<tracking id>, one
-- league per action): the new key keeps them unique too.
CREATE UNIQUE INDEX execution_log_league_claim_idx ON execution_log (league_id, queue, claim_key);
DROP INDEX execution_log_claim_idx;
