"""The dispatcher: one tick finds matches needing a listener and sends one start message per match.

Cost follows the eligible matches, not the table: one indexed query (which also flags stale
open rows), one UPDATE abandoning those stale rows (only when there are any), one MGET for
exhausted flags, one script call claiming the pending keys (SET NX), one UPDATE saving every
message id (made in SQL from one uuid4 per tick), then the sends (one pipelined round trip per
``SEND_BATCH`` starts with a batch sender).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from config.errors import KickoffError, LockNotOwned, ServiceUnavailable
from config.set_aside import SetAside, set_aside
from config.settings import KickoffSettings
from lifecycle.cleanup import after_abandon
from lifecycle.dispatch_selection import find_candidates
from lifecycle.errors import StartAttemptsExhausted
from lifecycle.listener_run import stored_settings_problem
from lifecycle.sql import rows
from models.audit import AuditContext
from models.boundary import transaction
from models.coordination import CoordinationStore
from models.db import release_connection
from models.start_messages import new_message_id, save_message_ids, store_new_message_ids

logger = logging.getLogger(__name__)

#: The loop's name where it sets a match aside (config.set_aside).
LOOP = "dispatch"


@dataclass(frozen=True)
class StartMessage:
    """One start_match_listener message to send (queue ``match_listeners``)."""

    match_id: str  # internal Match.id
    message_id: str  # ``start-match-listener.{match_id}.{uuid4}``, the Dramatiq message id (start_messages)
    overrides: dict[str, Any] | None = None  # call overrides (strongest settings layer)
    force: bool = False  # clear barriers first (never takes a live run's lock)
    handoff: bool = False  # a graceful shutdown's successor: waits for the running run's start lock


#: The window of a manual one-shot dispatch (``kickoff listeners dispatch``, ``kickoff enqueue
#: dispatch_upcoming_match_listeners``) when none is given: matches due now, not the scheduler's
#: look-ahead (LISTENER_DISPATCH_WITHIN_MINUTES, which the scheduler's ticks use).
MANUAL_WITHIN_MINUTES = 0

#: Sends one start message to the broker (the actors module provides the Dramatiq one).
Sender = Callable[[StartMessage], None]
#: Start messages per batch of a tick: a batch is one broker round trip (its commands stay bounded,
#: and one that times out on a saturated broker fails only itself and the batches after it). Each
#: round trip after the first waits for a broker the workers' consumers are busy with once the first
#: batch lands: on the fleet bench's box 10,000 starts took 0.76 s in one batch, 1.46 s in two of
#: 5,000 and 1.8-2.0 s in ten of 1,000 (docs/scaling.md).
SEND_BATCH = 10000

#: Sends many start messages at once (one round trip); all or nothing as far as the caller knows.
BatchSender = Callable[[list[StartMessage]], None]


@dataclass(frozen=True)
class DispatchResult:
    """What one dispatch tick did."""

    locked: bool = False  # another dispatch held the lock; nothing was done
    eligible: int = 0  # matches the selection returned
    enqueued: int = 0  # start messages sent
    skipped: int = 0  # pending key already held (queued or running)
    exhausted: int = 0  # skipped: attempt cap reached
    abandoned: int = 0  # stale open rows closed with 14 on the way
    failed: int = 0  # sends that raised (their pending keys were released)
    match_ids: list[str] = field(default_factory=list)  # matches that got a start message
    set_aside: list[dict[str, str]] = field(default_factory=list)  # {"item": match id, "reason"}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """The one line an operator reads (``kickoff listeners dispatch``, the console's Dispatch now)."""
        if self.locked:
            return "dispatch skipped: another dispatch is running"
        return (
            f"dispatch: {self.enqueued} enqueued, {self.skipped} already pending, "
            f"{self.exhausted} exhausted, {self.abandoned} stale rows abandoned ({self.eligible} eligible)"
        )


def audit_dispatch(audit: AuditContext, *, within_minutes: int, is_test: bool | None = None) -> None:
    """Audit one dispatch an operator asks for (``listeners.dispatch``: the CLI, the API, the console),
    before it runs: an entry that cannot be written refuses it (no act without its record). What it
    did is its answer and its log lines; each start it sends is a message of its own."""
    audit.record(
        "listeners.dispatch", "listeners", None, after={"within_minutes": within_minutes, "is_test": is_test}
    )


class _CollectionPause:
    """Counts the ticks that paused the collector: off with the first, on again after the last.

    Ticks of one process may overlap (a worker's lease thread and its listeners' hand-offs
    dispatch too); each one alone restoring what it saw could leave the collector off for good.
    """

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._pauses = 0
        self._reenable = False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._mu:
            if self._pauses == 0:
                self._reenable = gc.isenabled()
                gc.disable()
            self._pauses += 1
        try:
            yield
        finally:
            with self._mu:
                self._pauses -= 1
                if self._pauses == 0 and self._reenable:
                    gc.enable()


#: Pause Python's cyclic garbage collector while a tick runs (reference counting still frees).
#: A tick of 10,000 starts holds some hundred thousand objects until it ends (ids, messages,
#: bodies) and makes no reference cycles; the collector would scan them all in a full collection
#: in the middle of the tick (49 ms of a 367 ms tick, ``bench/dispatch.py --steps``).
cycle_collection_paused = _CollectionPause()


def dispatch_upcoming_match_listeners(
    *,
    within_minutes: int | None = None,
    is_test: bool | None = None,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    send: Sender,
    send_batch: BatchSender | None = None,
    use_lock: bool = True,
) -> DispatchResult:
    """One dispatch tick under the dispatch lock (``use_lock=False`` only to test the pending keys).

    With ``send_batch`` the start messages go out in calls of ``SEND_BATCH``; a batch that raises
    releases every pending key of the batch (a start that did go out is then superseded by the next
    dispatch's newer message id and does nothing).
    """
    within = settings.listener_dispatch_within_minutes if within_minutes is None else within_minutes
    lock = coordination.locks.dispatch_lock()
    if use_lock and not lock.acquire():
        logger.info("dispatch skipped: another dispatch holds the lock")
        return DispatchResult(locked=True)
    try:
        with cycle_collection_paused():
            return _dispatch(
                within=within,
                is_test=is_test,
                settings=settings,
                coordination=coordination,
                send=send,
                send_batch=send_batch,
            )
    finally:
        if use_lock:
            try:
                lock.release()
            except LockNotOwned:
                logger.warning("dispatch lock expired before the tick ended")
        release_connection()


def dispatch_matches(
    match_ids: list[str],
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    send_batch: BatchSender,
) -> DispatchResult:
    """Dispatch only ``match_ids``, without the dispatch lock.

    Used to restart at once the matches whose runs just ended through no fault of theirs (a
    dead worker's runs, a worker's graceful shutdown, a feed lost after streaming); the pending
    keys still keep a match from being sent twice, and the usual selection rules (auto-dispatch,
    league, status, window) apply. Like the periodic dispatch, develop restarts test clones only
    (``AppEnv.automatic_is_test``); elsewhere live and test matches alike.
    """
    if not match_ids:
        return DispatchResult()
    try:
        with cycle_collection_paused():
            return _dispatch(
                within=settings.listener_dispatch_within_minutes,
                is_test=settings.app_env.automatic_is_test,
                settings=settings,
                coordination=coordination,
                send=lambda message: send_batch([message]),
                send_batch=send_batch,
                match_ids=match_ids,
            )
    finally:
        release_connection()


def _dispatch(
    *,
    within: int,
    is_test: bool | None,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    send: Sender,
    send_batch: BatchSender | None,
    match_ids: list[str] | None = None,
) -> DispatchResult:
    found = find_candidates(
        within_minutes=within,
        is_test=is_test,
        active_max_age_seconds=coordination.active_max_age_seconds,
        stale_seconds=coordination.stale_seconds,
        match_ids=match_ids,
        coordination=coordination,
    )
    if not found:
        return DispatchResult()
    ids = [mid for mid, _, _ in found]
    with_stale = [mid for mid, has_stale, _ in found if has_stale]
    # Checked in the batch: only matches with stored settings carry them (the usual {} is None).
    poisoned = [
        set_aside(LOOP, mid, problem)
        for mid, _, stored in found
        if stored is not None and (problem := stored_settings_problem(stored)) is not None
    ]
    abandoned = rows.abandon_stale_rows(stale_seconds=coordination.stale_seconds, match_ids=with_stale)
    after_abandon(abandoned, settings=settings, coordination=coordination)
    exhausted = coordination.barriers.exhausted_among(ids)
    unusable = {p.item for p in poisoned}
    candidates = [m for m in ids if m not in exhausted and m not in unusable]
    claimed_flags = coordination.barriers.claim_pending_many(candidates)
    claimed = [m for m, ok in zip(candidates, claimed_flags, strict=True) if ok]
    try:
        message_ids = store_new_message_ids(claimed)
    except KickoffError:
        coordination.barriers.clear_pending(*claimed)
        raise
    messages = [StartMessage(match_id=m, message_id=i) for m, i in zip(claimed, message_ids, strict=True)]
    sent, failed, refused = _send_all(messages, send=send, send_batch=send_batch)
    poisoned += refused
    if failed:
        coordination.barriers.clear_pending(*failed)
    logger.info(
        "dispatch: %d eligible, %d enqueued, %d already pending, %d exhausted, %d abandoned, %d set aside",
        len(ids),
        len(sent),
        len(candidates) - len(claimed),
        len(exhausted),
        len(abandoned),
        len(poisoned),
    )
    return DispatchResult(
        eligible=len(ids),
        enqueued=len(sent),
        skipped=len(candidates) - len(claimed),
        exhausted=len(exhausted),
        abandoned=len(abandoned),
        failed=len(failed),
        match_ids=sent,
        set_aside=[p.as_dict() for p in poisoned],
    )


def _send_all(
    messages: list[StartMessage], *, send: Sender, send_batch: BatchSender | None
) -> tuple[list[str], list[str], list[SetAside]]:
    """Send ``messages``: ``(sent, failed, set aside)`` match ids (the failed include the set aside).

    With ``send_batch`` they go in batches of ``SEND_BATCH`` (one call each). A batch the broker's
    service refused (down, unreachable, too slow to answer) fails with every batch after it, which
    are not tried (the next tick sends them); the batches before it are sent. A batch that failed
    otherwise (a message it could not take) is sent again one message at a time, so one bad message
    is set aside and the others go (a message the batch did send arrives twice with one message id:
    its second copy does nothing).
    """
    if send_batch is None or not messages:
        return _send_one_by_one(messages, send=send)
    sent: list[str] = []
    failed: list[str] = []
    refused: list[SetAside] = []
    for start in range(0, len(messages), SEND_BATCH):
        batch = messages[start : start + SEND_BATCH]
        try:
            send_batch(batch)
        except ServiceUnavailable:
            logger.exception(
                "sending %d start messages failed (%d sent before them)", len(messages) - start, start
            )
            return sent, failed + [m.match_id for m in messages[start:]], refused
        except Exception as exc:
            logger.warning(
                "sending %d start messages in one batch failed (%s): sending them one by one",
                len(batch),
                _one_line(exc),
            )
            one_sent, one_failed, one_refused = _send_one_by_one(batch, send=send)
            sent += one_sent
            failed += one_failed
            refused += one_refused
        else:
            sent += [m.match_id for m in batch]
    return sent, failed, refused


def _send_one_by_one(
    messages: list[StartMessage], *, send: Sender
) -> tuple[list[str], list[str], list[SetAside]]:
    """``_send_all`` one message at a time: a refused service fails the message, any other error
    sets it aside."""
    sent: list[str] = []
    failed: list[str] = []
    refused: list[SetAside] = []
    for message in messages:
        try:
            send(message)
        except ServiceUnavailable:
            logger.exception("match %s: sending start %s failed", message.match_id, message.message_id)
            failed.append(message.match_id)
        except Exception as exc:
            refused.append(
                set_aside(LOOP, message.match_id, f"start {message.message_id} not sent: {_one_line(exc)}")
            )
            failed.append(message.match_id)
        else:
            sent.append(message.match_id)
    return sent, failed, refused


def _one_line(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def request_start(
    match_id: str,
    *,
    overrides: dict[str, Any] | None,
    force: bool,
    coordination: CoordinationStore,
    send: Sender,
    audit: AuditContext | None = None,
) -> tuple[StartMessage | None, str]:
    """A manual start: claim pending (force: take it over), save the message id, send.

    Returns the message sent (None when a non-forced start found the match already pending, or
    its start lock held by a run) and a one-line description. A non-forced start of a match whose
    attempts are exhausted raises StartAttemptsExhausted (a worker would skip it). A manual start
    also clears a leftover stop flag (an explicit operator intent). With ``audit``, a start that
    was sent is audited (listener.start or listener.force_start) in the message id's transaction.
    """
    busy = f"match {match_id}: a start is already queued or running (use --force to override)"
    if force:
        coordination.barriers.clear_pending(match_id)
    else:
        if coordination.barriers.is_exhausted(match_id):
            raise StartAttemptsExhausted(
                f"match {match_id}: start attempts exhausted"
                f" ({coordination.barriers.attempts(match_id)} failed starts,"
                f" cap {coordination.attempt_cap}); a plain start would be skipped, nothing was"
                " enqueued: start it with --force (API: force true) to clear the attempts"
            )
        if coordination.locks.start_lock_holder(match_id) is not None:
            return None, busy  # a run holds the lock (its pending key may have expired)
    if not coordination.barriers.claim_pending(match_id):
        return None, busy
    coordination.stops.clear_stop_flag(match_id)
    message = StartMessage(
        match_id=match_id, message_id=new_message_id(match_id), overrides=overrides, force=force
    )
    try:
        with transaction():
            save_message_ids([(match_id, message.message_id)])
            if audit is not None:
                audit.record(
                    "listener.force_start" if force else "listener.start",
                    "match",
                    match_id,
                    after={"message_id": message.message_id, "overrides": overrides or None},
                )
        send(message)
    except Exception:
        coordination.barriers.clear_pending(match_id)
        raise
    return message, f"match {match_id}: start enqueued as {message.message_id}" + (
        " (force)" if force else ""
    )
