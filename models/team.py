"""Team: one team of a league as the provider's hierarchy and teams documents describe it."""

from __future__ import annotations

import peewee

from config.clock import utcnow
from models.base import BaseModel, UTCDateTimeField
from models.league import League


class Team(BaseModel):
    """A team by the provider's id (``sr_id``, unique per league), with its conference and division."""

    league = peewee.ForeignKeyField(League, backref="teams", on_delete="CASCADE")
    sr_id = peewee.TextField()
    name = peewee.TextField()  # "Royals"
    market = peewee.TextField(null=True)  # "Kansas City"
    alias = peewee.TextField(null=True)  # "KC" (the provider's alias, or abbr for MLB)
    conference = peewee.TextField(null=True)  # conference (NFL, NHL) or league (MLB: AL, NL)
    division = peewee.TextField(null=True)
    created_at = UTCDateTimeField(default=utcnow)
    updated_at = UTCDateTimeField(default=utcnow)  # last time a refresh changed a value

    class Meta:
        table_name = "teams"
        indexes = ((("league", "sr_id"), True),)
