"""League: a competition whose matches may get listeners (disabled leagues never do)."""

from __future__ import annotations

import peewee

from models.base import BaseModel


class League(BaseModel):
    """A league by its feed name (``nfl``, ``mlb`` ...); ``enabled`` gates dispatch.

    ``sr_id``, ``alias`` and ``full_name`` are the provider's league metadata (its hierarchy
    document), empty until the league refresh has run.
    """

    name = peewee.TextField(unique=True)
    enabled = peewee.BooleanField(default=True)
    sr_id = peewee.TextField(null=True)  # the provider's league id
    alias = peewee.TextField(null=True)  # NFL, MLB, NHL
    full_name = peewee.TextField(null=True)  # the provider's name, e.g. "Major League Baseball"

    class Meta:
        table_name = "leagues"
