"""The model base class and the timestamp field that only accepts aware datetimes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import peewee
from playhouse.postgres_ext import DateTimeTZField

from config.clock import ensure_utc
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
