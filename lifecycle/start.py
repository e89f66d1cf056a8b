"""Listener start-up: which matches need a listener, the settings merge, and one listener run.

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
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from config import spans
from config.clock import utcnow
from config.errors import DatabaseUnavailable, ListenerStartSettingsError, MatchNotFound
from config.feed_text import unstorable_text
from config.settings import MatchListenerEnvironment
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
from lifecycle.sql.dispatch import dispatchable_match_rows
from lifecycle.stop_watch import StopRegistration
from listener.body import ListenerBody, ListenerContext, body_exit_reason
from listener.exit_codes import ExitCode, describe, exit_code_of, system_exit_reason
from models.coordination import CoordinationStore
from models.match import METADATA_KEYS, Match, match_with_league

logger = logging.getLogger(__name__)

#: Injected from the match unless the call overrides set them.
INJECTED_KEYS = ("listener_sr_request_match_uuid", "listener_sr_url_league")


# -- selection ------------------------------------------------------------------------


def find_upcoming_matches_needing_listeners(
    *,
    within_minutes: int,
    is_test: bool | None,
    active_max_age_seconds: float,
    stale_seconds: float,
    now: datetime | None = None,
    barriers: CoordinationStore | None = None,
) -> list[str]:
    """Internal ids of matches the dispatcher should start a listener for (one query); see below."""
    return [
        candidate[0]
        for candidate in find_candidates(
            within_minutes=within_minutes,
            is_test=is_test,
            active_max_age_seconds=active_max_age_seconds,
            stale_seconds=stale_seconds,
            now=now,
            barriers=barriers,
        )
    ]


#: ``(match id, has a stale open row, its listener_start_settings or None when they are {})``.
Candidate = tuple[str, bool, Any]


def find_candidates(
    *,
    within_minutes: int,
    is_test: bool | None,
    active_max_age_seconds: float,
    stale_seconds: float,
    now: datetime | None = None,
    match_ids: list[str] | None = None,
    barriers: CoordinationStore | None = None,
) -> list[Candidate]:
    """A Candidate for every match needing a listener (one query; see below for the rare second).

    Enabled league, ``auto_dispatch_listener`` on; live statuses always, pre-game and delayed
    ones when ``scheduled`` is in [now - active age, now + within_minutes]; ``is_test`` filters
    test vs live (None: both); a match with an open row created within the active age and a
    fresh heartbeat is dropped (stale open rows do not block: dispatch abandons them); an is_test
    clone no srsim serves yet (``srsim_unserved``) is not selected.
    ``match_ids`` limits the selection to those matches (a restart of known matches).

    The open-row guard follows the start lock, not only the row's age: with ``barriers``, a
    match whose open row is older than the active age but still beats and still holds the
    match's start lock (its token is the row id) is dropped too (one MGET and one query, only
    when the selection flagged such rows).
    """
    now = now or utcnow()
    found = dispatchable_match_rows(
        now=now,
        within_minutes=within_minutes,
        is_test=is_test,
        active_max_age_seconds=active_max_age_seconds,
        stale_seconds=stale_seconds,
        match_ids=match_ids,
    )
    held = set()
    if barriers is not None:
        held = rows.held_by_their_open_rows(
            [mid for mid, _, old, _ in found if old], barriers=barriers, stale_seconds=stale_seconds
        )
    return [(mid, bool(has_stale), stored) for mid, has_stale, _, stored in found if mid not in held]


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


def validate_listener_settings(settings: dict[str, Any] | None, *, source: str) -> None:
    """Refuse keys outside RUN_SETTINGS and invalid values (ListenerStartSettingsError naming the first).

    What a run would refuse at start, checked when the settings are stored (``--setting``).
    """
    validate_override_keys(settings, source=source)
    if not settings:
        return
    for key, value in settings.items():
        unstorable = unstorable_text(value)
        if unstorable:
            raise ListenerStartSettingsError(f"invalid listener setting in {source}: {key}: {unstorable}")
    _build_settings({"_env_file": None, **settings}, what=f"in {source}")


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

    @property
    def recorded_by_lifecycle(self) -> bool:
        """Whether the exit was written by the lifecycle (a stop, cleanup, shutdown), not the run itself."""
        return self.stop_cause is not None or self.closed_elsewhere


def load_match(match_id: str) -> Match:
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
    ListenerStartSettingsError before any row is written.
    """
    if lock_acquired_at is None:
        lock_acquired_at = time.monotonic()
    with services.db_slot():  # the connection is closed at the end: none is held while the game runs
        match = load_match(match_id)
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
    logger.info(
        "match %s: listener started (row %s, message %s, worker lease %s, fencing token %s)",
        match_id,
        record_id,
        message_id,
        lease_id,
        fence_token,
    )

    ctx = ListenerContext(
        match_id=match_id,
        record_id=record_id,
        is_test=is_test,
        settings=env,
        may_write=lambda: services.lease.holds(lease_id),
        fence_token=fence_token,
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
        on_lost=lambda reason: services.stop(
            handle, row_closed_elsewhere(reason) if reason == ROW_CLOSED_ELSEWHERE else lost_lock(reason)
        ),
    )
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
    closed_elsewhere = False
    if cause is not None:
        code, reason, stopped_by = cause.code, cause.reason, cause.stopped_by
    else:
        reason, stopped_by = exit_reason or describe(code), None
    if record_id:
        with services.db_slot():
            try:
                written = rows.close_row(record_id, exit_code=code, reason=reason, stopped_by=stopped_by)
            except DatabaseUnavailable as exc:
                # The row stays open and goes stale; the sweep abandons it. The exit is reported.
                logger.warning("match %s: row %s not closed: %s", match_id, record_id, exc)
                written = True
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
    )
