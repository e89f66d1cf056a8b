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

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import peewee
import psycopg2.extensions
from playhouse.db_url import parse
from playhouse.pool import MaxConnectionsExceeded
from playhouse.postgres_ext import PooledPostgresqlExtDatabase, PostgresqlExtDatabase

from config.errors import DatabaseNotMigrated, DatabaseUnavailable
from config.settings import mask_url
from models.db_deadline import deadline_cursor

logger = logging.getLogger(__name__)

database = peewee.DatabaseProxy()

_bound_url: str | None = None


def connect_kwargs_from_url(url: str) -> tuple[str, dict[str, object]]:
    """Split a ``postgresql://user:pw@host:port/db?opt=..`` URL into Peewee's (name, kwargs)."""
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
    """``kwargs`` plus connect timeout, keepalives, a server-side statement timeout and its client side.

    Values given in the URL's query (``?connect_timeout=..``) win; the statement timeout is
    appended to any ``options`` the URL carries. A timeout of 0 disables it. With a statement
    timeout, every statement also has a client-side deadline (``client_deadline_seconds``,
    models/db_deadline.py): a link that stops answering fails the statement instead of hanging it.
    """
    out: dict[str, object] = {**KEEPALIVES, **kwargs}
    if connect_timeout_seconds > 0:
        out.setdefault("connect_timeout", max(1, int(connect_timeout_seconds)))
    if statement_timeout_seconds > 0:
        opt = f"-c statement_timeout={int(statement_timeout_seconds * 1000)}"
        out["options"] = f"{out['options']} {opt}" if out.get("options") else opt
        deadline = client_deadline_seconds(
            connect_timeout_seconds=connect_timeout_seconds,
            statement_timeout_seconds=statement_timeout_seconds,
        )
        out.setdefault("cursor_factory", deadline_cursor(deadline))
    return out


class _ConnectionCount:
    """Connections a database object opened and closed, counted by the psycopg2 connection class
    it connects with (psycopg2's public ``connection_factory``)."""

    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0
        self._lock = threading.Lock()
        count = self

        class CountedConnection(psycopg2.extensions.connection):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                with count._lock:
                    count.opened += 1
                self._kickoff_counted_close = False

            def close(self) -> None:
                if not self._kickoff_counted_close:
                    self._kickoff_counted_close = True
                    with count._lock:
                        count.closed += 1
                super().close()

        self.connection_class = CountedConnection


def client_deadline_seconds(*, connect_timeout_seconds: float, statement_timeout_seconds: float) -> float:
    """How long a statement may wait for PostgreSQL's answer: the server's statement timeout, then a
    connect timeout's worth (at least a second) for the server's own timeout error to come back."""
    return statement_timeout_seconds + max(connect_timeout_seconds, 1.0)


class KickoffDatabase(PostgresqlExtDatabase):
    """PostgreSQL whose every statement on a schema that is not there raises DatabaseNotMigrated.

    Other errors keep their Peewee type here (callers decide what a timeout or a lost connection
    means, through ``database_errors`` or their own retry); only a missing table or column is the
    same answer everywhere: run kickoff db migrate.
    """

    def __init__(self, database: str, **kwargs: Any) -> None:
        self._count = _ConnectionCount()
        kwargs.setdefault("connection_factory", self._count.connection_class)
        super().__init__(database, **kwargs)

    @property
    def connections_opened(self) -> int:
        """Connections this database object opened so far (a pool counts only the new ones)."""
        return self._count.opened

    def cursor(self, named_cursor: object = None) -> Any:
        # a connection closed under this thread while no transaction was open (the pool reclaimed
        # it, see PooledKickoffDatabase) is forgotten: the statement runs on a fresh one
        if not self.is_closed() and not self.in_transaction() and self.connection().closed:
            self.close()
        return super().cursor(named_cursor)

    def execute_sql(self, sql: str, params: object = None, named_cursor: object = None) -> object:
        try:
            return super().execute_sql(sql, params, named_cursor=named_cursor)
        except peewee.ProgrammingError as exc:
            if _undefined(exc):
                raise not_migrated(None) from exc
            raise


@dataclass
class _Holder:
    """A connection handed out: the thread holding it, when it was taken (``time.time()``), the
    connection, how many statements (or BEGINs) run on it now."""

    thread: threading.Thread
    taken: float
    connection: Any = None
    busy: int = 0

    def in_use(self) -> bool:
        """A statement or BEGIN runs on it, or it is inside a transaction (libpq's own state:
        peewee sends BEGIN and COMMIT through the cursor, past ``execute_sql``)."""
        if self.busy:
            return True
        conn = self.connection
        if conn is None or conn.closed:
            return False
        return conn.get_transaction_status() != psycopg2.extensions.TRANSACTION_STATUS_IDLE


class PooledKickoffDatabase(PooledPostgresqlExtDatabase, KickoffDatabase):
    """KickoffDatabase whose connections are kept and reused: at most ``max_connections`` per process.

    playhouse's public pooled database (``PooledPostgresqlExtDatabase``) does the pooling:
    ``close()`` returns the thread's connection to the pool (rolled back if a transaction was
    left open; dropped if the server or the network closed it), each take checks the connection
    with one ``SELECT 1``, and a connection ``max_age_seconds`` old is closed (idle ones at the
    next take), so a process that goes quiet falls back to the connections it still uses.

    Added here, through public methods only: a thread that finds every connection taken waits
    for one up to ``wait_seconds`` (woken when a connection is handed back, and at least every
    ``WAIT_RECHECK_SECONDS`` to look for ended threads), then fails like a connect that timed out;
    before it waits, the connections of threads that ended without handing theirs back (a thread
    pool retires idle threads) are closed and their places freed. playhouse closes held
    connections only by age (``close_stale``): the cut-off is just after the newest ended
    thread's take, so a live thread that took its connection earlier loses it too, which is only
    done while no statement runs on it and its thread was in no transaction; that thread's next
    statement then runs on a fresh connection (``KickoffDatabase.cursor``).
    """

    #: How often a thread waiting for a free connection looks again without being woken (a thread
    #: that ended holding a connection hands nothing back).
    WAIT_RECHECK_SECONDS = 0.05

    def __init__(
        self, database: str, *, max_connections: int, max_age_seconds: float, wait_seconds: float, **kwargs
    ) -> None:
        # no wait inside the pool (timeout None): connect() below waits, so it can count and reclaim
        super().__init__(
            database,
            max_connections=max_connections,
            stale_timeout=max(1, int(max_age_seconds)),
            timeout=None,
            **kwargs,
        )
        self._cap = max_connections
        self._wait_seconds = wait_seconds if wait_seconds > 0 else float("inf")
        self.full_takes = 0  # takes that found every connection in use (the thread then waits or fails)
        self._holders_lock = threading.Lock()
        self._holders: dict[int, _Holder] = {}  # by id(connection)
        self._returned = threading.Condition()  # notified when a connection is handed back
        self._returns = 0  # connections handed back so far (under _returned)

    def connect(self, reuse_if_open: bool = False) -> bool:
        deadline = time.monotonic() + self._wait_seconds
        counted = False
        while True:
            with self._returned:
                returns = self._returns
            try:
                opened = super().connect(reuse_if_open)
            except MaxConnectionsExceeded as exc:
                if not counted:
                    counted = True
                    with self._holders_lock:
                        self.full_takes += 1
                if self._reclaim_ended_threads():
                    continue
                if time.monotonic() >= deadline:
                    raise peewee.OperationalError(
                        f"all {self._cap} connections of this process's pool are in use "
                        "(DATABASE_POOL_MAX_CONNECTIONS)"
                    ) from exc
                with self._returned:  # a connection handed back since the try above wakes it at once
                    self._returned.wait_for(
                        lambda seen=returns: self._returns != seen,
                        min(self.WAIT_RECHECK_SECONDS, max(0.0, deadline - time.monotonic())),
                    )
                continue
            if opened:
                with self._holders_lock:
                    conn = self.connection()
                    self._holders[id(conn)] = _Holder(threading.current_thread(), time.time(), conn)
            return opened

    def execute_sql(self, sql: str, params: object = None, named_cursor: object = None) -> object:
        holder = self._holder()
        if holder is not None:
            with self._holders_lock:
                holder.busy += 1
        try:
            return super().execute_sql(sql, params, named_cursor=named_cursor)
        finally:
            holder = holder or self._holder()  # the statement may have taken the connection
            if holder is not None:
                with self._holders_lock:
                    holder.busy = max(0, holder.busy - 1)

    def begin(self, *args: Any, **kwargs: Any) -> None:
        # marked busy under the holders' lock: a reclaim either closed this connection before (the
        # BEGIN then runs on a fresh one, KickoffDatabase.cursor) or sees it in use and waits
        holder = self._holder()
        if holder is not None:
            with self._holders_lock:
                holder.busy += 1
        try:
            super().begin(*args, **kwargs)
        finally:
            if holder is not None:
                with self._holders_lock:
                    holder.busy = max(0, holder.busy - 1)

    def _holder(self) -> _Holder | None:
        if self.is_closed():
            return None
        with self._holders_lock:
            return self._holders.get(id(self.connection()))

    def close(self) -> bool:
        if self.is_closed():
            return bool(super().close())
        with self._holders_lock:
            self._holders.pop(id(self.connection()), None)
        try:
            return bool(super().close())
        finally:
            with self._returned:
                self._returns += 1
                self._returned.notify()

    def _reclaim_ended_threads(self) -> bool:
        """Free the places of connections held by threads that ended; whether any was freed."""
        with self._holders_lock:
            ended = [h.taken for h in self._holders.values() if not h.thread.is_alive()]
            if not ended:
                return False
            # close_stale closes what was taken before now - age: just after the newest ended take
            cutoff = max(ended) + 0.002
            older = {key: h for key, h in self._holders.items() if h.taken < cutoff}
            if any(h.in_use() for h in older.values() if h.thread.is_alive()):
                return False  # a live thread is using an older connection: try again in a moment
            for key in older:
                del self._holders[key]
            return self.close_stale(age=max(0.0, time.time() - cutoff)) > 0

    @property
    def max_connections(self) -> int:
        """The pool's cap: connections this process keeps and uses at most."""
        return self._cap

    def in_use(self) -> int:
        """Connections handed out now (held by threads)."""
        with self._holders_lock:
            return len(self._holders)

    def idle(self) -> int:
        """Connections kept in the pool, open and unused (opened and not closed, minus those in use;
        one the server ended counts until the pool next looks at it)."""
        return max(0, self._count.opened - self._count.closed - self.in_use())


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
    except (peewee.PeeweeException, AttributeError):  # unbound proxy, or closing failed
        # peewee's close() forgets the thread's connection even when closing it failed; an
        # unbound proxy has none to forget
        logger.debug("ignored error while dropping a broken database connection", exc_info=True)


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


_scope = threading.local()


@contextmanager
def connection_scope() -> Iterator[None]:
    """One connection for this thread around several statements, closed (back to the pool) at the
    outermost scope's end: ``database.connection_context()`` made safe for a lost connection.

    Peewee's context keeps its nesting on the connection's state, which a reconnect or a dropped
    broken connection (``_forget_broken_connection``) resets, so its exit would fail with an
    IndexError instead of the DatabaseUnavailable on its way out. This scope counts its own
    nesting; inside it a lost connection is dropped and the next statement reconnects. Closing at
    the end never hides the error the block raised.
    """
    depth = getattr(_scope, "depth", 0)
    if depth == 0 and database.is_closed():
        with database_errors():  # a refused connect names DATABASE_URL, as a lost statement does
            database.connect()
    _scope.depth = depth + 1
    failed = True
    try:
        yield
        failed = False
    finally:
        _scope.depth = depth
        if depth == 0 and not database.is_closed() and not database.in_transaction():
            try:
                database.close()
            except peewee.PeeweeException:
                if not failed:
                    raise
                logger.debug("closing the scope's connection failed after an error", exc_info=True)


def release_connection() -> None:
    """Hand this thread's connection back (to the pool; closed without one) at the end of a unit of
    store calls made outside ``connection_scope``: nothing when no database is bound, the thread
    holds no connection or a transaction is open on it (its owner hands it back)."""
    if database.obj is None or database.is_closed() or database.in_transaction():
        return
    database.close()


def check_connection(url: str | None = None) -> None:
    """Open and close one connection, raising DatabaseUnavailable if PostgreSQL refuses."""
    with database_errors(url):
        database.connect(reuse_if_open=True)
        database.execute_sql("SELECT 1")
