"""The publisher's store: named statements, one module per table family (actions, outbox, trades,
results; the players table's is models.player), and the one path that runs them.

``execute``, ``fetch_one`` and ``fetch_all`` run a named statement of these modules and translate
its driver errors (models.boundary: DatabaseUnavailable, DatabaseNotMigrated, ConstraintViolation,
and DatabaseRefused for any other refusal of a statement, such as a value PostgreSQL cannot store),
as procrastinate's connector runs its named queries; the publisher's other modules hold no SQL and
never call the driver. Job runs (``run_log``) use the Peewee model ``models.run_log.RunLog`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from models.boundary import translate_database_refusals
from models.db import database

#: Positional (``%s``) or named (``%(name)s``) parameters of a statement.
Params = Sequence[Any] | Mapping[str, Any] | None


@translate_database_refusals
def execute(statement: str, params: Params = None) -> int:
    """Run ``statement``; how many rows it changed (or returned)."""
    return database.execute_sql(statement, params).rowcount


@translate_database_refusals
def fetch_one(statement: str, params: Params = None) -> tuple[Any, ...] | None:
    """Run ``statement``; its first row, or None."""
    return database.execute_sql(statement, params).fetchone()


@translate_database_refusals
def fetch_all(statement: str, params: Params = None) -> list[tuple[Any, ...]]:
    """Run ``statement``; every row it returns."""
    return database.execute_sql(statement, params).fetchall()
