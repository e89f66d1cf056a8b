"""The worker-less listener behind ``kickoff listen``: one match, in this process, until it ends.

A match with a Match row goes through the worker's start path (lifecycle.guarded_start
``start_match_listener`` without a message id): this process claims the match's pending start
key, takes its start lock with the lifecycle row id as token, and runs under its own
ListenerServices (the same heartbeat thread, stop watch and self-fencing as a listener worker).
When another listener holds the match (pending key, start lock or an active open row) nothing is
started and ListenerHeld names the holder; a match whose start attempts are exhausted is not
started either (as a worker start would skip it). Settings are the worker's merge (Layer A, then
Match.listener_start_settings, then this process's own run settings: the MatchListener body,
record-only unless asked to process, ``--league`` and ``--sr-env``).

The match is the one ``--match-id`` names (lifecycle.match_ref: internal id, then sr_id), else
the one whose sr_id is SR_ID; with ``--match-id`` the stream followed is still SR_ID's, and the
lifecycle row, lock and heartbeats are the named match's; the run records into the match's event
log (PostgreSQL), as a worker's run. Without a Match row the run records the spec's
``{shortcode}.json`` file only (no row, no lock), from the environment's settings. Ctrl-C or SIGTERM ends the
run as an operator stop (exit 15).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from config.settings import MatchListenerEnvironment
from lifecycle.cleanup import after_abandon
from lifecycle.errors import ListenerHeld
from lifecycle.guarded_start import Skip, start_match_listener
from lifecycle.holder import describe_holder, match_holder
from lifecycle.match_ref import resolve_match
from lifecycle.runtime import ListenerServices, RunHandle, operator_stop
from lifecycle.sql import rows
from listener.body import ListenerContext
from listener.match_listener import MatchListener
from models.coordination import CoordinationStore
from models.db import connection_scope, init_database
from models.errors import ListenerError
from models.match import match_by_sr_id

logger = logging.getLogger(__name__)

#: The body ``kickoff listen`` runs, whatever LISTENER_BODY says (it follows the real feed).
LISTEN_BODY = "listener.match_listener:MatchListener"


@dataclass(frozen=True)
class ListenResult:
    """How a ``kickoff listen`` run ended."""

    exit_code: int
    reason: str
    match_id: str | None
    record_id: str | None
    archive: str | None
    events: int


class ForegroundServices(ListenerServices):
    """ListenerServices of one foreground run: remembers its run; ``interrupt`` stops it as an operator."""

    def __init__(self, *, settings: MatchListenerEnvironment, coordination: CoordinationStore) -> None:
        super().__init__(settings=settings, coordination=coordination)
        self.handle: RunHandle | None = None
        self.interrupted = False

    def add(self, handle: RunHandle) -> None:
        super().add(handle)
        self.handle = handle
        if self.interrupted:  # a signal arrived before the run registered
            self.stop(handle, operator_stop())

    def interrupt(self) -> None:
        """Stop the run (exit 15), now or as soon as it registers."""
        self.interrupted = True
        for handle in self.running():
            self.stop(handle, operator_stop())


@contextmanager
def _signals(on_signal: Callable[[], None], *, install: bool) -> Iterator[None]:
    """Route SIGINT and SIGTERM to ``on_signal`` while inside (only when ``install``)."""
    previous: dict[int, Any] = {}
    if install:
        for sig in (signal.SIGINT, signal.SIGTERM):

            def handler(signum: int, _frame: object) -> None:
                logger.info("signal %s: stopping the listener", signum)
                on_signal()

            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def listen(
    sr_id: str,
    *,
    settings: MatchListenerEnvironment,
    league: str | None = None,
    record_only: bool = True,
    install_signals: bool = False,
    coordination: CoordinationStore | None = None,
    match_id: str | None = None,
    sr_env: str | None = None,
) -> ListenResult:
    """Follow match ``sr_id`` in the calling thread and return how it ended (ListenerHeld: not started).

    ``match_id`` (internal id or sr_id) names the match the run is logged against (MatchNotFound
    if none); ``sr_env`` is the feed's access level (``listener_sr_env``: trial, production).
    """

    init_database(
        settings.database_url,
        connect_timeout_seconds=settings.database_connect_timeout_seconds,
        statement_timeout_seconds=settings.database_statement_timeout_seconds,
    )
    with connection_scope():
        match = resolve_match(match_id) if match_id is not None else match_by_sr_id(sr_id)
    if match is None:
        return _archive_only(
            sr_id, settings=settings, league=league, sr_env=sr_env, install_signals=install_signals
        )
    coordination = coordination or CoordinationStore.from_settings(settings)
    # This process's own choices (not a message's): held to no per-run allowlist.
    local: dict[str, Any] = {"listener_body": LISTEN_BODY, "listener_skip_processing": record_only}
    if match.sr_id != sr_id:  # --match-id: this stream, that match's row
        local["listener_sr_request_match_uuid"] = sr_id
    if league:
        local["listener_sr_url_league"] = league
    if sr_env:
        local["listener_sr_env"] = sr_env
    return _start(
        str(match.id), local, settings=settings, coordination=coordination, install_signals=install_signals
    )


def _held(
    match_id: str, *, coordination: CoordinationStore, fallback: dict[str, Any] | None = None
) -> ListenerHeld:
    holder = match_holder(match_id, coordination=coordination) or fallback or {"pending": True}
    return ListenerHeld(
        f"match {match_id} is already held by {describe_holder(holder)}; not started", holder=holder
    )


def _claim(match_id: str, *, settings: MatchListenerEnvironment, coordination: CoordinationStore) -> None:
    """Claim the match like a dispatch would, or raise ListenerHeld naming whoever holds it.

    Stale open rows of the match are abandoned first (as dispatch and start do), so a dead
    listener does not block. A leftover operator stop flag is cleared once the claim is ours
    (running ``kickoff listen`` is an explicit start, like ``kickoff listeners start``).
    """
    abandoned = rows.abandon_stale_rows(stale_seconds=coordination.stale_seconds, match_ids=[match_id])
    after_abandon(abandoned, settings=settings, coordination=coordination)
    if not coordination.barriers.claim_pending(match_id):
        raise _held(match_id, coordination=coordination)
    holder = match_holder(match_id, coordination=coordination)  # at least our own pending key
    if holder is not None and "pending" not in holder:  # an open row or a start lock
        coordination.barriers.clear_pending(match_id)
        raise _held(match_id, coordination=coordination, fallback=holder)
    coordination.stops.clear_stop_flag(match_id)


def _start(
    match_id: str,
    local: dict[str, Any],
    *,
    settings: MatchListenerEnvironment,
    coordination: CoordinationStore,
    install_signals: bool,
) -> ListenResult:
    services = ForegroundServices(settings=settings, coordination=coordination)  # checks the intervals first
    _claim(match_id, settings=settings, coordination=coordination)
    try:
        with _signals(services.interrupt, install=install_signals):
            result = start_match_listener(
                match_id,
                None,
                message_id=None,
                settings=settings,
                coordination=coordination,
                services=services,
                local=local,
            )
    finally:
        services.close()
    if result.skipped is Skip.EXHAUSTED:
        raise ListenerError(
            f"match {match_id}: its start attempts are exhausted "
            f"(`kickoff listeners start {match_id} --force` clears them); not started"
        )
    if result.skipped is not None:
        # Lost a race after the claim (another start took the lock or wrote a row first).
        if result.skipped is Skip.STOPPED:
            coordination.barriers.clear_pending(match_id)
        raise _held(match_id, coordination=coordination, fallback={"pending": True})
    body = services.handle.body if services.handle is not None else None
    archive = getattr(body, "archive", None)
    stats = getattr(body, "stats", None)
    return ListenResult(
        exit_code=int(result.exit_code or 0),
        reason=result.reason or "",
        match_id=match_id,
        record_id=result.record_id,
        archive=_where(archive, match_id),
        events=stats.events if stats is not None else 0,
    )


def _where(archive: Any, match_id: str) -> str | None:
    """Where the run recorded: its file, or the event log (``kickoff matches export`` writes the file)."""
    if archive is None:
        return None
    if archive.path is None:
        return f"event log of match {match_id}"
    return str(archive.path)


def _archive_only(
    sr_id: str,
    *,
    settings: MatchListenerEnvironment,
    league: str | None,
    sr_env: str | None,
    install_signals: bool,
) -> ListenResult:
    """A match kickoff does not know: record its stream into the archive, no row and no lock."""
    run_settings = settings.model_copy(
        update={
            "listener_sr_request_match_uuid": sr_id,
            "listener_sr_url_league": league or settings.listener_sr_url_league,
            "listener_sr_env": sr_env or settings.listener_sr_env,
            "listener_skip_processing": True,
        }
    )
    ctx = ListenerContext(match_id="", record_id=None, is_test=False, settings=run_settings)
    body = MatchListener()

    def stop() -> None:
        ctx.stop_requested.set()
        body.request_stop()

    with _signals(stop, install=install_signals):
        code = body.run(ctx)
    archive = str(body.archive.path) if body.archive is not None else None
    return ListenResult(code, body.exit_reason, None, None, archive, body.stats.events)
