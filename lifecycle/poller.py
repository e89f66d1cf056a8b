"""The per-process poller shape: a set of registered runs and one daemon thread that serves them all."""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

from config.periodic import PeriodicThread

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

    def __contains__(self, item: object) -> bool:
        with self._mu:
            return item in self._items

    def snapshot(self) -> list[R]:
        """The members now (a copy: callers iterate without holding the lock)."""
        with self._mu:
            return list(self._items)


class RegistryPoller(Generic[R]):
    """Registrations plus one PeriodicThread that calls ``step`` every ``period_seconds()`` until stopped.

    Subclasses (the heartbeat, the stop-flag poller, the lease threads) implement ``period_seconds``
    and ``step``; ``step`` reads the registrations with ``snapshot``. A failing step is logged and
    the thread carries on with the next period. ``FIXED_RATE``: the steps start every period, the
    step's own time taken from the wait (``PeriodicThread``'s ``fixed_rate``).
    """

    FIXED_RATE = False

    def __init__(self, *, thread_name: str, step_name: str) -> None:
        self._regs: LockedSet[R] = LockedSet()
        # "<step_name> failed" in the log line of a failed step
        self._periodic = PeriodicThread(
            self.step,
            interval=self.period_seconds,
            name=thread_name,
            label=step_name,
            fixed_rate=self.FIXED_RATE,
        )

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

    @property
    def _stopping(self) -> bool:
        return self._periodic.stopping

    def start(self) -> None:
        """Start the thread if it is not running (idempotent)."""
        self._periodic.start()

    def wake(self) -> None:
        """Step now instead of at the end of the period."""
        self._periodic.wake()

    def stop(self) -> None:
        self._periodic.stop()
