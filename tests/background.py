"""A loop on a daemon thread while a ``with`` block runs: samplers and drainers of the tests."""

from __future__ import annotations

import threading

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
            database.close()

    def __enter__(self) -> BackgroundLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.join_seconds)
