"""A listener run's side of its match's processed watermark (models.processed): how far it may move.

The run tells ``ProcessedMark`` each run of messages it processed (``processed``: the last one's log
key, and whether the pipeline's own transaction moved the watermark there). Messages whose
processing wrote nothing leave the watermark behind them, harmlessly (a successor's replay of them
writes nothing either); after ``every`` of them, at the run's end and at a hand-over (``mark_now``)
it is moved over them in a fenced transaction of its own, and a status write moves it in its
transaction (``mark_within``). ``lock`` is held around processing and marking: the processing
thread, the run's end and a hand-over's drain share this state.
"""

from __future__ import annotations

import logging
import threading

from config.errors import DatabaseUnavailable
from models import fence
from models.boundary import connection
from models.errors import FencedWrite
from models.processed import mark_processed

logger = logging.getLogger(__name__)

#: Messages processed without a write after which the watermark is moved anyway (a transaction of its
#: own), so what a successor replays at its start stays short.
UNMARKED_LIMIT = 500


class ProcessedMark:
    """What one run processed past its match's watermark, and moving the watermark over it."""

    def __init__(
        self,
        *,
        match_id: str,
        fence_token: int | None,
        gate: threading.Semaphore,
        every: int = UNMARKED_LIMIT,
    ) -> None:
        self.match_id = match_id
        self.fence_token = fence_token
        self.gate = gate
        self.every = every
        self.lock = threading.Lock()
        self.last_key: str | None = None  # the log key of the last message processed
        self.unmarked = 0  # messages processed past the watermark

    def processed(self, through: str, count: int, *, marked: bool) -> None:
        """``count`` messages up to log key ``through`` are processed; ``marked``: the watermark moved to
        ``through`` with their writes. Moves it now when ``every`` messages wait (``lock`` held)."""
        self.last_key = through
        self.unmarked = 0 if marked else self.unmarked + count
        if self.unmarked >= self.every:
            self.mark_now()

    def mark_within(self) -> None:
        """Move the watermark over what waits, in the caller's fenced transaction (``lock`` held)."""
        if self.unmarked and self.last_key is not None:
            mark_processed(self.match_id, key=self.last_key, fence_token=self.fence_token)
            self.unmarked = 0

    def mark_now(self) -> None:
        """Move the watermark over what waits, in a fenced transaction of its own (``lock`` held)."""
        if not self.unmarked or self.last_key is None:
            return
        fenced = fence.fenced(self.match_id, self.fence_token, what="processed watermark")
        with self.gate, connection(), fenced:
            self.mark_within()

    def mark_quietly(self) -> None:
        """``mark_now`` once every message taken is processed (the run's end, a hand-over); a refusal or
        an outage leaves those messages to the next run, whose replay of them writes nothing."""
        with self.lock:
            try:
                self.mark_now()
            except (FencedWrite, DatabaseUnavailable) as exc:
                logger.info("match %s: processed watermark not moved: %s", self.match_id, exc)
