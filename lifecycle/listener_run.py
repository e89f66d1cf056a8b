"""One listener run: the settings a run may set (the merge of overrides, stored and injected
settings) and ``run_match_listener``.

``run_match_listener`` writes the lifecycle row, registers the run with the process's single
heartbeat thread and stop watcher, calls the body named by ``listener_body`` through
listener.body's interface, and writes the shutdown. It holds no database connection while the
body runs.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from config import spans
from config.errors import DatabaseUnavailable, KickoffError, ServiceUnavailable
from config.feed_text import unstorable_text
from config.settings import MatchListenerEnvironment
from lifecycle import takeover
from lifecycle.errors import ListenerStartSettingsError, RunNotBegun
from lifecycle.heartbeat import ROW_CLOSED_ELSEWHERE, HeartbeatRegistration
from lifecycle.runtime import (
    ListenerInterrupted,
    ListenerServices,
    RunHandle,
    StopCause,
    lost_lock,
    operator_stop,
    row_closed_elsewhere,
    worker_shutdown,
)
from lifecycle.sql import rows
from lifecycle.stop_watch import StopRegistration
from listener.body import ListenerBody, ListenerContext, body_exit_reason, body_lost_database, body_lost_feed
from listener.exit_codes import ExitCode, describe, exit_code_of, system_exit_reason
from models.badges import ENDED_BY_THE_RUN
from models.errors import MatchNotFound
from models.match import METADATA_KEYS, Match, match_with_league

logger = logging.getLogger(__name__)

#: Injected from the match unless the call overrides set them.
INJECTED_KEYS = ("listener_sr_request_match_uuid", "listener_sr_url_league")


# -- settings merge -------------------------------------------------------------------

#: The settings one run may set: start overrides, Match.listener_start_settings, clone and
#: ``matches edit --setting``. Listener behaviour only: dry run, the test and drill knobs, the
#: stream's heartbeat counts, timeouts, reconnect, bad-line and archive tuning. Every other
#: setting (endpoints, credentials, paths, code locations such as ``listener_body``, the feed
#: segments injected from the Match, and every process setting) comes only from the process
#: environment, so no per-run value can send the feed's key elsewhere or load other code.
RUN_SETTINGS = frozenset(
    {
        "listener_dry_run",
        "listener_skip_processing",
        "listener_force_exit_code",
        "listener_test_duration_seconds",
        "listener_test_exit_code",
        "listener_test_hang",
        "listener_max_consecutive_heartbeats",
        "listener_status_reload_heartbeats",
        "listener_connect_timeout_seconds",
        "listener_read_timeout_seconds",
        "listener_reconnect_attempts",
        "listener_reconnect_backoff_seconds",
        "listener_reconnect_backoff_max_seconds",
        "listener_reconnect_reset_seconds",
        "listener_max_line_bytes",
        "listener_max_bad_lines",
        "listener_archive_flush_events",
        "listener_archive_flush_seconds",
        "listener_backfill",
        "listener_resume",
        "listener_backfill_attempts",
        "listener_backfill_backoff_seconds",
        "listener_backfill_backoff_max_seconds",
        "listener_gap_heartbeats",
    }
)


def refused_run_settings(settings: dict[str, Any] | None) -> list[str]:
    """The keys of ``settings`` a run may not set (sorted): anything outside RUN_SETTINGS."""
    return sorted(set(settings or {}) - RUN_SETTINGS)


def validate_override_keys(overrides: dict[str, Any] | None, *, source: str = "overrides") -> None:
    """Refuse keys outside RUN_SETTINGS (ListenerStartSettingsError naming them).

    An unknown name and a setting of the process environment are told apart in the message.
    """
    refused = refused_run_settings(overrides)
    if not refused:
        return
    unknown = [k for k in refused if k not in MatchListenerEnvironment.model_fields]
    if unknown:
        raise ListenerStartSettingsError(f"unknown listener setting(s) in {source}: {', '.join(unknown)}")
    raise ListenerStartSettingsError(
        f"refused listener setting(s) in {source}: {', '.join(refused)}: only the process environment "
        "sets these (a run may set only the listener behaviour settings of docs/lifecycle.md)"
    )


#: Bounds of a per-run setting's number on every surface (the API's request model uses the same):
#: an int at most 2**31 - 1, a float at most 1e9 either side (``1e308`` seconds is no setting).
RUN_NUMBER_BOUNDS: dict[type, float] = {int: 2**31 - 1, float: 1e9}


def validate_listener_settings(settings: dict[str, Any] | None, *, source: str) -> None:
    """Refuse keys outside RUN_SETTINGS and invalid values (ListenerStartSettingsError naming the first).

    What a run would refuse at start, checked when the settings are stored (``--setting``, the
    console's settings form), numbers held to RUN_NUMBER_BOUNDS as the API holds them.
    """
    validate_override_keys(settings, source=source)
    if not settings:
        return
    for key, value in settings.items():
        unstorable = unstorable_text(value)
        if unstorable:
            raise ListenerStartSettingsError(f"invalid listener setting in {source}: {key}: {unstorable}")
    built = _build_settings({"_env_file": None, **settings}, what=f"in {source}")
    for key in settings:
        value = getattr(built, key, None)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        bound = RUN_NUMBER_BOUNDS[int if isinstance(value, int) else float]
        if not math.isfinite(value) or abs(value) > bound:
            raise ListenerStartSettingsError(
                f"invalid listener setting in {source}: {key}: must be between {-bound:g} and {bound:g}"
            )


def _build_settings(kwargs: dict[str, Any], *, what: str) -> MatchListenerEnvironment:
    """MatchListenerEnvironment(**kwargs); ListenerStartSettingsError naming the first invalid one."""
    try:
        return MatchListenerEnvironment(**kwargs)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        message = f"invalid listener setting {what}: {where}: {first.get('msg')}"
        raise ListenerStartSettingsError(message) from exc


def resolve_listener_environment(
    match: Match,
    overrides: dict[str, Any] | None = None,
    *,
    local: dict[str, Any] | None = None,
    env_file: Any = ...,
) -> MatchListenerEnvironment:
    """Build a run's settings: local > call overrides > Match.listener_start_settings > Layer A.

    The Sportradar match id and the league name are injected from the match; metadata keys
    (``message_id``) are stripped; a key outside RUN_SETTINGS in the overrides or the stored
    settings raises ListenerStartSettingsError. ``local`` is what this process chose for its own
    run (``kickoff listen``: its body and stream), never a message's or the database's, so it is
    not held to RUN_SETTINGS. Layer A is MatchListenerEnvironment itself: process environment >
    .env > defaults.
    """
    overrides = dict(overrides or {})
    problem = _shape_problem(match.listener_start_settings)
    if problem is not None:
        raise ListenerStartSettingsError(f"Match.listener_start_settings of match {match.id} {problem}")
    stored = {k: v for k, v in (match.listener_start_settings or {}).items() if k not in METADATA_KEYS}
    for key in METADATA_KEYS:
        overrides.pop(key, None)
    validate_override_keys(overrides, source="overrides")
    validate_override_keys(stored, source=f"Match.listener_start_settings of match {match.id}")
    merged: dict[str, Any] = {**stored}
    merged["listener_sr_request_match_uuid"] = str(match.sr_id)
    merged["listener_sr_url_league"] = match.league.name
    merged.update(overrides)
    merged.update(local or {})
    kwargs: dict[str, Any] = dict(merged)
    if env_file is not ...:
        kwargs["_env_file"] = env_file
    return _build_settings(kwargs, what=f"for match {match.id}")


def _shape_problem(stored: Any) -> str | None:
    """Why stored settings are not a JSON object (None: they are, or are unset)."""
    if stored is None or isinstance(stored, dict):
        return None
    return f"is a JSON {type(stored).__name__}, not an object"


def stored_settings_problem(stored: Any) -> str | None:
    """Why a match's ``listener_start_settings`` would make its start fail, or None.

    What ``resolve_listener_environment`` refuses of the stored layer: not a JSON object, a
    key outside RUN_SETTINGS (unknown or the process environment's) or an invalid value. The value
    check is cached per distinct settings (building the settings costs milliseconds).
    """
    problem = _shape_problem(stored)
    if problem is not None:
        return f"Match.listener_start_settings {problem}"
    user = {k: v for k, v in (stored or {}).items() if k not in METADATA_KEYS}
    if not user:
        return None
    try:
        validate_override_keys(user, source="Match.listener_start_settings")
    except ListenerStartSettingsError as exc:
        return str(exc)
    return _value_problem(json.dumps(user, sort_keys=True))


@functools.lru_cache(maxsize=1024)
def _value_problem(settings_json: str) -> str | None:
    user = json.loads(settings_json)
    try:
        _build_settings({"_env_file": None, **user}, what="in Match.listener_start_settings")
    except ListenerStartSettingsError as exc:
        return str(exc)
    return None


def load_body_class(path: str) -> type[ListenerBody]:
    """Import the body class named ``module:attr`` (the ``listener_body`` setting)."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ListenerStartSettingsError(f"listener_body must be 'module:attr', got {path!r}")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ListenerStartSettingsError(f"listener_body {path!r} cannot be imported: {exc}") from exc


# -- one run --------------------------------------------------------------------------


@dataclass(frozen=True)
class RunOutcome:
    """How one listener run ended."""

    record_id: str | None  # the lifecycle row (None: dry run without a row)
    exit_code: int  # the recorded exit (or, when someone else closed the row, the cause's)
    reason: str  # exit_reason
    stop_cause: StopCause | None  # set when the lifecycle ended the run (stop, lost lock, shutdown)
    sr_id: str | None = None  # the provider's match id (for failure reports)
    closed_elsewhere: bool = False  # a stop or a sweep closed the row first; exit_code is theirs
    went_live: bool = False  # the run's feed sent its first live byte (ctx.on_live)
    database_lost: bool = False  # the body ended by itself because PostgreSQL did not answer
    feed_lost: bool = False  # the body gave its match back: its feed stayed unreachable past the bound
    row_left_open: bool = False  # PostgreSQL did not answer the row's close

    @property
    def recorded_by_lifecycle(self) -> bool:
        """Whether the exit was written by the lifecycle (a stop, cleanup, shutdown), not the run itself."""
        return self.stop_cause is not None or self.closed_elsewhere


def load_match_with_league(match_id: str) -> Match:
    """The Match with its league, or MatchNotFound."""
    try:
        key = uuid.UUID(match_id)
    except ValueError as exc:
        raise MatchNotFound(f"no match with id {match_id}") from exc
    match = match_with_league(key)
    if match is None:
        raise MatchNotFound(f"no match with id {match_id}")
    return match


def run_match_listener(match_id: str, overrides: dict[str, Any] | None, **run: Any) -> RunOutcome:
    """Run one listener for ``match_id`` (``_run_listener``'s keywords) in its ``listener run`` span.

    One span for the whole run (its row stores the span's traceparent), with an event for each
    connect, gap, resume, backfill, status change and the exit, never a span per feed message.
    """
    attributes = {"kickoff.match_id": match_id, "messaging.message.id": run.get("message_id")}
    with spans.span("listener run", attributes=attributes) as current:
        outcome = _run_listener(match_id, overrides, **run)
        spans.event("exit", code=outcome.exit_code, reason=outcome.reason)
        if current is not None:
            current.set_attributes({"kickoff.exit_code": outcome.exit_code, "kickoff.sr_id": outcome.sr_id})
        return outcome


#: How long a hand-over waits for the message its run is recording to be recorded and processed.
HANDOVER_RECORDING_WAIT_SECONDS = 2.0


def _went_live(
    live: threading.Event, services: ListenerServices, record_id: str | None, match_id: str
) -> None:
    """The run's first live byte: remember it, and record the takeover (a run with a row)."""
    live.set()
    if record_id:
        _record_takeover(services, record_id, match_id)


def _record_takeover(services: ListenerServices, record_id: str, match_id: str) -> None:
    """The run's first live byte: say so to a run handed over to this one (it closes its stream now),
    then record how this run took its match over, if it did (lifecycle.takeover)."""
    try:
        services.coordination.stops.mark_live(
            match_id, ttl_seconds=2 * services.settings.listener_handoff_seconds + 1
        )
    except KickoffError as exc:  # the handed-over run closes at its bound instead
        logger.warning("match %s: marking the first live byte failed: %s", match_id, exc)
    with services.db_slot():
        takeover.record_at_first_live_byte(record_id, match_id)


def _handing_over(
    services: ListenerServices, ctx: ListenerContext, hb: HeartbeatRegistration, token: str, body: Any
) -> Callable[[], None]:
    """The hand-off of a running run to a successor waiting for its start lock, its stream kept open.

    Stops the run's recording (``ctx.handing_over``, once the message being recorded is done), leaves
    the heartbeat (its row is closed now: exit 14, ``worker shutdown``, the hand-off path), closes the
    row, then deletes the start lock (token-compared), in that order: the successor takes the lock,
    opens its row (a newer fencing token: the fence refuses any write of this run's still in flight)
    and connects, resuming where the event log ends, while this run still streams; the run closes its
    stream at the successor's first live byte (lifecycle.runtime). Raises KickoffError.
    """

    def hand_over() -> None:
        assert ctx.record_id is not None
        ctx.handing_over.set()
        # The message being recorded now, if any, is recorded and processed before the successor can
        # take its token (the body takes this lock per message and records nothing once it is set).
        if ctx.recording.acquire(timeout=HANDOVER_RECORDING_WAIT_SECONDS):
            ctx.recording.release()
        else:
            logger.warning(
                "match %s: hand-over: the message being recorded did not finish: the fence decides",
                ctx.match_id,
            )
        # A pipelined body's messages taken but not yet committed and processed (listener.ingest) are,
        # before the successor can take its token: a batch it refused would be the successor's to record.
        drain = getattr(body, "drain_recorded", None)
        if drain is not None and not drain(HANDOVER_RECORDING_WAIT_SECONDS):
            logger.warning(
                "match %s: hand-over: messages taken were not all processed in time: the fence decides",
                ctx.match_id,
            )
        services.heartbeat.unregister(hb)
        with services.db_slot():
            rows.close_row(ctx.record_id, exit_code=int(ExitCode.ABANDONED), reason=takeover.WORKER_SHUTDOWN)
        services.coordination.locks.delete_start_lock_if_token(ctx.match_id, token)

    return hand_over


def _run_listener(
    match_id: str,
    overrides: dict[str, Any] | None,
    *,
    token: str,
    message_id: str | None,
    services: ListenerServices,
    lock_acquired_at: float | None = None,
    local: dict[str, Any] | None = None,
) -> RunOutcome:
    """Run one listener for ``match_id`` under a start lock held with ``token``.

    ``local``: this process's own settings of the run (see resolve_listener_environment).

    ``token`` becomes the lifecycle row's id, so cleanup can tell whose lock it is.
    ``lock_acquired_at`` (``time.monotonic()`` taken just before the lock was acquired) starts
    the lock's deadline clock; without it, the registration time does. Raises MatchNotFound /
    ListenerStartSettingsError before any row is written, and RunNotBegun when PostgreSQL or Redis
    did not answer that work (its body never ran).
    """
    if lock_acquired_at is None:
        lock_acquired_at = time.monotonic()
    try:
        with services.db_slot():  # the connection is closed at the end: none is held while the game runs
            match = load_match_with_league(match_id)
            env = resolve_listener_environment(match, overrides, local=local)
            body_cls = load_body_class(env.listener_body)
            is_test = bool(match.is_test)
            sr_id = str(match.sr_id)
            write_row = is_test or not env.listener_dry_run
            record_id = token if write_row else None
            lease_id = services.lease_for_run()
            row_written_at = time.monotonic()  # taken before the write: the row's heartbeat is not older
            fence_token: int | None = None  # a dry run without a row writes nothing to fence
            if record_id:
                fence_token = rows.create_row(
                    record_id=record_id,
                    match_id=match_id,
                    message_id=message_id,
                    dry_run=env.listener_dry_run,
                    worker_lease=lease_id,
                    traceparent=spans.current_traceparent(),
                )
    except ServiceUnavailable as exc:
        # E.g. a new pool connection refused by a server at its connection limit (bench/chaos.py,
        # seed 7: the match waited a minute for the dispatch tick; docs/reliability.md finding 11).
        raise RunNotBegun(match_id, exc) from exc
    logger.info(
        "match %s: listener started (row %s, message %s, worker lease %s, fencing token %s)",
        match_id,
        record_id,
        message_id,
        lease_id,
        fence_token,
    )

    live = threading.Event()  # the run's first live byte arrived
    ctx = ListenerContext(
        match_id=match_id,
        record_id=record_id,
        is_test=is_test,
        settings=env,
        may_write=lambda: services.lease.holds(lease_id),
        fence_token=fence_token,
        on_live=lambda: _went_live(live, services, record_id, match_id),
        feed_reachable=lambda: not services.feed.finds_away(),
    )
    body = body_cls()
    handle = RunHandle(ctx=ctx, body=body)
    hb = HeartbeatRegistration(
        match_id=match_id,
        token=token,
        record_id=record_id,
        last_lock_ok=lock_acquired_at,
        last_row_ok=row_written_at,
        lease_id=lease_id,
        degraded=lambda: bool(getattr(body, "degraded", False)),  # listener.ingest: writing behind
        on_lost=lambda reason: (
            ctx.handing_over.is_set()  # its row and lock are the successor's now
            or services.stop(
                handle, row_closed_elsewhere(reason) if reason == ROW_CLOSED_ELSEWHERE else lost_lock(reason)
            )
        ),
    )
    if record_id:
        handle.hand_over = _handing_over(services, ctx, hb, token, body)
    sw = StopRegistration(match_id=match_id, on_stop=lambda: services.stop(handle, operator_stop()))
    services.add(handle)
    services.heartbeat.register(hb)
    services.stop_watch.register(sw)
    services.deadlines.start()
    code: int
    exit_reason: str | None = None  # the body's own reason (its exit_reason, or its SystemExit's)
    try:
        if services.shutting_down:
            services.stop(handle, worker_shutdown())
        if env.listener_force_exit_code is not None:
            code = int(env.listener_force_exit_code)
        elif handle.cause is not None:
            code = handle.cause.code
        else:
            handle.in_body = True
            try:
                with spans.quiet():  # the run's span events tell its story, not a span per write
                    code = exit_code_of(body.run(ctx))  # None is a clean return (0)
                exit_reason = body_exit_reason(body)  # e.g. "feed answered HTTP 404 at ..."
            finally:
                handle.leave_body()
    except ListenerInterrupted:
        code = handle.cause.code if handle.cause else int(ExitCode.CANCELLED)
    except SystemExit as exc:
        # A body's sys.exit() ends the run, not the worker: recorded and counted like a return.
        code, exit_reason = exit_code_of(exc.code), system_exit_reason(exc)
        logger.info("match %s: listener body raised SystemExit(%r)", match_id, exc.code)
    except Exception:
        logger.exception("match %s: listener body raised", match_id)
        code = int(ExitCode.UNEXPECTED_ERROR)
    finally:
        services.stop_watch.unregister(sw)
        services.heartbeat.unregister(hb)
        services.remove(handle)

    cause = handle.cause
    closed_elsewhere = row_left_open = False
    if cause is not None:
        code, reason, stopped_by = cause.code, cause.reason, cause.stopped_by
    else:
        # 14 / 15 the run reported itself: no cleanup or stop wrote them, the row says so (its badge is Ended)
        reason = exit_reason or describe(code)
        stopped_by = ENDED_BY_THE_RUN if code in (ExitCode.ABANDONED, ExitCode.STOPPED) else None
    if record_id:
        with services.db_slot():
            try:
                written = rows.close_row(record_id, exit_code=code, reason=reason, stopped_by=stopped_by)
            except DatabaseUnavailable as exc:
                # The row stays open and goes stale; the sweep abandons it, unless the start gives
                # the match back and closes it once PostgreSQL answers. The exit is reported.
                logger.warning("match %s: row %s not closed: %s", match_id, record_id, exc)
                written = row_left_open = True
            if not written:
                # Closed by a stop (15) or a sweep (14) first: report what the row says.
                recorded, recorded_reason = rows.recorded_exit(record_id)
                if recorded is not None:
                    code, reason = recorded, recorded_reason or reason
                    closed_elsewhere = True
                logger.info("match %s: row %s was already closed with %s", match_id, record_id, code)
    logger.info("match %s: listener ended with exit %s (%s)", match_id, code, reason)
    return RunOutcome(
        record_id=record_id,
        exit_code=code,
        reason=reason,
        stop_cause=cause,
        sr_id=sr_id,
        closed_elsewhere=closed_elsewhere,
        went_live=live.is_set(),
        database_lost=cause is None and body_lost_database(body),
        feed_lost=cause is None and body_lost_feed(body),
        row_left_open=row_left_open,
    )
