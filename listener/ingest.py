"""One listener run's way from a read message to its processing: recorded first, then processed, in order.

The stream loop hands every message to its run's ``Ingest`` (``take``) and reads on. With the event
log (``PipelinedIngest``) the message's row goes to the process's writer (listener.log_writer) at
once, without waiting; the writer commits whatever was handed over meanwhile in multi-row
statements, fenced by the run's token in the same statement. Once a batch committed, the messages
it logged for the first time are processed (the run's ``process``: Match.status, the question
pipeline) on the process's processing threads, one batch of a run at a time and in the order they
were read, so nothing is processed that is not recorded. A crash between a batch's commit and its
processing loses nothing either: the processing's writes move the match's processed watermark in
their own transaction (models.processed), and the next run processes the rows past it before it
streams (listener.match_listener). A message the log already held (another run's) is
counted as a duplicate; a refused batch (a newer run's token) ends the run with FencedWrite at the
stream loop's next message; a message the writer did not keep (its buffer full while PostgreSQL
was away) is counted (``take_dropped``): the run records a gap the play-by-play recovers.

A run holds at most ``listener_event_inflight_messages`` messages read but not yet processed: past
that the stream loop waits (backpressure), except while the writer is degraded (PostgreSQL away:
the writer's own bounded buffer decides). ``degraded`` says a run is behind: the writer is away or
half full, or the run's in-flight messages reached the bound.

A local record run (``kickoff listen``, the spec's file) records and processes each message inline
(``InlineIngest``).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from listener.archive import EventArchive
from listener.event_log import EventLog
from listener.log_writer import Ticket
from models.errors import FencedWrite

logger = logging.getLogger(__name__)

#: Rows a run's pending batch (``take(defer=True)``) holds at most before it is handed over.
PENDING_MAX = 500

#: Processes messages newly recorded, in order (the run's status rules and question pipeline); the
#: second argument is their event log keys (models.processed: the watermark), None for a file archive.
Process = Callable[[list[dict[str, Any]], list[str] | None], None]


class ProcessingThreads:
    """A process's processing threads: the runs' drains (``submit``), each run's in order, taken from one
    queue by ``threads`` threads.

    A thread is woken only when one is idle and not woken already: the writer's commit of one batch
    holds the messages of dozens of quiet runs, and their drains wake at most ``threads`` threads, each
    taking drains until none is left, instead of one wake (a futex, the GIL changing hands) and one
    future per message as with a ThreadPoolExecutor (issue 34: at 0.5 events/s per listener, every
    event was a submit of its own). When every idle thread is woken already (or none is idle), a drain
    starts one more thread, up to ``threads``, so a drain waiting on PostgreSQL holds up no other while
    the threads are still being started. A drain that raises is logged; the thread goes on.
    """

    def __init__(self, threads: int, *, name: str = "event-processing") -> None:
        self.threads = threads
        self.name = name
        self._cond = threading.Condition()
        self._queue: deque[Callable[[], None]] = deque()
        self._started = 0
        self._idle = 0  # threads waiting for work
        self._woken = 0  # idle threads notified and not running yet

    def submit(self, drain: Callable[[], None]) -> None:
        with self._cond:
            self._queue.append(drain)
            if self._idle > self._woken:
                self._woken += 1
                self._cond.notify()
            elif self._started < self.threads:  # every idle thread is woken already: one more
                self._started += 1
                threading.Thread(target=self._run, name=f"{self.name}-{self._started}", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._idle += 1
                    try:
                        self._cond.wait()
                    finally:
                        self._idle -= 1
                        self._woken = max(self._woken - 1, 0)
                drain = self._queue.popleft()
            try:
                drain()
            except BaseException:  # as a ThreadPoolExecutor's worker: the thread outlives any one drain
                logger.exception("event processing failed")


_pool: ProcessingThreads | None = None
_pool_lock = threading.Lock()


def processing_pool(threads: int) -> ProcessingThreads:
    """This process's processing threads (made on first use; shared by every run of the process)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ProcessingThreads(threads)
        return _pool


class InlineIngest:
    """Records each message into the run's file archive, then processes it (a local record run)."""

    degraded = False
    held_up = False
    inflight = 0

    def __init__(self, archive: EventArchive, process: Process) -> None:
        self.archive = archive
        self._process = process
        self.duplicates = 0

    def take(self, message: dict[str, Any], raw: bytes | None = None, *, defer: bool = False) -> bool:
        if not self.archive.record(message, raw):
            return False
        self._process([message], None)
        return True

    def take_all(self, messages: list[dict[str, Any]]) -> int:
        new = [m for m in messages if self.archive.record(m)]
        if new:
            self._process(new, None)
        return len(new)

    def flush(self) -> None:
        return None

    def check(self) -> None:
        return None

    def take_dropped(self) -> int:
        return 0

    def drain(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        return None


class PipelinedIngest:
    """Hands messages to the event log's writer without waiting; processes each batch once committed."""

    def __init__(
        self,
        log: EventLog,
        process: Process,
        *,
        pool: ProcessingThreads | Executor,
        limit: int,
        stop: threading.Event,
    ) -> None:
        self.log = log
        self._process = process
        self._pool = pool
        self.limit = limit
        self._stop = stop
        self._cond = threading.Condition()
        self._committed: deque[tuple[Ticket, list[dict[str, Any]]]] = deque()
        self._scheduled = False  # a drain of this run is queued or running on the pool
        self._processing = threading.Lock()  # held while ``process`` runs; ``close`` waits for it
        self.inflight = 0  # messages taken whose batch has not been processed yet
        self.failure: BaseException | None = None  # raised by ``check`` in the stream loop
        self.duplicates = 0  # messages the log held already (another run's)
        self.dropped = 0  # messages the writer did not keep (its buffer full)
        self._dropped_told = 0
        self.closed = False
        self.held_up = False  # the stream loop waited for room (the run, not the feed, was slow)
        # Rows taken with ``defer``, not handed over yet (``flush``), and their messages.
        self._pending_lock = threading.Lock()
        self._flushing = threading.Lock()  # one flush at a time: batches reach the writer in order
        self._pending_rows: list[Any] = []
        self._pending_messages: list[dict[str, Any]] = []

    @property
    def degraded(self) -> bool:
        """The run is behind: its writer is away or half full, or its in-flight messages hit the bound."""
        return self.log.writer.behind or self.inflight >= self.limit

    # -- the stream loop's side --------------------------------------------------------------

    def take(self, message: dict[str, Any], raw: bytes | None = None, *, defer: bool = False) -> bool:
        """Hand ``message`` over; False when the run's index knows it (a duplicate, nothing to do).

        ``defer``: the row joins the run's pending batch, handed over as one ticket by ``flush`` (the
        stream loop's, before each read of the socket: the messages of one read are one ticket), at
        the latest once PENDING_MAX rows wait."""
        self.check()
        row = self.log.prepare(message, raw)
        if row is None:
            return False
        self._wait_for_room()
        if not defer:
            self._send([row], [message], counted=True)
            return True
        with self._pending_lock:
            self._pending_rows.append(row)
            self._pending_messages.append(message)
            full = len(self._pending_rows) >= PENDING_MAX
        if full:
            self.flush()
        return True

    def flush(self) -> None:
        """Hand the pending batch (``take(defer=True)``) to the writer as one ticket."""
        with self._flushing:
            with self._pending_lock:
                rows, messages = self._pending_rows, self._pending_messages
                if not rows:
                    return
                self._pending_rows, self._pending_messages = [], []
            self._send(rows, messages, counted=True)

    def take_all(self, messages: list[dict[str, Any]]) -> int:
        """Hand a backfill's messages over in one batch and wait for it (at most the log's wait, none while
        PostgreSQL is away); returns how many it logged for the first time (all of them while held)."""
        self.check()
        self.flush()  # what the stream read before goes first
        prepared = [(row, m) for m in messages if (row := self.log.prepare(m)) is not None]
        if not prepared:
            return 0
        ticket = self._send([row for row, _ in prepared], [m for _, m in prepared])
        wait = 0.0 if self.log.writer.degraded else self.log.wait_seconds
        if not ticket.wait(wait):
            return len(prepared)
        if ticket.refused:
            raise self.log._refused()
        return 0 if ticket.dropped else len(ticket.logged)

    def check(self) -> None:
        """Raise what ended the processing side (FencedWrite, an error of the pipeline)."""
        if self.failure is not None:
            raise self.failure

    def take_dropped(self) -> int:
        """Messages the writer dropped since the last call (a gap to recover)."""
        dropped = self.dropped - self._dropped_told
        self._dropped_told += dropped
        return dropped

    def drain(self, timeout: float) -> bool:
        """Wait until every message taken is processed, giving up when ``timeout`` passes without progress."""
        self.flush()
        with self._cond:
            while self.inflight:
                if not self._cond.wait_for(functools.partial(self._below, self.inflight), timeout):
                    return False
        return True

    def _below(self, count: int) -> bool:
        return self.inflight < count

    def close(self) -> None:
        """No more processing: a batch committed from now on is recorded, left to the next run (it lies
        past the match's processed watermark)."""
        with self._processing:
            self.closed = True

    def _wait_for_room(self) -> None:
        if self.inflight >= self.limit:
            self.flush()  # the pending batch counts as in flight: it must be on its way
        with self._cond:
            while (
                self.inflight >= self.limit
                and not self.log.writer.degraded
                and self.failure is None
                and not self._stop.is_set()
            ):
                self.held_up = True
                self._cond.wait(0.2)
            self.inflight += 1

    def _send(self, rows: list[Any], messages: list[dict[str, Any]], *, counted: bool = False) -> Ticket:
        """One ticket of ``rows``; ``counted``: their messages are in ``inflight`` already (``take``)."""
        if not counted:
            with self._cond:
                self.inflight += len(messages)
        return self.log.send(rows, messages, functools.partial(self._on_committed, messages))

    # -- the writer's and the processing threads' side ---------------------------------------

    def _on_committed(self, messages: list[dict[str, Any]], ticket: Ticket) -> None:
        """The writer's thread: the batch's outcome is known; queue its processing."""
        with self._cond:
            self._committed.append((ticket, messages))
            if self._scheduled:
                return
            self._scheduled = True
        self._pool.submit(self._drain)

    def _drain(self) -> None:
        """A processing thread: process what committed, in order, until nothing is left."""
        while True:
            with self._cond:
                if not self._committed:
                    self._scheduled = False
                    return
                items = list(self._committed)
                self._committed.clear()
            new: list[dict[str, Any]] = []
            keys: list[str] = []
            for ticket, messages in items:
                if ticket.dropped:
                    self.dropped += len(messages)
                elif ticket.refused:
                    self.failure = self.failure or self.log._refused()
                else:
                    for row, message in zip(ticket.rows, messages, strict=True):
                        if row.message_key in ticket.logged:
                            new.append(message)
                            keys.append(row.message_key)
                        else:
                            self.duplicates += 1
            try:
                with self._processing:
                    if new and not self.closed and self.failure is None:
                        self._process(new, keys)
            except FencedWrite as exc:
                self.failure = self.failure or exc
            except BaseException as exc:  # ends the run at the stream loop's next message
                logger.exception("match %s: processing failed", self.log.match_id)
                self.failure = self.failure or exc
            finally:
                with self._cond:
                    self.inflight -= sum(len(m) for _, m in items)
                    self._cond.notify_all()
