"""The leagues, one declaration each: everything kickoff derives a league's parts from.

A ``LeagueDeclaration`` names the league as the feed does (its URL segment), how its schedule is
refreshed (``DAILY``, or ``WEEKLY`` with the rule that says which week a day is in), its
season-year rule (the month a new season starts), its push and play-by-play paths, the simulator's
event model and the listener's question pipeline. The scheduler table (which league refreshes
when), the schedule refresh (lifecycle.schedule), the season calendar (models.season_calendar),
the play-by-play URL (listener.play_by_play), the listener's pipeline (listener.pipeline), srsim's
event model (srsim.models) and ``kickoff check`` read it; ``tests/test_leagues.py`` fails when a
league is named anywhere else. docs/adding-a-league.md walks through adding one.

The simulator's model and the pipeline are named ``"module:attr"`` and resolved when first used:
they live in packages above this one. A league row in the database with no declaration is
dispatched for recording only (listener.pipeline.RecordOnlyPipeline) and ``kickoff check`` says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from enum import StrEnum

#: What a model or pipeline reference must look like: ``module:attr``.
REFERENCE_PATTERN = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
#: What a league's feed name may be (its URL segment).
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*")


class Cadence(StrEnum):
    """How often the schedule refresh reads a league's near games."""

    DAILY = "daily"  # today's and the next days' schedules (the daily schedule document)
    WEEKLY = "weekly"  # the current week's schedule (the weekly document; the league's week rule)


#: A week rule: ``(season year, week)`` of a day.
WeekRule = Callable[[date], "tuple[int, int]"]


@dataclass(frozen=True, kw_only=True)
class LeagueDeclaration:
    """One league, declared once (module docstring)."""

    name: str  # the feed's league segment, lowercase (``/{name}/{access}/...``) and League.name
    alias: str  # how people write it
    cadence: Cadence  # how the schedule refresh reads its near games
    season_start_month: int  # the month its season starts: a day before it belongs to last year's
    week_rule: WeekRule | None = None  # WEEKLY: which week of which season a day is in
    push_path: str = "/{league}/{access}/stream/en/events/subscribe"  # under SPORTRADAR_BASE_URL
    play_by_play_path: str = "/{league}/{access}/v7/en/games/{sr_id}/pbp.json"  # what a backfill reads
    sim_model: str  # "module:attr" of srsim's event model (srsim.models)
    pipeline: str  # "module:attr" of the listener's question pipeline (listener.pipelines)
    unit: str  # what one question is about: "at-bat", "drive", "period", "quarter"

    def __post_init__(self) -> None:
        if not NAME_PATTERN.fullmatch(self.name):
            raise ValueError(f"league {self.name!r}: the name is the feed's lowercase URL segment")
        if not 1 <= self.season_start_month <= 12:
            raise ValueError(f"league {self.name}: season_start_month must be 1..12")
        if (self.cadence is Cadence.WEEKLY) != (self.week_rule is not None):
            raise ValueError(f"league {self.name}: a weekly league needs a week rule, a daily one none")
        for what in ("sim_model", "pipeline"):
            if not REFERENCE_PATTERN.fullmatch(getattr(self, what)):
                raise ValueError(f"league {self.name}: {what} {getattr(self, what)!r} is not 'module:attr'")

    def season_year(self, day: date) -> int:
        """The provider's season year on ``day``: the year the season running then started."""
        return day.year if day.month >= self.season_start_month else day.year - 1


def september_week(first_monday_month: int = 9, weeks: int = 18) -> WeekRule:
    """A week rule of a season opening the Thursday after the first Monday of September.

    Week 1 runs from the Tuesday before that Thursday, every week from Tuesday to Monday, as the
    provider's weeks do; clamped to 1..``weeks`` (before week 1: week 1; playoffs: the last).
    """

    def rule(day: date) -> tuple[int, int]:
        year = day.year if day.month >= 3 else day.year - 1
        first = date(year, first_monday_month, 1)
        first_monday = first + timedelta(days=(7 - first.weekday()) % 7)
        week = (day - (first_monday + timedelta(days=1))).days // 7 + 1
        return year, min(max(week, 1), weeks)

    return rule


MLB = LeagueDeclaration(
    name="mlb",
    alias="MLB",
    cadence=Cadence.DAILY,
    season_start_month=1,
    sim_model="srsim.models:AtBats",
    pipeline="listener.pipelines:AtBatPipeline",
    unit="at-bat",
)
NFL = LeagueDeclaration(
    name="nfl",
    alias="NFL",
    cadence=Cadence.WEEKLY,
    season_start_month=3,
    week_rule=september_week(),
    sim_model="srsim.models:Drives",
    pipeline="listener.pipelines:DrivePipeline",
    unit="drive",
)
NHL = LeagueDeclaration(
    name="nhl",
    alias="NHL",
    cadence=Cadence.DAILY,
    season_start_month=7,
    sim_model="srsim.models:Periods",
    pipeline="listener.pipelines:PeriodPipeline",
    unit="period",
)
NBA = LeagueDeclaration(
    name="nba",
    alias="NBA",
    cadence=Cadence.DAILY,
    season_start_month=7,
    sim_model="srsim.models:Quarters",
    pipeline="listener.pipelines:QuarterPipeline",
    unit="quarter",
)

_REGISTRY: dict[str, LeagueDeclaration] = {d.name: d for d in (MLB, NFL, NHL, NBA)}
#: The league a test or demo game is of when nothing says otherwise.
DEFAULT = MLB
#: The league whose players the players map (PLAYERS_SOURCE, Sleeper's format) lists.
PLAYERS = NFL
#: The push path of a league with no declaration (recorded only).
UNDECLARED_PUSH_PATH = "/{league}/{access}/stream/en/events/subscribe"


def declared() -> tuple[LeagueDeclaration, ...]:
    """Every declared league, in declaration order."""
    return tuple(_REGISTRY.values())


def declaration(name: str) -> LeagueDeclaration | None:
    """The declaration of league ``name`` (any case); None: not declared (recorded only)."""
    return _REGISTRY.get(name.strip().lower())


def with_cadence(cadence: Cadence) -> tuple[LeagueDeclaration, ...]:
    """The declared leagues refreshed with ``cadence``."""
    return tuple(d for d in _REGISTRY.values() if d.cadence is cadence)


def push_path(override: str, league: str) -> str:
    """The push stream's path template of ``league``: ``override`` (LISTENER_STREAM_PATH) when set, else
    its declaration's, else UNDECLARED_PUSH_PATH."""
    decl = declaration(league)
    return override or (decl.push_path if decl is not None else UNDECLARED_PUSH_PATH)


@contextmanager
def registered(league: LeagueDeclaration) -> Iterator[LeagueDeclaration]:
    """Declare ``league`` in this process for the ``with`` block (tests: a throwaway extra league)."""
    if league.name in _REGISTRY:
        raise ValueError(f"league {league.name} is declared already")
    _REGISTRY[league.name] = league
    try:
        yield league
    finally:
        del _REGISTRY[league.name]
