"""The per-process poller shape: a set of registered runs and one daemon thread that serves them all."""

from __future__ import annotations

import logging
import threading
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

R = TypeVar("R")


class LockedSet(Generic[R]):
    """A set that several threads add to and remove from; readers take a copy under its lock."""

    def __init__(self) -> None:
        self._items: set[R] = set()
        self._mu = threading.Lock()

    def add(self, item: R) -> None:
        with self._mu:
            self._items.add(item)

    def discard(self, item: R) -> None:
        with self._mu:
            self._items.discard(item)

    def snapshot(self) -> list[R]:
        """The members now (a copy: callers iterate without holding the lock)."""
        with self._mu:
            return list(self._items)


class RegistryPoller(Generic[R]):
    """Registrations plus one thread that calls ``step`` every ``period_seconds()`` until stopped.

    Subclasses (the heartbeat, the stop-flag poller) implement ``period_seconds`` and ``step``;
    ``step`` reads the registrations with ``snapshot``. A failing step is logged and the thread
    carries on with the next period.
    """

    def __init__(self, *, thread_name: str, step_name: str) -> None:
        self._thread_name = thread_name
        self._step_name = step_name  # in the log line of a failed step: "<step_name> failed"
        self._regs: LockedSet[R] = LockedSet()
        self._mu = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def period_seconds(self) -> float:
        raise NotImplementedError

    def step(self) -> None:
        raise NotImplementedError

    # -- registration ----------------------------------------------------------------

    def register(self, reg: R) -> None:
        self._regs.add(reg)
        self.start()

    def unregister(self, reg: R) -> None:
        self._regs.discard(reg)

    def snapshot(self) -> list[R]:
        """The registrations now (a copy: the step runs without holding the lock)."""
        return self._regs.snapshot()

    # -- the thread ------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread if it is not running (idempotent)."""
        with self._mu:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.period_seconds())
            self._wake.clear()
            if self._stopping:
                break
            try:
                self.step()
            except Exception:
                logger.exception("%s failed", self._step_name)
