"""The is_test Match rows of srsim's scripted games: created when srsim starts, if missing."""

from __future__ import annotations

from datetime import timedelta

from config.clock import utcnow
from srsim.script import GameScript


def register_test_matches(games: list[GameScript], *, speed: float = 1.0) -> int:
    """Create the is_test Match rows (and leagues) of srsim's is_test games that do not exist yet."""
    from models.db import database
    from models.league import League
    from models.match import Match

    created = 0
    with database.connection_context():
        for g in games:
            if not g.is_test:
                continue
            lg, _ = League.get_or_create(name=g.league)
            _, made = Match.get_or_create(
                sr_id=g.sr_id,
                defaults={
                    "league": lg,
                    "title": g.title,
                    "scheduled": utcnow() + timedelta(seconds=g.start_after / speed),
                    "is_test": True,
                },
            )
            created += int(made)
    return created
