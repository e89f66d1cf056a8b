"""srsim's event models, one per sport (models.leagues names each league's): what a generated game sends.

A model turns play ``i`` of a generated game into one push message in the provider's envelope
(``payload.game``, ``payload.event``, ``metadata``). Every model plays units of ``PER_UNIT``
messages: the first starts the unit, the last ends it (the message a question pipeline settles
on), the two between are ordinary plays (what a script's ``corrections`` and ``deletes`` target).
``corrected`` gives the version of a unit's last message with the other outcome (a script's
``resettles``). The models follow the provider's push event documents (docs/adding-a-league.md)
in small: one unit is four messages, where a real inning, drive, period or quarter has many.

It also holds how the league's own documents differ (the teams' alias key, the hierarchy's group
name): baseball's ``abbr`` and ``leagues``, the others' ``alias`` and ``conferences``.
"""

from __future__ import annotations

import functools
import pkgutil
import uuid
from datetime import datetime, timedelta
from typing import Any

from models.leagues import DEFAULT, declaration

#: A generated game (srsim.script.GameScript, which imports this module).
GameScript = Any

#: Messages per unit: its start, two plays, its end.
PER_UNIT = 4
_HITTERS = ["Adalberto Mondesi", "Whit Merrifield", "Jose Altuve", "Alex Bregman", "Salvador Perez"]


def _uid(game: GameScript, *parts: object) -> str:
    return name_uuid("/".join([game.sr_id, *map(str, parts)]))


@functools.lru_cache(maxsize=4096)
def name_uuid(name: str) -> str:
    """A name-based UUID, computed once per name (a unit's id is named again by each of its plays, a
    team's by every message of its games: together a third of building a session)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


class EventModel:
    """What a generated game of one sport sends (module docstring)."""

    alias_key = "alias"  # the teams' alias field in the league's documents
    groups_key = "conferences"  # the hierarchy's top groups

    def play(self, game: GameScript, i: int, scheduled: datetime) -> dict[str, Any]:
        unit, step = divmod(i, PER_UNIT)
        created = scheduled + timedelta(seconds=i * game.event_interval)
        etype, category, op, event, extra = self.message(game, unit, step)
        event.setdefault("id", _uid(game, unit, step))
        event.update(
            {
                "type": etype,
                "sequence_number": i,
                "status": "official",
                "created_at": created.isoformat(),
                "updated_at": created.isoformat(),
            }
        )
        meta = game._metadata(etype, category, op, None, None)
        meta.update(extra)
        return {
            "payload": {"game": game._game("inprogress", scheduled), "event": event},
            "locale": "en",
            "metadata": meta,
        }

    def message(
        self, game: GameScript, unit: int, step: int
    ) -> tuple[str, str, str, dict[str, Any], dict[str, Any]]:
        """(type, category, operation, event, extra metadata) of step ``step`` of unit ``unit``."""
        raise NotImplementedError

    def corrected(self, env: dict[str, Any]) -> None:
        """Turn the unit's last message ``env`` into its version with the other outcome (in place)."""
        raise NotImplementedError


class AtBats(EventModel):
    """Baseball: an at-bat (``atbat``, create), two pitches, the pitch that ends it (``atbatover``, with
    ``hit`` every third at-bat); pitches carry their at-bat's ``atbat_id`` (the MLB push shape)."""

    alias_key = "abbr"
    groups_key = "leagues"

    def message(self, game: GameScript, unit: int, step: int) -> tuple[str, str, str, dict, dict]:
        inning, half = unit // 6 + 1, "T" if (unit // 3) % 2 == 0 else "B"
        extra = {"inning": inning, "inning_half": half}
        base = {"inning": inning, "inning_half": half}
        if step == 0:
            return (
                "atbat",
                "atbat",
                "create",
                {**base, "hitter": {"full_name": _HITTERS[unit % len(_HITTERS)]}},
                extra,
            )
        category = "pitch"
        if step == PER_UNIT - 1:
            category = "pitch,hit,single,atbatover" if unit % 3 == 0 else "pitch,strikeout,out,atbatover"
        return "pitch", category, "update", {**base, "atbat_id": _uid(game, unit, 0)}, extra

    def corrected(self, env: dict[str, Any]) -> None:
        meta = env["metadata"]
        hit = "hit" in meta["event_category"].split(",")
        meta["event_category"] = "pitch,strikeout,out,atbatover" if hit else "pitch,hit,single,atbatover"
        env["payload"]["event"]["description"] = "Call reviewed"


#: Drive end reasons srsim plays, in turn (Sportradar's drive ``end_reason`` values).
END_REASONS = ("Touchdown", "Punt", "Field Goal", "Interception")


class Drives(EventModel):
    """American football: a drive (``drive`` event, create, its ``start_reason``), two plays naming it, the
    drive again (update) with its ``end_reason`` and ``scoring_drive`` (the NFL push and play-by-play
    drive fields)."""

    def message(self, game: GameScript, unit: int, step: int) -> tuple[str, str, str, dict, dict]:
        drive = _uid(game, unit, 0)
        quarter = {"number": unit // 4 + 1}
        if step == 0:
            start = "Kickoff" if unit == 0 else "Possession"
            return (
                "drive",
                "drive",
                "create",
                {"id": drive, "sequence": unit + 1, "start_reason": start, "quarter": quarter},
                {},
            )
        if step == PER_UNIT - 1:
            reason = END_REASONS[unit % len(END_REASONS)]
            event = {
                "id": drive,
                "sequence": unit + 1,
                "end_reason": reason,
                "scoring_drive": reason in ("Touchdown", "Field Goal"),
                "quarter": quarter,
            }
            return "drive", "drive", "update", event, {}
        play_type = "pass" if step == 1 else "rush"
        return (
            "play",
            play_type,
            "create",
            {"play_type": play_type, "drive": {"id": drive}, "quarter": quarter},
            {},
        )

    def corrected(self, env: dict[str, Any]) -> None:
        event = env["payload"]["event"]
        scored = event["end_reason"] in ("Touchdown", "Field Goal")
        event["end_reason"] = "Downs" if scored else "Touchdown"
        event["scoring_drive"] = not scored


class Periods(EventModel):
    """Hockey: every event names its period (``period: {id, number, sequence}``); a faceoff, a save, a
    goal (the home team's in odd periods, the away team's in even ones), ``endperiod`` with the score
    (``home_points``, ``away_points``), as the NHL push events carry it."""

    kind = "period"
    plays = ("faceoff", "shotsaved", "goal")

    def points(self, unit: int, step: int) -> tuple[int, int]:
        """The score after step ``step`` of unit ``unit``: one goal per unit, after its third message."""
        done = unit + (1 if step >= 2 else 0)
        home = sum(1 for u in range(done) if u % 2 == 0)
        return home, done - home

    def message(self, game: GameScript, unit: int, step: int) -> tuple[str, str, str, dict, dict]:
        period = {
            "id": _uid(game, self.kind, unit),
            "number": unit + 1,
            "sequence": unit + 1,
            "type": self.kind,
        }
        home, away = self.points(unit, step)
        event = {"period": period, "home_points": home, "away_points": away}
        if step == PER_UNIT - 1:
            return "endperiod", "period,stoppage", "update", event, {}
        etype = self.plays[step]
        return etype, "score" if etype.endswith(("goal", "made")) else etype, "create", event, {}

    def corrected(self, env: dict[str, Any]) -> None:
        event = env["payload"]["event"]
        event["home_points"], event["away_points"] = event["away_points"], event["home_points"]
        if event["home_points"] == event["away_points"]:
            event["home_points"] += 1


class Quarters(Periods):
    """Basketball: the same shape by quarter (``period.type`` quarter): an opening possession, a two, a
    three, ``endperiod`` with the score, as the NBA push events carry it."""

    kind = "quarter"
    plays = ("possession", "twopointmade", "threepointmade")

    def points(self, unit: int, step: int) -> tuple[int, int]:
        """The score after step ``step`` of unit ``unit``: the home team's two every quarter, the away
        team's two threes in even quarters."""
        home = away = 0
        for u in range(unit + 1):
            s = PER_UNIT - 1 if u < unit else step
            home += 2 if s >= 1 else 0
            away += 6 if s >= 2 and u % 2 == 1 else 0
        return home, away


def model_of(league: str) -> EventModel:
    """The event model of ``league`` (its declaration's; an undeclared league plays the default's)."""
    decl = declaration(league) or DEFAULT
    return pkgutil.resolve_name(decl.sim_model)()
