"""Player sync: read the provider's players map, alert rostered players' injury changes, keep the map.

The source is the provider's players map in Sleeper's format: a JSON object from player id (a
string) to ``{"player_id", "full_name", "team", "injury_status", "espn_id", ...}``, read from an
``http(s)://`` URL or a file. A sync compares each rostered player's ``injury_status`` with the
one the last sync saw: a change to Questionable, Doubtful or Out is one INJURY_STATUS_CHANGE
alert on waiver_actions (publisher.alerts); the same status seen again sends nothing, and a
player seen for the first time is recorded without an alert. Alerts are published before the
new statuses are saved, so a failed publish is retried by the next sync (at least once).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import peewee
import requests

from config.clock import utcnow
from config.errors import PlayerSyncError, TriggerValidationError
from config.settings import mask_url
from models.db import database, database_errors
from models.player import Player, RosterPlayer
from publisher.alerts import InjuryChange, publish_injury_alerts, should_alert
from publisher.amqp import AmqpPublisher
from publisher.sql import players as player_sql

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlayerRecord:
    """One player of the map, as synced."""

    sleeper_id: str
    espn_id: int | None
    full_name: str | None
    team: str | None
    injury_status: str | None


@dataclass(frozen=True)
class SyncReport:
    """What one sync did."""

    players: int  # players in the map
    rostered: int  # rostered players found in it
    first_seen: int  # rostered players recorded without an alert (no earlier status)
    alerts: list[str] = field(default_factory=list)  # message ids of the alerts published

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def parse_players_map(data: Any) -> list[PlayerRecord]:
    """The players of a decoded map; PlayerSyncError when it is not a map of player objects."""
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise PlayerSyncError(f"the players map must be a JSON object of player id -> player, got {kind}")
    out = []
    for key, player in data.items():
        if not isinstance(player, dict):
            raise PlayerSyncError(f"player {key!r} is not an object")
        out.append(
            PlayerRecord(
                sleeper_id=str(player.get("player_id") or key),
                espn_id=_int_or_none(player.get("espn_id")),
                full_name=player.get("full_name"),
                team=player.get("team"),
                injury_status=player.get("injury_status") or None,
            )
        )
    return out


def load_players_map(source: str, *, timeout_seconds: float = 30.0) -> list[PlayerRecord]:
    """Read the players map from an http(s) URL or a file path."""
    try:
        if source.startswith(("http://", "https://")):
            response = requests.get(source, timeout=timeout_seconds)
            response.raise_for_status()
            data = response.json()
        else:
            data = json.loads(Path(source).read_text())
    except (requests.RequestException, OSError, ValueError) as exc:
        # A requests error's text repeats the URL unmasked: its kind (and HTTP status) only.
        status = getattr(getattr(exc, "response", None), "status_code", None)
        reason = (
            f"{type(exc).__name__}{f' {status}' if status else ''}"
            if isinstance(exc, requests.RequestException)
            else str(exc)
        )
        raise PlayerSyncError(f"players map {mask_url(source)} cannot be read: {reason}") from exc
    return parse_players_map(data)


def _rostered_statuses(ids: Iterable[str]) -> dict[str, Player]:
    """The last synced record of each rostered player among ``ids``."""
    rostered = RosterPlayer.select(RosterPlayer.sleeper_id).distinct()
    query = Player.select().where(Player.sleeper_id.in_(list(ids)), Player.sleeper_id.in_(rostered))
    return {p.sleeper_id: p for p in query}


def _rostered_ids(ids: Iterable[str]) -> set[str]:
    query = RosterPlayer.select(RosterPlayer.sleeper_id).where(RosterPlayer.sleeper_id.in_(list(ids)))
    return {r.sleeper_id for r in query}


def _save(players: list[PlayerRecord], *, now: datetime) -> None:
    """Upsert every player of the map (one statement)."""
    database.execute_sql(
        player_sql.UPSERT,
        (
            [p.sleeper_id for p in players],
            [p.espn_id for p in players],
            [p.full_name for p in players],
            [p.team for p in players],
            [p.injury_status for p in players],
            now,
        ),
    )


def sync_players(source: str, *, publisher: AmqpPublisher, now: datetime | None = None) -> SyncReport:
    """One sync: alert the rostered players' injury changes, then save the map; see the module docstring."""
    now = now or utcnow()
    players = load_players_map(source)
    by_id = {p.sleeper_id: p for p in players}
    with database_errors():
        rostered = _rostered_ids(by_id)
        before = _rostered_statuses(rostered)
    changes = [
        InjuryChange(
            player_id=pid,
            player_name=by_id[pid].full_name or pid,
            previous_status=before[pid].injury_status,
            status=by_id[pid].injury_status,
            rostered=True,
            nfl_team=by_id[pid].team,
            observed_at=now,
        )
        for pid in sorted(rostered)
        if pid in before
    ]
    alerts = publish_injury_alerts([c for c in changes if should_alert(c)], publisher=publisher)
    with database_errors(), database.atomic():
        _save(players, now=now)
    report = SyncReport(
        players=len(players), rostered=len(rostered), first_seen=len(rostered) - len(before), alerts=alerts
    )
    logger.info(
        "player sync: %d players, %d rostered (%d first seen), %d injury alerts",
        report.players,
        report.rostered,
        report.first_seen,
        len(alerts),
    )
    return report


def add_to_roster(league_id: str, sleeper_ids: Iterable[str]) -> int:
    """Put players on a league's roster (already there: unchanged); returns how many were added."""
    rows = [{"league_id": league_id, "sleeper_id": str(s), "added_at": utcnow()} for s in sleeper_ids]
    if not rows:
        return 0
    with database_errors():
        query = RosterPlayer.insert_many(rows).on_conflict_ignore().returning(RosterPlayer.sleeper_id)
        return len(list(query.execute()))


def roster(league_id: str | None = None) -> list[dict[str, Any]]:
    """The rostered players with their last synced name, team and injury status."""
    same_player = RosterPlayer.sleeper_id == Player.sleeper_id
    query = (
        RosterPlayer.select(RosterPlayer, Player)
        .join(Player, peewee.JOIN.LEFT_OUTER, on=same_player, attr="player")
        .order_by(RosterPlayer.league_id, RosterPlayer.sleeper_id)
    )
    if league_id is not None:
        query = query.where(RosterPlayer.league_id == league_id)
    with database_errors():
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


def sleeper_only_ids(ids: Iterable[int]) -> set[int]:
    """Of ``ids``, those the players map knows as Sleeper ids and not as any player's ESPN id."""
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return set()
    with database_errors():
        rows = database.execute_sql(
            player_sql.SLEEPER_ONLY_IDS,
            (wanted,),
        ).fetchall()
    return {int(r[0]) for r in rows}


def sleeper_id_refusal(fields: dict[str, int | None], sleeper_ids: set[int]) -> TriggerValidationError | None:
    """The refusal naming the first field whose id is in ``sleeper_ids`` (``sleeper_only_ids``), if any.

    The ESPN routes take ESPN ids (integers); a numeric Sleeper id ("4046") turned into an
    integer would otherwise pass. Ids the map does not know are left to the consumer.
    """
    for name, pid in fields.items():
        if pid is not None and pid in sleeper_ids:
            return TriggerValidationError(
                name, f"{pid} is a Sleeper player id (players map); this route takes ESPN player ids"
            )
    return None
