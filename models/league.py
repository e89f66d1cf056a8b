"""League: a competition whose matches may get listeners (disabled leagues never do)."""

from __future__ import annotations

from typing import Any

import peewee

from models.base import BaseModel
from models.boundary import translate_database_errors


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


@translate_database_errors
def league_named(name: str) -> League | None:
    """The league named ``name``, compared case-insensitively, or None."""
    return League.get_or_none(peewee.fn.lower(League.name) == name.lower())


@translate_database_errors
def all_league_names() -> list[str]:
    """Every league's name, sorted."""
    return sorted(lg.name for lg in League.select(League.name))


@translate_database_errors
def leagues_by_name(limit: int) -> list[League]:
    """The first ``limit`` leagues by name."""
    return list(League.select().order_by(League.name).limit(limit))


@translate_database_errors
def create_league(name: str, *, enabled: bool = True) -> League:
    """Store league ``name`` as given; ConstraintViolation when one has that name already."""
    return League.create(name=name, enabled=enabled)


@translate_database_errors
def set_league_enabled_row(league_id: int, enabled: bool) -> None:
    """Write league ``league_id``'s ``enabled``."""
    League.update(enabled=enabled).where(League.id == league_id).execute()


@translate_database_errors
def update_league_fields(league_id: int, changes: dict[str, Any]) -> None:
    """Write ``changes`` (field -> value) to league ``league_id``."""
    League.update(**changes).where(League.id == league_id).execute()
