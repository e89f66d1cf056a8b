"""The listener status board: the latest run of every match with a listener history, and its barriers."""

from __future__ import annotations

import uuid
from typing import Any

from config.clock import utcnow
from config.errors import MatchNotFound
from config.settings import MatchListenerEnvironment
from models.badges import derive_badge
from models.barriers import Barriers
from models.db import database, database_errors

_LATEST = """
SELECT DISTINCT ON (r.match_id)
       r.match_id, m.sr_id, r.ended_at, r.exit_code, r.heartbeat_at, m.auto_dispatch_listener
  FROM match_listener_records r JOIN matches m ON m.id = r.match_id
 {where}
 ORDER BY r.match_id, r.created_at DESC
"""


def listener_status(
    *, settings: MatchListenerEnvironment, barriers: Barriers, match_id: str | None = None
) -> list[dict[str, Any]]:
    """Rows with keys ``match_id, sr_id, badge, exit_code, heartbeat_age_s, attempts, exhausted,
    auto_dispatch`` (heartbeat age only for open runs)."""
    params: tuple[Any, ...] = ()
    where = ""
    if match_id is not None:
        where, params = "WHERE r.match_id = %s", (uuid.UUID(match_id),)
    with database_errors():
        if (
            match_id is not None
            and not database.execute_sql("SELECT 1 FROM matches WHERE id = %s", params).fetchone()
        ):
            raise MatchNotFound(f"no match with id {match_id}")
        latest = database.execute_sql(_LATEST.format(where=where), params).fetchall()
    now = utcnow()
    out = []
    for mid, sr_id, ended_at, exit_code, heartbeat_at, auto in latest:
        badge = derive_badge(
            ended_at=ended_at,
            exit_code=exit_code,
            heartbeat_at=heartbeat_at,
            now=now,
            stale_after_seconds=settings.listener_heartbeat_stale_seconds,
        )
        out.append(
            {
                "match_id": str(mid),
                "sr_id": sr_id,
                "badge": str(badge),
                "exit_code": exit_code,
                "heartbeat_age_s": None if ended_at else round((now - heartbeat_at).total_seconds(), 1),
                "attempts": barriers.attempts(mid),
                "exhausted": barriers.is_exhausted(mid),
                "auto_dispatch": bool(auto),
            }
        )
    return sorted(out, key=lambda r: r["sr_id"])
