"""Player and RosterPlayer: the provider's players map as last synced, and the rostered players."""

from __future__ import annotations

import peewee

from models.base import BaseModel, UTCDateTimeField


class Player(BaseModel):
    """One player of the provider's map (Sleeper id), with its last seen injury status."""

    sleeper_id = peewee.TextField(primary_key=True)
    espn_id = peewee.BigIntegerField(null=True)  # the ESPN id the map gives, if any
    full_name = peewee.TextField(null=True)
    team = peewee.TextField(null=True)  # NFL team abbreviation
    injury_status = peewee.TextField(null=True)  # Questionable, Doubtful, Out, IR, ... or None
    synced_at = UTCDateTimeField()

    class Meta:
        table_name = "players"


class RosterPlayer(BaseModel):
    """A player on a league's roster: its injury status changes are alerted."""

    league_id = peewee.TextField()
    sleeper_id = peewee.TextField()
    added_at = UTCDateTimeField()

    class Meta:
        table_name = "roster_players"
        primary_key = peewee.CompositeKey("league_id", "sleeper_id")
