"""Season: one season of a league (year and type) as the provider's seasons document lists it."""

from __future__ import annotations

from datetime import date

import peewee

from models.base import LeagueRecord
from models.boundary import translate_database_errors
from models.league import League


class Season(LeagueRecord):
    """A season by the provider's id (``sr_id``, unique per league): year, type and dates."""

    league = peewee.ForeignKeyField(League, backref="seasons", on_delete="CASCADE")
    year = peewee.IntegerField()  # the year the season started
    type = peewee.TextField()  # PRE, REG, PST
    status = peewee.TextField(null=True)  # scheduled, inprogress, closed
    start_date = peewee.DateField(null=True)
    end_date = peewee.DateField(null=True)

    class Meta:
        table_name = "seasons"


@translate_database_errors
def season_covering(league_id: int, today: date) -> Season | None:
    """League ``league_id``'s stored season covering ``today`` (the latest to start), else the next to
    start after it; None if neither."""
    seasons = Season.select().where(Season.league == league_id, Season.start_date.is_null(False))
    current = (
        seasons.where(Season.start_date <= today, Season.end_date.is_null(True) | (Season.end_date >= today))
        .order_by(Season.start_date.desc())
        .first()
    )
    if current is None:
        current = seasons.where(Season.start_date > today).order_by(Season.start_date).first()
    return current
