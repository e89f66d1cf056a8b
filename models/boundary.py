"""How a store translates driver errors: once, around each of its functions.

A store (a module of ``models/``, a package's ``store.py`` or ``sql/`` module) is the only code that
talks to PostgreSQL; its public functions carry ``@translate_database_errors``, so nothing above a
store sees a peewee or psycopg2 exception (tests/test_boundaries.py walks the code for one):

- a lost or refused connection becomes DatabaseUnavailable, a missing table DatabaseNotMigrated
  (``models.db.database_errors``);
- a broken constraint (a duplicate key: another writer was first) becomes ConstraintViolation.

``refusals_translated`` also turns any other refusal of one statement (a lock or statement timeout,
a value PostgreSQL cannot take) into DatabaseRefused, for the callers that answer "retry" to any.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import ParamSpec, TypeVar

import peewee

from config.errors import ConstraintViolation, DatabaseRefused
from models.db import connection_scope, database, database_errors

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def database_errors_translated() -> Iterator[None]:
    """``database_errors()`` plus a broken constraint as ConstraintViolation."""
    try:
        with database_errors():
            yield
    except peewee.IntegrityError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "a constraint was broken"
        raise ConstraintViolation(reason) from exc


@contextmanager
def refusals_translated() -> Iterator[None]:
    """``database_errors_translated()`` plus any other driver error of a statement as DatabaseRefused."""
    try:
        with database_errors_translated():
            yield
    except peewee.DatabaseError as exc:
        raise DatabaseRefused(str(exc).strip() or type(exc).__name__) from exc


def _run_inside(scope: Callable[[], AbstractContextManager[None]], func: Callable[P, R]) -> Callable[P, R]:
    """``func``, each call of it run inside a new ``scope()``."""

    @functools.wraps(func)
    def translated(*args: P.args, **kwargs: P.kwargs) -> R:
        with scope():
            return func(*args, **kwargs)

    return translated


def translate_database_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Run the store function ``func`` inside ``database_errors_translated()``."""
    return _run_inside(database_errors_translated, func)


@contextmanager
def transaction() -> Iterator[None]:
    """One transaction around several store calls, its commit's driver errors translated too.

    The callers above the stores group writes with it (a change and its audit entry): nested in
    another transaction it is a savepoint, as ``database.atomic()``.
    """
    with database_errors_translated(), database.atomic():
        yield


def translate_database_refusals(func: Callable[P, R]) -> Callable[P, R]:
    """Run the store function ``func`` inside ``refusals_translated()`` (every driver error translated)."""
    return _run_inside(refusals_translated, func)


@contextmanager
def connection() -> Iterator[None]:
    """A connection of its own around several store calls (``models.db.connection_scope``), opening
    and closing it with their driver errors translated too."""
    with database_errors_translated(), connection_scope():
        yield
