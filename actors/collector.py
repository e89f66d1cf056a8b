"""The garbage collector of a worker process the ``dramatiq`` command started: short full passes.

A full pass of CPython's collector stops every thread of the process for as long as it takes to
visit every object it tracks. A 2,500-listener worker tracks about 700,000 (each run's threads'
locks, conditions, queues and HTTP sessions): a full pass took about 0.6 s of a core, and with
CPython's thresholds one came every 16 s, so about 4 % of the worker's stream messages waited up to
0.6 s to be read (issue 34's tail; docs/scaling.md). So, in such a process:

* what it holds is frozen (``gc.freeze``) once its boot hooks ran, and again every
  ``FREEZE_SECONDS``: the collector's passes visit only the objects made since the last freeze,
  a few seconds' worth, and stay short;
* every ``THAW_SECONDS`` everything is thawed, collected in one full pass and frozen again: a
  cycle among frozen objects (an ended run's) is freed then, so nothing is kept for longer than
  that, at the cost of one long pass per period instead of one every few seconds.

A worker started in another process (a test's) changes nothing of that process's collector.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Protocol

from config.periodic import PeriodicThread

logger = logging.getLogger(__name__)

#: How often what the process holds is frozen (its collector's passes visit only what came since).
FREEZE_SECONDS = 60.0
#: How often everything is thawed, collected in one full pass and frozen again.
THAW_SECONDS = 900.0


class Collector(Protocol):
    """What HeapFreezer uses of the ``gc`` module."""

    def freeze(self) -> None: ...
    def unfreeze(self) -> None: ...
    def collect(self) -> int: ...


class HeapFreezer:
    """Freezes the process's heap now and every ``freeze_seconds``; thaws and collects it all every
    ``thaw_seconds`` (``step``: one period's work; ``start``: on a thread of its own)."""

    def __init__(
        self,
        *,
        freeze_seconds: float = FREEZE_SECONDS,
        thaw_seconds: float = THAW_SECONDS,
        collector: Collector = gc,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.thaw_seconds = thaw_seconds
        self._gc = collector
        self._clock = clock
        self._thawed_at = clock()
        self.full_passes = 0  # thaws and collections so far
        self._thread = PeriodicThread(
            self.step, interval=freeze_seconds, name="kickoff-heap-freezer", wait_first=True
        )

    def step(self) -> None:
        if self._clock() - self._thawed_at >= self.thaw_seconds:
            started = time.perf_counter()
            self._gc.unfreeze()
            freed = self._gc.collect()
            self._thawed_at = self._clock()
            self.full_passes += 1
            took = time.perf_counter() - started
            logger.debug("heap thawed and collected: %d objects freed in %.3f s", freed, took)
        self._gc.freeze()

    def start(self) -> None:
        """Freeze now, then every period on the freezer's thread."""
        self._gc.freeze()
        self._thread.start()

    def stop(self) -> None:
        self._thread.stop()
