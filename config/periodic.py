"""One periodic thread: a step called every interval on a daemon thread of its own until stopped.

Every "do this every N seconds in the background" of kickoff is a PeriodicThread: the listener
pollers (heartbeat, stop flags), the worker presence, the history flusher, the tests' samplers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


class PeriodicThread:
    """Calls ``step`` on one daemon thread, then waits ``interval`` seconds, until ``stop``.

    ``interval`` is a number or a callable read before each wait (a setting that may change).
    ``wait_first``: wait one interval before the first step (a heartbeat, a flush) or step at once
    (a sampler). ``fixed_rate``: steps start every interval (the wait is what the last step left of
    it; a step longer than the interval is followed at once), not an interval after the last step
    ended: a heartbeat whose own write takes a second under load still beats every interval.
    A step that raises is logged (``<label> failed``; the label is the thread's name unless given)
    and the next period comes.
    ``wake()`` ends the current wait early: the step runs at once. ``on_exit`` runs on the thread
    as it ends (closing its database connection). ``start`` is idempotent; a stopped thread may be
    started again (a new thread: the old one only ever sees its own stop).
    """

    def __init__(
        self,
        step: Callable[[], object],
        *,
        interval: float | Callable[[], float],
        name: str,
        label: str | None = None,
        wait_first: bool = True,
        fixed_rate: bool = False,
        on_exit: Callable[[], object] | None = None,
    ) -> None:
        self.name = name
        self.label = label or name
        self._step = step
        self._interval: Callable[[], float] = interval if callable(interval) else (lambda: interval)
        self._wait_first = wait_first
        self._fixed_rate = fixed_rate
        self._on_exit = on_exit
        self._mu = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()

    @property
    def running(self) -> bool:
        """Whether its thread runs and was not asked to stop."""
        with self._mu:
            return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    @property
    def alive(self) -> bool:
        """Whether its thread runs, asked to stop or not."""
        with self._mu:
            return self._thread is not None and self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        """Whether ``stop`` was called since the last ``start`` (False before the first start)."""
        return self._stop.is_set()

    def start(self) -> bool:
        """Start the thread unless it runs; True when this call started it."""
        with self._mu:
            if self._thread is not None and self._thread.is_alive() and not self._stop.is_set():
                return False
            self._stop, self._wake = threading.Event(), threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(self._stop, self._wake), name=self.name, daemon=True
            )
            self._thread.start()
            return True

    def wake(self) -> None:
        """Run the next step now instead of at the end of the current wait."""
        self._wake.set()

    def stop(self, *, join_seconds: float | None = None) -> None:
        """Ask the thread to end (after the step in progress); wait up to ``join_seconds`` for it."""
        with self._mu:
            self._stop.set()
            self._wake.set()
            thread = self._thread
        if join_seconds is not None and thread is not None and thread is not threading.current_thread():
            thread.join(timeout=join_seconds)

    def _run(self, stop: threading.Event, wake: threading.Event) -> None:
        try:
            waits = self._wait_first
            started: float | None = None  # when the last step started (fixed_rate)
            while not stop.is_set():
                if waits:
                    wait = self._interval()
                    if self._fixed_rate and started is not None:
                        wait = max(0.0, wait - (time.monotonic() - started))
                    wake.wait(wait)
                    wake.clear()
                    if stop.is_set():
                        break
                waits = True
                started = time.monotonic()
                try:
                    self._step()
                except Exception:
                    logger.exception("%s failed", self.label)
        finally:
            if self._on_exit is not None:
                self._on_exit()
