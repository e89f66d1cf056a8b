"""League: a competition whose matches may get listeners (disabled leagues never do)."""

from __future__ import annotations

import peewee

from models.base import BaseModel


class League(BaseModel):
    """A league by its feed name (``nfl``, ``mlb`` ...); ``enabled`` gates dispatch."""

    name = peewee.TextField(unique=True)
    enabled = peewee.BooleanField(default=True)

    class Meta:
        table_name = "leagues"
