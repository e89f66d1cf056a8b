"""A loop on a daemon thread while a ``with`` block runs: samplers and drainers of the tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from config.clock import utcnow
from models.db import database


class BackgroundLoop:
    """Calls ``step()`` every ``interval`` seconds on its own thread from ``__enter__`` until
    ``__exit__``, which waits up to ``join_seconds`` for it to end; the thread's database
    connection is closed when it ends."""

    interval = 0.02
    join_seconds = 5.0

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)

    def step(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.step()
                self._stop.wait(self.interval)
        finally:
            if database.obj is not None:  # the unit tier never binds the database
                database.close()

    def __enter__(self) -> BackgroundLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.join_seconds)


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
