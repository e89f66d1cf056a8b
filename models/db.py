"""The process-wide database handle: a Peewee proxy initialised once at boot.

``init_database`` binds the proxy to PostgreSQL; nothing connects at import time.
``database_errors`` translates psycopg2/Peewee connection failures into DatabaseUnavailable.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import peewee
from playhouse.postgres_ext import PostgresqlExtDatabase

from config.errors import DatabaseUnavailable
from config.settings import mask_url

database = peewee.DatabaseProxy()

_bound_url: str | None = None


def connect_kwargs_from_url(url: str) -> tuple[str, dict[str, object]]:
    """Split a ``postgresql://user:pw@host:port/db?opt=..`` URL into Peewee's (name, kwargs)."""
    from playhouse.db_url import parse

    parsed = parse(url)
    name = parsed.pop("database")
    return name, parsed


def init_database(url: str) -> PostgresqlExtDatabase:
    """Bind the process-wide proxy to the PostgreSQL database at ``url`` (no connection yet)."""
    global _bound_url
    name, kwargs = connect_kwargs_from_url(url)
    db = PostgresqlExtDatabase(name, autoconnect=True, thread_safe=True, **kwargs)
    database.initialize(db)
    _bound_url = url
    return db


def bound_url() -> str | None:
    """Return the URL the proxy is bound to, or None before ``init_database``."""
    return _bound_url


@contextmanager
def database_errors(url: str | None = None) -> Iterator[None]:
    """Translate a failure to connect into DatabaseUnavailable naming DATABASE_URL."""
    try:
        yield
    except peewee.OperationalError as exc:
        address = mask_url(url or _bound_url or "<unset>")
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "does not exist" in reason:
            reason += " (run `kickoff db migrate` to create it)"
        raise DatabaseUnavailable(
            service="PostgreSQL", setting="DATABASE_URL", address=address, reason=reason
        ) from exc


def check_connection(url: str | None = None) -> None:
    """Open and close one connection, raising DatabaseUnavailable if PostgreSQL refuses."""
    with database_errors(url):
        database.connect(reuse_if_open=True)
        database.execute_sql("SELECT 1")
