"""The worker-less listener behind ``kickoff listen``: one match, in this process, until it ends.

Settings come from the environment and ``.env`` only (no Match.listener_start_settings merge);
the match is looked up by its Sportradar id. When a Match row exists the run writes a lifecycle
row with heartbeats so the board shows it (a dry run writes none, except for is_test matches);
without a row it records the archive only. Record-only (``listener_skip_processing``) unless the
caller asks for processing.
"""

from __future__ import annotations

import logging
import signal
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from config.settings import MatchListenerEnvironment
from listener.body import ListenerContext
from listener.exit_codes import describe
from listener.match_listener import MatchListener

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ListenResult:
    """How a ``kickoff listen`` run ended."""

    exit_code: int
    reason: str
    match_id: str | None
    record_id: str | None
    archive: str | None
    events: int


def listen(
    sr_id: str,
    *,
    settings: MatchListenerEnvironment,
    league: str | None = None,
    record_only: bool = True,
    install_signals: bool = False,
) -> ListenResult:
    """Follow match ``sr_id`` in the calling thread and return how it ended."""
    from models.db import database, init_database
    from models.match import Match

    init_database(
        settings.database_url,
        connect_timeout_seconds=settings.database_connect_timeout_seconds,
        statement_timeout_seconds=settings.database_statement_timeout_seconds,
    )
    with database.connection_context():
        match = Match.select().where(Match.sr_id == sr_id).first()
        league_name = league or (match.league.name if match is not None else settings.listener_sr_url_league)
    updates: dict[str, Any] = {
        "listener_sr_request_match_uuid": sr_id,
        "listener_sr_url_league": league_name,
    }
    if record_only:
        updates["listener_skip_processing"] = True
    run_settings = settings.model_copy(update=updates)
    match_id = str(match.id) if match is not None else ""
    record_id = None
    # A dry run writes no row, except for is_test matches (so dispatch does not start another).
    if match is not None and (match.is_test or not settings.listener_dry_run):
        record_id = _open_row(match_id, dry_run=settings.listener_dry_run)
    ctx = ListenerContext(
        match_id=match_id, record_id=record_id, is_test=bool(match and match.is_test), settings=run_settings
    )
    body = MatchListener()
    stop_beats = threading.Event()
    beater = None
    if record_id:
        beater = threading.Thread(
            target=_beat,
            args=(record_id, settings.listener_heartbeat_interval_seconds, stop_beats),
            daemon=True,
        )
        beater.start()
    previous: dict[int, Any] = {}
    if install_signals:
        for sig in (signal.SIGINT, signal.SIGTERM):

            def on_signal(signum: int, _frame: object) -> None:
                logger.info("match %s: signal %s, stopping", match_id or sr_id, signum)
                ctx.stop_requested.set()
                body.request_stop()

            previous[sig] = signal.signal(sig, on_signal)
    try:
        code = body.run(ctx)
    finally:
        stop_beats.set()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if record_id:
        _close_row(record_id, code, body.exit_reason or describe(code))
    archive = str(body.archive.path) if body.archive is not None else None
    return ListenResult(code, body.exit_reason, match_id or None, record_id, archive, body.stats.events)


def _open_row(match_id: str, *, dry_run: bool) -> str:
    from listener import rows
    from models.db import database

    record_id = str(uuid.uuid4())
    with database.connection_context():
        rows.create_row(record_id=record_id, match_id=match_id, message_id=None, dry_run=dry_run)
    return record_id


def _beat(record_id: str, interval: float, stop: threading.Event) -> None:
    from listener import rows
    from models.db import database

    while not stop.wait(interval):
        try:
            with database.connection_context():
                if not rows.heartbeat_rows([record_id]):
                    logger.warning("row %s was closed by someone else (sweep or stop)", record_id)
        except Exception:
            logger.exception("heartbeat of row %s failed", record_id)


def _close_row(record_id: str, code: int, reason: str) -> None:
    from listener import rows
    from models.db import database

    with database.connection_context():
        rows.close_row(record_id, exit_code=code, reason=reason[:500])
