"""League calendars: the provider's season year of a day, and a weekly league's week of a day.

Pure rules (no I/O), shared by the schedule refresh and the simulator's league documents; each
league's rule is its declaration's (models.leagues).
"""

from __future__ import annotations

from datetime import date

from models.leagues import declaration


def season_year(league: str, day: date) -> int:
    """The provider's season year of ``league`` on ``day`` (the year the season started).

    The league's declared ``season_start_month`` decides: a day before it belongs to the season
    that started the year before. An undeclared league's season is the calendar year.
    """
    decl = declaration(league)
    return decl.season_year(day) if decl is not None else day.year


def week_of(league: str, day: date) -> tuple[int, int]:
    """``(season year, week)`` of ``day`` by weekly ``league``'s declared week rule.

    ValueError when ``league`` is not a declared weekly league.
    """
    decl = declaration(league)
    if decl is None or decl.week_rule is None:
        raise ValueError(f"league {league!r} is not a declared weekly league")
    return decl.week_rule(day)
