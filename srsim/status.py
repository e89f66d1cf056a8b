"""StatusWriter: srsim's writes of Match.status for is_test matches (the simulator owns them).

Writes happen on one background thread fed by a queue, so the asyncio loop never waits on
PostgreSQL. A terminal status is never overwritten (a restarted srsim replays a session from
its start, and must not reopen a game it already closed). When a session of an is_test clone
starts, the writer also makes the clone dispatchable (``mark_served``).
"""

from __future__ import annotations

import logging
import queue
import threading
from datetime import datetime

from models.match import mark_test_clone_served, write_test_match_status

logger = logging.getLogger(__name__)


class StatusWriter:
    """Applies (sr_id, status) writes to is_test matches in the order they were asked for."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[str, str | datetime] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="srsim-status", daemon=True)
        self.written: list[tuple[str, str]] = []
        self.served: list[str] = []  # clones made dispatchable (tests)
        self._thread.start()

    def write(self, sr_id: str, status: str) -> None:
        self._queue.put((sr_id, status))

    def mark_served(self, sr_id: str, scheduled: datetime) -> None:
        """An is_test clone's session started: make it dispatchable, kick-off at the session's."""
        self._queue.put((sr_id, scheduled))

    def close(self, timeout: float = 5.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:

        while True:
            item = self._queue.get()
            if item is None:
                return
            sr_id, status = item
            if isinstance(status, datetime):
                self._served(sr_id, status)
                continue
            try:
                if write_test_match_status(sr_id, status):
                    self.written.append((sr_id, status))
                    logger.info("srsim set is_test match sr_id=%s status %s", sr_id, status)
            except Exception:
                logger.exception("srsim could not write status %s of sr_id=%s", status, sr_id)

    def _served(self, sr_id: str, scheduled: datetime) -> None:

        try:
            if mark_test_clone_served(sr_id, scheduled):
                self.served.append(sr_id)
                logger.info("srsim serves is_test clone sr_id=%s from %s", sr_id, scheduled.isoformat())
        except Exception:
            logger.exception("srsim could not mark is_test clone sr_id=%s served", sr_id)
