"""This process's history counts (events, gaps, trigger answers), kept per minute and added to the store.

The processes that count things (a listener worker's listeners, the API and CLI that answer
triggers) call ``count`` where they count; the counts wait in memory by (series, key, minute)
and a flusher thread adds them to ``history_points`` every HISTORY_FLUSH_SECONDS in one
statement (models.history.add_points), and once more when the process ends. ``count`` costs a
lock and a dict update, never I/O; before ``start`` (a test, a benchmark, a process that keeps no
history) it does nothing. When PostgreSQL is away the counts wait for the next flush; past
HISTORY_MAX_PENDING_POINTS waiting points new ones are dropped (counted and logged), so memory
stays bounded.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from datetime import UTC, datetime

from config.errors import KickoffError
from config.periodic import PeriodicThread
from models.db import connection_scope
from models.history import PointKey, add_points

logger = logging.getLogger(__name__)


class HistoryRecorder:
    """Counts by (series, key, minute), flushed to the history store by a thread of its own."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._counts: dict[tuple[str, str, int], float] = {}
        self._flusher = PeriodicThread(
            self.flush, interval=lambda: self.interval_seconds, name="kickoff-history", label="history flush"
        )
        self.enabled = False
        self.interval_seconds = 10.0
        self.max_pending = 100_000
        self.dropped = 0  # counts dropped because too many points waited
        self.flushed = 0  # points written so far
        self._stop_at_exit = False  # ``stop`` registered to run at the process's exit

    def count(self, series: str, key: str = "", n: float = 1.0) -> None:
        """Add ``n`` to ``series``/``key`` in the current minute (nothing before ``start``)."""
        if not self.enabled:
            return
        point = (series, key, int(time.time() // 60))
        with self._mu:
            self._add(point, n)

    def _add(self, point: tuple[str, str, int], n: float) -> None:
        """Add ``n`` to ``point`` (the lock held); a new point past ``max_pending`` is dropped, counted."""
        if point in self._counts:
            self._counts[point] += n
        elif len(self._counts) < self.max_pending:
            self._counts[point] = n
        else:
            self.dropped += 1

    def pending(self) -> int:
        with self._mu:
            return len(self._counts)

    def flush(self) -> int:
        """Add what was counted to the store now; the points written (0 when PostgreSQL refused: kept)."""
        with self._mu:
            taken, self._counts = self._counts, {}
        if not taken:
            return 0
        points: dict[PointKey, float] = {
            (series, key, datetime.fromtimestamp(minute * 60, tz=UTC)): n
            for (series, key, minute), n in taken.items()
        }
        try:
            with connection_scope():
                written = add_points(points)
        except KickoffError as exc:
            with self._mu:
                for point, n in taken.items():
                    self._add(point, n)
            logger.warning("history: %d points kept for the next flush: %s", len(taken), exc)
            return 0
        self.flushed += written
        return written

    def enable(self) -> None:
        """Count from now on without a flusher thread (a one-shot command flushes when it is done)."""
        self.enabled = True

    def start(self, *, interval_seconds: float, max_pending: int) -> None:
        """Count from now on and flush every ``interval_seconds`` (a call while it runs only adjusts the
        interval; ``stop`` at the process's exit, registered once)."""
        self.interval_seconds = interval_seconds
        self.max_pending = max_pending
        with self._mu:
            if self.enabled and self._flusher.running:
                return
            self.enabled = True
            self._flusher.start()
            if not self._stop_at_exit:
                atexit.register(self.stop)
                self._stop_at_exit = True

    def stop(self) -> None:
        """Stop counting and flush what is left (the process, or the API app, is ending)."""
        self.enabled = False
        self._flusher.stop(join_seconds=10)
        self.flush()


#: The process's recorder (started at boot by the processes that keep history).
recorder = HistoryRecorder()


def count(series: str, key: str = "", n: float = 1.0) -> None:
    """``recorder.count``: add ``n`` to ``series``/``key`` in the current minute."""
    recorder.count(series, key, n)
