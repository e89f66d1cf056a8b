"""The gaps of one listener run: when the stream was away, and whether what it missed was recovered.

A gap is a reconnect (the stream dropped), a takeover (the run starts where an earlier run's
archive ends) or a silence (no event and no heartbeat for more than ``listener_gap_heartbeats``
provider heartbeat intervals). Each gap is one log line with the match id, counted on the run's
lifecycle row (``gaps``, ``gap_seconds``); a gap stays pending until a resume replay or a
play-by-play backfill recovers it (``events_backfilled``), and pending gaps whose backfill gave up
are ``gaps_unrecovered`` until a later backfill succeeds (the play-by-play holds the whole game).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from config import spans
from config.clock import utcnow
from models import history_recorder as history

logger = logging.getLogger(__name__)


@dataclass
class GapCounts:
    """What the lifecycle row records about the run's gaps."""

    gaps: int = 0
    gap_seconds: float = 0.0
    events_backfilled: int = 0
    gaps_unrecovered: int = 0
    events_unrecovered: int = 0  # what the comparison at close still found missing

    def as_row(self) -> dict[str, float | int]:
        return {**asdict(self), "gap_seconds": round(self.gap_seconds, 3)}


class GapTracker:
    """Opens, closes and settles the gaps of one run (the stream loop's thread only)."""

    def __init__(self, match_id: str, *, on_gap: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.match_id = match_id
        #: Told of each gap as it closes: its cause, began and ended (UTC ISO), seconds, how it closed (the
        #: run writes it to the event log as a ``gap`` marker: the match card draws it on its timeline).
        self.on_gap = on_gap
        self.counts = GapCounts()
        self.seq = 0  # number of the last gap closed
        self._pending: dict[int, int] = {}  # closed gaps waiting for a backfill: number -> held at begin
        self._open_kind: str | None = None
        self._open_since = 0.0
        self._open_held = 0

    @property
    def open(self) -> bool:
        return self._open_kind is not None

    @property
    def pending(self) -> int:
        """Closed gaps no backfill has recovered yet."""
        return len(self._pending)

    @property
    def held_before(self) -> int | None:
        """Archive size when the oldest pending gap began (None: no gap pending)."""
        return min(self._pending.values()) if self._pending else None

    def begin(self, kind: str, *, since: float, held: int) -> None:
        """The stream went away at monotonic ``since`` holding ``held`` messages (kept if one is open)."""
        if self._open_kind is None:
            self._open_kind, self._open_since, self._open_held = kind, since, held

    def end(self, *, now: float | None = None, how: str) -> float:
        """The stream is back (``how``: "resumed", "reconnected", ...); returns the gap's seconds."""
        if self._open_kind is None:
            return 0.0
        now = time.monotonic() if now is None else now
        seconds = max(now - self._open_since, 0.0)
        kind, self._open_kind = self._open_kind, None
        self.counts.gaps += 1
        self.counts.gap_seconds += seconds
        history.count("gaps", self.match_id)
        history.count("gap_seconds", self.match_id, seconds)
        self.seq += 1
        self._pending[self.seq] = self._open_held
        logger.warning("match %s gap: %s, %.1fs without a stream, %s", self.match_id, kind, seconds, how)
        spans.event("gap", kind=kind, seconds=round(seconds, 3), how=how)
        if self.on_gap is not None:
            ended = utcnow()
            began = ended - timedelta(seconds=seconds)
            self.on_gap(
                {
                    "cause": kind,
                    "began": began.isoformat(),
                    "ended": ended.isoformat(),
                    "seconds": round(seconds, 3),
                    "how": how,
                    "number": self.seq,
                }
            )
        return seconds

    def silence(self, *, since: float, now: float, held: int) -> float:
        """A silence that just ended (it began at ``since``)."""
        self.begin("silence", since=since, held=held)
        return self.end(now=now, how="stream silent, events again")

    def recovered(self, events: int, *, upto: int | None = None) -> None:
        """A backfill asked for after gap ``upto`` (None: every gap so far) brought ``events`` messages:
        it covers that gap and every earlier one (the play-by-play holds the whole game)."""
        upto = self.seq if upto is None else upto
        self.counts.events_backfilled += events
        history.count("events", self.match_id, events)  # play-by-play events the stream missed
        self._pending = {n: held for n, held in self._pending.items() if n > upto}
        self.counts.gaps_unrecovered = min(self.counts.gaps_unrecovered, len(self._pending))

    def resumed(self) -> None:
        """The feed accepted the resume of the gap just closed: its replay recovers it."""
        self._pending.pop(self.seq, None)
        self.counts.gaps_unrecovered = min(self.counts.gaps_unrecovered, len(self._pending))

    def added(self, events: int) -> None:
        """Messages recovered without settling the pending gaps (a resume replay's)."""
        self.counts.events_backfilled += events

    def given_up(self) -> None:
        """Every try of a backfill failed (or the run ends): the pending gaps are unrecovered for now."""
        self.counts.gaps_unrecovered = len(self._pending)
