"""srsim game scripts: what a simulated game sends and when, in the provider's push envelope.

A script file is JSON: ``{"games": [game, ...]}`` (or one game object). A game::

    {"sr_id": "<uuid>", "league": "mlb", "title": "HOU @ KC", "is_test": true,
     "start_after": 5,          # script seconds after srsim starts until the first event
     "event_interval": 2,       # script seconds between two events
     "event_count": 40,         # generated at-bats and pitches ... or "events": [envelope, ...]
     "game_delay_at_event": 10, # optional rain delay before this event index
     "delay_seconds": 30,       # how long the delay lasts (script seconds)
     "corrections": 2,          # optional: re-sent pitch events with a corrected category
     "deletes": 1}              # optional: pitch events deleted by a later message

Script seconds are divided by srsim's speed factor. Generated events follow the game's league's
event model (srsim.models: at-bats, drives, periods or quarters of four messages each, in the
provider's push shape: ``payload.game``, ``payload.event``, ``metadata.match``,
``metadata.operation``); the delay
is one event whose ``payload.game.status`` is ``delayed``; the last event carries ``complete``
and nothing marks the end of the stream afterwards, as in the real feed. Every generated event
has ``created_at`` and ``updated_at``.

``corrections`` and ``deletes`` (generated games only; 0 by default) add messages between two
plays, a few plays after their target (a pitch that does not end its at-bat): a correction re-sends
the pitch with a later ``updated_at``, a corrected ``metadata.event_category`` and a
``description`` (operation ``update``); a delete cuts it to ``{id, type, deleted}`` (operation
``delete``, the NBA feed's shape). They are messages of the session (``total_events``) but not
plays (``event_count``), and take no slot of the timeline, so the game's clock is unchanged.
``resettles`` (0 by default) re-sends the play that ended each of the first units, two plays later,
with the other outcome (operation ``update``: a review), so a question settles again.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from models.leagues import DEFAULT
from srsim.errors import SimulatorScriptError
from srsim.models import PER_UNIT, model_of, name_uuid

_TEAMS = [
    ("Royals", "Kansas City", "KC"),
    ("Astros", "Houston", "HOU"),
    ("Yankees", "New York", "NYY"),
    ("Red Sox", "Boston", "BOS"),
    ("Cubs", "Chicago", "CHC"),
    ("Dodgers", "Los Angeles", "LAD"),
]


@dataclass
class GameScript:
    """One simulated game and its timeline (seconds are script seconds)."""

    sr_id: str
    league: str = DEFAULT.name
    title: str = ""
    is_test: bool = True
    start_after: float = 5.0
    event_interval: float = 2.0
    event_count: int = 40
    events: list[dict[str, Any]] = field(default_factory=list)  # full envelopes (clones)
    game_delay_at_event: int | None = None
    delay_seconds: float = 30.0
    week: int = 1
    corrections: int = 0  # extra messages correcting an earlier pitch (generated games only)
    deletes: int = 0  # extra messages deleting an earlier pitch (generated games only)
    resettles: int = 0  # extra messages correcting how an earlier unit ended (generated games only)
    home: tuple[str, str, str] = _TEAMS[0]
    away: tuple[str, str, str] = _TEAMS[1]

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> GameScript:
        if not isinstance(raw, dict) or not raw.get("sr_id"):
            raise SimulatorScriptError(f"a game needs an sr_id: {str(raw)[:80]}")
        known = {f for f in cls.__dataclass_fields__ if f not in ("home", "away")}
        kwargs = {k: v for k, v in raw.items() if k in known}
        if kwargs.get("game_delay_at_event") is not None:
            kwargs["game_delay_at_event"] = int(kwargs["game_delay_at_event"])
        for key in ("corrections", "deletes", "resettles"):
            if key in kwargs:
                try:
                    kwargs[key] = max(0, int(kwargs[key] or 0))
                except (TypeError, ValueError) as exc:
                    raise SimulatorScriptError(f"game {raw['sr_id']}: {key} must be a number") from exc
        game = cls(**kwargs)
        game.sr_id = str(game.sr_id)
        game.league = str(game.league).lower()
        if game.events:
            game.event_count = len(game.events)
        return game

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("home", "away")}
        return out

    # -- timeline --------------------------------------------------------------------

    def event_times(self) -> list[float]:
        """Script second of each message (the delay event and the extra messages included)."""
        base = self._base_times()
        extras = self._extras()
        out = []
        for m, t in enumerate(base):
            out.append(t)
            after = [x for x in extras if x[0] == m]
            for slot, _x in enumerate(after):  # evenly between this message and the next one
                out.append(t + (base[m + 1] - t) * (slot + 1) / (len(after) + 1))
        return out

    def _base_times(self) -> list[float]:
        """Script second of each play and of the delay event (resumed plays shifted by the delay)."""
        times = []
        for i in range(self._base_count):
            t = self.start_after + i * self.event_interval
            if self.game_delay_at_event is not None and i > self.game_delay_at_event:
                t += self.delay_seconds
            times.append(t)
        return times

    @property
    def _base_count(self) -> int:
        extra = (
            1 if self.game_delay_at_event is not None and self.game_delay_at_event < self.event_count else 0
        )
        return self.event_count + extra

    @property
    def total_events(self) -> int:
        """Messages of the session: the plays, the delay event, the corrections and deletes."""
        return self._base_count + len(self._extras())

    def _extras(self) -> list[tuple[int, str, int]]:
        """The corrections and deletes in message order: (index of the base message, a play or the
        delay event, they follow; kind; target play index)."""
        if self.events or not (self.corrections or self.deletes or self.resettles) or self.event_count < 3:
            return []
        last = self.event_count - 2  # another play comes after it (the last one is ``complete``)
        ends = [i for i in range(last + 1) if i % PER_UNIT == PER_UNIT - 1]  # plays ending a unit
        resettles = [(self._base_index(min(e + 2, last)), "resettle", e) for e in ends[: self.resettles]]
        candidates = [i for i in range(last + 1) if i % PER_UNIT in (1, 2)]  # plays not ending a unit
        wanted = min(self.corrections + self.deletes, len(candidates))
        if not wanted:
            return sorted(resettles, key=lambda x: x[0])
        targets = [candidates[(k * len(candidates)) // wanted] for k in range(wanted)]
        corrections, deletes = min(self.corrections, wanted), wanted - min(self.corrections, wanted)
        plan = []
        for k, target in enumerate(targets):  # alternate while both remain: both spread over the game
            if corrections and (not deletes or k % 2 == 0):
                kind, corrections = "correction", corrections - 1
            else:
                kind, deletes = "delete", deletes - 1
            plan.append((self._base_index(min(target + 3, last)), kind, target))
        return sorted(plan + resettles, key=lambda x: x[0])

    def _base_index(self, play: int) -> int:
        """Index of play ``play`` among the plays and the delay event."""
        d = self.game_delay_at_event
        return play + (1 if d is not None and d < self.event_count and play >= d else 0)

    def transitions(self) -> list[tuple[float, str]]:
        """(script second, Match.status) when srsim writes an is_test match's status."""
        times = self._base_times()
        out: list[tuple[float, str]] = [(self.start_after, "inprogress")]
        d = self.game_delay_at_event
        if d is not None and d < self.event_count:
            out.append((times[d], "delayed"))
            out.append((times[d] + self.delay_seconds, "inprogress"))
        out.append(((times[-1] if times else self.start_after) + self.event_interval, "closed"))
        return out

    def status_at(self, t: float) -> str:
        status = "scheduled"
        for when, value in self.transitions():
            if t >= when:
                status = value
        return status

    def envelopes(self, scheduled: datetime) -> list[dict[str, Any]]:
        """Every message of the game in order, in the provider's push envelope."""
        if self.events:
            base = [self._retarget(e) for e in self.events]
        else:
            model = model_of(self.league)  # once per game, not per message
            base = [model.play(self, i, scheduled) for i in range(self.event_count)]
        d = self.game_delay_at_event
        if d is not None and d < self.event_count:
            base.insert(d, self._delay_event(d, scheduled))
            for env in base[d + 1 :]:
                _set_status(env, "inprogress")
        if base:
            _set_status(base[-1], "complete")
        extras = self._extras()
        if extras:
            out = []
            for m, env in enumerate(base):
                out.append(env)
                for after, kind, target in extras:
                    if after == m:
                        original = base[self._base_index(target)]
                        seconds = (after - self._base_index(target) + 0.5) * self.event_interval
                        if kind == "resettle":
                            out.append(self._resettle(original, seconds))
                        elif kind == "correction":
                            out.append(self._correction(original, seconds))
                        else:
                            out.append(self._deletion(original, seconds))
            base = out
        return base

    def _correction(self, original: dict[str, Any], seconds: float) -> dict[str, Any]:
        """The original pitch again, later, with a corrected category and description (an update)."""
        env = json.loads(json.dumps(original))
        event, meta = env["payload"]["event"], env["metadata"]
        event["updated_at"] = _later(event["created_at"], seconds)
        meta["event_category"] = "pitch,ball"
        event["description"] = "Ball (corrected call)"
        meta["operation"] = "update"
        return env

    def _resettle(self, original: dict[str, Any], seconds: float) -> dict[str, Any]:
        """The play that ended a unit again, later, with the other outcome (an update: a review)."""
        env = json.loads(json.dumps(original))
        env["payload"]["event"]["updated_at"] = _later(env["payload"]["event"]["created_at"], seconds)
        env["metadata"]["operation"] = "update"
        model_of(self.league).corrected(env)
        return env

    def _deletion(self, original: dict[str, Any], seconds: float) -> dict[str, Any]:
        """A message deleting the original pitch: the event cut to its id, type and deletion time."""
        env = json.loads(json.dumps(original))
        event = env["payload"]["event"]
        env["payload"]["event"] = {
            "id": event["id"],
            "type": event["type"],
            "deleted": _later(event["created_at"], seconds),
        }
        env["metadata"]["operation"] = "delete"
        return env

    def _retarget(self, env: dict[str, Any]) -> dict[str, Any]:
        env = json.loads(json.dumps(env))
        game = env.setdefault("payload", {}).setdefault("game", {})
        game["id"] = self.sr_id
        env.setdefault("metadata", {})["match"] = f"sd:match:{self.sr_id}"
        return env

    def teams(self) -> tuple[dict[str, str], dict[str, str]]:
        """The home and away teams as the push payload's ``game.home`` and ``game.away``."""
        (hn, hm, ha), (an, am, aa) = self.home, self.away
        home = {"name": hn, "market": hm, "abbr": ha, "id": name_uuid(ha)}
        away = {"name": an, "market": am, "abbr": aa, "id": name_uuid(aa)}
        return home, away

    def _game(self, status: str, scheduled: datetime) -> dict[str, Any]:
        home, away = self.teams()
        return {
            "id": self.sr_id,
            "status": status,
            "coverage": "full",
            "scheduled": scheduled.isoformat(),
            "home": home,
            "away": away,
        }

    def _delay_event(self, i: int, scheduled: datetime) -> dict[str, Any]:
        created = (scheduled + timedelta(seconds=i * self.event_interval)).isoformat()
        event = {
            "id": name_uuid(f"{self.sr_id}/delay"),
            "type": "delay",
            "description": "Rain delay",
            "sequence_number": i,
            "created_at": created,
            "updated_at": created,
        }
        return {
            "payload": {"game": self._game("delayed", scheduled), "event": event},
            "locale": "en",
            "metadata": self._metadata("delay", "delay", "create", None, None, status="delayed"),
        }

    def _metadata(
        self,
        etype: str,
        category: str,
        op: str,
        inning: int | None,
        half: str | None,
        status: str = "inprogress",
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "league": self.league.upper(),
            "match": f"sd:match:{self.sr_id}",
            "status": status,
            "event_type": etype,
            "event_category": category,
            "locale": "en",
            "operation": op,
            "version": "v6.5",
        }
        if inning is not None:
            meta["inning"], meta["inning_half"] = inning, half
        return meta


def _later(iso: str, seconds: float) -> str:
    return (datetime.fromisoformat(iso) + timedelta(seconds=seconds)).isoformat()


def _set_status(env: dict[str, Any], status: str) -> None:
    payload = env.get("payload")
    if isinstance(payload, dict) and isinstance(payload.get("game"), dict):
        payload["game"]["status"] = status
    if isinstance(env.get("metadata"), dict):
        env["metadata"]["status"] = status


def load_script(path: Path | str) -> list[GameScript]:
    """Read a script file (``{"games": [...]}`` or one game object)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SimulatorScriptError(f"cannot read script {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise SimulatorScriptError(f"script {path} is not JSON: {exc}") from exc
    games = raw.get("games") if isinstance(raw, dict) and "games" in raw else [raw]
    if not isinstance(games, list):
        raise SimulatorScriptError(f"script {path}: 'games' must be a list")
    return [GameScript.from_dict(g) for g in games]


def save_script(path: Path, games: list[GameScript]) -> None:
    """Write a script file atomically (a watching srsim never reads a half-written one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"games": [g.to_dict() for g in games]}, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def demo_games(
    *, start_after: float = 10.0, event_interval: float = 2.0, event_count: int = 24
) -> list[GameScript]:
    """The built-in games: a plain one, one with a rain delay, and one more for a restart drill.

    Each has two corrections and one delete, so a listener's backfill meets final versions.
    """

    def game(title: str, home: int, **extra: Any) -> GameScript:
        return GameScript(
            sr_id=str(uuid.uuid4()),
            title=title,
            start_after=start_after,
            event_interval=event_interval,
            event_count=event_count,
            corrections=2,
            deletes=1,
            home=_TEAMS[home],
            away=_TEAMS[home + 1],
            **extra,
        )

    rain = {"game_delay_at_event": event_count // 3, "delay_seconds": event_interval * 8}
    return [game("HOU @ KC", 0), game("BOS @ NYY (rain delay)", 2, **rain), game("LAD @ CHC", 4)]
