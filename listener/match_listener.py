"""MatchListener: the listener body that follows one match's push stream until the game is over.

Per event: append it to the archive, apply its status (``stream_status_of``) through
``Match.apply_stream`` for live matches (is_test statuses belong to srsim; PostgreSQL is touched
only when the status changes), and pass it to the processing pipeline. Per stream heartbeat: count
consecutive ones (exit 10 at ``listener_max_consecutive_heartbeats``) and reload Match.status every
``listener_status_reload_heartbeats`` of them: a terminal status (ended, postponed, cancelled) exits
13; a delayed one keeps the listener up, writes a synthetic delay marker and resets the counter.
Errors map to exit codes: 11 data/HTTP/JSON, 12 connection/timeout after reconnects, 16 an
unexpected cancel, 9 anything else; an operator stop (``request_stop``) returns 15 within a second.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from config import spans
from config.backoff import backoff_seconds
from config.clock import utcnow
from config.errors import (
    ArchivePathError,
    ConfigurationError,
    DatabaseUnavailable,
    FencedWrite,
    StreamConnectionError,
    StreamDataError,
    StreamResumeRefused,
)
from config.set_aside import set_aside
from listener import log_writer
from listener.archive import EventArchive, TextLog, archive_path, shortcode_for
from listener.body import ListenerContext
from listener.db_gate import db_gate
from listener.event_log import EventLog
from listener.events import FROM_RESUME
from listener.exit_codes import ExitCode, exit_code_of, system_exit_reason
from listener.match_info import MatchInfo, load_match, stream_status_of
from listener.pipeline import Pipeline, RecordOnlyPipeline, load_pipeline, pipeline_for
from listener.recovery import Recovery
from listener.stream import OVERSIZE, FeedConnection, StreamConfig, subscribe_url
from listener.verify import Verification
from models import history_recorder as history
from models.leagues import push_path
from models.status import DELAYED, TERMINAL, Phase, apply_stream_status, normalise, phase_of

logger = logging.getLogger(__name__)


class _Exit(Exception):
    """Ends the run with an exit code."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass
class ListenerStats:
    """Counters of one run (also read by benchmarks and ``kickoff listen``)."""

    events: int = 0  # events recorded (each distinct message once)
    duplicates: int = 0  # events the archive already held (a resume replay, a successor's overlap)
    heartbeats: int = 0
    skipped: int = 0
    reconnects: int = 0
    status_reloads: int = 0
    delay_markers: int = 0


class MatchListener:
    """Follows one match's push stream; ``run`` returns an ExitCode value."""

    def __init__(self, *, session: requests.Session | None = None) -> None:
        self._session = session
        self._conn: FeedConnection | None = None
        self._stop = threading.Event()
        self._conn_lock = threading.Lock()
        self.stats = ListenerStats()
        self.archive: EventArchive | EventLog | None = None
        self.exit_reason = ""
        self._log = TextLog(None)

    # -- lifecycle interface -----------------------------------------------------------

    def request_stop(self) -> None:
        """Make ``run`` return promptly (closes the stream socket from this thread)."""
        self._stop.set()
        with self._conn_lock:
            conn = self._conn
        if conn is not None:
            conn.close()

    def run(self, ctx: ListenerContext) -> int:
        """Follow the match until it ends, a stop is requested or an error ends the run."""
        s = ctx.settings
        if s.listener_force_exit_code is not None:
            self.exit_reason = "listener_force_exit_code"
            logger.info(
                "match %s forced exit %s before any stream work", ctx.match_id, s.listener_force_exit_code
            )
            return int(s.listener_force_exit_code)
        self._ctx = ctx
        log = TextLog(None)
        pipeline: Pipeline = RecordOnlyPipeline()
        try:
            with self._gate():
                info = load_match(ctx)
            path = archive_path(s.data_dir, info.league, shortcode_for(info.sr_id))
            self.archive = self._open_record(ctx, info, path)
            log = TextLog.for_run(path, ctx.record_id)
            self._log = log
            log.write(
                "start match=%s sr_id=%s league=%s archive_events=%d",
                ctx.match_id,
                info.sr_id,
                info.league,
                self.archive.count,
            )
            if not s.listener_skip_processing and info.has_row:
                pipeline = load_pipeline(
                    pipeline_for(s.listener_pipeline, info.league, match_id=ctx.match_id),
                    match_id=ctx.match_id,
                    settings=s,
                    db_gate=self._gate(),
                    fence_token=ctx.fence_token,
                )
            self._status = info.status
            self._info = info
            self._match_urn = f"sd:match:{info.sr_id}"
            code = self._follow(ctx, info, pipeline)
            self.exit_reason = self.exit_reason or "stream ended"
        except _Exit as exc:
            code, self.exit_reason = exc.code, exc.reason
        except FencedWrite as exc:  # a successor run took over: this one wrote nothing more
            code, self.exit_reason = ExitCode.CANCELLED, f"fenced: {exc}"
        except (StreamDataError, ArchivePathError) as exc:
            code, self.exit_reason = ExitCode.DATA_ERROR, str(exc)
        except StreamConnectionError as exc:
            code, self.exit_reason = ExitCode.CONNECTION_ERROR, str(exc)
        except ConfigurationError as exc:
            code, self.exit_reason = ExitCode.UNEXPECTED_ERROR, str(exc)
        except Exception as exc:
            logger.exception("match %s listener failed unexpectedly", ctx.match_id)
            code, self.exit_reason = ExitCode.UNEXPECTED_ERROR, f"{type(exc).__name__}: {exc}"
        except SystemExit as exc:  # sys.exit() / sys.exit(None) is a clean return, as in a process
            code, self.exit_reason = exit_code_of(exc.code), system_exit_reason(exc)
        except BaseException as exc:
            code, self.exit_reason = ExitCode.CANCELLED, f"cancelled: {type(exc).__name__}"
        finally:
            self._close_quietly(pipeline)
        if self._stop.is_set() or ctx.stop_requested.is_set():
            code, self.exit_reason = ExitCode.STOPPED, "stop requested"
        counts = (self.stats.events, self.stats.heartbeats, self.stats.skipped, self.stats.reconnects)
        logger.info(
            "match %s listener exit %d (%s): %d events, %d heartbeats, %d skipped, %d reconnects",
            ctx.match_id,
            code,
            self.exit_reason,
            *counts,
        )
        log.write(
            "exit %d (%s) events=%d heartbeats=%d skipped=%d reconnects=%d", code, self.exit_reason, *counts
        )
        return int(code)

    # -- set-up --------------------------------------------------------------------------

    def _open_record(self, ctx: ListenerContext, info: MatchInfo, path: Path) -> EventArchive | EventLog:
        """A run with a lifecycle row records into the event log (PostgreSQL), fenced by its token; a
        local record run without one (``kickoff listen``) into the spec's ``{shortcode}.json`` file."""
        s = ctx.settings
        if not (info.has_row and ctx.record_id):
            return EventArchive(
                path,
                flush_events=s.listener_archive_flush_events,
                flush_seconds=s.listener_archive_flush_seconds,
                match_id=ctx.match_id,
                fence_token=ctx.fence_token,
            ).open()
        log = EventLog(
            match_id=ctx.match_id,
            writer=log_writer.writer(
                buffer_limit=s.listener_event_buffer_messages,
                retry_seconds=s.listener_event_log_retry_seconds,
            ),
            record_id=ctx.record_id,
            fence_token=ctx.fence_token,
            wait_seconds=s.listener_event_log_wait_seconds,
            on_dropped=self._dropped,
        )
        with self._gate():
            return log.open()

    def _dropped(self, messages: int) -> None:
        recovery = getattr(self, "_recovery", None)
        if recovery is not None:
            recovery.overflowed(messages)

    def _gate(self) -> threading.BoundedSemaphore:
        return db_gate(self._ctx.settings.listener_db_concurrency)

    def _close_quietly(self, pipeline: Pipeline) -> None:
        try:
            pipeline.close()
        except Exception:
            logger.exception(
                "match %s pipeline close failed", getattr(self, "_ctx", None) and self._ctx.match_id
            )
        if self.archive is not None:
            try:
                self.archive.close()
            except FencedWrite as exc:
                logger.warning("match %s: %s", self._ctx.match_id, exc)
            except OSError:
                logger.exception("match %s archive close failed", self._ctx.match_id)

    # -- the stream loop ----------------------------------------------------------------

    def _follow(self, ctx: ListenerContext, info: MatchInfo, pipeline: Pipeline) -> int:
        s = ctx.settings
        assert self.archive is not None
        url = subscribe_url(
            base_url=s.sportradar_base_url,
            path=push_path(s.listener_stream_path, info.league),
            league=info.league,
            access=s.listener_sr_env,
            sr_id=info.sr_id,
            fmt=s.listener_stream_format,
        )
        recovery = self._recovery = Recovery(
            s,
            archive=self.archive,
            league=info.league,
            sr_id=info.sr_id,
            match_id=ctx.match_id,
            stop=self._stop,
            live_at_start=phase_of(info.status) in (Phase.LIVE, Phase.DELAYED),
            may_write=ctx.may_write,
        )
        self._pipeline = pipeline
        session = self._session or requests.Session()
        failures = 0
        self._idle = 0
        self._bad = 0
        code: int = ExitCode.STOPPED
        try:
            code = self._stream_loop(ctx, url, session, recovery, failures)
            return code
        except _Exit as exc:
            code = exc.code
            raise
        finally:
            if self._session is None:
                session.close()
            self._finish_recovery(game_over=code == ExitCode.NOT_IN_PROGRESS)

    def _stream_loop(
        self, ctx: ListenerContext, url: str, session: requests.Session, recovery: Recovery, failures: int
    ) -> int:
        s = ctx.settings
        while not self._stopped():
            config = StreamConfig(
                url=recovery.subscribe_url(url),
                api_key=s.sportradar_api_key.get_secret_value(),
                connect_timeout=s.listener_connect_timeout_seconds,
                read_timeout=s.listener_read_timeout_seconds,
                max_line_bytes=s.listener_max_line_bytes,
                match_id=ctx.match_id,
            )
            resuming = config.url != url
            conn = FeedConnection(config, session=session)
            with self._conn_lock:
                self._conn = conn
            connected_at = time.monotonic()
            try:
                conn.open()
                logger.info(
                    "match %s stream connected %s (%s)", ctx.match_id, conn.final_url, conn.content_type
                )
                self._log.write("connected %s content_type=%s", conn.final_url, conn.content_type)
                spans.event("connect", resumed=resuming, content_type=conn.content_type)
                recovery.connected(resumed=resuming)
                self._write_gaps()
                for raw in conn.messages():
                    self._handle(raw)
                    if self._stopped():
                        return ExitCode.STOPPED
            except StreamResumeRefused as exc:
                if not resuming:  # a 410 to a plain subscribe is no refused resume
                    raise StreamDataError(str(exc)) from exc
                recovery.resume_refused(str(exc))
                continue  # at once, without the resume id; not a failed connection
            except StreamConnectionError as exc:
                if self._stopped():
                    return ExitCode.STOPPED
                recovery.dropped()
                # A connection that stayed up long enough was a working one: start counting afresh.
                lasted = time.monotonic() - connected_at
                failures = 1 if lasted >= s.listener_reconnect_reset_seconds else failures + 1
                if failures > s.listener_reconnect_attempts:
                    raise StreamConnectionError(f"{exc} (gave up after {failures - 1} reconnects)") from exc
                delay = backoff_seconds(
                    failures,
                    base=s.listener_reconnect_backoff_seconds,
                    cap=s.listener_reconnect_backoff_max_seconds,
                )
                self.stats.reconnects += 1
                logger.warning("match %s %s; reconnecting in %.1fs", ctx.match_id, exc, delay)
                self._log.write("disconnected (%s); reconnect in %.1fs", exc, delay)
                spans.event("disconnect", reason=str(exc), reconnect_in_seconds=delay)
                self._merge_backfill()
                if self.archive is not None:
                    self.archive.flush()
                if self._stop.wait(delay) or ctx.stop_requested.is_set():
                    return ExitCode.STOPPED
            finally:
                conn.close()
                with self._conn_lock:
                    self._conn = None
        return ExitCode.STOPPED

    # -- gaps and backfills ------------------------------------------------------------

    def _process(self, message: dict) -> None:
        """Hand one newly recorded message to the pipeline (PostgreSQL away: archived, not processed)."""
        try:
            self._pipeline.process(message)
        except DatabaseUnavailable as exc:  # archived already; the stream goes on
            logger.warning(
                "match %s: event not processed (PostgreSQL unavailable): %s", self._ctx.match_id, exc
            )

    def _merge_backfill(self) -> None:
        if not self._ctx.may_write():
            return
        if self._recovery.merge(self._process) is not None:
            self._write_gaps()

    def _finish_recovery(self, *, game_over: bool) -> None:
        recovery = getattr(self, "_recovery", None)
        if recovery is None:
            return
        try:
            if self._ctx.may_write():
                verification = recovery.finish(
                    game_over=game_over and not self._stop.is_set(), handle=self._process
                )
                self._write_gaps()
                if verification is not None and self._ctx.may_write():
                    self._record_verification(verification)
        except OSError:
            logger.exception("match %s: the last backfill could not be written", self._ctx.match_id)
        finally:
            recovery.close()

    def _record_verification(self, verification: Verification) -> None:
        """The game is over: its archive compared with the play-by-play, stored on the match."""
        self._log.write(
            "archive verification: %s (%d missing, %d extra, %d differing of %d events)",
            "ok" if verification.ok else "not ok",
            len(verification.missing),
            len(verification.extra),
            len(verification.differing),
            verification.events,
        )
        if not self._info.has_row:
            return
        from listener.verify_store import record_verification

        try:
            with self._gate():
                record_verification(self._ctx.match_id, verification, fence_token=self._ctx.fence_token)
        except DatabaseUnavailable as exc:
            logger.warning("match %s: archive verification not stored: %s", self._ctx.match_id, exc)

    def _write_gaps(self) -> None:
        """Write the run's gap counts on its lifecycle row (not in a dry run, never once fenced)."""
        ctx = self._ctx
        if not ctx.record_id or not self._info.has_row or not ctx.may_write():
            return
        from models import fence
        from models.boundary import connection
        from models.listener_record import write_gap_counts

        counts = self._recovery.counts.as_row()
        try:
            with self._gate(), connection():
                written = write_gap_counts(ctx.record_id, counts)
        except DatabaseUnavailable as exc:
            logger.warning("match %s: gap counts not written yet: %s", ctx.match_id, exc)
            return
        if not written and ctx.fence_token is not None:
            raise fence.refused(ctx.match_id, ctx.fence_token, "gap counts")

    def _stopped(self) -> bool:
        return self._stop.is_set() or self._ctx.stop_requested.is_set()

    def _handle(self, raw: bytes | object) -> None:
        archive = self.archive
        assert archive is not None
        if not self._ctx.may_write():  # paused past the worker lease: a successor may be writing
            raise _Exit(ExitCode.CANCELLED, "worker lease expired")
        if raw is OVERSIZE:
            self._skip("line longer than listener_max_line_bytes")
            return
        assert isinstance(raw, bytes)
        try:
            message = json.loads(raw)
        except ValueError as exc:
            why = "invalid UTF-8" if isinstance(exc, UnicodeDecodeError) else "invalid JSON"
            archive.record_unreadable(raw, why)  # kept byte for byte in the event log
            self._skip(why)
            return
        if not isinstance(message, dict):
            self._skip("not a JSON object")
            return
        self._recovery.seen(message)
        if "heartbeat" in message:
            self._bad = 0
            self._on_heartbeat()
            self._merge_backfill()
            return
        payload = message.get("payload")
        if not isinstance(payload, dict):
            self._skip(f"unknown message type (keys {sorted(message)[:5]})", bad=False)
            return
        self._bad = 0
        meta = message.get("metadata")
        if isinstance(meta, dict) and meta.get("match") not in (None, self._match_urn):
            self._skip(f"event of another match ({meta.get('match')})", bad=False)
            return
        self._idle = 0
        replayed = message.get("replay") is True
        if replayed or b"\n" in raw:
            if replayed:
                message["kickoff"] = {"backfilled": FROM_RESUME, "at": utcnow().isoformat()}
            raw = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
        if not archive.record(message, raw):
            self.stats.duplicates += 1
            self._merge_backfill()
            return
        self.stats.events += 1
        history.count("events", self._ctx.match_id)
        if replayed:
            self._recovery.replayed()
        incoming = stream_status_of(message)
        if incoming is not None and incoming != self._status:
            self._apply_stream_status(incoming)
        self._process(message)
        self._merge_backfill()
        archive.maybe_flush()

    def _skip(self, why: str, *, bad: bool = True) -> None:
        self.stats.skipped += 1
        if not bad:
            logger.info("match %s skipped a stream message: %s", self._ctx.match_id, why)
            return
        set_aside(
            "listener stream",
            f"a line of match {self._ctx.match_id}",
            why,
            kind=why,
            match_id=self._ctx.match_id,
        )
        self._bad += 1
        if self._bad >= self._ctx.settings.listener_max_bad_lines:
            raise _Exit(ExitCode.DATA_ERROR, f"{self._bad} consecutive unreadable stream lines (last: {why})")

    def _apply_stream_status(self, incoming: str) -> None:
        """Live matches: persist through Match.apply_stream (only when the status differs)."""
        if not self._info.has_row:  # no Match row: follow the stream's status in memory only
            self._status = apply_stream_status(self._status or "scheduled", incoming)
            return
        if self._ctx.is_test:  # srsim owns an is_test match's status
            return
        if normalise(incoming) is None:
            logger.warning("match %s stream status %r unknown; ignored", self._ctx.match_id, incoming)
            self._status = incoming  # remembered so the warning is not repeated for every event
            return
        from models.boundary import connection
        from models.match import match_by_id

        try:
            with self._gate(), connection():
                match = match_by_id(self._ctx.match_id)
                before = match.status
                self._status = match.apply_stream(incoming, fence_token=self._ctx.fence_token)
        except DatabaseUnavailable as exc:
            # PostgreSQL restarting: keep streaming; the next event with a status tries again.
            logger.warning("match %s: status %r not written yet: %s", self._ctx.match_id, incoming, exc)
            return
        if before != self._status:
            self._log.write("status %s -> %s (stream)", before, self._status)
            spans.event("status", before=before, after=self._status)

    def _on_heartbeat(self) -> None:
        s = self._ctx.settings
        self.stats.heartbeats += 1
        self._idle += 1
        if self.archive is not None:
            self.archive.flush()
        if self._idle % s.listener_status_reload_heartbeats == 0:
            self._reload_status()
        if self._idle >= s.listener_max_consecutive_heartbeats:
            raise _Exit(ExitCode.MAX_HEARTBEATS, f"{self._idle} consecutive heartbeats without an event")

    def _reload_status(self) -> None:
        self.stats.status_reloads += 1
        status = self._status
        if self._info.has_row:
            from models.boundary import connection
            from models.match import status_of_match

            stored = None
            try:
                with self._gate(), connection():
                    stored = status_of_match(self._ctx.match_id)
            except DatabaseUnavailable as exc:
                logger.warning("match %s: status reload skipped: %s", self._ctx.match_id, exc)
            status = stored if stored is not None else status
            self._status = status
        self._log.write("status check: %s after %d idle heartbeats", status, self._idle)
        phase = phase_of(status)
        if phase is Phase.TERMINAL or (status in TERMINAL):
            raise _Exit(ExitCode.NOT_IN_PROGRESS, f"match no longer in progress ({status})")
        if phase is Phase.DELAYED or status in DELAYED:
            assert self.archive is not None
            self.archive.append_marker("delay", status=status, idle_heartbeats=self._idle)
            self.stats.delay_markers += 1
            logger.info(
                "match %s is %s: listener stays up, heartbeat counter reset", self._ctx.match_id, status
            )
            self._idle = 0
