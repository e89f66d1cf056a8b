"""Operator and cleanup actions on listeners: stop (exit 15), sweep stale rows (Abandoned, 14).

Start locks are deleted here only on behalf of a holder that is provably not beating: the
lock key must still hold the closed row's token and that row's heartbeat must be older than
the stale threshold (by then the holder has stopped itself, see ``_holder_silent``). A healthy
listener whose row is closed under it sees
that at its next beat, stops itself and releases its own lock, so a successor cannot overlap it.

Each closed row and each match is cleaned up on its own (config.set_aside): one whose Redis
keys cannot be handled (e.g. a key holding another kind of value) is set aside with its reason,
counted and logged, and the others are still cleaned; the sweep reports what it set aside.

A match whose row the sweep abandoned while its game is over (a terminal Match.status) and that
has no open row left gets one backfill of its archive (``send_backfill``: the
backfill_match_archive actor): no listener will record the rest of the game. A send that fails
is set aside; the sweep goes on.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import Any

from config import spans, tracing
from config.errors import KickoffError, LockNotOwned, ServiceUnavailable
from config.set_aside import SetAside, setting_aside
from config.settings import KickoffSettings
from lifecycle import takeover
from lifecycle.errors import BackfillNotSent
from lifecycle.listener_run import load_match_with_league
from lifecycle.sql import rows
from models.audit import AuditContext
from models.boundary import transaction
from models.coordination import CoordinationStore, LeaseState
from models.listener_record import ended_matches_without_open_run
from models.match import update_match_fields
from models.start_messages import stop_dispatch, stored_message_ids

logger = logging.getLogger(__name__)

#: The loop's name where it sets a row or match aside (config.set_aside).
LOOP = "sweep"


def _in_order(closed: Iterable[rows.ClosedRow]) -> list[rows.ClosedRow]:
    """Closed rows oldest heartbeat first (the order their clean-up runs and logs in)."""
    return sorted(closed, key=lambda row: (row.heartbeat_at, row.record_id))


def reap_dead_workers(
    match_ids: Iterable[str] | None = None,
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    aside: list[SetAside] | None = None,
    signal_lost: list[str] | None = None,
    leases_seen: list[str] | None = None,
    grace_seconds: float | None = None,
    dead_leases: list[str] | None = None,
) -> list[rows.ClosedRow]:
    """Abandon (14) the open rows of dead workers; free their locks and barriers.

    ``signal_lost``: gets the leases whose signal is gone but whose grace has not passed yet (the
    caller judges again once it has). ``leases_seen``: set to the worker leases judged (what
    ``watch_worker_leases`` watches until the next full step). ``grace_seconds``: the liveness
    grace to judge with (default LISTENER_LIVENESS_GRACE_SECONDS; a reaper whose own signal is not
    steady passes a longer one, lifecycle.liveness UNSTEADY_GRACE_SECONDS).

    A worker is dead when its liveness signal stayed gone for LISTENER_LIVENESS_GRACE_SECONDS while
    its lease was fresh (its process ended: the kernel closed its connection; lifecycle.liveness;
    reason ``WORKER_DIED``), or when its lease key is gone (reason ``worker lease expired``). A lease
    key is gone only once its process has fenced itself (lifecycle.lease), and a process whose
    signal is gone either ended or fences itself within the grace plus one deadline poll
    (``LivenessSignal.must_fence``), so the lock of such a row is deleted at once (token-compared)
    and its match can start again; the successor's fencing token refuses any write the predecessor
    still tries. No lease is judged lapsed
    until Redis's data epoch is older than one lease plus one renewal: after Redis lost its data, every
    live worker re-creates its lease within that time. A dead signal needs no such wait: it is judged
    only for a lease key that exists, and after a Redis restart the reapers judge with a longer grace
    (``grace_seconds``) while their own signal is not steady, inside which every live worker
    re-subscribes. A row whose clean-up fails is set aside (appended to ``aside``) and
    the others go on. ``dead_leases``: gets the leases judged dead or lapsed (their rows abandoned).
    Without ``match_ids`` (a reaper's full step) the leases judged are those of the open rows and
    every listener worker's (``Locks.leases_to_judge``: those with no row are found dead too, and
    the caller releases their starts and requeues what they fetched).
    """
    match_ids = None if match_ids is None else list(match_ids)
    leases = rows.open_worker_leases(match_ids)
    if match_ids is None:
        # And every listener worker's lease (Locks.leases_to_judge): a worker killed with no open row
        # of its own is found by no row, and the starts it had fetched or begun would wait for the
        # next dispatch tick or their locks' TTL (docs/reliability.md finding 15).
        leases = sorted(set(leases) | set(coordination.locks.leases_to_judge()))
    if leases_seen is not None:
        leases_seen[:] = sorted(set(leases))
    if not leases:
        return []
    lease_ttl = settings.listener_worker_lease_seconds
    grace = settings.listener_liveness_grace_seconds if grace_seconds is None else grace_seconds
    judged = coordination.locks.judge_worker_leases(leases, grace_seconds=grace, ttl_seconds=lease_ttl)
    dead = judged.among(LeaseState.DEAD)
    if signal_lost is not None:
        signal_lost.extend(sorted(judged.among(LeaseState.SIGNAL_LOST)))
    young = judged.epoch_age is None or judged.epoch_age < lease_ttl * 1.25 + 1
    gone = set() if young else judged.among(LeaseState.LAPSED)
    if dead_leases is not None:
        dead_leases.extend(sorted(dead | gone))
    abandon = rows.abandon_rows_of_dead_workers
    died = abandon(dead, match_ids=match_ids, reason=takeover.WORKER_DIED) if dead else []
    lapsed = abandon(gone, match_ids=match_ids) if gone else []
    for row in _in_order(died + lapsed):
        logger.warning(
            "match %s: row %s abandoned (exit 14): its worker %s",
            row.match_id,
            row.record_id,
            "died (its liveness signal ended)" if row in died else "lease expired",
        )
        with _releasing_lock_of(row, aside):
            coordination.locks.delete_start_lock_if_token(row.match_id, row.record_id)
    closed = _in_order(died + lapsed)
    _clear_barriers_of_dead(closed, coordination=coordination, aside=aside)
    return closed


@dataclass(frozen=True)
class LeaseWatch:
    """What one watch of the leases found (``watch_worker_leases``)."""

    dead: frozenset[str]  # leases whose liveness signal stayed gone past the grace: their processes ended
    due: bool  # a lease is dead or lapsed: the full step (or ``reap_workers_seen_dead``) should run now
    lost: bool  # a liveness signal is gone within its grace: judge again until the grace ends


def watch_worker_leases(
    leases: Iterable[str],
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    grace_seconds: float | None = None,
) -> LeaseWatch:
    """Between two full reaper steps: judge the leases the last one read, in Redis alone (one script,
    no PostgreSQL): see ``LeaseWatch``.

    So a killed worker is seen within LISTENER_LIVENESS_WATCH_SECONDS of its connection closing, for
    one Redis script per watch per listener worker, O(leases watched), instead of the full step's
    PostgreSQL reads every poll. Lapsed leases count only once Redis's data epoch is old enough, as
    in ``reap_dead_workers``.
    """
    lease_ttl = settings.listener_worker_lease_seconds
    grace = settings.listener_liveness_grace_seconds if grace_seconds is None else grace_seconds
    judged = coordination.locks.judge_worker_leases(leases, grace_seconds=grace, ttl_seconds=lease_ttl)
    young = judged.epoch_age is None or judged.epoch_age < lease_ttl * 1.25 + 1
    dead = frozenset(judged.among(LeaseState.DEAD))
    due = bool(dead) or (not young and bool(judged.among(LeaseState.LAPSED)))
    return LeaseWatch(dead=dead, due=due, lost=bool(judged.among(LeaseState.SIGNAL_LOST)))


def reap_workers_seen_dead(
    leases: Iterable[str], *, coordination: CoordinationStore, aside: list[SetAside] | None = None
) -> list[rows.ClosedRow]:
    """The watch's fast path: abandon (14, ``WORKER_DIED``) the open rows of the workers whose liveness
    signal a watch has just judged dead, free their locks and barriers, as ``reap_dead_workers`` does
    for them, but with no read before the one write (the leases, their judgement and the other rows
    wait for the next full step): the kill's matches are dispatched a few round trips sooner.
    """
    closed = _in_order(rows.abandon_rows_of_dead_workers(leases, reason=takeover.WORKER_DIED))
    for row in closed:
        logger.warning(
            "match %s: row %s abandoned (exit 14): its worker died (its liveness signal ended)",
            row.match_id,
            row.record_id,
        )
        with _releasing_lock_of(row, aside):
            coordination.locks.delete_start_lock_if_token(row.match_id, row.record_id)
    _clear_barriers_of_dead(closed, coordination=coordination, aside=aside)
    return closed


def release_starts_of_dead(leases: Iterable[str], *, coordination: CoordinationStore) -> list[str]:
    """Release the start locks (and pending keys) that starts of these dead workers took before their
    runs wrote a row, and return those matches, to be sent again at once.

    A start takes its match's lock, then its run writes the row (lifecycle.guarded_start); a worker
    killed in between leaves a lock no row names, which no reaper abandons and which only its TTL
    (LISTENER_HEARTBEAT_STALE_SECONDS) would end: chaos seed 62 killed a worker that had just begun
    ten starts (docs/reliability.md finding 15). Each start notes its lock under its worker's lease
    (``Locks.note_start_taken``); a lock a successor holds now is left alone. Redis not answering is
    logged and nothing is released (the locks expire), so the reaper's other steps go on.
    """
    try:
        released = coordination.locks.release_starts_taken(leases)
    except KickoffError as exc:
        logger.warning("releasing the start locks dead workers took failed (they expire): %s", exc)
        return []
    for match_id in released:
        logger.warning("match %s: released the start lock a dead worker took before its run began", match_id)
    return released


def close_given_back_rows(
    *, coordination: CoordinationStore, aside: list[SetAside] | None = None
) -> list[str]:
    """Close the rows that runs gave back open, and return their matches, to be dispatched again at once.

    A run that gave its match back (its feed lost past LISTENER_FEED_LOST_SECONDS, or PostgreSQL
    refusing it) on a host also cut from PostgreSQL cannot close its row, and a start skips a
    match whose open row has a fresh heartbeat: the match waited for that cut to end (seed 62: a
    feed cut overlapping the host's PostgreSQL cut, 40.9-52.6 s without a stream; docs/reliability.md
    finding 5). Such a run marks its row in Redis (``Locks.give_back_row``); any reaper that reaches
    PostgreSQL closes it with the run's own exit code and reason (the run's stream is gone, its
    writes are over, and its fencing token is still the match's: nothing was started since), marks
    it closed (the run stops trying), and its match is sent again. One Redis read per step, one
    more when a run gave its row back. A row closed already (by its run, a stop or the sweep) is
    only marked; an item whose clean-up fails is set aside (``aside``) and the others go on.
    """
    freed: set[str] = set()
    for run in coordination.locks.given_back_rows():
        with _row_step(aside, "close_given_back_row", run.match_id, run.record_id):
            if rows.close_row(run.record_id, exit_code=run.exit_code, reason=run.reason):
                logger.warning(
                    "match %s: closed row %s (exit %s) for its run, which gave the match back but could"
                    " not reach PostgreSQL: starting it again",
                    run.match_id,
                    run.record_id,
                    run.exit_code,
                )
                freed.add(run.match_id)
            coordination.locks.settle_given_back_row(run.record_id)
    return sorted(freed)


def release_locks_of_fenced_runs(
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    aside: list[SetAside] | None = None,
) -> list[str]:
    """Free the start lock (and pending key) a closed row still holds once its worker lease is gone.

    A run cut from Redis (PostgreSQL still reachable) fences itself when its lease can no longer
    be renewed and closes its own row (16, ``worker lease expired``), but it cannot release its
    start lock or clear its pending key: nobody could start the match again until the lock's TTL
    (the stale threshold) and then the sweep's ``reclaim_stale_pending``. A lease key that is gone
    proves its run may write nothing more (lifecycle.lease), so such a lock and pending key are
    deleted at once, by one script that checks both again (``Locks.release_fenced_start_lock``:
    never a live run's lock). Only rows closed within the stale threshold are read (a lock lives
    no longer), and nothing is judged until Redis's data epoch is older than one lease plus one
    renewal, as in ``reap_dead_workers``. Returns the matches freed (to be dispatched again); a
    row whose keys cannot be handled is set aside (``aside``) and the others go on.
    """
    closed = rows.recently_closed_leased_rows(within_seconds=settings.listener_heartbeat_stale_seconds)
    if not closed:
        return []
    holders = coordination.locks.start_lock_holders(sorted({row.match_id for row in closed}))
    holding = [row for row in closed if holders.get(row.match_id) == row.record_id]
    if not holding:
        return []
    alive, epoch_age = coordination.locks.live_worker_leases(row.lease for row in holding)
    if epoch_age is None or epoch_age < settings.listener_worker_lease_seconds * 1.25 + 1:
        return []
    freed: set[str] = set()
    for row in holding:
        record_id, match_id, lease = row.record_id, row.match_id, row.lease
        if lease in alive:
            continue
        with _row_step(aside, "release_fenced_lock", match_id, record_id):
            if coordination.locks.release_fenced_start_lock(match_id, record_id, lease):
                logger.warning(
                    "match %s: released the start lock and pending key of run %s (closed, its worker"
                    " lease expired)",
                    match_id,
                    record_id,
                )
                freed.add(match_id)
    return sorted(freed)


#: The shortest time between two reaper restarts of one fenced run's match (its restart mark in
#: Redis): a fault that fails every restart (e.g. the start taken by a worker cut from PostgreSQL)
#: restarts it no more often than the dispatch tick (every minute) would.
ORPHAN_RESTART_EVERY_SECONDS = 60.0


def orphans_of_fenced_runs(*, settings: KickoffSettings, coordination: CoordinationStore) -> list[str]:
    """Matches a fenced or abandoned run left with nothing to restart them: to be dispatched again.

    A run that fenced itself (16) or was abandoned (14) leaves its start lock and pending key
    for ``release_locks_of_fenced_runs`` (or the run's own release) to free and its match to be
    dispatched. When a Redis restart loses both first, nothing is left to free and no reaper
    would restart the match: the next dispatch tick would. So: the matches whose newest row such
    a close ended within the stale threshold, with no open row (one query), and with neither a
    start lock nor a pending key, each at most once per ORPHAN_RESTART_EVERY_SECONDS (one script
    call). Nothing is judged until Redis's data epoch is older than one lease plus one renewal
    (live runs take their locks again within that time). The dispatch that follows claims the
    pending key (SET NX) and applies the usual selection and attempt rules, so nothing starts twice.
    """
    candidates = rows.recently_fenced_matches_without_run(
        within_seconds=settings.listener_heartbeat_stale_seconds
    )
    if not candidates:
        return []
    _, epoch_age = coordination.locks.live_worker_leases(())
    if epoch_age is None or epoch_age < settings.listener_worker_lease_seconds * 1.25 + 1:
        return []
    orphans = coordination.locks.claim_orphan_restarts(candidates, every_seconds=ORPHAN_RESTART_EVERY_SECONDS)
    for match_id in orphans:
        logger.warning("match %s: its fenced run left no start lock or pending key: restarting it", match_id)
    return orphans


def _row_step(
    aside: list[SetAside] | None, step: str, match_id: str, record_id: str
) -> AbstractContextManager[None]:
    """One row's step of the clean-up, set aside on its own when it fails."""
    item = f"match {match_id} row {record_id}"
    return setting_aside(aside, loop=LOOP, item=item, step=step, match_id=match_id, record_id=record_id)


def _releasing_lock_of(row: rows.ClosedRow, aside: list[SetAside] | None) -> AbstractContextManager[None]:
    """The sweep's step of releasing one dead row's start lock, set aside on its own when it fails."""
    return _row_step(aside, "release_start_lock", row.match_id, row.record_id)


def _clear_barriers_of_dead(
    closed: list[rows.ClosedRow], *, coordination: CoordinationStore, aside: list[SetAside] | None = None
) -> set[str]:
    """Clear pending, attempts and exhausted of each match with no active row left (each on its own)."""
    matches = {row.match_id for row in closed}
    if not matches:
        return set()
    active = rows.matches_with_active_rows(
        matches,
        stale_seconds=coordination.stale_seconds,
        active_max_age_seconds=coordination.active_max_age_seconds,
    )
    cleared: set[str] = set()
    for match_id in sorted(matches - active):
        with setting_aside(
            aside, loop=LOOP, item=f"match {match_id}", step="clear_start_barriers", match_id=match_id
        ):
            coordination.barriers.clear_start_barriers(match_id)
            cleared.add(match_id)
    return cleared


def _holder_silent(row: rows.ClosedRow, settings: KickoffSettings) -> bool:
    """Whether the row's holder must already have stopped itself (so its lock may be deleted).

    A holder whose row writes fail keeps extending its lock through Redis and only stops itself
    once its row has not been written for ``stale - interval - grace`` (lifecycle.heartbeat
    ``_too_late``); it then has the interval plus the grace to end. So a holder is silent only
    once its heartbeat is older than the stale threshold (the start lock's TTL) itself: any
    earlier, a live holder could still be running and a successor would overlap it.
    """
    return row.heartbeat_age_seconds > settings.listener_heartbeat_stale_seconds


def release_dead_holders_locks(
    closed: Iterable[rows.ClosedRow],
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    aside: list[SetAside] | None = None,
) -> int:
    """Delete the start lock of each closed row whose holder is silent (token-compared).

    A row whose lock cannot be handled is set aside (appended to ``aside``); the others go on.
    """
    n = 0
    for row in _in_order(closed):
        if not _holder_silent(row, settings):
            continue
        with _releasing_lock_of(row, aside):
            if coordination.locks.delete_start_lock_if_token(row.match_id, row.record_id):
                logger.info("match %s: released the start lock of dead run %s", row.match_id, row.record_id)
                n += 1
    return n


def after_abandon(
    closed: list[rows.ClosedRow],
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    aside: list[SetAside] | None = None,
) -> set[str]:
    """Barrier clean-up after rows were abandoned; return the matches whose barriers were cleared.

    Pending, attempts and exhausted are cleared for a match with no active sibling row left.
    Each row and match is handled on its own: one that cannot be is set aside (``aside``).
    """
    if not closed:
        return set()
    for row in _in_order(closed):
        logger.warning(
            "match %s: row %s abandoned (exit 14), heartbeat %s",
            row.match_id,
            row.record_id,
            row.heartbeat_at.isoformat(),
        )
    release_dead_holders_locks(closed, settings=settings, coordination=coordination, aside=aside)
    return _clear_barriers_of_dead(closed, coordination=coordination, aside=aside)


def reclaim_stale_pending(
    match_ids: Iterable[str] | None = None, *, coordination: CoordinationStore
) -> list[str]:
    """Clear pending keys that no start can clear any more; return their match ids.

    A pending key is reclaimable when no start lock is held for the match **and** no queued
    start can still run: the match's stored message id is absent (a stop forgot it) or already
    consumed (its start began and died, or was revoked). A start that is still queued has its
    id stored and not consumed, so its pending key is kept. ``match_ids`` None: every pending
    key in Redis (the sweep).
    """
    unlocked = coordination.barriers.pending_without_lock(match_ids)
    if not unlocked:
        return []
    queued = {mid: message_id for mid, message_id in stored_message_ids(unlocked).items() if message_id}
    consumed = coordination.barriers.consumed_among(list(queued.values()))
    still_queued = {mid for mid, message_id in queued.items() if message_id not in consumed}
    reclaim = [mid for mid in unlocked if mid not in still_queued]
    if reclaim:
        coordination.barriers.clear_pending(*reclaim)
        logger.info("reclaimed %d pending keys no start could clear: %s", len(reclaim), reclaim)
    return reclaim


@dataclass(frozen=True)
class SweepResult:
    """What one sweep did."""

    locked: bool  # another sweep held the sweep lock; nothing was done
    abandoned: int = 0  # rows closed with exit 14
    matches: list[str] = field(default_factory=list)  # matches with abandoned rows
    barriers_cleared: list[str] = field(default_factory=list)  # matches whose barriers were cleared
    pending_reclaimed: list[str] = field(default_factory=list)  # pending keys no start could clear
    locks_released: list[str] = field(default_factory=list)  # matches freed from a fenced run's lock
    backfills: list[str] = field(default_factory=list)  # matches whose archive backfill was enqueued
    set_aside: list[SetAside] = field(default_factory=list)  # items left as they are, with their reason

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def matches_needing_backfill(match_ids: Iterable[str]) -> list[str]:
    """Which of ``match_ids`` have a terminal status and no open lifecycle row (one query)."""
    ids = sorted({uuid.UUID(str(m)) for m in match_ids})
    if not ids:
        return []
    return ended_matches_without_open_run(ids)


def enqueue_backfills(
    closed: Iterable[rows.ClosedRow], *, send_backfill: Callable[[str], None], aside: list[SetAside]
) -> list[str]:
    """Send one backfill per match of ``closed`` whose game is over; a failed send is set aside."""
    sent = []
    for match_id in matches_needing_backfill(row.match_id for row in closed):
        with setting_aside(
            aside, loop=LOOP, item=f"match {match_id}", step="enqueue_backfill", match_id=match_id
        ):
            try:
                send_backfill(match_id)
            except ServiceUnavailable as exc:  # an item's step here: the sweep itself is done
                raise BackfillNotSent(str(exc)) from exc
            sent.append(match_id)
            logger.info("match %s: archive backfill enqueued (its game is over, its run abandoned)", match_id)
    return sent


def sweep_stale_match_listeners(
    *,
    heartbeat_stale_seconds: float | None = None,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    send_backfill: Callable[[str], None] | None = None,
) -> SweepResult:
    """Abandon (14) dead runs under the sweep lock; clear the barriers of their matches.

    A run is dead when its worker lease is gone (``reap_dead_workers``) or its heartbeat is older
    than the stale threshold; a closed run whose lease is gone no longer holds its start lock
    (``release_locks_of_fenced_runs``: those matches are in ``locks_released``).
    ``heartbeat_stale_seconds`` overrides that threshold (0 closes every open row, healthy or
    not: an operator's last resort, never needed after a deploy).
    ``send_backfill`` (the backfill_match_archive actor's send): called once, after its rows are
    closed, for each match whose game is over and that has no open row left; None sends none.

    Every row, match and step is handled on its own: one that cannot be (its Redis keys hold
    something else, the lease epoch is unreadable) is set aside with its reason, counted and
    logged (config.set_aside), listed in ``set_aside``, and the sweep goes on.
    """
    stale = (
        settings.listener_heartbeat_stale_seconds
        if heartbeat_stale_seconds is None
        else heartbeat_stale_seconds
    )
    lock = coordination.locks.sweep_lock()
    if not lock.acquire():
        logger.info("sweep skipped: another sweep holds the lock")
        return SweepResult(locked=True)
    aside: list[SetAside] = []
    reaped: list[rows.ClosedRow] = []
    reclaimed: list[str] = []
    released: list[str] = []
    try:
        with setting_aside(aside, loop=LOOP, item="worker leases", step="judge_worker_leases"):
            reaped = reap_dead_workers(settings=settings, coordination=coordination, aside=aside)
        closed = rows.abandon_stale_rows(stale_seconds=stale)
        cleared = after_abandon(closed, settings=settings, coordination=coordination, aside=aside)
        cleared |= _clear_barriers_of_dead(reaped, coordination=coordination, aside=aside)
        closed = reaped + closed
        spans.link_runs((row.traceparent for row in closed), **{"kickoff.closed_by": "sweep"})
        with setting_aside(aside, loop=LOOP, item="fenced runs' locks", step="judge_fenced_locks"):
            released = release_locks_of_fenced_runs(settings=settings, coordination=coordination, aside=aside)
        with setting_aside(aside, loop=LOOP, item="pending keys", step="reclaim_pending"):
            reclaimed = reclaim_stale_pending(coordination=coordination)
    finally:
        with contextlib.suppress(LockNotOwned):
            lock.release()
    backfills: list[str] = []
    if send_backfill is not None and closed:
        with setting_aside(aside, loop=LOOP, item="archive backfills", step="select_backfills"):
            backfills = enqueue_backfills(closed, send_backfill=send_backfill, aside=aside)
    return SweepResult(
        locked=False,
        abandoned=len(closed),
        matches=sorted({r.match_id for r in closed}),
        barriers_cleared=sorted(cleared),
        pending_reclaimed=sorted(reclaimed),
        locks_released=released,
        backfills=backfills,
        set_aside=aside,
    )


def audit_sweep(audit: AuditContext, *, heartbeat_stale_seconds: float | None = None) -> None:
    """Audit one sweep an operator asks for (``listeners.sweep``: the CLI, the API, the console), before
    it runs: an entry that cannot be written refuses it (no act without its record). The threshold
    asked for (None: the setting's) is recorded; what it did is its answer and its log lines."""
    audit.record(
        "listeners.sweep", "listeners", None, after={"heartbeat_stale_seconds": heartbeat_stale_seconds}
    )


@dataclass(frozen=True)
class StopResult:
    """What an operator stop did."""

    match_id: str  # internal Match.id
    rows_closed: int  # open rows closed with exit 15
    revoked_message_id: str | None  # the queued/running start message that was revoked
    locks_released: int  # start locks of silent holders deleted
    auto_dispatch_was: bool  # auto_dispatch_listener before the stop (now off)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def stop_match_listener(
    match_id: str,
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    stopped_by: str = "operator",
    audit: AuditContext | None = None,
) -> StopResult:
    """Operator stop: the running listener ends with 15, a queued start never runs, dispatch turns off.

    Order: stop flag (a running listener sees it within the poll interval), revoke the stored
    start message id, close open rows with 15, clear pending/attempts/exhausted, turn
    auto-dispatch off and forget the stored message id. With ``audit``, the stop is audited
    (listener.stop, with its reason and request id) before any of it: an entry that cannot be
    written refuses the stop.
    """
    match = load_match_with_league(match_id)
    mid = str(match.id)
    message_id = match.start_message_id
    if audit is not None:  # before the act: an entry that cannot be written refuses the stop
        audit.record(
            "listener.stop",
            "match",
            mid,
            before={"auto_dispatch": bool(match.auto_dispatch_listener)},
            after={"auto_dispatch": False, "revoked_message_id": message_id},
        )
    if tracing.enabled():  # read first: a run that sees the flag may close its own row before we do
        spans.link_runs(rows.open_run_traceparents(mid), **{"kickoff.closed_by": "stop"})
    coordination.stops.set_stop_flag(mid, ttl_seconds=settings.listener_stop_flag_ttl_seconds)
    if message_id:
        coordination.barriers.revoke_message(message_id)
    closed = rows.close_open_rows_for_stop(mid, stopped_by=stopped_by)
    released = release_dead_holders_locks(closed, settings=settings, coordination=coordination)
    coordination.barriers.clear_start_barriers(mid)
    stop_dispatch(mid)
    logger.info(
        "match %s: stopped by %s: %d rows closed, message %s revoked",
        mid,
        stopped_by,
        len(closed),
        message_id,
    )
    result = StopResult(
        match_id=mid,
        rows_closed=len(closed),
        revoked_message_id=message_id,
        locks_released=released,
        auto_dispatch_was=bool(match.auto_dispatch_listener),
    )
    return result


def set_auto_dispatch(
    match_id: str,
    on: bool,
    *,
    coordination: CoordinationStore,
    audit: AuditContext | None = None,
) -> bool:
    """Turn a match's auto-dispatch on or off; turning it on also clears a leftover stop flag.

    Turning it on also reclaims a pending key no start can clear (``reclaim_stale_pending``),
    e.g. one claimed inside a stop's race window. Returns the previous value. With ``audit``, the
    change is audited (match.dispatch_on/off, before and after) in the update's transaction.
    """
    match = load_match_with_league(match_id)
    before = bool(match.auto_dispatch_listener)
    with transaction():
        update_match_fields(match.id, {"auto_dispatch_listener": on})
        if audit is not None:
            audit.record(
                "match.dispatch_on" if on else "match.dispatch_off",
                "match",
                str(match.id),
                before={"auto_dispatch": before},
                after={"auto_dispatch": on},
            )
    if on:
        coordination.stops.clear_stop_flag(str(match.id))
        reclaim_stale_pending([str(match.id)], coordination=coordination)
    return before
