"""One listener run's view of its match's event log (PostgreSQL): what is there, and recording more.

``EventLog`` has the file archive's interface (``record``, ``count``, ``index``, ``flush``...)
so the stream loop, the recovery and the backfill use either; it is what every run with a
lifecycle row records into. ``open`` reads what the log holds (any host's, any run's) into the
index. Two ways to record:

* ``record`` skips a message the index knows, else hands it to the process's writer
  (listener.log_writer) and waits until PostgreSQL has it. While PostgreSQL is away it waits at
  most ``listener_event_log_wait_seconds``: the message stays with the writer (written when
  PostgreSQL is back) and counts as recorded.
* ``prepare`` + ``send`` (the listener's stream loop, listener.ingest): the row is handed to the
  writer without waiting, and the caller learns the outcome once its batch committed (``on_done``
  on the writer's thread), so one listener's burst is written in a few multi-row statements.

The log's unique key decides, not the index: a message another run logged meanwhile comes back as
not logged. A refused write (a newer run's fencing token) raises FencedWrite (``record``,
``maybe_flush``). A marker (``append_marker``: a gap, a delay) is handed over without waiting: a
gap's is written on a stream's reader thread (listener.stream_reader), which must not wait for
PostgreSQL while its other streams' bytes wait; ``maybe_flush`` and ``close`` learn its outcome.
A message is indexed when it is handed over; one the writer then drops (its buffer
full) leaves the index again, so the play-by-play backfill can bring it back. A line that is not
UTF-8 or not JSON is kept as kind ``unreadable`` with its bytes (and, in ``message``, their base64).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from config.clock import utcnow
from listener.events import FROM_PLAY_BY_PLAY, FROM_RESUME, EventIndex, backfilled_from, message_key
from listener.log_writer import LogWriter, Ticket
from models import event_log
from models.errors import FencedWrite
from models.event_log import NewRow, key_text

logger = logging.getLogger(__name__)

#: Where a recovered message came from (its ``kickoff.backfilled`` note) -> the row's kind.
_KIND_OF_SOURCE = {FROM_RESUME: "resumed", FROM_PLAY_BY_PLAY: "backfilled"}


def kind_of(message: Any) -> str:
    """The row kind of a message about to be recorded (live, resumed or backfilled)."""
    return _KIND_OF_SOURCE.get(backfilled_from(message) or "", "live")


def stored_form(message: dict[str, Any], line: bytes | None = None) -> tuple[str, bytes | None]:
    """(JSON text for ``message`` jsonb, bytes for ``raw`` or None): kickoff's notes left out, a NUL kept.

    ``line``: the message as read (its UTF-8 JSON text), used as it is when kickoff added no note and it
    holds no NUL (no second serialisation on the stream's path)."""
    if line is not None and "kickoff" not in message and b"\\u0000" not in line:
        try:
            return line.decode("utf-8"), None
        except UnicodeDecodeError:
            pass
    provider = {k: v for k, v in message.items() if k != "kickoff"} if "kickoff" in message else message
    text = json.dumps(provider, separators=(",", ":"), ensure_ascii=False)
    if "\\u0000" in text:
        note = {"kickoff": {"stored_as": "raw", "reason": "a NUL (\\u0000) jsonb cannot hold"}}
        return json.dumps(note), text.encode("utf-8", "surrogatepass")
    return text, None


class EventLog:
    """Records one match's messages into the event log, fenced by the run's token."""

    path = None  # no file: readers ask the log

    def __init__(
        self,
        *,
        match_id: str,
        writer: LogWriter,
        record_id: str | None = None,
        fence_token: int | None = None,
        wait_seconds: float = 5.0,
        on_dropped: Callable[[int], None] | None = None,
    ) -> None:
        self.match_id = match_id
        self.record_id = record_id
        self.fence_token = fence_token
        self.writer = writer
        self.wait_seconds = wait_seconds
        self.on_dropped = on_dropped
        self.fenced = False
        self.count = 0
        self.index = EventIndex()
        self.last_written_at: float | None = None  # epoch seconds of the last message logged before
        self.last_resume_id: str | None = None  # the newest logged message's resume id (a successor's)
        self.pending: list[Ticket] = []  # tickets not known written when their wait ran out
        self.unreadable = 0
        self._sent = threading.Condition()
        self._unsettled = 0  # tickets handed over by ``send`` whose outcome is not known yet
        self.dropped_sent = 0  # messages ``send`` handed over that the writer did not keep

    def open(self) -> EventLog:
        """Read what the log holds for the match (every run's, every host's) into the index."""
        for page in event_log.pages_of(self.match_id):
            for row in page:
                if row.kind == "unreadable":
                    continue
                self.index.add(row.message)
                if row.kind != "marker":
                    self.count += 1
                resume_id = row.message.get("resume_id") if isinstance(row.message, dict) else None
                if isinstance(resume_id, str) and resume_id:
                    self.last_resume_id = resume_id
                self.last_written_at = row.arrived_at.timestamp()
        return self

    def messages(self) -> list[Any]:
        """Every logged message of the match, in arrival order (as the file archive held them)."""
        self.wait_sent(self.wait_seconds)
        self.flush()
        return event_log.messages_of(self.match_id)

    # -- recording ---------------------------------------------------------------------

    def _row(self, key: str, kind: str, text: str, raw: bytes | None) -> NewRow:
        return NewRow(
            match_id=self.match_id,
            message_key=key,
            kind=kind,
            message=text,
            raw=raw,
            record_id=self.record_id,
            fence_token=self.fence_token,
        )

    def prepare(self, message: Any, raw: bytes | None = None) -> NewRow | None:
        """The row that logs ``message``, indexed as handed over; None when the index knows it already.
        FencedWrite once a newer run holds the match."""
        if self.fenced:
            raise self._refused()
        key = message_key(message)
        if key is not None and key in self.index.keys:
            return None
        text, kept = stored_form(message, raw)
        row_key = key_text(key) if key is not None else key_text(("message", _digest(text.encode())))
        self.index.add(message, key)
        self.count += 1
        return self._row(row_key, kind_of(message), text, kept)

    def send(
        self, rows: Sequence[NewRow], messages: Sequence[Any], on_done: Callable[[Ticket], None]
    ) -> Ticket:
        """Hand ``rows`` (of ``messages``, from ``prepare``) to the writer without waiting; ``on_done`` gets
        the ticket once their batch committed, was refused or dropped (on the writer's thread)."""
        with self._sent:
            self._unsettled += 1

        def settled(ticket: Ticket) -> None:
            if ticket.refused:
                self.fenced = True
            if ticket.dropped:
                self.dropped_sent += len(rows)
                self._unindex(messages)
            try:
                on_done(ticket)
            finally:
                with self._sent:
                    self._unsettled -= 1
                    self._sent.notify_all()

        return self.writer.submit(rows, on_done=settled)

    def wait_sent(self, timeout: float) -> bool:
        """Wait up to ``timeout`` until every ``send`` has its outcome; False when some still wait."""
        with self._sent:
            return self._sent.wait_for(lambda: self._unsettled == 0, timeout)

    def record_all(self, messages: Sequence[Any]) -> list[Any]:
        """Log the ``messages`` the index lacks in one batch and wait for it (as ``record`` waits); the ones
        logged now, in order (all of them when PostgreSQL is away and the writer holds them)."""
        prepared = [(row, m) for m in messages if (row := self.prepare(m)) is not None]
        if not prepared:
            return []
        ticket = self.writer.submit([row for row, _ in prepared])
        if ticket.dropped:
            self._unindex([m for _, m in prepared])
            logger.warning(
                "match %s: event log buffer full, %d messages not kept", self.match_id, len(prepared)
            )
            if self.on_dropped is not None:
                self.on_dropped(len(prepared))
            return []
        if not ticket.wait(0.0 if self.writer.degraded else self.wait_seconds):
            self.pending.append(ticket)
            return [m for _, m in prepared]
        self._check([ticket])
        return [m for row, m in prepared if row.message_key in ticket.logged]

    def _unindex(self, messages: Sequence[Any]) -> None:
        for message in messages:  # not in the log: the play-by-play may bring it back
            key = message_key(message)
            if key is not None:
                self.index.keys.discard(key)

    def record(self, message: Any, raw: bytes | None = None) -> bool:
        """Log one feed message unless it is logged already; True when this call logged it (or the writer
        holds it while PostgreSQL is away). FencedWrite once a newer run holds the match."""
        if self.fenced:
            raise self._refused()
        key = message_key(message)
        if key is not None and key in self.index.keys:
            return False
        text, kept = stored_form(message)
        row_key = key_text(key) if key is not None else key_text(("message", _digest(text.encode())))
        return self._log(self._row(row_key, kind_of(message), text, kept), message)

    def _log(self, row: NewRow, message: Any, *, wait: bool = True) -> bool:
        """Hand ``row`` to the writer; ``wait``: until PostgreSQL has it (at most ``wait_seconds``, none
        while the writer is degraded). Not waited for, it is held like a message PostgreSQL did not
        take in time: ``maybe_flush`` learns its outcome (and raises FencedWrite if it was refused)."""
        ticket = self.writer.submit([row])
        if ticket.dropped:
            logger.warning("match %s: event log buffer full, message not kept (a gap)", self.match_id)
            if self.on_dropped is not None:
                self.on_dropped(1)
            return False
        # PostgreSQL away (the writer's last try failed): the stream does not wait for each message.
        if not ticket.wait(self.wait_seconds if wait and not self.writer.degraded else 0.0):
            self.pending.append(ticket)
            self.index.add(message)
            self.count += 1
            return True
        self._check([ticket])
        self.index.add(message)
        if row.message_key in ticket.logged:
            self.count += 1
            return True
        return False  # another run or host logged it first

    def record_unreadable(self, raw: bytes, why: str) -> None:
        """Keep a line that is no readable JSON message, byte for byte (kind ``unreadable``)."""
        note = {"kickoff": {"unreadable": why, "bytes": len(raw), "base64": base64.b64encode(raw).decode()}}
        key = key_text(("unreadable", _digest(raw)))
        self.unreadable += 1
        self._log(self._row(key, "unreadable", json.dumps(note), raw), None)

    def append_marker(self, kind: str, **fields: Any) -> None:
        """Log a synthetic kickoff marker (a rain delay seen by a status check, a gap...), not waited for:
        a reader thread that closes the gaps of many of its streams at once (the box stalled them all)
        would wait for one marker's commit after another, its other streams unread meanwhile, silent
        again: a state two 10,000-listener runs never left (docs/scaling.md)."""
        marker = {"kickoff": {"marker": kind, "at": utcnow().isoformat(), **fields}}
        text = json.dumps(marker, separators=(",", ":"), default=str)
        row = self._row(key_text(("marker", _digest(text.encode()))), "marker", text, None)
        self._log(row, marker, wait=False)

    def _check(self, tickets: list[Ticket]) -> None:
        for ticket in tickets:
            if ticket.refused:
                self.fenced = True
                raise self._refused()

    def _refused(self) -> FencedWrite:
        logger.warning(
            "match %s event log write refused: fencing token %s is no longer the newest",
            self.match_id,
            self.fence_token,
        )
        return FencedWrite(
            f"match {self.match_id}: event log write refused: fencing token {self.fence_token} "
            "is no longer the newest"
        )

    # -- flushing: learning the outcome of held writes -----------------------------------------

    def maybe_flush(self) -> None:
        """Learn the outcome of writes held while PostgreSQL was away (FencedWrite when refused)."""
        done = [t for t in self.pending if t.done.is_set()]
        if done:
            self.pending = [t for t in self.pending if not t.done.is_set()]
            dropped = sum(1 for t in done if t.dropped)
            if dropped and self.on_dropped is not None:
                self.on_dropped(dropped)
            self._check(done)

    def flush(self) -> None:
        self.maybe_flush()

    def close(self, wait_seconds: float | None = None) -> None:
        """Wait a little for held writes (they stay with the process's writer); FencedWrite if refused."""
        self.wait_sent(self.wait_seconds if wait_seconds is None else wait_seconds)
        for ticket in self.pending:
            ticket.wait(self.wait_seconds if wait_seconds is None else wait_seconds)
        self.maybe_flush()


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()
