"""Season: one season of a league (year and type) as the provider's seasons document lists it."""

from __future__ import annotations

import peewee

from models.base import LeagueRecord
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
