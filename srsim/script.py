"""srsim game scripts: what a simulated game sends and when, in the provider's push envelope.

A script file is JSON: ``{"games": [game, ...]}`` (or one game object). A game::

    {"sr_id": "<uuid>", "league": "mlb", "title": "HOU @ KC", "is_test": true,
     "start_after": 5,          # script seconds after srsim starts until the first event
     "event_interval": 2,       # script seconds between two events
     "event_count": 40,         # generated at-bats and pitches ... or "events": [envelope, ...]
     "game_delay_at_event": 10, # optional rain delay before this event index
     "delay_seconds": 30}       # how long the delay lasts (script seconds)

Script seconds are divided by srsim's speed factor. Generated events follow the real MLB push
shape (``payload.game``, ``payload.event``, ``metadata.match``, ``metadata.operation``); the delay
is one event whose ``payload.game.status`` is ``delayed``; the last event carries ``complete``
and nothing marks the end of the stream afterwards, as in the real feed.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from config.errors import SimulatorScriptError

_TEAMS = [
    ("Royals", "Kansas City", "KC"),
    ("Astros", "Houston", "HOU"),
    ("Yankees", "New York", "NYY"),
    ("Red Sox", "Boston", "BOS"),
    ("Cubs", "Chicago", "CHC"),
    ("Dodgers", "Los Angeles", "LAD"),
]
_HITTERS = ["Adalberto Mondesi", "Whit Merrifield", "Jose Altuve", "Alex Bregman", "Salvador Perez"]


@dataclass
class GameScript:
    """One simulated game and its timeline (seconds are script seconds)."""

    sr_id: str
    league: str = "mlb"
    title: str = ""
    is_test: bool = True
    start_after: float = 5.0
    event_interval: float = 2.0
    event_count: int = 40
    events: list[dict[str, Any]] = field(default_factory=list)  # full envelopes (clones)
    game_delay_at_event: int | None = None
    delay_seconds: float = 30.0
    week: int = 1
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
        """Script second of each event (the delay event included, resumed events shifted)."""
        times = []
        for i in range(self.total_events):
            t = self.start_after + i * self.event_interval
            if self.game_delay_at_event is not None and i > self.game_delay_at_event:
                t += self.delay_seconds
            times.append(t)
        return times

    @property
    def total_events(self) -> int:
        extra = (
            1 if self.game_delay_at_event is not None and self.game_delay_at_event < self.event_count else 0
        )
        return self.event_count + extra

    def transitions(self) -> list[tuple[float, str]]:
        """(script second, Match.status) when srsim writes an is_test match's status."""
        times = self.event_times()
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
            base = [self._generated(i, scheduled) for i in range(self.event_count)]
        d = self.game_delay_at_event
        if d is not None and d < self.event_count:
            base.insert(d, self._delay_event(d, scheduled))
            for env in base[d + 1 :]:
                _set_status(env, "inprogress")
        if base:
            _set_status(base[-1], "complete")
        return base

    def _retarget(self, env: dict[str, Any]) -> dict[str, Any]:
        env = json.loads(json.dumps(env))
        game = env.setdefault("payload", {}).setdefault("game", {})
        game["id"] = self.sr_id
        env.setdefault("metadata", {})["match"] = f"sd:match:{self.sr_id}"
        return env

    def _game(self, status: str, scheduled: datetime) -> dict[str, Any]:
        (hn, hm, ha), (an, am, aa) = self.home, self.away
        return {
            "id": self.sr_id,
            "status": status,
            "coverage": "full",
            "scheduled": scheduled.isoformat(),
            "home": {"name": hn, "market": hm, "abbr": ha, "id": str(uuid.uuid5(uuid.NAMESPACE_URL, ha))},
            "away": {"name": an, "market": am, "abbr": aa, "id": str(uuid.uuid5(uuid.NAMESPACE_URL, aa))},
        }

    def _generated(self, i: int, scheduled: datetime) -> dict[str, Any]:
        atbat, step = divmod(i, 4)
        inning = atbat // 6 + 1
        half = "T" if (atbat // 3) % 2 == 0 else "B"
        event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.sr_id}/{atbat}/{step}"))
        created = scheduled + timedelta(seconds=i * self.event_interval)
        if step == 0:
            etype, category, op = "atbat", "atbat", "create"
            hitter = _HITTERS[atbat % len(_HITTERS)]
            event: dict[str, Any] = {"hitter": {"full_name": hitter}}
        else:
            etype, op = "pitch", "update"
            category = "pitch"
            if step == 3:
                category = "pitch,hit,single,atbatover" if atbat % 3 == 0 else "pitch,strikeout,out,atbatover"
            event = {}
        event.update(
            {
                "id": event_id,
                "type": etype,
                "inning": inning,
                "inning_half": half,
                "sequence_number": i,
                "status": "official",
                "created_at": created.isoformat(),
            }
        )
        return {
            "payload": {"game": self._game("inprogress", scheduled), "event": event},
            "locale": "en",
            "metadata": self._metadata(etype, category, op, inning, half),
        }

    def _delay_event(self, i: int, scheduled: datetime) -> dict[str, Any]:
        event = {
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.sr_id}/delay")),
            "type": "delay",
            "description": "Rain delay",
            "sequence_number": i,
            "created_at": (scheduled + timedelta(seconds=i * self.event_interval)).isoformat(),
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
    """The built-in games: a plain one, one with a rain delay, and one more for a restart drill."""

    def game(title: str, home: int, **extra: Any) -> GameScript:
        return GameScript(
            sr_id=str(uuid.uuid4()),
            title=title,
            start_after=start_after,
            event_interval=event_interval,
            event_count=event_count,
            home=_TEAMS[home],
            away=_TEAMS[home + 1],
            **extra,
        )

    rain = {"game_delay_at_event": event_count // 3, "delay_seconds": event_interval * 8}
    return [game("HOU @ KC", 0), game("BOS @ NYY (rain delay)", 2, **rain), game("LAD @ CHC", 4)]
