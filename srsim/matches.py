"""The is_test Match rows of srsim's scripted games: created when srsim starts, if missing."""

from __future__ import annotations

from datetime import timedelta

from config.clock import utcnow
from models.db import connection_scope
from models.match import register_test_match
from srsim.script import GameScript


def register_test_matches(games: list[GameScript], *, speed: float = 1.0) -> int:
    """Create the is_test Match rows (and leagues) of srsim's is_test games that do not exist yet."""
    created = 0
    with connection_scope():
        for g in games:
            if not g.is_test:
                continue
            scheduled = utcnow() + timedelta(seconds=g.start_after / speed)
            created += register_test_match(sr_id=g.sr_id, league=g.league, title=g.title, scheduled=scheduled)
    return created
