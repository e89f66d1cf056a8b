"""The process-wide database handle: a Peewee proxy initialised once at boot.

``init_database`` binds the proxy to PostgreSQL; nothing connects at import time. With
``pool_max_connections`` a process keeps its connections and reuses them (``database.close()``
hands the thread's connection back to the pool), so a burst of short database steps (a thousand
listener starts) does not pay a new connection each; the pool is the process's cap.
``database_errors`` is the one boundary of the PostgreSQL driver: a failed or lost connection
becomes DatabaseUnavailable, a missing table DatabaseNotMigrated. The database object itself
turns a missing table into DatabaseNotMigrated on every statement, wherever it runs.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import peewee
from playhouse.pool import MaxConnectionsExceeded, _PooledPostgresqlDatabase
from playhouse.postgres_ext import PostgresqlExtDatabase

from config.errors import DatabaseNotMigrated, DatabaseUnavailable
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
#: about ``idle + interval * count`` seconds instead of waiting on the socket forever; one whose
#: sent bytes go unacknowledged (a black hole: packets dropped mid-statement) fails after
#: ``tcp_user_timeout`` ms instead of the kernel's retransmissions (about 15 minutes).
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 30000,
}


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


class KickoffDatabase(PostgresqlExtDatabase):
    """PostgreSQL whose every statement on a schema that is not there raises DatabaseNotMigrated.

    Other errors keep their Peewee type here (callers decide what a timeout or a lost connection
    means, through ``database_errors`` or their own retry); only a missing table or column is the
    same answer everywhere: run kickoff db migrate.
    """

    #: Connections this database object opened so far (a pool counts only the new ones).
    connections_opened = 0

    def _connect(self) -> object:
        conn = super()._connect()
        self.connections_opened += 1  # under the database's connect lock
        return conn

    def execute_sql(self, sql: str, params: object = None, named_cursor: object = None) -> object:
        try:
            return super().execute_sql(sql, params, named_cursor=named_cursor)
        except peewee.ProgrammingError as exc:
            if _undefined(exc):
                raise not_migrated(None) from exc
            raise


class PooledKickoffDatabase(_PooledPostgresqlDatabase, KickoffDatabase):
    """KickoffDatabase whose connections are kept and reused: at most ``max_connections`` per process.

    ``close()`` returns the thread's connection to the pool (rolled back if a transaction was
    left open; dropped if the server or the network closed it). A connection is checked with one
    ``SELECT 1`` when it is taken from the pool after more than ``RECHECK_AFTER_SECONDS`` unused
    (Peewee checks on every take, one round trip under the process's connect lock; a burst of
    starts takes a connection every few milliseconds), and closed once it is ``max_age_seconds``
    old (idle ones at the next take), so a process that goes quiet falls back to the connections
    it still uses. A thread that finds every connection taken waits for one up to
    ``wait_seconds``, then fails like a connect that timed out; before it waits, the connections
    of threads that ended without handing theirs back (a thread pool retires idle threads) are
    closed and their places freed.
    """

    #: A connection handed back less than this long ago is taken without its ``SELECT 1``.
    RECHECK_AFTER_SECONDS = 1.0

    def __init__(
        self, database: str, *, max_connections: int, max_age_seconds: float, wait_seconds: float, **kwargs
    ) -> None:
        super().__init__(
            database,
            max_connections=max_connections,
            stale_timeout=max(1, int(max_age_seconds)),
            timeout=max(1, int(wait_seconds)) if wait_seconds > 0 else 0,  # 0: wait as long as it takes
            **kwargs,
        )
        self._returned_at: dict[int, float] = {}  # id(connection) -> monotonic time handed back
        self.full_takes = 0  # takes that found every connection in use (the thread then waits or fails)
        self._full_takes_lock = threading.Lock()
        self._owners: dict[int, threading.Thread] = {}  # id(connection) -> the thread holding it

    def _connect(self) -> Any:
        with self._pool_lock:
            if not self._connections and len(self._in_use) >= self._max_connections:
                self._reclaim_orphans()
            try:
                conn = super()._connect()
            except MaxConnectionsExceeded:
                with self._full_takes_lock:
                    self.full_takes += 1
                raise
            self._owners[id(conn)] = threading.current_thread()
            return conn

    def _reclaim_orphans(self) -> None:
        """Close the connections held by threads that ended (a request thread pool retires idle
        threads; the thread's connection would stay counted as in use for ever)."""
        for key, owner in list(self._owners.items()):
            if owner.is_alive():
                continue
            del self._owners[key]
            held = self._in_use.pop(key, None)
            if held is not None:
                self._close_raw(held.connection)

    def _is_closed(self, conn: Any) -> bool:
        returned = self._returned_at.pop(id(conn), None)
        if conn.closed:
            return True
        if returned is not None and time.monotonic() - returned < self.RECHECK_AFTER_SECONDS:
            return False
        return bool(super()._is_closed(conn))

    def _close(self, conn: Any, close_conn: bool = False) -> None:
        with self._pool_lock:
            super()._close(conn, close_conn)
            self._owners.pop(id(conn), None)
        if not close_conn and not conn.closed:
            self._returned_at[id(conn)] = time.monotonic()

    def connect(self, reuse_if_open: bool = False) -> bool:
        try:
            return super().connect(reuse_if_open)
        except MaxConnectionsExceeded as exc:
            raise peewee.OperationalError(
                f"all {self._max_connections} connections of this process's pool are in use "
                "(DATABASE_POOL_MAX_CONNECTIONS)"
            ) from exc

    @property
    def max_connections(self) -> int:
        """The pool's cap: connections this process keeps and uses at most."""
        return int(self._max_connections)

    def in_use(self) -> int:
        """Connections handed out now (held by threads)."""
        return len(self._in_use)

    def idle(self) -> int:
        """Connections kept in the pool, open and unused."""
        return len(self._connections)


#: How old a pooled connection gets before it is closed (setting database_pool_max_age_seconds).
DEFAULT_POOL_MAX_AGE_SECONDS = 60.0


#: SQLSTATE of "relation does not exist" / "column does not exist": a schema behind the code.
_UNDEFINED = {"42P01", "42703"}


def _undefined(exc: Exception) -> bool:
    return getattr(getattr(exc, "orig", None), "pgcode", None) in _UNDEFINED


def not_migrated(url: str | None) -> DatabaseNotMigrated:
    """The one answer to a missing table or column, naming DATABASE_URL."""
    address = mask_url(url or _bound_url or "<unset>")
    return DatabaseNotMigrated(f"database not migrated: run kickoff db migrate (DATABASE_URL={address})")


def init_database(
    url: str,
    *,
    connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
    statement_timeout_seconds: float = DEFAULT_STATEMENT_TIMEOUT_SECONDS,
    pool_max_connections: int = 0,
    pool_max_age_seconds: float = DEFAULT_POOL_MAX_AGE_SECONDS,
) -> PostgresqlExtDatabase:
    """Bind the process-wide proxy to the PostgreSQL database at ``url`` (no connection yet).

    Every connection gets a connect timeout, TCP keepalives and a statement timeout (see
    ``connection_limits``); migrations use their own connection and are not limited.
    ``pool_max_connections`` > 0 keeps and reuses at most that many connections
    (``PooledKickoffDatabase``; a thread waits up to the connect timeout for a free one); 0 opens
    a connection on first use in a thread and closes it on ``database.close()``.
    """
    global _bound_url
    name, kwargs = connect_kwargs_from_url(url)
    kwargs = connection_limits(
        kwargs,
        connect_timeout_seconds=connect_timeout_seconds,
        statement_timeout_seconds=statement_timeout_seconds,
    )
    previous = database.obj
    if isinstance(previous, PooledKickoffDatabase):
        previous.close_idle()  # rebinding (tests, a new runtime): the old pool's idle connections go now
    db: KickoffDatabase
    if pool_max_connections > 0:
        db = PooledKickoffDatabase(
            name,
            max_connections=pool_max_connections,
            max_age_seconds=pool_max_age_seconds,
            wait_seconds=connect_timeout_seconds,
            autoconnect=True,
            thread_safe=True,
            **kwargs,
        )
    else:
        db = KickoffDatabase(name, autoconnect=True, thread_safe=True, **kwargs)
    database.initialize(db)
    _bound_url = url
    return db


#: The smallest default pool: a default-queue worker's 8 threads (deploy/Procfile) and its 2
#: outbox drains (OUTBOX_DRAIN_WORKERS) may all use the database at once.
MIN_DEFAULT_POOL = 10


def pool_size(*, pool_max_connections: int | None, listener_db_concurrency: int) -> int:
    """The pool of a worker process: the setting; unset, the listener database slots plus two (the
    heartbeat's and the worker lease's connections), at least ``MIN_DEFAULT_POOL``; 0: no pool.

    A pool only opens the connections its threads use at once, so a larger cap costs nothing
    until a burst needs it.
    """
    if pool_max_connections is not None:
        return pool_max_connections
    return max(listener_db_concurrency + 2, MIN_DEFAULT_POOL)


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
    except peewee.ProgrammingError as exc:
        if _undefined(exc):
            raise not_migrated(url) from exc
        raise
    except (peewee.OperationalError, peewee.InterfaceError) as exc:
        if isinstance(exc, peewee.InterfaceError) and "must be initialized" in str(exc):
            raise
        _forget_broken_connection()
        address = mask_url(url or _bound_url or "<unset>")
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "database" in reason and "does not exist" in reason:
            reason += " (run `kickoff db migrate` to create it)"
        raise DatabaseUnavailable(
            service="PostgreSQL", setting="DATABASE_URL", address=address, reason=reason
        ) from exc


def check_connection(url: str | None = None) -> None:
    """Open and close one connection, raising DatabaseUnavailable if PostgreSQL refuses."""
    with database_errors(url):
        database.connect(reuse_if_open=True)
        database.execute_sql("SELECT 1")
