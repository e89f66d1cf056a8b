"""Player and RosterPlayer: the provider's players map as last synced, and the rostered players."""

from __future__ import annotations

from typing import Any

import peewee

from models.base import BaseModel, UTCDateTimeField
from models.boundary import translate_database_errors


class Player(BaseModel):
    """One player of the provider's map (Sleeper id), with its last seen injury status."""

    sleeper_id = peewee.TextField(primary_key=True)
    espn_id = peewee.BigIntegerField(null=True)  # the ESPN id the map gives, if any
    full_name = peewee.TextField(null=True)
    team = peewee.TextField(null=True)  # NFL team abbreviation
    injury_status = peewee.TextField(null=True)  # Questionable, Doubtful, Out, IR, ... or None
    synced_at = UTCDateTimeField()

    class Meta:
        table_name = "players"


class RosterPlayer(BaseModel):
    """A player on a league's roster: its injury status changes are alerted."""

    league_id = peewee.TextField()
    sleeper_id = peewee.TextField()
    added_at = UTCDateTimeField()

    class Meta:
        table_name = "roster_players"
        primary_key = peewee.CompositeKey("league_id", "sleeper_id")


@translate_database_errors
def rostered_players(sleeper_ids: list[str]) -> dict[str, Player]:
    """The last synced record of each rostered player among ``sleeper_ids``, by Sleeper id."""
    rostered = RosterPlayer.select(RosterPlayer.sleeper_id).distinct()
    query = Player.select().where(Player.sleeper_id.in_(sleeper_ids), Player.sleeper_id.in_(rostered))
    return {p.sleeper_id: p for p in query}


@translate_database_errors
def rostered_ids(sleeper_ids: list[str]) -> set[str]:
    """Which of ``sleeper_ids`` are on some roster."""
    query = RosterPlayer.select(RosterPlayer.sleeper_id).where(RosterPlayer.sleeper_id.in_(sleeper_ids))
    return {r.sleeper_id for r in query}


@translate_database_errors
def roster_rows(league_id: str | None = None) -> list[dict[str, Any]]:
    """The rostered players (of league ``league_id``; None: every league) with their last synced name,
    team and injury status, by league and Sleeper id."""
    same_player = RosterPlayer.sleeper_id == Player.sleeper_id
    query = (
        RosterPlayer.select(RosterPlayer, Player)
        .join(Player, peewee.JOIN.LEFT_OUTER, on=same_player, attr="player")
        .order_by(RosterPlayer.league_id, RosterPlayer.sleeper_id)
    )
    if league_id is not None:
        query = query.where(RosterPlayer.league_id == league_id)
    out = []
    for r in query:
        player = getattr(r, "player", None)
        out.append(
            {
                "league_id": r.league_id,
                "sleeper_id": r.sleeper_id,
                "full_name": player.full_name if player else None,
                "team": player.team if player else None,
                "injury_status": player.injury_status if player else None,
            }
        )
    return out


@translate_database_errors
def add_roster_rows(rows: list[dict[str, Any]]) -> int:
    """Insert roster ``rows`` (league_id, sleeper_id, added_at); one already there is left as it is.
    Returns how many were added."""
    query = RosterPlayer.insert_many(rows).on_conflict_ignore().returning(RosterPlayer.sleeper_id)
    return len(list(query.execute()))
