"""The start of a match listener: the spec's seven steps around run_match_listener, made re-delivery safe.

``start_match_listener`` is what the Dramatiq actor calls. Before anything else a start
message is *consumed* (its revoked key is SET NX): a message revoked by an operator stop, or
re-delivered by Dramatiq after its worker died, does nothing. A message that is not the
match's stored ``message_id`` does nothing either: a newer start was enqueued, or an operator
stop forgot the stored id (every sender stores the id before sending the message).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from config.errors import KickoffError, LockNotOwned
from config.settings import MatchListenerEnvironment
from listener import rows
from listener.cleanup import after_abandon, reap_dead_workers
from listener.exit_codes import ExitCode, is_success
from listener.locks import clear_pending_many, consume_message, start_lock_holder
from listener.runtime import ListenerServices
from listener.start import RunOutcome, run_match_listener, validate_override_keys
from models.barriers import Barriers
from models.db import database, database_errors

logger = logging.getLogger(__name__)

#: Exits recorded by cleanup or stop, not by the listener's own failure: never counted.
NOT_COUNTED = frozenset({int(ExitCode.ABANDONED), int(ExitCode.STOPPED)})


class Skip(StrEnum):
    """Why a start did nothing (an intentional skip is a successful message)."""

    REVOKED = "skipped_revoked"  # message revoked by stop, or already used (re-delivery)
    SUPERSEDED = "skipped_superseded"  # a newer start message was enqueued for the match
    STOPPED = "skipped_stopped"  # an operator stop flag is set (force clears it)
    EXHAUSTED = "skipped_exhausted"  # attempt cap reached (force clears it)
    ACTIVE = "skipped_active"  # an open row with a fresh heartbeat exists
    LOCKED = "skipped_locked"  # another run holds the start lock (force never takes it)
    SHUTDOWN = "skipped_shutdown"  # this worker is shutting down: handed to another worker


@dataclass(frozen=True)
class StartResult:
    """What one start did."""

    match_id: str  # internal Match.id
    message_id: str | None  # the Dramatiq message id of this start
    skipped: Skip | None = None  # set when nothing ran
    exit_code: int | None = None  # the run's exit when it ran
    reason: str | None = None  # the run's exit reason
    record_id: str | None = None  # the run's lifecycle row
    success: bool = True  # False: a failed start (counted)
    attempts: int | None = None  # the attempt counter after a failure
    sr_id: str | None = None  # the provider's match id, when the run loaded its match

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.skipped is not None:
            out["skipped"] = str(self.skipped)
            out[str(self.skipped)] = True
        return out


def is_counted_failure(code: int | None) -> bool:
    """Whether an exit counts as a failed start (attempt counter)."""
    return not is_success(code) and code not in NOT_COUNTED


def stored_message_id(match_id: str) -> str | None:
    """``Match.listener_start_settings['message_id']`` (one small query)."""
    with database_errors():
        row = database.execute_sql(
            "SELECT listener_start_settings ->> 'message_id' FROM matches WHERE id = %s",
            (uuid.UUID(match_id),),
        ).fetchone()
    return row[0] if row else None


def forget_message_id(match_id: str, message_id: str) -> None:
    """Clear the stored message id if it is still ours (the enqueue id is cleared on unwind)."""
    with database_errors():
        database.execute_sql(
            "UPDATE matches SET listener_start_settings = listener_start_settings - 'message_id' "
            "WHERE id = %s AND listener_start_settings ->> 'message_id' = %s",
            (uuid.UUID(match_id), message_id),
        )


def _count_failure(match_id: str, barriers: Barriers) -> int:
    count = barriers.record_failed_attempt(match_id)
    logger.warning("match %s: failed start %d of %d", match_id, count, barriers.attempt_cap)
    return count


def _unwind(match_id: str, token: str, barriers: Barriers) -> None:
    """Release our start lock and the pending key; leave both alone if a successor holds the lock."""
    lock = barriers.start_lock(match_id).adopt(token)
    try:
        with contextlib.suppress(LockNotOwned):
            lock.release()
        if start_lock_holder(barriers, match_id) in (None, token):
            barriers.clear_pending(match_id)
    except KickoffError as exc:
        logger.warning("match %s: releasing start barriers failed (they expire): %s", match_id, exc)


def start_match_listener(
    match_id: str,
    overrides: dict[str, Any] | None = None,
    force: bool = False,
    *,
    message_id: str | None,
    settings: MatchListenerEnvironment,
    barriers: Barriers,
    services: ListenerServices,
    on_consumed: Callable[[], None] | None = None,
) -> StartResult:
    """Start (and run, for the whole game) the listener of one match; see the module docstring.

    ``force`` clears pending, attempts, exhausted and the stop flag and skips the open-row
    guard, but never takes a start lock held by another run: a live listener is never
    stopped or doubled by a forced start (stop it first). Raises ListenerStartSettingsError /
    MatchNotFound (failed starts, counted) and ListenerRunFailed-worthy outcomes are returned
    with ``success=False``. ``on_consumed`` is called once the message is consumed (from then on
    a re-delivery does nothing): the RabbitMQ broker acks the delivery there.
    """
    mid = str(uuid.UUID(str(match_id)))

    def skip(why: Skip, *, clear_pending: bool) -> StartResult:
        if clear_pending:
            barriers.clear_pending(mid)
        logger.info("match %s: start %s: %s", mid, message_id, why)
        return StartResult(match_id=mid, message_id=message_id, skipped=why)

    def prepare() -> StartResult | str:
        """The guards before the run; a StartResult (skip) or the start-lock token taken."""
        if message_id is not None:
            consumed = consume_message(barriers, message_id)
            if consumed and on_consumed is not None:
                on_consumed()
            current = stored_message_id(mid)
            if not consumed:
                if current == message_id:
                    # Re-delivered after its worker died (a stop would have removed the stored id).
                    recover_pending_of_dead_start(mid, barriers=barriers)
                return skip(Skip.REVOKED, clear_pending=False)
            if current != message_id:
                # Every sender stores its message id before sending, so a message that is not
                # the stored one was replaced by a newer start, or its match was stopped (the
                # stop forgets the stored id): it must never run, even after the stop flag expired.
                return skip(Skip.SUPERSEDED, clear_pending=False)

        if services.shutting_down:
            # Taken from the queue while this worker stops: send a new start for another worker.
            barriers.clear_pending(mid)
            services.hand_off(mid)
            return skip(Skip.SHUTDOWN, clear_pending=False)
        if force:
            barriers.clear_start_barriers(mid, include_start_lock=False)
            barriers.clear_stop_flag(mid)
        try:
            validate_override_keys(overrides)
        except KickoffError:
            barriers.clear_pending(mid)
            _count_failure(mid, barriers)
            raise
        if not force:
            if barriers.stop_flags_among([mid]):
                return skip(Skip.STOPPED, clear_pending=False)
            if barriers.is_exhausted(mid):
                return skip(Skip.EXHAUSTED, clear_pending=True)

        stale_kw = {
            "stale_seconds": barriers.stale_seconds,
            "active_max_age_seconds": barriers.active_max_age_seconds,
        }
        reap_dead_workers([mid], settings=settings, barriers=barriers)
        abandoned = rows.abandon_stale_rows(stale_seconds=barriers.stale_seconds, match_ids=[mid])
        after_abandon(abandoned, settings=settings, barriers=barriers)
        if not force and rows.has_active_row(mid, **stale_kw):
            return skip(Skip.ACTIVE, clear_pending=True)

        token = str(uuid.uuid4())
        locked_at.append(time.monotonic())  # before SET NX: the lock's TTL runs from no earlier
        if not barriers.start_lock(mid).acquire(token):
            return skip(Skip.LOCKED, clear_pending=not force)
        if not force and rows.has_active_row(mid, **stale_kw):
            _unwind(mid, token, barriers)
            return skip(Skip.ACTIVE, clear_pending=False)
        if force:
            superseded = rows.supersede_open_rows(mid)
            if superseded:
                logger.warning(
                    "match %s: forced start closed %d open rows of dead runs", mid, len(superseded)
                )
        return token

    locked_at: list[float] = []
    with services.db_slot():
        prepared = prepare()
    if isinstance(prepared, StartResult):
        return prepared
    token = prepared

    outcome: RunOutcome | None = None
    try:
        outcome = run_match_listener(
            mid,
            overrides,
            token=token,
            message_id=message_id,
            services=services,
            lock_acquired_at=locked_at[-1],
        )
    except KickoffError:
        _count_failure(mid, barriers)
        raise
    finally:
        _unwind(mid, token, barriers)
        if not database.is_closed():
            database.close()
    if message_id is not None:
        with services.db_slot(), contextlib.suppress(KickoffError):
            forget_message_id(mid, message_id)
    if outcome.stop_cause is not None and outcome.stop_cause.hand_off:
        services.hand_off(mid)  # a worker shutdown: the match streams again on another worker now

    failed = is_counted_failure(outcome.exit_code)
    attempts = _count_failure(mid, barriers) if failed else None
    return StartResult(
        match_id=mid,
        message_id=message_id,
        exit_code=outcome.exit_code,
        reason=outcome.reason,
        record_id=outcome.record_id,
        success=not failed,
        attempts=attempts,
        sr_id=outcome.sr_id,
    )


def recover_pending_of_dead_start(match_id: str, *, barriers: Barriers) -> bool:
    """Clear a pending key nobody can clear any more (start lock free, no active row); True if cleared.

    Used for a re-delivered start whose first delivery died before writing its row.
    """
    if start_lock_holder(barriers, match_id) is not None:
        return False
    if rows.has_active_row(
        match_id, stale_seconds=barriers.stale_seconds, active_max_age_seconds=barriers.active_max_age_seconds
    ):
        return False
    clear_pending_many(barriers, [match_id])
    return True
