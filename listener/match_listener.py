"""MatchListener: the listener body that follows one match's push stream until the game is over.

Per event: hand it to the run's ingest (listener.ingest), which records it (the event log: in
batches through the process's writer, the stream read on meanwhile) and, once it is recorded and in
the order read, processes it: apply its status (``stream_status_of``) through ``Match.apply_stream``
for live matches (is_test statuses belong to srsim; PostgreSQL is touched only when the status
changes), and pass it to the processing pipeline, moving the match's processed watermark with those
writes (models.processed). Before it reads the stream, a run processes what the log holds past the
watermark (a run before it logged and never processed it: a kill between the two). Per stream
heartbeat: count
consecutive ones (exit 10 at ``listener_max_consecutive_heartbeats``) and reload Match.status every
``listener_status_reload_heartbeats`` of them: a terminal status (ended, postponed, cancelled) exits
13; a delayed one keeps the listener up, writes a synthetic delay marker and resets the counter.
Errors map to exit codes: 11 data/HTTP/JSON, 12 connection/timeout after reconnects, 16 an
unexpected cancel, 9 anything else; an operator stop (``request_stop``) returns 15 within a second.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from config import feed_json, spans
from config.backoff import backoff_seconds
from config.clock import utcnow
from config.errors import ConfigurationError, DatabaseUnavailable
from config.set_aside import set_aside
from listener import log_writer
from listener.archive import EventArchive, TextLog, archive_path, shortcode_for
from listener.body import ListenerContext
from listener.db_gate import db_gate
from listener.errors import ArchivePathError, StreamConnectionError, StreamDataError, StreamResumeRefused
from listener.event_log import EventLog
from listener.events import FROM_PLAY_BY_PLAY, FROM_RESUME, backfilled_from
from listener.exit_codes import ExitCode, exit_code_of, system_exit_reason
from listener.ingest import InlineIngest, PipelinedIngest, processing_pool
from listener.match_info import MatchInfo, load_match_info, stream_status_of
from listener.pipeline import Pipeline, RecordOnlyPipeline, load_pipeline, pipeline_for
from listener.processed_mark import UNMARKED_LIMIT, ProcessedMark
from listener.recovery import Recovery
from listener.stream import OVERSIZE, FeedConnection, StreamConfig, reader_session, subscribe_url
from listener.stream_reader import STREAM_READERS
from listener.verify import Verification
from models import history_recorder as history
from models.errors import FencedWrite
from models.leagues import push_path
from models.status import DELAYED, TERMINAL, Phase, apply_stream_status, normalise, phase_of

logger = logging.getLogger(__name__)

#: Where a message processing cannot handle at a run's start is set aside (config.set_aside).
REPLAY_LOOP = "listener replay"


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
    reprocessed: int = 0  # messages a run before this one logged but never processed, processed at start


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
        self.database_lost = False  # the run ended because PostgreSQL did not answer (listener.body)
        self.feed_lost = (
            False  # the run gave its match back: its feed was lost past the bound (listener.body)
        )
        self._log = TextLog(None)
        self._live = False  # a live feed message arrived (ctx.on_live was called)
        self._muted = False  # handed over and refused by the fence: the stream stays open, unrecorded
        self._ingest: InlineIngest | PipelinedIngest | None = None
        self._status_lock = threading.Lock()  # the status: the stream loop's reload, processing's rules
        self._replayed = 0  # resume replays recorded (processing's count; the stream loop tells Recovery)
        self._replayed_told = 0
        self._mark: ProcessedMark | None = None  # the match's processed watermark (models.processed)
        self._batch_marks = False  # the pipeline's process_batch moves it with its writes (``through``)
        self._reload_due = False  # a status reload waits for a free database slot (``_reload_status``)

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
                info = load_match_info(ctx)
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
        except DatabaseUnavailable as exc:  # a step the run cannot do without (its match, its log)
            logger.warning("match %s listener: PostgreSQL did not answer: %s", ctx.match_id, exc)
            code, self.exit_reason = ExitCode.UNEXPECTED_ERROR, f"{type(exc).__name__}: {exc}"
            self.database_lost = True
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
                linger_seconds=s.listener_event_log_linger_seconds,
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
        ingest = self._ingest
        if ingest is not None:
            # What is recorded is processed before the pipeline closes (a stop does not wait for it).
            stopping = self._stop.is_set() or self._ctx.stop_requested.is_set()
            if not ingest.drain(0.5 if stopping else self._ctx.settings.listener_event_log_wait_seconds * 5):
                logger.warning(
                    "match %s: %d recorded events not processed at the run's end (the next run's, past "
                    "the processed watermark)",
                    self._ctx.match_id,
                    ingest.inflight,
                )
                ingest.close()
            else:
                ingest.close()
                if self._mark is not None:
                    self._mark.mark_quietly()
            self.stats.duplicates += ingest.duplicates
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
        self._batch_marks = _marks_in_batch(pipeline)
        self._mark = ProcessedMark(
            match_id=ctx.match_id,
            fence_token=ctx.fence_token,
            gate=self._gate(),
            # A pipeline that writes on its own: the watermark moves after each of its batches.
            every=UNMARKED_LIMIT if self._batch_marks else 1,
        )
        if isinstance(self.archive, EventLog):
            self._replay_unprocessed()
            self._ingest = PipelinedIngest(
                self.archive,
                self._on_recorded,
                pool=processing_pool(s.listener_db_concurrency),
                limit=s.listener_event_inflight_messages,
                stop=self._stop,
            )
        else:
            self._ingest = InlineIngest(self.archive, self._on_recorded)
        shared = bool(s.listener_stream_readers) and s.listener_stream_format == "ndjson"
        session = self._session or (reader_session() if shared else requests.Session())
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
        first_connect_at = time.monotonic()
        while not self._stopped():
            config = StreamConfig(
                url=recovery.subscribe_url(url),
                api_key=s.sportradar_api_key.get_secret_value(),
                connect_timeout=(
                    wait := recovery.connect_timeout(since_start=first_connect_at, reconnecting=failures > 0)
                ),
                first_byte_timeout=wait,
                read_timeout=s.listener_read_timeout_seconds,
                max_line_bytes=s.listener_max_line_bytes,
                match_id=ctx.match_id,
                silence_seconds=recovery.silence_limit,
                before_read=self._hand_over_read,
            )
            resuming = config.url != url
            conn = FeedConnection(config, session=session)
            with self._conn_lock:
                self._conn = conn
            if self._stopped():  # a stop that came before request_stop could see this connection
                conn.close()
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
                if (readers := s.listener_stream_readers) and STREAM_READERS.follow(
                    conn, self._handle, should_stop=self._stopped, threads=readers
                ):
                    return ExitCode.STOPPED  # a reader's stream returns only for a stop
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
                lost = recovery.lost_for(since_start=first_connect_at)
                if not self._live and not ctx.feed_reachable():
                    # Never live, and this worker's probe finds the feed unreachable (its host cut
                    # from it since the start was taken): give the match back now, to a worker
                    # that reaches the feed, rather than retry until the bound (finding 13).
                    self.feed_lost = True
                    raise StreamConnectionError(f"feed lost before going live: {exc}") from exc
                if failures > 1 and lost + delay >= s.listener_feed_lost_seconds:
                    # A reconnect failed and the next would come past the bound: give the match
                    # back, to start at once on a worker that reaches the feed (lifecycle.guarded_start).
                    self.feed_lost = True
                    raise StreamConnectionError(f"feed lost for {lost:.1f} s: {exc}") from exc
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
                self._hand_over_read()
                conn.close()
                with self._conn_lock:
                    self._conn = None
        return ExitCode.STOPPED

    # -- gaps and backfills ------------------------------------------------------------

    def _on_recorded(self, messages: list[dict], keys: list[str] | None, *, replayed: bool = False) -> None:
        """Messages newly recorded, in the order read (the ingest's processing thread, once their batch
        committed; ``keys``: their event log keys), or at the run's start the ones a run before logged
        and never processed (``replayed``): count them, apply their status, hand them to the pipeline (a
        run of messages between two status changes in one batch), advance the resume id and the
        match's processed watermark (models.processed: with the writes that processing made)."""
        mark = self._mark
        assert mark is not None
        with mark.lock:
            live = 0
            batch: list[dict] = []
            for i, message in enumerate(messages):
                source = backfilled_from(message)
                # A play-by-play's are counted by the recovery (gaps.recovered).
                if source != FROM_PLAY_BY_PLAY:
                    if not replayed:
                        live += 1
                        self.stats.events += 1
                        if source == FROM_RESUME:
                            self._replayed += 1
                    incoming = stream_status_of(message)
                    if incoming is not None and incoming != self._status:
                        self._process_all(batch, keys[i - 1] if keys and i else None, replayed=replayed)
                        batch = []
                        self._apply_stream_status(incoming)
                batch.append(message)
            self._process_all(batch, keys[-1] if keys else None, replayed=replayed)
        if replayed:
            self.stats.reprocessed += len(messages)
            return
        if live:
            history.count("events", self._ctx.match_id, live)
        for message in reversed(messages):
            resume_id = message.get("resume_id")
            if isinstance(resume_id, str) and resume_id:
                self._recovery.resume_at(resume_id)  # only past what the log holds
                break

    def _process_all(self, messages: list[dict], through: str | None, *, replayed: bool = False) -> None:
        """Hand newly recorded messages to the pipeline in order (PostgreSQL away: not processed, but a
        replay's end the run, whose successor replays them); ``through``: the last one's log key (the
        watermark moves there with the pipeline's writes)."""
        if not messages:
            return
        batch = getattr(self._pipeline, "process_batch", None)
        marked = False
        try:
            if batch is not None and through is not None and self._batch_marks:
                marked = bool(batch(messages, through=through))
            elif batch is None or len(messages) == 1:
                for message in messages:
                    self._process(message)
            else:
                batch(messages)
        except DatabaseUnavailable as exc:  # recorded already; the stream goes on
            if replayed:
                raise
            logger.warning(
                "match %s: %d events not processed (PostgreSQL unavailable): %s",
                self._ctx.match_id,
                len(messages),
                exc,
            )
        if through is not None and self._mark is not None:
            self._mark.processed(through, len(messages), marked=marked)

    def _replay_unprocessed(self) -> None:
        """Before the stream: process what the log holds past the match's processed watermark (a run
        before this one logged it, then died before processing it: a SIGKILL between the two), in
        order, as it would have been. A message that processing cannot handle is set aside (a log line
        and a count of ``kickoff_items_set_aside_total{loop="listener replay"}``), never retried for
        ever by each run in turn."""
        from models.event_log import PAGE
        from models.processed import processed_seq, unprocessed_page

        match_id = self._ctx.match_id
        with self._gate():
            after = processed_seq(match_id)
        while True:
            with self._gate():
                page = unprocessed_page(match_id, after=after)
            if not page:
                break
            self._replay_page([u.message for u in page], [u.key for u in page])
            after = page[-1].row.seq
            if len(page) < PAGE:
                break
        if self.stats.reprocessed:
            logger.info(
                "match %s: processed %d messages a run before this one logged and did not process",
                match_id,
                self.stats.reprocessed,
            )
            self._log.write("processed %d messages logged but not processed before", self.stats.reprocessed)

    def _replay_page(self, messages: list[dict], keys: list[str]) -> None:
        """One page of the replay: in one go when the pipeline writes a batch at once, else (or when
        that failed) a message at a time, so a failing message is known and set aside."""
        mark = self._mark
        assert mark is not None
        done = 0
        if self._batch_marks:  # a batch that fails writes nothing: what the watermark covers is done
            try:
                self._on_recorded(messages, keys, replayed=True)
                return
            except (FencedWrite, DatabaseUnavailable):
                raise
            except Exception:
                logger.exception(
                    "match %s: replaying %d messages failed; one at a time", self._ctx.match_id, len(keys)
                )
            done = keys.index(mark.last_key) + 1 if mark.last_key in keys else 0
        for message, key in zip(messages[done:], keys[done:], strict=True):
            try:
                self._on_recorded([message], [key], replayed=True)
            except (FencedWrite, DatabaseUnavailable):
                raise
            except Exception as exc:
                set_aside(
                    REPLAY_LOOP,
                    f"match {self._ctx.match_id} logged message {key}",
                    f"{type(exc).__name__}: {exc}",
                    kind=type(exc).__name__,
                    match_id=self._ctx.match_id,
                )
                with mark.lock:
                    mark.processed(key, 1, marked=False)
                    mark.mark_now()

    def _process(self, message: dict) -> None:
        """Hand one newly recorded message to the pipeline (PostgreSQL away: recorded, not processed)."""
        try:
            self._pipeline.process(message)
        except DatabaseUnavailable as exc:  # recorded already; the stream goes on
            logger.warning(
                "match %s: event not processed (PostgreSQL unavailable): %s", self._ctx.match_id, exc
            )

    def _record_all(self, messages: list[dict]) -> int:
        assert self._ingest is not None
        return self._ingest.take_all(messages)

    def _merge_backfill(self) -> None:
        if self._muted or self._ctx.handing_over.is_set() or not self._ctx.may_write():
            return
        if self._recovery.merge(self._record_all) is not None:
            self._write_gaps()

    def _finish_recovery(self, *, game_over: bool) -> None:
        recovery = getattr(self, "_recovery", None)
        if recovery is None:
            return
        try:
            # A run handed over leaves the last backfill to its successor (which holds the match now).
            if self._ctx.may_write() and not self._ctx.handing_over.is_set():
                verification = recovery.finish(
                    game_over=game_over and not self._stop.is_set(), record_all=self._record_all
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
        """Record one feed line (under ``ctx.recording``); a run handed over (``ctx.handing_over``)
        records nothing more and keeps its stream open until it is asked to stop (the successor is
        live), as does one whose write the fence refused during the hand-over."""
        if self._muted:
            return
        with self._ctx.recording:
            if self._ctx.handing_over.is_set():
                self._mute("its successor resumes where the event log ends")
                return
            try:
                self._record_line(raw)
            except FencedWrite:
                if not self._ctx.handing_over.is_set():
                    raise
                self._mute("the successor's fencing token refused a write")

    degraded = property(lambda self: bool(self._ingest and self._ingest.degraded))  # listener.ingest

    def drain_recorded(self, timeout: float) -> bool:
        """Wait until every message this run took is committed and processed (a hand-over's, after
        ``ctx.handing_over``: the body takes no more); False when ``timeout`` passed without progress."""
        ingest = self._ingest
        if ingest is None:
            return True
        if not ingest.drain(timeout):
            return False
        if self._mark is not None:
            self._mark.mark_quietly()  # the successor replays nothing of this run's
        return True

    def _mute(self, why: str) -> None:
        self._muted = True
        logger.info(
            "match %s: handed over (%s): streaming on unrecorded until it is live", self._ctx.match_id, why
        )

    def _record_line(self, raw: bytes | object) -> None:
        archive, ingest = self.archive, self._ingest
        assert archive is not None and ingest is not None
        if not self._ctx.may_write():  # paused past the worker lease: a successor may be writing
            raise _Exit(ExitCode.CANCELLED, "worker lease expired")
        ingest.check()  # what ended the processing side (fenced, a pipeline error) ends the run
        self._tell_recovery(ingest)
        if raw is OVERSIZE:
            self._skip("line longer than listener_max_line_bytes")
            return
        assert isinstance(raw, bytes)
        try:
            message = feed_json.loads(raw)
        except ValueError as exc:
            why = "invalid UTF-8" if isinstance(exc, UnicodeDecodeError) else "invalid JSON"
            archive.record_unreadable(raw, why)  # kept byte for byte in the event log
            self._skip(why)
            return
        if not isinstance(message, dict):
            self._skip("not a JSON object")
            return
        if not self._live and message.get("replay") is not True:
            # The run's first live byte (a live event or a heartbeat, not a resume's replay): a run
            # handed over to this one stops now; a takeover records its path (lifecycle.takeover).
            self._live = True
            self._ctx.on_live()
        self._recovery.seen(message, resume="payload" not in message)  # a recorded one's: once committed
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
        taken = ingest.take(message, raw, defer=True)  # handed over before the next read (one ticket)
        if ingest.held_up:  # waited for room: the run was slow, not the feed
            ingest.held_up = False
            self._recovery.held_up()
        if not taken:
            self.stats.duplicates += 1
            resume_id = message.get("resume_id")
            if not ingest.inflight and isinstance(resume_id, str) and resume_id:
                self._recovery.resume_at(resume_id)  # held by the log, nothing read before it in flight
        self._merge_backfill()
        archive.maybe_flush()

    def _hand_over_read(self) -> None:
        """Before each read of the socket (and at a connection's end): the messages of the last read go
        to the event log's writer as one batch (listener.ingest ``flush``)."""
        if self._ingest is not None:
            self._ingest.flush()

    def _tell_recovery(self, ingest: InlineIngest | PipelinedIngest) -> None:
        """What the processing side counted since: messages the writer dropped, resume replays recorded."""
        dropped = ingest.take_dropped()
        if dropped:
            self._dropped(dropped)
        replayed = self._replayed - self._replayed_told
        if replayed:
            self._replayed_told += replayed
            self._recovery.replayed(replayed)
            # On the row at once (a replay comes in a few committed batches): a run killed later never
            # writes its counts at close, and its row would show the replay's events as never recovered.
            self._write_gaps()

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
        from models.db import database
        from models.match import match_by_id

        ctx = self._ctx
        try:
            # A status write moves the watermark over the messages processed before this one in its
            # transaction: the row it updates is fenced (models.fence.is_current) and stays locked
            # until the commit, so a successor's token waits for both and a run that starts after it
            # never applies an older status again.
            with self._status_lock, self._gate(), connection(), database.atomic():
                match = match_by_id(ctx.match_id)
                before = match.status
                self._status = match.apply_stream(incoming, fence_token=ctx.fence_token)
                if self._status != before and self._mark is not None:
                    self._mark.mark_within()
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
            self._reload_due = True
        if self._reload_due:
            self._reload_status()
        if self._idle >= s.listener_max_consecutive_heartbeats:
            raise _Exit(ExitCode.MAX_HEARTBEATS, f"{self._idle} consecutive heartbeats without an event")

    def _reload_status(self) -> None:
        """Read the match's status (every ``listener_status_reload_heartbeats`` idle heartbeats). It never
        waits for a database slot or for processing's status write: the stream's reader may be a shared
        one (listener.stream_reader), whose other streams would wait with it; the reload then comes at the
        next heartbeat."""
        status = self._status
        if self._info.has_row:
            from models.boundary import connection
            from models.match import status_of_match

            gate = self._gate()
            if not self._status_lock.acquire(blocking=False):  # processing is writing a status
                return
            try:
                if not gate.acquire(blocking=False):
                    return
                stored = None
                try:
                    with connection():
                        stored = status_of_match(self._ctx.match_id)
                except DatabaseUnavailable as exc:
                    logger.warning("match %s: status reload skipped: %s", self._ctx.match_id, exc)
                finally:
                    gate.release()
            finally:
                self._status_lock.release()
            status = stored if stored is not None else status
            self._status = status
        self._reload_due = False
        self.stats.status_reloads += 1
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


def _marks_in_batch(pipeline: Pipeline) -> bool:
    """Whether ``pipeline``'s batches advance the processed watermark with their own writes (its
    ``process_batch`` takes ``through``: listener.pipelines); a record-only one writes nothing."""
    if isinstance(pipeline, RecordOnlyPipeline):
        return True
    batch = getattr(pipeline, "process_batch", None)
    if batch is None:
        return False
    try:
        return "through" in inspect.signature(batch).parameters
    except (TypeError, ValueError):
        return False
