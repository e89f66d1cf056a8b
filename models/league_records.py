"""The store of a league's records from the feed (``LeagueRecord``s: teams, seasons), keyed by sr_id."""

from __future__ import annotations

import logging
from typing import Any

from config.clock import utcnow
from models.base import LeagueRecord
from models.boundary import translate_database_errors
from models.league import League

logger = logging.getLogger(__name__)


@translate_database_errors
def upsert_league_records(
    model: type[LeagueRecord], league: League, rows: list[dict[str, Any]]
) -> tuple[int, int]:
    """Create or update ``model`` rows (teams, seasons) of ``league`` by sr_id, writing only changed values;
    returns (created, updated)."""
    now = utcnow()
    existing = {r.sr_id: r for r in model.select().where(model.league == league)}
    created = updated = 0
    for values in {v["sr_id"]: v for v in rows}.values():
        current = existing.get(values["sr_id"])
        if current is None:
            fields = {getattr(model, k): v for k, v in values.items() if k != "sr_id"}
            model.insert(league=league, created_at=now, updated_at=now, **values).on_conflict(
                conflict_target=[model.league, model.sr_id], update={**fields, model.updated_at: now}
            ).execute()
            created += 1
            continue
        changed = {k: v for k, v in values.items() if getattr(current, k) != v}
        if changed:
            model.update(**changed, updated_at=now).where(model.id == current.id).execute()
            logger.info(
                "%s %s of %s updated: %s", model.__name__, values["sr_id"], league.name, sorted(changed)
            )
            updated += 1
    return created, updated
