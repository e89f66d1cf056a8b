"""Named SQL statements on ``players`` (the roster sync and the ESPN-id check).

The publisher runs these with ``database.execute_sql``; no other module of it writes SQL for this table.
"""

from __future__ import annotations

UPSERT = (
    "INSERT INTO players (sleeper_id, espn_id, full_name, team, injury_status, synced_at) SELECT * FROM "
    "unnest(%s::text[], %s::bigint[], %s::text[], %s::text[], %s::text[]), LATERAL (SELECT "
    "%s::timestamptz) t ON CONFLICT (sleeper_id) DO UPDATE SET espn_id = EXCLUDED.espn_id, full_name = "
    "EXCLUDED.full_name, team = EXCLUDED.team, injury_status = EXCLUDED.injury_status, synced_at = "
    "EXCLUDED.synced_at"
)

SLEEPER_ONLY_IDS = (
    "SELECT v.id FROM unnest(%s::bigint[]) AS v (id) WHERE EXISTS (SELECT 1 FROM players p WHERE "
    "p.sleeper_id = v.id::text) AND NOT EXISTS (SELECT 1 FROM players p WHERE p.espn_id = v.id)"
)
