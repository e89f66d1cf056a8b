"""Player and RosterPlayer: the provider's players map as last synced, and the rostered players.

The one store of the ``players`` and ``roster_players`` tables: the roster sync (players.sync)
and the triggers' ESPN-id check (publisher.sleeper_ids) reach them through these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

import peewee

from models.base import BaseModel, UTCDateTimeField
from models.boundary import translate_database_errors, translate_database_refusals
from models.db import database


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


class PlayerValues(Protocol):
    """What ``upsert_players`` stores of one player of the map (players.sync.PlayerRecord)."""

    @property
    def sleeper_id(self) -> str: ...
    @property
    def espn_id(self) -> int | None: ...
    @property
    def full_name(self) -> str | None: ...
    @property
    def team(self) -> str | None: ...
    @property
    def injury_status(self) -> str | None: ...


_UPSERT = (
    "INSERT INTO players (sleeper_id, espn_id, full_name, team, injury_status, synced_at) SELECT * FROM "
    "unnest(%s::text[], %s::bigint[], %s::text[], %s::text[], %s::text[]), LATERAL (SELECT "
    "%s::timestamptz) t ON CONFLICT (sleeper_id) DO UPDATE SET espn_id = EXCLUDED.espn_id, full_name = "
    "EXCLUDED.full_name, team = EXCLUDED.team, injury_status = EXCLUDED.injury_status, synced_at = "
    "EXCLUDED.synced_at"
)

_SLEEPER_ONLY_IDS = (
    "SELECT v.id FROM unnest(%s::bigint[]) AS v (id) WHERE EXISTS (SELECT 1 FROM players p WHERE "
    "p.sleeper_id = v.id::text) AND NOT EXISTS (SELECT 1 FROM players p WHERE p.espn_id = v.id)"
)


@translate_database_refusals
def upsert_players(players: Sequence[PlayerValues], *, synced_at: datetime) -> None:
    """Insert or update every player of ``players`` (one statement), each marked synced at ``synced_at``;
    any refusal of the statement (a value PostgreSQL cannot store) raises DatabaseRefused."""
    database.execute_sql(
        _UPSERT,
        (
            [p.sleeper_id for p in players],
            [p.espn_id for p in players],
            [p.full_name for p in players],
            [p.team for p in players],
            [p.injury_status for p in players],
            synced_at,
        ),
    )


@translate_database_refusals
def sleeper_ids_among(ids: Iterable[int]) -> set[int]:
    """Of ``ids``, those the players map knows as Sleeper ids and not as any player's ESPN id (one query)."""
    rows = database.execute_sql(_SLEEPER_ONLY_IDS, (list(ids),)).fetchall()
    return {int(r[0]) for r in rows}
