"""The model base classes and the timestamp field that only accepts aware datetimes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import peewee
from playhouse.postgres_ext import DateTimeTZField

from config.clock import ensure_utc, utcnow
from models.db import database


class UTCDateTimeField(DateTimeTZField):
    """A ``timestamptz`` column: naive datetimes are refused, values come back in UTC."""

    def db_value(self, value: Any) -> Any:
        if isinstance(value, datetime):
            value = ensure_utc(value, what=f"{self.model.__name__}.{self.name}")
        return super().db_value(value)

    def python_value(self, value: Any) -> Any:
        value = super().python_value(value)
        if isinstance(value, datetime):
            return value.astimezone(UTC)
        return value


class BaseModel(peewee.Model):
    """Base of every kickoff table: bound to the process-wide database proxy."""

    class Meta:
        database = database
        legacy_table_names = False


class LeagueRecord(BaseModel):
    """Base of a league's rows the provider's documents describe (seasons, teams).

    Each subclass declares its ``league`` foreign key; ``sr_id`` (the provider's id) is unique per league.
    """

    sr_id = peewee.TextField()
    created_at = UTCDateTimeField(default=utcnow)
    updated_at = UTCDateTimeField(default=utcnow)  # last time a refresh changed a value

    class Meta:
        indexes = ((("league", "sr_id"), True),)
