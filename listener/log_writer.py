"""The one writer of a listener worker process to the match event log: batched, bounded, patient.

Every match's listener of the process hands its new messages to ``writer()`` (``submit``) and
waits for their ticket: the writer's thread takes everything submitted meanwhile and logs it in
one statement (models.event_log.insert_events: fenced, de-duplicated), so a busy process writes
big batches over one connection and a quiet one writes each message at once. While PostgreSQL is
away the writer keeps what it was given (up to ``listener_event_buffer_messages``; a submit past
that is refused at once as ``dropped``: the listener records a gap that the play-by-play
recovers) and tries again every ``listener_event_log_retry_seconds``; ``degraded`` says so.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from config.clock import utcnow
from config.errors import ServiceUnavailable
from models.event_log import NewRow, ensure_partitions, insert_events

logger = logging.getLogger(__name__)

#: How often the writer makes sure next month's partition exists.
PARTITION_CHECK_SECONDS = 3600.0


@dataclass
class Ticket:
    """The outcome of one submit: which keys were logged, which refused (fenced); ``done`` once known."""

    rows: Sequence[NewRow]
    done: threading.Event = field(default_factory=threading.Event)
    logged: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    dropped: bool = False  # the buffer was full: nothing of it will be written

    def wait(self, timeout: float | None) -> bool:
        return self.done.wait(timeout)


class LogWriter:
    """Writes the submitted rows of every listener of this process in batches (its own thread)."""

    def __init__(self, *, buffer_limit: int, retry_seconds: float, batch_rows: int = 2000) -> None:
        self.buffer_limit = buffer_limit
        self.retry_seconds = retry_seconds
        self.batch_rows = batch_rows
        self._cond = threading.Condition()
        self._queue: deque[Ticket] = deque()
        self._rows = 0  # rows waiting in _queue
        self._thread: threading.Thread | None = None
        self._partitions_at = 0.0
        self.degraded = False  # the last write failed: PostgreSQL away, rows held
        self.written = 0
        self.dropped = 0

    @property
    def waiting(self) -> int:
        """Rows held, not written yet."""
        with self._cond:
            return self._rows

    def submit(self, rows: Sequence[NewRow]) -> Ticket:
        """Queue ``rows`` for the next batch; a full buffer drops them at once (``ticket.dropped``)."""
        ticket = Ticket(rows)
        with self._cond:
            if self._rows + len(rows) > self.buffer_limit:
                self.dropped += len(rows)
                ticket.dropped = True
                ticket.done.set()
                return ticket
            self._queue.append(ticket)
            self._rows += len(rows)
            self._start()
            self._cond.notify()
        return ticket

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="event-log-writer", daemon=True)
            self._thread.start()

    def _take(self) -> list[Ticket]:
        with self._cond:
            while not self._queue:
                self._cond.wait(1.0)
            batch: list[Ticket] = []
            rows = 0
            while self._queue and (not batch or rows + len(self._queue[0].rows) <= self.batch_rows):
                ticket = self._queue.popleft()
                batch.append(ticket)
                rows += len(ticket.rows)
            return batch

    def _give_back(self, batch: list[Ticket]) -> None:
        with self._cond:
            self._queue.extendleft(reversed(batch))

    def _run(self) -> None:
        while True:
            batch = self._take()
            try:
                self._write(batch)
            except ServiceUnavailable as exc:
                if not self.degraded:
                    logger.warning("event log unavailable, holding %d messages: %s", self.waiting, exc)
                self.degraded = True
                self._give_back(batch)
                time.sleep(self.retry_seconds)
            except Exception:  # a batch PostgreSQL refuses as a whole: its rows are written one by one
                logger.exception("event log batch refused; writing its %d submits one by one", len(batch))
                for ticket in batch:
                    try:
                        self._write([ticket])
                    except ServiceUnavailable:
                        self._give_back([ticket])
                        self.degraded = True
                        time.sleep(self.retry_seconds)
                    except Exception:
                        logger.exception("event log refused %d messages; they are dropped", len(ticket.rows))
                        with self._cond:
                            self._rows -= len(ticket.rows)
                        ticket.dropped = True
                        ticket.done.set()

    def _write(self, batch: list[Ticket]) -> None:
        if time.monotonic() - self._partitions_at > PARTITION_CHECK_SECONDS:
            ensure_partitions(utcnow())
            self._partitions_at = time.monotonic()
        rows = [row for ticket in batch for row in ticket.rows]
        outcome = insert_events(rows)
        if self.degraded:
            logger.info("event log back: writing the messages held")
        self.degraded = False
        self.written += len(outcome.logged)
        with self._cond:
            self._rows -= len(rows)
        for ticket in batch:
            for row in ticket.rows:
                pair = (row.match_id, row.message_key)
                if pair in outcome.logged:
                    ticket.logged.add(row.message_key)
                elif pair in outcome.refused:
                    ticket.refused.add(row.message_key)
            ticket.done.set()


_writer: LogWriter | None = None
_writer_lock = threading.Lock()


def writer(*, buffer_limit: int, retry_seconds: float) -> LogWriter:
    """This process's writer (made on first use with these settings)."""
    global _writer
    with _writer_lock:
        if _writer is None:
            _writer = LogWriter(buffer_limit=buffer_limit, retry_seconds=retry_seconds)
        return _writer
