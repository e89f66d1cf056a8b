"""How one listener run recovers what its gaps missed: resume ids, silences and play-by-play backfills.

The stream loop tells its Recovery what happens (connected, dropped, a message, a heartbeat) and
calls ``merge`` between messages; Recovery decides: reconnect with the last resume id when the
feed sends them and ``listener_resume`` is on (the feed replays what was missed), else, and when
the feed refuses the resume, ask the Backfiller for the play-by-play. A run that starts where an
earlier run's archive ends (a takeover) connects with that archive's last resume id
(``last_resume_id``), and backfills only when the feed refuses it; one that starts late into a live
game with nothing recorded backfills once it is connected. A run that
ends because the game is over fetches the play-by-play once more, so a gap whose backfill had
failed is recovered before the archive is closed, and compares the archive with it (stored on the
match: its archive verification; backfill off, the comparison alone).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import requests

from config import spans
from config.settings import MatchListenerEnvironment
from listener.archive import EventArchive
from listener.backfill import Backfiller, merge
from listener.errors import PlayByPlayError
from listener.event_log import EventLog
from listener.gaps import GapCounts, GapTracker
from listener.play_by_play import PlayByPlay, fetch_play_by_play, play_by_play_url
from listener.verify import Verification, compare
from models.errors import FencedWrite

logger = logging.getLogger(__name__)

#: The shortest wait a reconnect's connect is given (a feed that answers at all answers within it).
MIN_CONNECT_SECONDS = 1.0

#: Records a backfill's messages and hands each new one on; returns how many were new.
RecordAll = Callable[[list[dict[str, Any]]], int]


def last_resume_id(archive: EventArchive | EventLog) -> str | None:
    """The resume id of the newest recorded message that carries one (None: none does).

    The one place a run reads its predecessor's last resume id: the event log noted it while it
    read the match's rows at open (every run's, every host's); a local record run reads its file.
    """
    if isinstance(archive, EventLog):
        return archive.last_resume_id
    for message in reversed(archive.messages()):
        resume_id = message.get("resume_id") if isinstance(message, dict) else None
        if isinstance(resume_id, str) and resume_id:
            return resume_id
    return None


class Recovery:
    """Gap bookkeeping and recovery of one run (called from the stream loop's thread only)."""

    def __init__(
        self,
        settings: MatchListenerEnvironment,
        *,
        archive: EventArchive | EventLog,
        league: str,
        sr_id: str,
        match_id: str,
        stop: threading.Event,
        live_at_start: bool,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        self.settings = settings
        self.archive = archive
        self.league = league
        self.sr_id = sr_id
        self.match_id = match_id
        self._stop = stop
        self._may_write = may_write
        self.gaps = GapTracker(match_id, on_gap=self._log_gap)
        self._logging_gap = False
        self.backfiller = (
            Backfiller(settings, league=league, sr_id=sr_id, match_id=match_id, stop=stop)
            if settings.listener_backfill
            else None
        )
        self.resume_id: str | None = None
        self.heartbeat_interval: float | None = None  # seconds, from the feed's heartbeat messages
        self.last_seen: float | None = None
        self._first = True
        self._start_backfill = settings.listener_backfill and (archive.count > 0 or live_at_start)
        if archive.count > 0 and archive.last_written_at is not None:
            # An earlier run recorded this archive: the takeover's gap began with its last write.
            since = time.monotonic() - max(time.time() - archive.last_written_at, 0.0)
            self.gaps.begin("takeover", since=since, held=archive.count)
            # Reconnect where it stopped: the feed replays what it missed (no play-by-play round trip
            # before the first live byte); a refused resume falls back to the play-by-play.
            self.resume_id = last_resume_id(archive)

    @property
    def counts(self) -> GapCounts:
        return self.gaps.counts

    def _log_gap(self, gap: dict[str, Any]) -> None:
        """Keep a closed gap in the record as a ``gap`` marker (the match card's timeline draws it).

        A marker the full buffer drops closes a gap of its own: that one is not written (no loop). A
        refused write is the next message's to raise (the log stays fenced)."""
        if self._logging_gap:
            return
        self._logging_gap = True
        try:
            self.archive.append_marker("gap", **gap)
        except FencedWrite:
            logger.info("match %s: gap marker refused (a newer run holds the match)", self.match_id)
        finally:
            self._logging_gap = False

    # -- the connection ------------------------------------------------------------------

    def subscribe_url(self, url: str) -> str:
        """The URL to (re)connect to: with the last resume id when the run may resume."""
        if self.resume_id and self.settings.listener_resume and self.settings.listener_backfill:
            return f"{url}&resume_id={quote(self.resume_id, safe='')}"
        return url

    def resume_refused(self, why: str) -> None:
        """The feed refused the resume id: reconnect plainly (the play-by-play recovers the gap)."""
        logger.warning("match %s resume refused (%s); reconnecting without it", self.match_id, why)
        spans.event("resume refused", reason=why)
        self.resume_id = None

    def connected(self, *, resumed: bool) -> None:
        """A connection is open (``resumed``: with a resume id the feed accepted)."""
        now = time.monotonic()
        self.last_seen = now
        if self.gaps.open:
            self.gaps.end(now=now, how="resumed: the feed replays it" if resumed else "reconnected")
            if resumed and not self.gaps.counts.gaps_unrecovered:
                self.gaps.resumed()  # the replay's messages are counted as they arrive
                spans.event("resume")
            else:
                # No resume, or an earlier gap the replay does not reach: the play-by-play.
                self._backfill()
        elif self._first and self._start_backfill:
            self._request(self.archive.count)
        self._first = False

    def dropped(self) -> None:
        """The connection dropped: a gap begins at the last message or heartbeat seen."""
        self.gaps.begin("reconnect", since=self.last_seen or time.monotonic(), held=self.archive.count)

    def seen(self, message: dict[str, Any] | None = None, *, resume: bool = True) -> None:
        """A message or heartbeat arrived: close a silence, remember the heartbeat interval and (``resume``)
        its resume id; a message to record passes ``resume=False``: its id counts once the log holds it
        (``resume_at``)."""
        now = time.monotonic()
        limit = (self.heartbeat_interval or 0.0) * self.settings.listener_gap_heartbeats
        if self.last_seen is not None and limit > 0 and now - self.last_seen > limit:
            self.gaps.silence(since=self.last_seen, now=now, held=self.archive.count)
            self._backfill()
        self.last_seen = now
        if message is None:
            return
        beat = message.get("heartbeat")
        if isinstance(beat, dict) and isinstance(beat.get("interval"), int | float) and beat["interval"] > 0:
            self.heartbeat_interval = float(beat["interval"]) / 1000.0
        resume_id = message.get("resume_id")
        if resume and isinstance(resume_id, str) and resume_id:
            self.resume_id = resume_id

    def silence_limit(self) -> float | None:
        """How long the open stream may stay silent before it is given up as dead and reconnected: the
        silence that makes a gap (``listener_gap_heartbeats`` of the feed's heartbeat intervals; None
        until a heartbeat said the interval). A feed black-holed mid-stream shows only as this silence."""
        if self.heartbeat_interval is None:
            return None
        return self.heartbeat_interval * self.settings.listener_gap_heartbeats

    def lost_for(self, *, since_start: float) -> float:
        """Seconds since the feed was last heard (a message, a heartbeat or a connection; ``since_start``,
        the run's first connect, when it never was)."""
        return time.monotonic() - (self.last_seen if self.last_seen is not None else since_start)

    def connect_timeout(self, *, since_start: float, reconnecting: bool) -> float:
        """How long a connect may wait: a reconnect at most what is left of ``listener_feed_lost_seconds``
        since the feed was last heard (at least a second), so a black-holed feed is given up by that bound."""
        timeout = self.settings.listener_connect_timeout_seconds
        if not reconnecting:
            return timeout
        left = self.settings.listener_feed_lost_seconds - self.lost_for(since_start=since_start)
        return min(timeout, max(left, MIN_CONNECT_SECONDS))

    def held_up(self) -> None:
        """The run held its stream up (waiting for its own writes): no silence of the feed until now."""
        self.last_seen = time.monotonic()

    def resume_at(self, resume_id: str) -> None:
        """The log holds the message with ``resume_id`` and everything read before it: a reconnect resumes
        there (called in read order, from the run's processing thread too: one assignment)."""
        self.resume_id = resume_id

    def overflowed(self, messages: int) -> None:
        """The event log's buffer was full (PostgreSQL away too long): ``messages`` were not kept, a gap
        the play-by-play recovers."""
        now = time.monotonic()
        self.gaps.begin("event log buffer full", since=now, held=self.archive.count)
        self.gaps.end(now=now, how=f"{messages} messages not kept while PostgreSQL was away")
        self._backfill()

    def replayed(self, messages: int = 1) -> None:
        """A resume replay brought ``messages`` the archive lacked."""
        self.gaps.added(messages)

    # -- backfills -----------------------------------------------------------------------

    def _backfill(self) -> None:
        held = self.gaps.held_before
        self._request(self.archive.count if held is None else held)

    def _request(self, held_before: int) -> None:
        if self.backfiller is not None:
            self.backfiller.request(held_before, self.gaps.seq)

    def merge(self, record_all: RecordAll) -> int | None:
        """Record a finished backfill's messages (``record_all``: the run's ingest, which records them in
        one batch and processes them once committed); returns how many (None when no backfill had
        finished: the gap counts did not change)."""
        if self.backfiller is None or not self._may_write():
            return None
        fetched = self.backfiller.take()
        if fetched is None:
            return None
        if fetched.play_by_play is None:
            self.gaps.given_up()
            logger.error(
                "match %s backfill gave up after %d tries (%s): %d gaps unrecovered for now",
                self.match_id,
                fetched.tries,
                fetched.error,
                self.gaps.counts.gaps_unrecovered,
            )
            spans.event("backfill gave up", tries=fetched.tries, error=str(fetched.error))
            return 0
        recorded = merge(
            fetched.play_by_play,
            self.archive,
            sr_id=self.sr_id,
            league=self.league,
            held_before=fetched.held_before,
            record_all=record_all,
        )
        self.gaps.recovered(recorded, upto=fetched.upto)
        if recorded:
            logger.info("match %s backfilled %d events from the play-by-play", self.match_id, recorded)
        spans.event("backfill", events=recorded)
        return recorded

    def close(self) -> None:
        """The run is over: no fetch goes on behind it."""
        if self.backfiller is not None:
            self.backfiller.close()

    def finish(self, *, game_over: bool, record_all: RecordAll) -> Verification | None:
        """The run ends: merge what was fetched; once the game is over, fetch the play-by-play once more,
        merge it and compare the archive with it (returned; None when it could not be fetched)."""
        if self.backfiller is None:  # backfill off: the gaps stay as they are, the comparison is made
            self.gaps.given_up()
            return self._final_fetch(record_all, merging=False) if game_over else None
        if not self._stop.is_set():  # a stop returns at once: what is ready is merged, no more
            self.backfiller.wait(self.settings.listener_connect_timeout_seconds, stop=self._stop)
        self.merge(record_all)
        self.backfiller.close()
        verification = self._final_fetch(record_all) if game_over else None
        self.gaps.given_up()  # whatever is still pending was not recovered by this run
        return verification

    def _final_fetch(self, record_all: RecordAll, *, merging: bool = True) -> Verification | None:
        pbp = self._fetch_unless_stopped()
        if pbp is None or not self._may_write():
            return None
        if not merging:
            self.archive.flush()
            return self._compared(pbp)
        held = self.gaps.held_before
        recorded = merge(
            pbp,
            self.archive,
            sr_id=self.sr_id,
            league=self.league,
            held_before=self.archive.count if held is None else held,
            record_all=record_all,
        )
        self.gaps.recovered(recorded)
        if recorded:
            logger.info("match %s final backfill recorded %d events", self.match_id, recorded)
        spans.event("final backfill", events=recorded)
        return self._compared(pbp)

    def _fetch_unless_stopped(self) -> PlayByPlay | None:
        """One play-by-play fetch in a thread of its own, given up as soon as the run is asked to stop."""
        s = self.settings
        outcome: list[PlayByPlay | None] = []

        def fetch() -> None:
            with requests.Session() as session:
                try:
                    outcome.append(
                        fetch_play_by_play(
                            session,
                            play_by_play_url(s, league=self.league, sr_id=self.sr_id),
                            api_key=s.sportradar_api_key.get_secret_value(),
                            timeout=(s.listener_connect_timeout_seconds, s.listener_read_timeout_seconds),
                            match_id=self.match_id,
                        )
                    )
                except PlayByPlayError as exc:
                    logger.warning("match %s final backfill failed: %s", self.match_id, exc)
                    outcome.append(None)

        thread = threading.Thread(target=fetch, name=f"final-pbp-{self.match_id[:8]}", daemon=True)
        thread.start()
        while thread.is_alive() and not self._stop.is_set():
            thread.join(0.1)
        return outcome[0] if outcome and not self._stop.is_set() else None

    def _compared(self, pbp: PlayByPlay) -> Verification:
        verification = compare(self.archive.messages(), pbp)
        self.gaps.counts.events_unrecovered = len(verification.missing)
        return verification
