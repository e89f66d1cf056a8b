"""Player sync: read the provider's players map, alert rostered players' injury changes, keep the map.

The source is the provider's players map in Sleeper's format: a JSON object from player id (a
string) to ``{"player_id", "full_name", "team", "injury_status", "espn_id", ...}``, read from an
``http(s)://`` URL or a file. A sync compares each rostered player's ``injury_status`` with the
one the last sync saw: a change to Questionable, Doubtful or Out is one INJURY_STATUS_CHANGE
alert on waiver_actions (publisher.alerts); the same status seen again sends nothing, and a
player seen for the first time is recorded without an alert. Alerts are published before the
new statuses are saved, so a failed publish is retried by the next sync (at least once).

Each record is handled on its own: one that is malformed (not an object, a name, team or status
that is not a string, text PostgreSQL cannot store such as a NUL character or a lone surrogate,
an ESPN id that is not an integer or a string of digits or is beyond bigint, a player id seen
twice) is skipped with its reason (``SyncReport.skipped``), counted and logged once
(``config.set_aside``), and the other players are synced. Only a source that cannot be read,
or is not a map at all, fails the sync.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import requests

from config.clock import utcnow
from config.set_aside import set_aside
from config.settings import mask_url
from models.audit import AuditContext
from models.boundary import transaction
from models.player import add_roster_rows, roster_rows, rostered_ids, rostered_players, upsert_players
from players.errors import PlayerSyncError
from publisher.alerts import InjuryChange, publish_injury_alerts, should_alert
from publisher.amqp import AmqpPublisher
from publisher.validation import MAX_ESPN_ID

logger = logging.getLogger(__name__)

#: The loop's name where it sets an item aside (config.set_aside).
LOOP = "player_sync"


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

    players: int  # players of the map synced (the skipped ones are not counted)
    rostered: int  # rostered players found in it
    first_seen: int  # rostered players recorded without an alert (no earlier status)
    alerts: list[str] = field(default_factory=list)  # message ids of the alerts published
    skipped: dict[str, str] = field(default_factory=dict)  # map key -> why the record was not synced

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _espn_id(value: Any) -> int | None:
    """The ESPN id of a record: an integer or a string of digits; None when absent; ValueError otherwise."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        espn_id = value
    elif isinstance(value, str) and value.isascii() and value.isdigit():
        espn_id = int(value)
    else:
        raise ValueError(f"espn_id must be an integer or a string of digits, got {value!r:.100}")
    if not -MAX_ESPN_ID <= espn_id <= MAX_ESPN_ID:
        raise ValueError(f"espn_id {espn_id} is beyond a bigint")
    return espn_id


@dataclass(frozen=True)
class PlayersMap:
    """A decoded players map: the records that can be synced and the skipped ones (key -> reason)."""

    players: list[PlayerRecord]
    skipped: dict[str, str] = field(default_factory=dict)


def _text(player: dict[str, Any], name: str) -> str | None:
    value = player.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    _storable(value, name)
    return value


def _storable(value: str, name: str) -> None:
    """ValueError when PostgreSQL cannot store ``value``: a NUL character or a lone surrogate."""
    if "\x00" in value:
        raise ValueError(f"{name} contains the NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} is not valid UTF-8 text ({exc.reason})") from None


def _record(key: str, player: Any) -> PlayerRecord:
    """One record of the map; ValueError naming what is malformed."""
    if not isinstance(player, dict):
        raise ValueError(f"not an object ({type(player).__name__})")
    pid = player.get("player_id") or key
    if isinstance(pid, bool) or not isinstance(pid, str | int):
        raise ValueError(f"player_id must be a string, got {type(pid).__name__}")
    sleeper_id = str(pid)
    if not sleeper_id.strip():
        raise ValueError("player_id is empty")
    _storable(sleeper_id, "player_id")
    return PlayerRecord(
        sleeper_id=sleeper_id,
        espn_id=_espn_id(player.get("espn_id")),
        full_name=_text(player, "full_name"),
        team=_text(player, "team"),
        injury_status=_text(player, "injury_status"),
    )


def _skip(skipped: dict[str, str], key: str, kind: str, reason: str) -> None:
    skipped[key] = reason
    set_aside(loop=LOOP, kind=kind, item=f"player {key!r}", reason=reason)


def read_players_map(data: Any) -> PlayersMap:
    """The records of a decoded map, each malformed one skipped with its reason (counted, logged).

    PlayerSyncError only when ``data`` is not a map at all. A player id seen twice keeps its first
    record.
    """
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise PlayerSyncError(f"the players map must be a JSON object of player id -> player, got {kind}")
    players: dict[str, PlayerRecord] = {}
    skipped: dict[str, str] = {}
    for key, player in data.items():
        try:
            record = _record(str(key), player)
        except ValueError as exc:
            _skip(skipped, str(key), "malformed", f"malformed: {exc}")
            continue
        if record.sleeper_id in players:
            _skip(skipped, str(key), "duplicate", f"player id {record.sleeper_id} appears twice in the map")
            continue
        players[record.sleeper_id] = record
    return PlayersMap(list(players.values()), skipped)


def load_players_map(source: str, *, timeout_seconds: float = 30.0) -> PlayersMap:
    """Read the players map from an http(s) URL or a file path (malformed records skipped)."""
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
    return read_players_map(data)


def sync_players(
    source: str, *, publisher: AmqpPublisher, now: datetime | None = None, audit: AuditContext | None = None
) -> SyncReport:
    """One sync: alert the rostered players' injury changes, then save the map; see the module docstring.

    With ``audit``, the sync is audited (players.sync, the source masked) before anything is read.
    """
    if audit is not None:
        audit.record("players.sync", "players", None, after={"source": mask_url(source)})
    now = now or utcnow()
    loaded = load_players_map(source)
    players, skipped = loaded.players, dict(loaded.skipped)
    by_id = {p.sleeper_id: p for p in players}
    rostered = rostered_ids(list(by_id))
    before = rostered_players(list(rostered))
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
    with transaction():
        upsert_players(players, synced_at=now)  # one statement; the records were checked by _record
    report = SyncReport(
        players=len(players),
        rostered=len(rostered),
        first_seen=len(rostered) - len(before),
        alerts=alerts,
        skipped=skipped,
    )
    logger.info(
        "player sync: %d players, %d rostered (%d first seen), %d injury alerts, %d skipped",
        report.players,
        report.rostered,
        report.first_seen,
        len(alerts),
        len(skipped),
    )
    return report


def add_to_roster(league_id: str, sleeper_ids: Iterable[str], *, audit: AuditContext | None = None) -> int:
    """Put players on a league's roster (already there: unchanged); returns how many were added. With
    ``audit``, the rows and their entry (roster.add) are written in one transaction."""
    ids = [str(s) for s in sleeper_ids]
    rows = [{"league_id": league_id, "sleeper_id": s, "added_at": utcnow()} for s in ids]
    if not rows:
        return 0
    with transaction():
        added = add_roster_rows(rows)
        if audit is not None:
            audit.record("roster.add", "league", league_id, after={"sleeper_ids": ids})
    return added


def roster(league_id: str | None = None) -> list[dict[str, Any]]:
    """The rostered players with their last synced name, team and injury status."""
    return roster_rows(league_id)
