"""A client-side deadline for every PostgreSQL statement: a link that stops answering fails the call.

PostgreSQL's ``statement_timeout`` only helps while the server hears the statement and can
answer. When the link to it is black-holed (packets dropped, a hung proxy or server, a host cut
off the network) the connection looks alive: connect timeouts do not apply to an open
connection, and TCP keepalives are only sent on an idle one, so a statement or COMMIT waits on
its socket until the link comes back, for ever if it never does. Every connection kickoff opens
therefore uses ``deadline_cursor(seconds)``: each ``execute`` (Peewee sends BEGIN, COMMIT and
ROLLBACK as statements too) and ``copy_expert`` (the event log's batches) is watched, and one
that has not returned ``seconds`` after it started has its connection's socket shut, so the
driver raises OperationalError ("server closed the connection unexpectedly"), which
``database_errors`` turns into DatabaseUnavailable and the pool drops the connection. What that
statement did is unknown, as with any lost connection (a COMMIT may have been applied): callers
treat it as they treat PostgreSQL going away.

One watchdog thread per process, started on first use, checks the deadlines.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import socket
import threading
import time
from typing import Any

import psycopg2.extensions

logger = logging.getLogger(__name__)


class _Watchdog:
    """Shuts the socket of a connection whose statement outlived its deadline."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []  # (deadline, token), earliest first
        self._watched: dict[int, tuple[Any, float]] = {}  # token -> (connection, seconds)
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None
        self.expired = 0  # statements whose connection this process shut

    def watch(self, connection: Any, seconds: float) -> int:
        with self._cond:
            while self._heap and self._heap[0][1] not in self._watched:
                heapq.heappop(self._heap)  # released: the heap holds the statements in flight
            token = next(self._tokens)
            self._watched[token] = (connection, seconds)
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="db-statement-deadline", daemon=True)
                self._thread.start()
            elif self._heap[0][1] == token:
                self._cond.notify()
        return token

    def release(self, token: int) -> None:
        with self._cond:
            self._watched.pop(token, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][1] not in self._watched:
                    heapq.heappop(self._heap)  # released meanwhile
                if not self._heap:
                    self._cond.wait(60.0)
                    continue
                deadline, token = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                connection, seconds = self._watched.pop(token)
                self.expired += 1
                _shut(connection, seconds)  # under the lock: a statement that returned is never shut


def _shut(connection: Any, seconds: float) -> None:
    """Shut ``connection``'s socket both ways; the statement waiting on it fails at once."""
    try:
        fd = os.dup(connection.fileno())
    except (OSError, psycopg2.Error):  # closed meanwhile
        return
    with socket.socket(fileno=fd) as sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    logger.warning("a PostgreSQL statement got no answer within %gs: its connection was shut", seconds)


WATCHDOG = _Watchdog()


def deadline_cursor(seconds: float) -> type[psycopg2.extensions.cursor]:
    """A psycopg2 cursor class whose every ``execute`` fails once it waited ``seconds`` (see above)."""

    class DeadlineCursor(psycopg2.extensions.cursor):
        def execute(self, query: Any, vars: Any = None) -> Any:
            token = WATCHDOG.watch(self.connection, seconds)
            try:
                return super().execute(query, vars)
            finally:
                WATCHDOG.release(token)

        def copy_expert(self, sql: Any, file: Any, size: int = 8192) -> Any:
            token = WATCHDOG.watch(self.connection, seconds)
            try:
                return super().copy_expert(sql, file, size)
            finally:
                WATCHDOG.release(token)

    DeadlineCursor.__name__ = DeadlineCursor.__qualname__ = f"DeadlineCursor{seconds:g}s"
    return DeadlineCursor
