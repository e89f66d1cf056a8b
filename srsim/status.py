"""StatusWriter: srsim's writes of Match.status for is_test matches (the simulator owns them).

Writes happen on one background thread fed by a queue, so the asyncio loop never waits on
PostgreSQL. A terminal status is never overwritten (a restarted srsim replays a session from
its start, and must not reopen a game it already closed).
"""

from __future__ import annotations

import logging
import queue
import threading

from config.clock import utcnow
from models.status import TERMINAL

logger = logging.getLogger(__name__)


class StatusWriter:
    """Applies (sr_id, status) writes to is_test matches in the order they were asked for."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="srsim-status", daemon=True)
        self.written: list[tuple[str, str]] = []
        self._thread.start()

    def write(self, sr_id: str, status: str) -> None:
        self._queue.put((sr_id, status))

    def close(self, timeout: float = 5.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        from models.db import database
        from models.match import Match

        while True:
            item = self._queue.get()
            if item is None:
                return
            sr_id, status = item
            try:
                with database.connection_context():
                    rows = (
                        Match.update(status=status, updated_at=utcnow())
                        .where(
                            (Match.sr_id == sr_id)
                            & (Match.is_test == True)  # noqa: E712 - peewee expression
                            & (Match.status.not_in(sorted(TERMINAL)))
                        )
                        .execute()
                    )
                if rows:
                    self.written.append((sr_id, status))
                    logger.info("srsim set is_test match sr_id=%s status %s", sr_id, status)
            except Exception:
                logger.exception("srsim could not write status %s of sr_id=%s", status, sr_id)
