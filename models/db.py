"""The process-wide database handle: a Peewee proxy initialised once at boot.

``init_database`` binds the proxy to PostgreSQL; nothing connects at import time.
``database_errors`` translates psycopg2/Peewee connection failures into DatabaseUnavailable.
"""

from __future__ import annotations

import contextlib
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


#: Defaults of the connection limits (settings ``database_connect_timeout_seconds`` and
#: ``database_statement_timeout_seconds``): a dead or hung PostgreSQL must fail a call, not hang it.
DEFAULT_CONNECT_TIMEOUT_SECONDS = 10.0
DEFAULT_STATEMENT_TIMEOUT_SECONDS = 60.0

#: libpq TCP keepalives: a connection whose peer vanished (network cut, host gone) fails in
#: about ``idle + interval * count`` seconds instead of waiting on the socket forever.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}


def connection_limits(
    kwargs: dict[str, object], *, connect_timeout_seconds: float, statement_timeout_seconds: float
) -> dict[str, object]:
    """``kwargs`` plus connect timeout, keepalives and a server-side statement timeout.

    Values given in the URL's query (``?connect_timeout=..``) win; the statement timeout is
    appended to any ``options`` the URL carries. A timeout of 0 disables it.
    """
    out: dict[str, object] = {**KEEPALIVES, **kwargs}
    if connect_timeout_seconds > 0:
        out.setdefault("connect_timeout", max(1, int(connect_timeout_seconds)))
    if statement_timeout_seconds > 0:
        opt = f"-c statement_timeout={int(statement_timeout_seconds * 1000)}"
        out["options"] = f"{out['options']} {opt}" if out.get("options") else opt
    return out


def init_database(
    url: str,
    *,
    connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
    statement_timeout_seconds: float = DEFAULT_STATEMENT_TIMEOUT_SECONDS,
) -> PostgresqlExtDatabase:
    """Bind the process-wide proxy to the PostgreSQL database at ``url`` (no connection yet).

    Every connection gets a connect timeout, TCP keepalives and a statement timeout (see
    ``connection_limits``); migrations use their own connection and are not limited.
    """
    global _bound_url
    name, kwargs = connect_kwargs_from_url(url)
    kwargs = connection_limits(
        kwargs,
        connect_timeout_seconds=connect_timeout_seconds,
        statement_timeout_seconds=statement_timeout_seconds,
    )
    db = PostgresqlExtDatabase(name, autoconnect=True, thread_safe=True, **kwargs)
    database.initialize(db)
    _bound_url = url
    return db


def bound_url() -> str | None:
    """Return the URL the proxy is bound to, or None before ``init_database``."""
    return _bound_url


def _forget_broken_connection() -> None:
    """Drop this thread's connection if the server or the network closed it.

    Peewee keeps a connection it believes open; after PostgreSQL went away every later query
    on it fails with ``connection already closed`` and autoconnect never opens a new one. Once
    no transaction is open (the outermost handler), a connection that is no longer usable is
    closed, so the next query reconnects.
    """
    try:
        if database.is_closed() or database.in_transaction() or database.is_connection_usable():
            return
        database.close()
    except (peewee.PeeweeException, AttributeError):  # unbound proxy, or closing failed: start over
        with contextlib.suppress(Exception):
            database.obj._state.reset()  # type: ignore[union-attr]


@contextmanager
def database_errors(url: str | None = None) -> Iterator[None]:
    """Translate a failure to connect (or a connection lost meanwhile) into DatabaseUnavailable naming
    DATABASE_URL; a connection the server or the network closed is dropped so the next query reconnects."""
    try:
        yield
    except (peewee.OperationalError, peewee.InterfaceError) as exc:
        if isinstance(exc, peewee.InterfaceError) and "must be initialized" in str(exc):
            raise
        _forget_broken_connection()
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
