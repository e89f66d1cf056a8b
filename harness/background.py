"""A loop on a daemon thread while a ``with`` block runs: samplers and drainers of the tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from config.clock import utcnow
from config.periodic import PeriodicThread
from models.db import database


class BackgroundLoop:
    """Calls ``step()`` every ``interval`` seconds on its own thread (a PeriodicThread) from
    ``__enter__`` until ``__exit__``, which waits up to ``join_seconds`` for it to end; the thread's
    database connection is closed when it ends. A step that raises is logged and the loop goes on."""

    interval = 0.02
    join_seconds = 5.0

    def __init__(self) -> None:
        self._loop = PeriodicThread(
            self.step,
            interval=lambda: self.interval,
            name=type(self).__name__,
            wait_first=False,
            on_exit=_close_database,
        )

    def step(self) -> None:
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        """Whether its thread still runs (after ``__exit__``: it outlived ``join_seconds``)."""
        return self._loop.alive

    def __enter__(self) -> BackgroundLoop:
        self._loop.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.stop(join_seconds=self.join_seconds)


def _close_database() -> None:
    if database.obj is not None:  # the unit tier never binds the database
        database.close()


class FirstSeen(BackgroundLoop):
    """When ``predicate`` first held (kickoff's clock), checked every ``interval`` from ``__enter__``.

    Times a duration at its event: a test that reads the clock only after a CLI or browser step
    (or its own polling) adds that step's time to the duration.
    """

    def __init__(self, predicate: Callable[[], Any]) -> None:
        super().__init__()
        self.predicate = predicate
        self.at: datetime | None = None
        self._seen = threading.Event()

    def step(self) -> None:
        if self.at is None and self.predicate():
            self.at = utcnow()
            self._seen.set()

    def wait(self, timeout: float, what: str) -> datetime:
        """The time it first held; fails after ``timeout`` seconds without it."""
        if not self._seen.wait(timeout):
            raise AssertionError(f"{what}: not reached within {timeout} s")
        assert self.at is not None
        return self.at
