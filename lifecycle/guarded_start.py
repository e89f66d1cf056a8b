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

from config.errors import DatabaseUnavailable, KickoffError, LockNotOwned, ServiceUnavailable
from config.settings import MatchListenerEnvironment
from lifecycle.cleanup import after_abandon, reap_dead_workers
from lifecycle.errors import RunNotBegun, StartGivenBack
from lifecycle.listener_run import RunOutcome, run_match_listener, validate_override_keys
from lifecycle.runtime import ListenerServices
from lifecycle.sql import rows
from listener.exit_codes import ExitCode, is_success
from models.coordination import CoordinationStore, GivenBackRow
from models.db import release_connection
from models.start_messages import forget_message_id, stored_message_id

logger = logging.getLogger(__name__)

#: Exits the lifecycle records (cleanup, stop, shutdown), not the listener's own failure: never
#: counted when the lifecycle wrote them. A run that reports one of them by itself (a body's
#: return or SystemExit, listener_force_exit_code) failed like any other non-success exit.
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


def is_counted_failure(code: int | None, *, by_lifecycle: bool = False) -> bool:
    """Whether an exit counts as a failed start (attempt counter).

    ``by_lifecycle``: the exit was written by a stop, cleanup or shutdown, not by the run; only
    then are 14 and 15 uncounted.
    """
    if is_success(code):
        return False
    return not (by_lifecycle and code in NOT_COUNTED)


def _count_failure(match_id: str, coordination: CoordinationStore) -> int | None:
    """Count a failed start; None when Redis did not answer (the failure goes uncounted: what follows,
    a give-back's restart above all, must still happen; chaos seed 62, a run that lost its feed as the
    private Redis restarted waited 40 s for the dispatch tick)."""
    try:
        count = coordination.barriers.record_failed_attempt(match_id)
    except KickoffError as exc:
        logger.warning("match %s: failed start not counted: %s", match_id, exc)
        return None
    logger.warning("match %s: failed start %d of %d", match_id, count, coordination.attempt_cap)
    return count


def _unwind(match_id: str, held: HeldLock, coordination: CoordinationStore) -> None:
    """Release our start lock and the pending key; leave both alone if a successor holds the lock."""
    lock = coordination.locks.start_lock(match_id).adopt(held.token)
    try:
        with contextlib.suppress(LockNotOwned):
            lock.release()
        if coordination.locks.start_lock_holder(match_id) in (None, held.token):
            coordination.barriers.clear_pending(match_id)
        if held.lease_id is not None:  # last: a note left behind names a lock its token no longer holds
            coordination.locks.forget_start_taken(held.lease_id, match_id)
    except KickoffError as exc:
        logger.warning("match %s: releasing start barriers failed (they expire): %s", match_id, exc)


@dataclass(frozen=True)
class HeldLock:
    """The start lock a start took."""

    token: str  # the holder's token, also the run's lifecycle row id
    acquired_at: float  # time.monotonic() just before SET NX: the lock's TTL runs from no earlier
    lease_id: str | None = None  # the worker lease it was noted under (``Locks.note_start_taken``)


def start_match_listener(
    match_id: str,
    overrides: dict[str, Any] | None = None,
    force: bool = False,
    *,
    message_id: str | None,
    settings: MatchListenerEnvironment,
    coordination: CoordinationStore,
    services: ListenerServices,
    on_consumed: Callable[[], None] | None = None,
    local: dict[str, Any] | None = None,
    handoff: bool = False,
) -> StartResult:
    """Start (and run, for the whole game) the listener of one match; see the module docstring.

    ``force`` clears pending, attempts, exhausted and the stop flag (then takes the pending
    key again: it is held while the forced run runs) and skips the open-row guard, but never
    takes a start lock held by another run: a live listener is never stopped or doubled by a
    forced start (stop it first). Raises ListenerStartSettingsError /
    MatchNotFound (failed starts, counted) and ListenerRunFailed-worthy outcomes are returned
    with ``success=False``. ``on_consumed`` is called once the message is consumed (from then on
    a re-delivery does nothing): the RabbitMQ broker acks the delivery there. ``local`` is the
    calling process's own settings of the run (``kickoff listen``), never a message's.
    ``handoff``: the successor start a graceful shutdown queued while the match still streams on
    the stopping worker; it says it waits, then waits (outside any database slot) until the start
    lock is free, for at most twice LISTENER_HANDOFF_SECONDS, and goes on like any start.

    Steps: consume the message, check the guards, abandon dead runs, take the start lock (all
    under one database slot; a hand-off waits between the guards and the lock), then run and
    record the outcome.
    """
    mid = str(uuid.UUID(str(match_id)))
    consumed: list[bool] = []  # Redis's answer to this start's consume, once it answered

    def take_lock() -> HeldLock | Skip:
        lease_id = services.lease.held_id()  # the lock is noted under it (a kill before the row)
        return _take_start_lock(mid, force, settings=settings, coordination=coordination, lease_id=lease_id)

    try:
        with services.db_slot():
            taken = _consume_message(
                mid,
                message_id,
                coordination=coordination,
                on_consumed=on_consumed,
                answered=consumed,
                on_orphaned=lambda: services.hand_off(mid),
            ) or _check_guards(mid, overrides, force, coordination=coordination, services=services)
            if taken is None and not handoff:
                taken = take_lock()
        if taken is None:  # a hand-off's successor
            _await_predecessor(mid, settings=settings, coordination=coordination)
            with services.db_slot():
                taken = take_lock()
    except ServiceUnavailable as exc:
        _give_back(mid, message_id, exc, consumed=consumed, coordination=coordination, services=services)
        raise
    if isinstance(taken, Skip):
        logger.info("match %s: start %s: %s", mid, message_id, taken)
        return StartResult(match_id=mid, message_id=message_id, skipped=taken)
    try:
        outcome = _run(
            mid,
            overrides,
            taken,
            message_id=message_id,
            coordination=coordination,
            services=services,
            local=local,
        )
    except RunNotBegun as exc:
        # Its lock and pending key are freed (_run); nothing ran: given back as before the lock.
        logger.warning("%s", exc)
        _give_back(
            mid, message_id, exc.cause, consumed=consumed, coordination=coordination, services=services
        )
        raise
    failed = is_counted_failure(outcome.exit_code, by_lifecycle=outcome.recorded_by_lifecycle)
    attempts = _count_failure(mid, coordination) if failed else None
    if outcome.feed_lost:
        # Its feed stayed unreachable past LISTENER_FEED_LOST_SECONDS (a host cut from the feed): this
        # worker takes no start until it reaches the feed again, and the match starts at once on one
        # that does (docs/reliability.md finding 5). Counted, as every exit 12.
        logger.warning("match %s: the feed was lost: starting it again at once elsewhere", mid)
        services.feed.unreachable()
        _send_again_once_closed(mid, outcome, settings=settings, services=services)
    elif _lost_the_feed_after_streaming(outcome, lock=taken, settings=settings):
        logger.warning("match %s: the feed's reconnects ran out: starting it again at once", mid)
        services.hand_off(mid)  # after the count: an exhausted match is not sent again
    elif outcome.database_lost and not outcome.went_live:
        # Refused by PostgreSQL after it took its lock (a cut, the server at its connection limit):
        # this worker takes no start until its probe answers; another runs the match now, not at
        # the next dispatch tick (docs/reliability.md finding 8). Counted: a lasting refusal
        # exhausts the match's attempts instead of restarting it for ever.
        logger.warning("match %s: PostgreSQL did not answer the run: starting it again at once", mid)
        services.database.unreachable()
        _send_again_once_closed(mid, outcome, settings=settings, services=services)
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


#: How often a run that gave its match back tries again to close its row and send the match, while
#: PostgreSQL does not answer.
GIVE_BACK_RETRY_SECONDS = 0.5


def _send_again_once_closed(
    mid: str, outcome: RunOutcome, *, settings: MatchListenerEnvironment, services: ListenerServices
) -> None:
    """Close the run's row if PostgreSQL did not answer its close, then send the match again.

    A run that gave its match back (its feed lost, or PostgreSQL refusing it: a host cut from the
    feed and from PostgreSQL at once, the server at its connection limit) may have left its row
    open under a lease that is still renewed: no reaper takes it for a dead worker's, and a new
    start skips a match whose open row has a fresh heartbeat (``skipped_active``). So, every
    GIVE_BACK_RETRY_SECONDS for up to half the stale threshold (then the sweep abandons the row, as
    before), this start marks the row given back in Redis (``Locks.give_back_row``: the reaper of any
    worker that reaches PostgreSQL closes it and sends the match, ``cleanup.close_given_back_rows``;
    marked again each try, as a Redis restart loses it) and tries to close it itself; it sends the
    match once it closed the row, and stops once a reaper did (bench/chaos.py: seed 62, 48 s and
    then 40.9-52.6 s without a stream; seed 13, 66 s, a run refused by PostgreSQL at its
    connection limit).
    """
    deadline = time.monotonic() + settings.listener_heartbeat_stale_seconds / 2
    record_id = outcome.record_id if outcome.row_left_open else None
    run = None if record_id is None else GivenBackRow(record_id, mid, outcome.exit_code, outcome.reason)
    closed = run is None
    mark_failed = False
    while True:
        if run is not None and not closed:
            try:
                if services.coordination.locks.give_back_row(run, ttl_seconds=deadline - time.monotonic()):
                    logger.info(
                        "match %s: row %s closed by another worker, which sent the match", mid, record_id
                    )
                    return
            except KickoffError as exc:  # Redis away too: this start closes the row itself once it can
                if not mark_failed:  # once, not every try
                    logger.warning("match %s: marking row %s given back failed: %s", mid, record_id, exc)
                mark_failed = True
            try:
                with services.db_slot():
                    rows.close_row(run.record_id, exit_code=run.exit_code, reason=run.reason)
                closed = True
                logger.info("match %s: row %s closed once PostgreSQL answered", mid, run.record_id)
                with contextlib.suppress(KickoffError):  # if left, a reaper finds the row closed: no send
                    services.coordination.locks.forget_given_back_row(run.record_id)
            except DatabaseUnavailable:
                pass
        if closed:
            try:
                if services.redispatch is not None:
                    services.redispatch([mid])
                return
            except KickoffError as exc:
                logger.warning("match %s: restarting it elsewhere failed, trying again: %s", mid, exc)
        if time.monotonic() >= deadline or services.shutting_down:
            logger.warning("match %s: given back, but not sent again (the next dispatch or sweep will)", mid)
            return
        time.sleep(GIVE_BACK_RETRY_SECONDS)


def _lost_the_feed_after_streaming(
    outcome: RunOutcome, *, lock: HeldLock, settings: MatchListenerEnvironment
) -> bool:
    """Whether a run ran out of reconnects (12) after it had run for LISTENER_RECONNECT_RESET_SECONDS.

    Such a match is dispatched again at once rather than at the next dispatch tick (up to a
    minute): the feed may be back already, and the dispatch's usual rules (auto-dispatch, a live
    status, the stop flag, the attempt cap, the pending key) still decide. A run that failed
    sooner (the feed still down when it started) waits for the tick as before, so a lasting
    fault restarts a match no more often than the tick does.
    """
    if outcome.exit_code != int(ExitCode.CONNECTION_ERROR):
        return False
    return time.monotonic() - lock.acquired_at >= settings.listener_reconnect_reset_seconds


def _consume_message(
    mid: str,
    message_id: str | None,
    *,
    coordination: CoordinationStore,
    on_consumed: Callable[[], None] | None = None,
    answered: list[bool] | None = None,
    on_orphaned: Callable[[], None] | None = None,
) -> Skip | None:
    """Use the start message once (then ``on_consumed``); skip a revoked, re-delivered or superseded one.

    ``answered`` gets Redis's answer to the consume (True: consumed here). ``on_orphaned`` is called
    for a re-delivery of the match's current start whose first delivery's worker died, when no run
    holds the match (no start lock, no live row): the match is sent again at once, by the dispatch's
    rules, rather than at the next dispatch tick (up to a minute; a worker killed right after it
    fetched starts, whose starts a reaper requeued: actors.fetched_starts)."""
    if message_id is None:
        return None
    consumed = coordination.barriers.consume_message(message_id)
    if answered is not None:
        answered.append(consumed)
    if consumed and on_consumed is not None:
        on_consumed()
    current = stored_message_id(mid)
    if not consumed:
        if current == message_id:
            # Re-delivered after its worker died (a stop would have removed the stored id).
            orphaned = recover_pending_of_dead_start(mid, coordination=coordination)
            if orphaned and on_orphaned is not None:
                logger.warning(
                    "match %s: start %s was taken by a worker that died, and no run holds the "
                    "match: sending it again",
                    mid,
                    message_id,
                )
                on_orphaned()
        return Skip.REVOKED
    if current != message_id:
        # Every sender stores its message id before sending, so a message that is not the stored
        # one was replaced by a newer start, or its match was stopped (the stop forgets the
        # stored id): it must never run, even after the stop flag expired.
        return Skip.SUPERSEDED
    return None


def _check_guards(
    mid: str,
    overrides: dict[str, Any] | None,
    force: bool,
    *,
    coordination: CoordinationStore,
    services: ListenerServices,
) -> Skip | None:
    """Worker shutdown (hand-off), the overrides, the stop flag and the attempt cap."""
    if services.shutting_down:
        # Taken from the queue while this worker stops: send a new start for another worker.
        coordination.barriers.clear_pending(mid)
        services.hand_off(mid)
        return Skip.SHUTDOWN
    if force:
        # Cleared, then re-acquired: the forced run holds the pending key like any start.
        coordination.barriers.retake_for_forced_start(mid)
        coordination.stops.clear_stop_flag(mid)
    try:
        validate_override_keys(overrides)
    except KickoffError:
        coordination.barriers.clear_pending(mid)
        _count_failure(mid, coordination)
        raise
    if force:
        return None
    if coordination.stops.stop_flags_among([mid]):
        # A stop raced the dispatch that sent this start: free the key it claimed, or a plain
        # Start would answer "already queued or running" until a sweep reclaims it.
        coordination.barriers.clear_pending(mid)
        return Skip.STOPPED
    if coordination.barriers.is_exhausted(mid):
        coordination.barriers.clear_pending(mid)
        return Skip.EXHAUSTED
    return None


def _await_predecessor(
    mid: str, *, settings: MatchListenerEnvironment, coordination: CoordinationStore
) -> None:
    """Say this successor waits, then wait until the start lock is free (bounded; see the caller)."""
    bound = 2 * settings.listener_handoff_seconds
    coordination.stops.announce_handover(mid, ttl_seconds=bound + 1)
    deadline = time.monotonic() + bound
    while coordination.locks.start_lock_holder(mid) is not None:
        if time.monotonic() >= deadline:
            logger.warning("match %s: hand-off: the start lock is still held after %g s", mid, bound)
            break
        time.sleep(settings.listener_handoff_poll_seconds)
    coordination.stops.clear_handovers([mid])


def _take_start_lock(
    mid: str,
    force: bool,
    *,
    settings: MatchListenerEnvironment,
    coordination: CoordinationStore,
    lease_id: str | None = None,
) -> HeldLock | Skip:
    """Abandon dead runs of the match, then take its start lock unless a live run holds it.

    The lock taken is noted under the worker's ``lease_id``: should the worker die before its run
    writes its row (a kill in a burst of starts), a reaper that finds the lease dead releases the
    lock and sends the match again (``cleanup.release_starts_of_dead``); nothing else would before
    the lock's TTL (LISTENER_HEARTBEAT_STALE_SECONDS)."""
    stale_kw = {
        "stale_seconds": coordination.stale_seconds,
        "active_max_age_seconds": coordination.active_max_age_seconds,
    }
    reap_dead_workers([mid], settings=settings, coordination=coordination)
    abandoned = rows.abandon_stale_rows(stale_seconds=coordination.stale_seconds, match_ids=[mid])
    after_abandon(abandoned, settings=settings, coordination=coordination)
    if not force and rows.has_active_row(mid, **stale_kw):
        coordination.barriers.clear_pending(mid)
        return Skip.ACTIVE

    lock = HeldLock(token=str(uuid.uuid4()), acquired_at=time.monotonic(), lease_id=lease_id)
    if not coordination.locks.start_lock(mid).acquire(lock.token):
        if not force:
            coordination.barriers.clear_pending(mid)
        return Skip.LOCKED
    try:
        if lease_id is not None:
            coordination.locks.note_start_taken(
                lease_id, mid, lock.token, ttl_seconds=coordination.stale_seconds
            )
        if not force and rows.has_active_row(mid, **stale_kw):
            _unwind(mid, lock, coordination)
            return Skip.ACTIVE
        if force:
            superseded = rows.supersede_open_rows(mid)
            if superseded:
                logger.warning(
                    "match %s: forced start closed %d open rows of dead runs", mid, len(superseded)
                )
    except KickoffError:
        _unwind(mid, lock, coordination)
        raise
    return lock


def _run(
    mid: str,
    overrides: dict[str, Any] | None,
    lock: HeldLock,
    *,
    message_id: str | None,
    coordination: CoordinationStore,
    services: ListenerServices,
    local: dict[str, Any] | None = None,
) -> RunOutcome:
    """Run the listener under the lock; release it, forget the message id, hand off on shutdown."""
    try:
        outcome = run_match_listener(
            mid,
            overrides,
            token=lock.token,
            message_id=message_id,
            services=services,
            lock_acquired_at=lock.acquired_at,
            local=local,
        )
    except RunNotBegun:
        raise  # nothing ran: the caller gives the message back, not a failed start
    except KickoffError:
        _count_failure(mid, coordination)
        raise
    finally:
        _unwind(mid, lock, coordination)
        release_connection()
    if message_id is not None:
        with services.db_slot(), contextlib.suppress(KickoffError):
            forget_message_id(mid, message_id)
    if outcome.stop_cause is not None and outcome.stop_cause.hand_off:
        services.hand_off(mid)  # a worker shutdown: the match streams again on another worker now
    return outcome


def _give_back(
    mid: str,
    message_id: str | None,
    exc: ServiceUnavailable,
    *,
    consumed: list[bool],
    coordination: CoordinationStore,
    services: ListenerServices,
) -> None:
    """PostgreSQL or Redis did not answer before the start took its lock, or before its run under the
    lock began (RunNotBegun: its match read or its row written): raise StartGivenBack (the actor
    retries the message within seconds, on whichever worker takes it) when the message can run
    again; else free the pending key (PostgreSQL unreachable) and let ``exc`` go on.

    The message can run again when Redis did not answer this start's consume (``consumed`` empty)
    or this start consumed it and its mark could be removed (``unconsume_message``; a message
    revoked or used before is never given back); its pending key stays
    (the message still stands for it). Without this, a start taken by a worker cut from Redis
    died before its consume and left its pending key with a stored message id nobody would ever
    run: no dispatch, reaper or sweep restarted the match (docs/reliability.md finding 7); one cut
    from PostgreSQL left its match for a reaper's restart or the dispatch tick (finding 6).
    """
    if isinstance(exc, DatabaseUnavailable):
        services.database.unreachable()  # no more starts here until PostgreSQL answers again
    if message_id is not None:
        try:
            again = not consumed or (consumed[0] and coordination.barriers.unconsume_message(message_id))
        except KickoffError as undo:
            logger.warning("match %s: giving start %s back failed: %s", mid, message_id, undo)
            again = False
        if again:
            logger.warning("match %s: start %s given back (%s): it runs again", mid, message_id, exc)
            raise StartGivenBack(f"match {mid}: start given back: {exc}") from exc
    if isinstance(exc, DatabaseUnavailable):
        _give_up_pending(mid, coordination)


def _give_up_pending(match_id: str, coordination: CoordinationStore) -> None:
    """A start that could not reach PostgreSQL before its run began: free its pending key.

    Otherwise the key (held for this start) would keep every dispatch from sending the match
    again until the sweep reclaims it, while a worker that can reach PostgreSQL could run it now
    (e.g. the start went to a host cut from PostgreSQL alone). Left alone while a start lock is
    held; not a counted failure (the match is fine, the database was away).
    """
    try:
        if coordination.barriers.clear_pending_unless_started(match_id):
            logger.warning("match %s: start gave up (PostgreSQL unreachable): pending key freed", match_id)
    except KickoffError as exc:
        logger.warning("match %s: freeing the pending key failed (the sweep reclaims it): %s", match_id, exc)


def recover_pending_of_dead_start(match_id: str, *, coordination: CoordinationStore) -> bool:
    """Clear a pending key nobody can clear any more (start lock free, no active row); True if cleared.

    Used for a re-delivered start whose first delivery died before writing its row.
    """
    if coordination.locks.start_lock_holder(match_id) is not None:
        return False
    if rows.has_active_row(
        match_id,
        stale_seconds=coordination.stale_seconds,
        active_max_age_seconds=coordination.active_max_age_seconds,
    ):
        return False
    coordination.barriers.clear_pending(match_id)
    return True
