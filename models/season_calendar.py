"""League calendars: the provider's season year of a day, and the NFL regular-season week.

Pure rules (no I/O), shared by the schedule refresh and the simulator's league documents.
"""

from __future__ import annotations

from datetime import date, timedelta

NFL_REGULAR_WEEKS = 18


def season_year(league: str, day: date) -> int:
    """The provider's season year of ``league`` on ``day`` (the year the season started).

    NFL: January and February still belong to the season that started the September before.
    NHL and NBA (October to June): before July the season started the year before. Others
    (MLB): the calendar year.
    """
    league = league.lower()
    if league == "nfl":
        return day.year if day.month >= 3 else day.year - 1
    if league in ("nhl", "nba"):
        return day.year if day.month >= 7 else day.year - 1
    return day.year


def nfl_week(day: date) -> tuple[int, int]:
    """``(season year, regular-season week)`` of ``day``, the week clamped to 1..18.

    The season opens on the Thursday after Labor Day (the first Monday of September); week 1
    runs from the Tuesday before that Thursday, and every week from Tuesday to Monday, as the
    provider's weeks do. Before week 1 (the off-season) it is week 1; after week 18 (playoffs)
    week 18.
    """
    year = season_year("nfl", day)
    labor_day = date(year, 9, 1) + timedelta(days=(7 - date(year, 9, 1).weekday()) % 7)
    week1_tuesday = labor_day + timedelta(days=1)
    week = (day - week1_tuesday).days // 7 + 1
    return year, min(max(week, 1), NFL_REGULAR_WEEKS)
