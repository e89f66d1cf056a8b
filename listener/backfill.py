"""Backfill: fetching a game's play-by-play beside the live stream, and merging it into the archive.

A listener run asks its Backfiller for a fetch after each gap; a background thread fetches the
play-by-play (``listener_backfill_attempts`` tries, capped exponential backoff between them, one
warning per failed try) and leaves the result for the run's stream loop, which alone writes the
archive: ``merge`` records every message the archive lacks, in game order, and hands each new one
to the pipeline. The live stream is never held up by a slow or failing play-by-play.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from config.backoff import backoff_seconds
from config.settings import MatchListenerEnvironment
from listener.archive import EventArchive
from listener.errors import PlayByPlayError
from listener.event_log import EventLog
from listener.play_by_play import PlayByPlay, backfill_messages, fetch_play_by_play, play_by_play_url

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Fetched:
    """The outcome of one backfill request: the play-by-play, or None when every try failed."""

    play_by_play: PlayByPlay | None
    held_before: int  # messages the archive held when the oldest gap it answers began
    upto: int  # the last gap (GapTracker.seq) asked for when the fetch began
    tries: int
    error: str = ""


class Backfiller:
    """Fetches one game's play-by-play in a background thread, one request at a time."""

    def __init__(
        self,
        settings: MatchListenerEnvironment,
        *,
        league: str,
        sr_id: str,
        match_id: str,
        stop: threading.Event,
        fetch: Callable[..., PlayByPlay] = fetch_play_by_play,
    ) -> None:
        self.settings = settings
        self.url = play_by_play_url(settings, league=league, sr_id=sr_id)
        self.match_id = match_id
        self._stop = stop
        self._fetch = fetch
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._again: tuple[int, int] | None = None  # (held_before, upto) asked for while a fetch ran
        self._result: Fetched | None = None
        self._done = threading.Event()
        self._closed = threading.Event()

    def close(self) -> None:
        """The run ends: a fetch still waiting between tries gives up."""
        self._closed.set()

    def request(self, held_before: int, upto: int) -> None:
        """Fetch soon for the gaps up to ``upto`` (a fetch already running is followed by another one, so
        no gap is left out)."""
        with self._lock:
            if self._closed.is_set():
                return
            if (self._thread is not None and self._thread.is_alive()) or self._result is not None:
                held, last = self._again or (held_before, upto)
                self._again = (min(held, held_before), max(last, upto))
                return
            self._start(held_before, upto)

    def _start(self, held_before: int, upto: int) -> None:
        self._done.clear()
        self._thread = threading.Thread(
            target=self._run, args=(held_before, upto), name=f"backfill-{self.match_id[:8]}", daemon=True
        )
        self._thread.start()

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._result is None and self._thread is not None and self._thread.is_alive()

    def take(self) -> Fetched | None:
        """The result of the last finished fetch, once (None while none is waiting); a request made
        meanwhile starts its fetch now."""
        with self._lock:
            result, self._result = self._result, None
            if result is not None and self._again is not None:
                (held, upto), self._again = self._again, None
                if result.play_by_play is None:  # the failed fetch's gaps are still to recover
                    held = min(held, result.held_before)
                if not self._closed.is_set():
                    self._start(held, upto)
            return result

    def wait(self, timeout: float, *, stop: threading.Event | None = None) -> None:
        """Wait up to ``timeout`` for the running fetch (less when ``stop`` is set meanwhile)."""
        thread = self._thread
        deadline = time.monotonic() + timeout
        while thread is not None and thread.is_alive() and time.monotonic() < deadline:
            if stop is not None and stop.is_set():
                return
            thread.join(min(0.1, max(deadline - time.monotonic(), 0.0)))

    def _run(self, held_before: int, upto: int) -> None:
        s = self.settings
        session = requests.Session()
        error = ""
        tries = 0
        try:
            for tries in range(1, s.listener_backfill_attempts + 1):
                if self._closed.is_set():
                    return
                try:
                    pbp = self._fetch(
                        session,
                        self.url,
                        api_key=s.sportradar_api_key.get_secret_value(),
                        timeout=(s.listener_connect_timeout_seconds, s.listener_read_timeout_seconds),
                        match_id=self.match_id,
                    )
                except PlayByPlayError as exc:
                    error = str(exc)
                    delay = backoff_seconds(
                        tries,
                        base=s.listener_backfill_backoff_seconds,
                        cap=s.listener_backfill_backoff_max_seconds,
                    )
                    logger.warning(
                        "match %s backfill try %d/%d failed: %s; next try in %.1fs",
                        self.match_id,
                        tries,
                        s.listener_backfill_attempts,
                        exc,
                        delay,
                    )
                    if tries == s.listener_backfill_attempts or self._waited_out(delay):
                        break
                    continue
                self._finish(Fetched(play_by_play=pbp, held_before=held_before, upto=upto, tries=tries))
                return
            self._finish(
                Fetched(play_by_play=None, held_before=held_before, upto=upto, tries=tries, error=error)
            )
        finally:
            session.close()

    def _waited_out(self, delay: float) -> bool:
        """Wait ``delay`` seconds between tries; True when the run stopped or ended meanwhile."""
        deadline = time.monotonic() + delay
        while not (self._stop.is_set() or self._closed.is_set()):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._closed.wait(min(left, 0.2))
        return True

    def _finish(self, result: Fetched) -> None:
        with self._lock:
            self._result = result
        self._done.set()


def merge(
    pbp: PlayByPlay,
    archive: EventArchive | EventLog,
    *,
    sr_id: str,
    league: str,
    held_before: int,
    handle: Callable[[dict[str, Any]], None] | None = None,
    record_all: Callable[[list[dict[str, Any]]], int] | None = None,
) -> int:
    """Record every message ``pbp`` holds that ``archive`` lacks, in game order; returns how many.

    The event log records them in one batch (multi-row statements through the process's writer).
    ``handle`` is called with each new message after it is recorded (the run's pipeline);
    ``record_all``, when given, records and hands them on instead (a listener run's ingest, which
    processes them after their batch committed, in order with the live stream's).
    """
    messages = backfill_messages(pbp, archive.index, sr_id=sr_id, league=league, held_before=held_before)
    if record_all is not None:
        recorded = record_all(messages) if messages else 0
    elif isinstance(archive, EventLog):
        new = archive.record_all(messages)
        for message in new:
            if handle is not None:
                handle(message)
        recorded = len(new)
    else:
        recorded = 0
        for message in messages:
            if archive.record(message):
                recorded += 1
                if handle is not None:
                    handle(message)
    archive.flush()
    return recorded
