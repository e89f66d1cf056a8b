"""The one writer of a listener worker process to the match event log: batched, bounded, patient.

Every match's listener of the process hands its new messages to ``writer()`` (``submit``) and
learns their outcome from their ticket (``on_done``, called on the writer's thread once the batch
committed; or ``wait``): the writer's thread takes everything submitted meanwhile and logs it in
one statement per 2,000 rows (models.event_log.insert_events: fenced, de-duplicated), so a busy
process writes big batches over one connection. A smaller batch waits until its oldest message is
``listener_event_log_linger_seconds`` old (50 ms), so a process following a thousand quiet streams
commits their messages together, not one commit each (issue 34's fleet: 491 commits/s and 0.48 ms of
CPU per stream message before, 33 and 0.17 ms with it). A
listener does not wait for each message: it reads on while its earlier messages are written
(listener.ingest), so one busy listener's burst is written in batches too. Tickets complete in
the order they were submitted. While PostgreSQL is
away the writer keeps what it was given (up to ``listener_event_buffer_messages``; a submit past
that is refused at once as ``dropped``: the listener records a gap that the play-by-play
recovers) and tries again every ``listener_event_log_retry_seconds``; ``degraded`` says so.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from config.clock import utcnow
from config.errors import ServiceUnavailable
from models.boundary import connection
from models.event_log import NewRow, ensure_partitions, insert_events

logger = logging.getLogger(__name__)

#: How often the writer makes sure next month's partition exists.
PARTITION_CHECK_SECONDS = 3600.0
#: The writer gives its connection back to the pool after this long without a submit (a quiet
#: process holds none; a busy one keeps one open between batches).
IDLE_RELEASE_SECONDS = 2.0


#: Guards a ticket's ``done`` event, made only when someone waits, against the ticket's finish.
_done_lock = threading.Lock()


class Ticket:
    """The outcome of one submit: which keys were logged, which refused (fenced); ``done`` once known.

    A listener submits each message it reads as a ticket of its own and learns the outcome from
    ``on_done``: nothing waits for most tickets, so their ``done`` event is only made when asked for.
    """

    __slots__ = ("_done", "_finished", "dropped", "logged", "on_done", "queued_at", "refused", "rows")

    def __init__(self, rows: Sequence[NewRow], on_done: Callable[[Ticket], None] | None = None) -> None:
        self.rows = rows
        self.logged: set[str] = set()
        self.refused: set[str] = set()
        self.dropped = False  # the buffer was full, or PostgreSQL refused it: nothing of it is written
        self.on_done = on_done  # called once the outcome is known (writer's thread)
        self.queued_at = 0.0  # when it was queued for the writer (monotonic)
        self._finished = False
        self._done: threading.Event | None = None

    @property
    def done(self) -> threading.Event:
        """Set once the outcome is known."""
        with _done_lock:
            if self._done is None:
                self._done = threading.Event()
                if self._finished:
                    self._done.set()
            return self._done

    def finish(self) -> None:
        """The outcome is known: wake a waiter, then tell ``on_done``."""
        with _done_lock:
            self._finished = True
            done = self._done
        if done is not None:
            done.set()
        if self.on_done is not None:
            try:
                self.on_done(self)
            except Exception:
                logger.exception("event log ticket callback failed")

    def wait(self, timeout: float | None) -> bool:
        return self.done.wait(timeout)


class LogWriter:
    """Writes the submitted rows of every listener of this process in batches (its own thread)."""

    def __init__(
        self, *, buffer_limit: int, retry_seconds: float, batch_rows: int = 2000, linger_seconds: float = 0.0
    ) -> None:
        self.buffer_limit = buffer_limit
        self.retry_seconds = retry_seconds
        self.batch_rows = batch_rows
        self.linger_seconds = linger_seconds
        self._cond = threading.Condition()
        self._queue: deque[Ticket] = deque()
        self._rows = 0  # rows waiting in _queue
        self._thread: threading.Thread | None = None
        self._running = False  # the writer's thread was started and has not ended
        self._idle = False  # the writer's thread waits for a submit
        self._lingering = False  # the writer's thread lets a small batch gather more (``_linger``)
        self._partitions_at = 0.0
        self.degraded = False  # the last write failed: PostgreSQL away, rows held
        self.written = 0
        self.dropped = 0

    @property
    def waiting(self) -> int:
        """Rows held, not written yet."""
        with self._cond:
            return self._rows

    @property
    def behind(self) -> bool:
        """PostgreSQL is away, or more than half the buffer waits: a listener shows itself degraded."""
        return self.degraded or self._rows * 2 > self.buffer_limit

    def submit(self, rows: Sequence[NewRow], on_done: Callable[[Ticket], None] | None = None) -> Ticket:
        """Queue ``rows`` for the next batch; a full buffer drops them at once (``ticket.dropped``, and
        ``on_done`` is called before this returns)."""
        ticket = Ticket(rows, on_done=on_done)
        with self._cond:
            full = self._rows + len(rows) > self.buffer_limit
            if full:
                self.dropped += len(rows)
                ticket.dropped = True
            else:
                ticket.queued_at = time.monotonic()
                self._queue.append(ticket)
                self._rows += len(rows)
                if not self._running:
                    self._start()
                if self._idle or (self._lingering and self._rows >= self.batch_rows):
                    self._cond.notify()
        if full:
            ticket.finish()
        return ticket

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="event-log-writer", daemon=True)
            self._running = True
            self._thread.start()

    def _await_work(self) -> None:
        """Wait, holding no connection, until a submit queued rows."""
        with self._cond:
            while not self._queue:
                self._idle = True  # a submit wakes the thread (only then: notify costs each message)
                try:
                    self._cond.wait(1.0)
                finally:
                    self._idle = False

    def _take(self) -> list[Ticket]:
        """The next batch; none once IDLE_RELEASE_SECONDS passed without a submit."""
        with self._cond:
            deadline = time.monotonic() + IDLE_RELEASE_SECONDS
            while not self._queue:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._idle = True
                try:
                    self._cond.wait(remaining)
                finally:
                    self._idle = False
            self._linger()
            batch: list[Ticket] = []
            rows = 0
            while self._queue and (not batch or rows + len(self._queue[0].rows) <= self.batch_rows):
                ticket = self._queue.popleft()
                batch.append(ticket)
                rows += len(ticket.rows)
            return batch

    def _linger(self) -> None:
        """Let a batch smaller than ``batch_rows`` gather more until its oldest submit is ``linger_seconds``
        old (``_cond`` held): many quiet streams' messages go in one commit, not one commit each. A submit
        that fills the batch ends the wait."""
        if self.linger_seconds <= 0:
            return
        until = self._queue[0].queued_at + self.linger_seconds
        while self._rows < self.batch_rows and not self.degraded:
            remaining = until - time.monotonic()
            if remaining <= 0:
                return
            self._lingering = True
            try:
                self._cond.wait(remaining)
            finally:
                self._lingering = False

    def _give_back(self, batch: list[Ticket]) -> None:
        with self._cond:
            self._queue.extendleft(reversed(batch))

    def _run(self) -> None:
        """Serve batches over one connection held open while submits come (reopened after an outage,
        given back to the pool when idle)."""
        try:
            while True:
                self._await_work()
                try:
                    with connection():
                        self._serve()
                except ServiceUnavailable as exc:
                    self.degraded = True
                    logger.warning(
                        "event log writer cannot connect (%s); holding %d messages", exc, self.waiting
                    )
                    time.sleep(self.retry_seconds)
        finally:
            with self._cond:  # the next submit starts a new thread
                self._running = False

    def _serve(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return  # idle: the connection goes back to the pool
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
                        ticket.finish()

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
        for ticket in batch:
            ticket.finish()


_writer: LogWriter | None = None
_writer_lock = threading.Lock()


def writer(*, buffer_limit: int, retry_seconds: float, linger_seconds: float = 0.0) -> LogWriter:
    """This process's writer (made on first use with these settings)."""
    global _writer
    with _writer_lock:
        if _writer is None:
            _writer = LogWriter(
                buffer_limit=buffer_limit, retry_seconds=retry_seconds, linger_seconds=linger_seconds
            )
        return _writer
