"""One heartbeat thread per worker process: one UPDATE and one Redis call per interval for all listeners
(and one more while a run is degraded).

Every interval the thread extends the start locks of every registered run (one Lua call),
sets the degraded flag of every run whose event log writing is behind (listener.ingest; the
boards show it) and deletes it of a run that caught up (one more Redis call, only then), then
writes ``heartbeat_at`` on their open rows (one UPDATE); the Redis calls never wait on
PostgreSQL, so a run behind because PostgreSQL is away still shows as degraded. The flag lives
``DEGRADED_FLAG_INTERVALS`` intervals: a run that stops beating stops showing it. A run is told
to stop when:

* its start lock no longer holds its token (someone deleted it, or it expired);
* its row was closed by someone else (operator stop, sweep), or its fencing token is no longer
  its match's newest (a successor started: the heartbeat is refused, ``FENCED``);
* Redis (or PostgreSQL) has not answered for so long that the lock (or the row) would go
  stale before the next interval plus the grace: the run stops before a successor could
  start, because a successor needs the lock to expire first. A thread that does no I/O checks
  these deadlines too (``enforce_deadlines``), so a beat hung in PostgreSQL cannot delay them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lifecycle.lease import LEASE_EXPIRED, WorkerLease
from lifecycle.poller import RegistryPoller
from lifecycle.sql import rows
from models.coordination import CoordinationStore
from models.db import release_connection

logger = logging.getLogger(__name__)

#: Reason given when a run's row was closed by someone else (stop, sweep): not a failure.
ROW_CLOSED_ELSEWHERE = "lifecycle row closed by another process"
#: Reason given when a newer run of the match took its fencing token (models.fence): exit 16.
FENCED = "fenced: a newer run of the match started"
#: Reason given when the start lock could not be extended in time (Redis down or the beat stuck).
LOCK_UNREACHABLE = "start lock could not be extended before it would expire"
#: Reason given when the row's heartbeat could not be written in time (PostgreSQL failing or stuck).
ROW_UNWRITABLE = "heartbeat could not be written before the stale threshold"
#: A run's degraded flag outlives this many heartbeat intervals unless a beat sets it again.
DEGRADED_FLAG_INTERVALS = 3


@dataclass(eq=False)
class HeartbeatRegistration:
    """One running listener as the heartbeat thread sees it."""

    match_id: str  # internal Match.id
    token: str  # start-lock token of the run (= lifecycle row id)
    record_id: str | None  # lifecycle row, None in a dry run without a row
    on_lost: Callable[[str], None]  # called (possibly repeatedly) with a reason when the run must stop
    lease_id: str | None = None  # the worker lease the run started under (lifecycle.lease)
    # whether the run's event log writing is behind now (listener.ingest ``degraded``); None: never
    degraded: Callable[[], bool] | None = None
    flagged_degraded: bool = False  # its degraded flag is set in Redis (by the last beat that wrote it)
    fenced: bool = False  # its lease ran out: never extend its lock again
    # monotonic times of the last proof: set them to when the lock was taken / the row written
    last_lock_ok: float = field(default_factory=time.monotonic)
    last_row_ok: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class BeatReport:
    """What one beat did (tests and logs)."""

    rows_written: int  # rows whose heartbeat_at was updated
    locks_extended: int  # start locks extended
    lost: tuple[str, ...]  # match ids told to stop


class HeartbeatService(RegistryPoller[HeartbeatRegistration]):
    """The process's single heartbeat thread; register a run when it starts, unregister at its end.

    A beat starts every interval, whatever its own writes took (``FIXED_RATE``): a beat that takes a
    second under load would otherwise push every later one a second back, and each row's heartbeat
    would age by as much past the interval (a part of issue 34's heartbeat lag)."""

    FIXED_RATE = True

    def __init__(
        self,
        *,
        coordination: CoordinationStore,
        interval_seconds: float,
        lock_ttl_seconds: float,
        grace_seconds: float,
        lease: WorkerLease | None = None,
    ) -> None:
        super().__init__(thread_name="kickoff-heartbeat", step_name="heartbeat beat")
        self.coordination = coordination
        self.lease = lease  # the process's worker lease: a run under a lapsed one is fenced
        self.interval_seconds = interval_seconds
        self.lock_ttl_seconds = lock_ttl_seconds
        self.grace_seconds = grace_seconds

    def period_seconds(self) -> float:
        return self.interval_seconds

    def step(self) -> None:
        self.beat_once()

    # -- the beat --------------------------------------------------------------------

    def _too_late(self, last_ok: float, now: float) -> bool:
        """Whether waiting one more interval could let the lock/row go stale while we run."""
        return now + self.interval_seconds + self.grace_seconds >= last_ok + self.lock_ttl_seconds

    def beat_once(self) -> BeatReport:
        """Extend every registered start lock, then write every row's heartbeat, once.

        The locks are extended first and independently of PostgreSQL: a row write that hangs
        or fails must not let the start lock expire under a live run. Any failure of the row
        write counts as "not written"; the deadlines are also enforced from the stop watcher's
        thread (``enforce_deadlines``) so a beat stuck in PostgreSQL still stops the run in time.
        """
        now = time.monotonic()
        lost: dict[HeartbeatRegistration, str] = {}
        regs = []
        for reg in self.snapshot():
            # A run whose lock may have expired (or whose lease ran out) must not take it again.
            # The lease's reason wins: whichever thread notices a lapsed lease first, the run
            # records why it stopped (the lease ran out), not the lock it then may not extend.
            lapsed = self.lease is not None and not self.lease.holds(reg.lease_id, now)
            if reg.fenced or lapsed:
                lost[reg] = LEASE_EXPIRED
            elif now >= reg.last_lock_ok + self.lock_ttl_seconds - self.grace_seconds:
                lost[reg] = LOCK_UNREACHABLE
            else:
                regs.append(reg)
        if not regs:
            return BeatReport(0, 0, self._notify(lost))

        extended = 0
        try:
            results = self.coordination.locks.extend_start_locks(
                [(r.match_id, r.token) for r in regs], ttl_seconds=self.lock_ttl_seconds
            )
        except Exception as exc:
            logger.warning("heartbeat: extending %d start locks failed: %s", len(regs), exc)
            for reg in regs:
                if self._too_late(reg.last_lock_ok, now):
                    lost.setdefault(reg, LOCK_UNREACHABLE)
        else:
            for reg, ok in zip(regs, results, strict=True):
                if ok:
                    reg.last_lock_ok = now
                    extended += 1
                else:
                    lost.setdefault(reg, "start lock lost")
            self._let_go_of_ended(regs, results)
        self._flag_degraded(regs)

        record_ids = [r.record_id for r in regs if r.record_id]
        written: set[str] | None = None
        if record_ids:
            try:
                written = rows.heartbeat_rows(record_ids)
            except Exception as exc:
                logger.warning("heartbeat: writing %d rows failed: %s", len(record_ids), exc)
                written = None
            finally:
                release_connection()
        unwritten = [r.record_id for r in regs if r.record_id and r.record_id not in (written or ())]
        fenced = self._fenced(unwritten) if written is not None else set()
        for reg in regs:
            if reg.record_id is None:
                continue
            if written is None:
                if self._too_late(reg.last_row_ok, now):
                    lost.setdefault(reg, ROW_UNWRITABLE)
            elif reg.record_id in written:
                reg.last_row_ok = now
            elif reg.record_id in fenced:
                lost.setdefault(reg, FENCED)
            else:
                lost.setdefault(reg, ROW_CLOSED_ELSEWHERE)

        return BeatReport(len(written or ()), extended, self._notify(lost))

    def _let_go_of_ended(self, regs: list[HeartbeatRegistration], extended: list[bool]) -> None:
        """Delete again each lock this beat took again for a run that ended meanwhile.

        The extension takes a missing lock again (``extend_start_locks``: Redis lost its data); a run
        unregisters before it releases its lock, so a run gone from the registrations may have
        released its lock after this beat's snapshot, and the beat brought it back under the ended
        run's token: no start of the match could run until it expired. A successor's lock holds
        another token and is left alone.
        """
        for reg, ok in zip(regs, extended, strict=True):
            if not ok or reg in self._regs:
                continue
            try:
                self.coordination.locks.delete_start_lock_if_token(reg.match_id, reg.token)
            except Exception as exc:
                logger.warning("match %s: releasing an ended run's start lock failed: %s", reg.match_id, exc)

    def _flag_degraded(self, regs: list[HeartbeatRegistration]) -> None:
        """Set the degraded flag of every run behind now, delete it of those that caught up (one call,
        none when no run is or was degraded); a failure is logged and the next beat tries again."""
        degraded: list[HeartbeatRegistration] = []
        recovered: list[HeartbeatRegistration] = []
        for reg in regs:
            if reg.record_id is None or reg.degraded is None:
                continue
            try:
                behind = bool(reg.degraded())
            except Exception:
                logger.exception("match %s: reading whether the run is degraded failed", reg.match_id)
                continue
            if behind:
                degraded.append(reg)
            elif reg.flagged_degraded:
                recovered.append(reg)
        if not degraded and not recovered:
            return
        try:
            self.coordination.locks.flag_degraded_runs(
                [r.record_id for r in degraded if r.record_id],
                [r.record_id for r in recovered if r.record_id],
                ttl_seconds=DEGRADED_FLAG_INTERVALS * self.interval_seconds,
            )
        except Exception as exc:
            logger.warning("heartbeat: flagging %d degraded runs failed: %s", len(degraded), exc)
            return
        for reg in degraded:
            if not reg.flagged_degraded:
                logger.info(
                    "match %s: run %s is degraded (event log writing behind)", reg.match_id, reg.record_id
                )
            reg.flagged_degraded = True
        for reg in recovered:
            logger.info("match %s: run %s caught up (no longer degraded)", reg.match_id, reg.record_id)
            reg.flagged_degraded = False

    def _fenced(self, record_ids: list[str]) -> set[str]:
        """Which rows the beat did not write were refused for their fencing token (none when unreadable)."""
        if not record_ids:
            return set()
        try:
            return rows.fenced_rows(record_ids)
        except Exception as exc:
            logger.warning("heartbeat: reading the fencing of %d rows failed: %s", len(record_ids), exc)
            return set()
        finally:
            release_connection()

    def enforce_deadlines(self, now: float | None = None) -> list[str]:
        """Tell every run whose lock or row has not been renewed in time to stop; return their match ids.

        Called from another thread (lifecycle.lease ``DeadlineWatch``) so that a beat stuck in PostgreSQL
        or Redis cannot keep a run going past the point where a successor could start.
        """
        now = time.monotonic() if now is None else now
        lost: dict[HeartbeatRegistration, str] = {}
        for reg in self.snapshot():
            if self._too_late(reg.last_lock_ok, now):
                lost[reg] = LOCK_UNREACHABLE
            elif reg.record_id is not None and self._too_late(reg.last_row_ok, now):
                lost[reg] = ROW_UNWRITABLE
        return list(self._notify(lost))

    def _notify(self, lost: dict[HeartbeatRegistration, str]) -> tuple[str, ...]:
        """Tell each run still registered why it must stop; returns their match ids."""
        told = []
        for reg, reason in lost.items():
            if reg not in self._regs:
                # the run ended while the beat ran (its own close made its row look closed by
                # another process): there is nothing to stop, and no reason to log one
                continue
            told.append(reg.match_id)
            logger.warning("match %s: listener must stop: %s", reg.match_id, reason)
            try:
                reg.on_lost(reason)
            except Exception:
                logger.exception("match %s: stop callback failed", reg.match_id)
        return tuple(told)
