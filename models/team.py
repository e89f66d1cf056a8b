"""Team: one team of a league as the provider's hierarchy and teams documents describe it."""

from __future__ import annotations

import peewee

from models.base import LeagueRecord
from models.league import League


class Team(LeagueRecord):
    """A team by the provider's id (``sr_id``, unique per league), with its conference and division."""

    league = peewee.ForeignKeyField(League, backref="teams", on_delete="CASCADE")
    name = peewee.TextField()  # "Royals"
    market = peewee.TextField(null=True)  # "Kansas City"
    alias = peewee.TextField(null=True)  # "KC" (the provider's alias, or abbr for MLB)
    conference = peewee.TextField(null=True)  # conference (NFL, NHL) or league (MLB: AL, NL)
    division = peewee.TextField(null=True)

    class Meta:
        table_name = "teams"
