"""Process-wide listener services: the heartbeat thread, the stop watcher and the running-run registry.

A worker process builds one ``ListenerServices`` (``ListenerServices.for_process``) and every
``run_match_listener`` in it registers a ``RunHandle``. Whoever decides a run must end
(operator stop flag, lost start lock, closed row, worker shutdown) calls
``RunHandle.request_stop`` with a ``StopCause``; the first cause wins and decides the recorded exit.
A body that ignores ``request_stop`` for longer than the grace gets ``ListenerInterrupted``
raised in its thread. The process's worker lease (lifecycle.lease) is renewed by its own thread;
the reaper of other processes' dead runs, when one is given, runs on another (a reaper stuck in
PostgreSQL must never delay a renewal and fence a healthy worker).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from dramatiq.threading import raise_thread_exception

from config.errors import ConfigurationError, KickoffError
from config.settings import MatchListenerEnvironment
from lifecycle.heartbeat import HeartbeatService
from lifecycle.lease import LEASE_EXPIRED, DeadlineWatch, LeaseKeeper, Reaper, WorkerLease
from lifecycle.poller import LockedSet
from lifecycle.stop_watch import StopWatcher
from listener.body import ListenerBody, ListenerContext
from listener.db_gate import db_gate
from listener.exit_codes import ExitCode
from models.coordination import CoordinationStore
from models.db import release_connection

logger = logging.getLogger(__name__)


class ListenerInterrupted(BaseException):
    """Raised inside a listener body's thread that ignored ``request_stop`` past the grace.

    A BaseException so a body's ``except Exception`` cannot swallow it.
    """


@dataclass(frozen=True)
class StopCause:
    """Why a run was asked to stop, and what its row records."""

    code: int  # exit code written on the row
    reason: str  # exit_reason on the row
    stopped_by: str | None = None  # who stopped it (operator stops only)
    hand_off: bool = False  # the match should start again elsewhere at once (worker shutdown)


def operator_stop() -> StopCause:
    return StopCause(int(ExitCode.STOPPED), "stopped by operator", "operator")


def lost_lock(reason: str) -> StopCause:
    """The run can no longer prove it owns the match: exit 16 (unexpected cancel), a failure."""
    return StopCause(int(ExitCode.CANCELLED), reason)


def row_closed_elsewhere(reason: str) -> StopCause:
    """Someone else (stop, sweep) already closed the row: end quietly, not a failure."""
    return StopCause(int(ExitCode.ABANDONED), reason)


def worker_shutdown(*, successor_waiting: bool = False) -> StopCause:
    """Graceful worker shutdown: recorded as Abandoned (14), like the deploy's sweep would.

    ``successor_waiting``: a start of the match on another worker already waits for the start
    lock, so no hand-off is sent after the run (it would only be skipped).
    """
    return StopCause(int(ExitCode.ABANDONED), "worker shutdown", hand_off=not successor_waiting)


@dataclass(eq=False)
class RunHandle:
    """One running listener in this process."""

    ctx: ListenerContext
    body: ListenerBody
    thread_id: int = field(default_factory=threading.get_ident)
    cause: StopCause | None = None
    stop_deadline: float | None = None
    interrupted: bool = False
    in_body: bool = False  # only a thread still inside body.run may be interrupted
    _mu: threading.Lock = field(default_factory=threading.Lock)

    def request_stop(self, cause: StopCause, *, grace_seconds: float) -> bool:
        """Ask the body to stop; the first cause wins. True if this call set the cause."""
        with self._mu:
            if self.cause is not None:
                return False
            self.cause = cause
            self.stop_deadline = time.monotonic() + grace_seconds
        logger.info("match %s: stopping listener: %s", self.ctx.match_id, cause.reason)
        self.ctx.stop_requested.set()
        try:
            self.body.request_stop()
        except Exception:
            logger.exception("match %s: body.request_stop failed", self.ctx.match_id)
        return True

    def leave_body(self) -> None:
        """Mark that the thread left body.run: no interrupt may be raised any more."""
        with self._mu:
            self.in_body = False

    def enforce_deadline(self, now: float) -> None:
        """Interrupt the body's thread once if it ignored the stop past its deadline."""
        with self._mu:
            due = (
                self.in_body
                and self.stop_deadline is not None
                and now >= self.stop_deadline
                and not self.interrupted
            )
            if due:
                self.interrupted = True
        if due:
            logger.warning("match %s: listener body ignored stop; interrupting its thread", self.ctx.match_id)
            raise_thread_exception(self.thread_id, ListenerInterrupted)


#: Abandons other processes' runs whose worker lease is gone; returns the matches it freed.
ReapStep = Callable[[], list[str]]
#: Sends a start for each of these matches at once (the usual selection rules apply).
Redispatcher = Callable[[list[str]], None]
#: Sends a hand-off start for each of these running matches: it waits for their start locks.
HandOver = Callable[[list[str]], None]


class ListenerServices:
    """Heartbeat thread, stop watcher, worker lease and running runs of one process.

    ``reap`` and ``redispatch`` (given by a listener worker) let this process restart, within
    seconds, the matches of a worker that died and of its own runs a shutdown ends; with
    ``hand_over`` a shutdown first queues each match's successor start and stops each run only
    once its successor waits for the start lock (or after LISTENER_HANDOFF_SECONDS).
    """

    _process: ListenerServices | None = None
    _process_mu = threading.Lock()

    def __init__(
        self,
        *,
        settings: MatchListenerEnvironment,
        barriers: CoordinationStore,
        reap: ReapStep | None = None,
        redispatch: Redispatcher | None = None,
        hand_over: HandOver | None = None,
    ) -> None:
        margin = settings.listener_heartbeat_interval_seconds + settings.listener_lock_loss_grace_seconds
        if margin >= barriers.stale_seconds:
            raise ConfigurationError(
                "LISTENER_HEARTBEAT_INTERVAL_SECONDS + LISTENER_LOCK_LOSS_GRACE_SECONDS "
                f"({margin:g}) must be below LISTENER_HEARTBEAT_STALE_SECONDS ({barriers.stale_seconds:g}): "
                "the start lock would expire between heartbeats"
            )
        lease_margin = settings.listener_lock_loss_grace_seconds + settings.listener_stop_poll_seconds
        lease_ttl = settings.listener_worker_lease_seconds
        if lease_ttl / 4 + lease_margin >= lease_ttl:
            raise ConfigurationError(
                f"LISTENER_WORKER_LEASE_SECONDS ({lease_ttl:g}) must exceed a quarter of itself plus "
                "LISTENER_LOCK_LOSS_GRACE_SECONDS + LISTENER_STOP_POLL_SECONDS "
                f"({lease_margin:g}): the lease would expire between renewals"
            )
        self.settings = settings
        self.barriers = barriers
        self.stop_grace_seconds = max(1.0, settings.listener_lock_loss_grace_seconds)
        self.stop_watch = StopWatcher(barriers=barriers, poll_seconds=settings.listener_stop_poll_seconds)
        # The deadlines on a thread of their own: the stop watcher's poll may hang in Redis.
        self.deadlines = DeadlineWatch(
            period_seconds=settings.listener_stop_poll_seconds, step=self.enforce_deadlines
        )
        self.lease = WorkerLease(barriers=barriers, ttl_seconds=lease_ttl, fence_margin_seconds=lease_margin)
        self.heartbeat = HeartbeatService(
            barriers=barriers,
            interval_seconds=settings.listener_heartbeat_interval_seconds,
            lock_ttl_seconds=barriers.stale_seconds,
            grace_seconds=settings.listener_lock_loss_grace_seconds,
            lease=self.lease,
        )
        self.lease_keeper = LeaseKeeper(lease=self.lease, step=self.keep_lease)
        self.reaper = Reaper(period_seconds=settings.listener_reaper_poll_seconds, step=self.reap_dead)
        self.reap = reap
        self.redispatch = redispatch
        self.hand_over = hand_over
        self._runs: LockedSet[RunHandle] = LockedSet()
        self.shutting_down = False
        self._db_slots = db_gate(settings.listener_db_concurrency)

    @contextlib.contextmanager
    def db_slot(self) -> Iterator[None]:
        """Bound the PostgreSQL work a burst of starts/shutdowns does at once; hand ours back at exit.

        A worker with 1,000 listener threads must not open 1,000 connections when a dispatch
        hands it 1,000 starts at once: each start's database work runs inside a slot of the
        process's one database gate (shared with the listeners' own queries), on a connection of
        the process's pool (models.db), and no connection is held while the game runs.
        """
        with self._db_slots:
            try:
                yield
            finally:
                release_connection()

    @classmethod
    def for_process(cls, build: Callable[[], ListenerServices]) -> ListenerServices:
        """The services of this process: ``build()`` on first use (their lease taken), the same after."""
        with cls._process_mu:
            if cls._process is None:
                cls._process = build()
                cls._process.start()
            return cls._process

    def start(self) -> None:
        """Take the lease now and start its thread (a run would take it on first use anyway)."""
        self.lease.renew()
        self.lease_keeper.start()
        self.deadlines.start()
        self.stop_watch.start()
        if self.reap is not None:
            self.reaper.start()

    # -- the worker lease --------------------------------------------------------------

    def lease_for_run(self) -> str:
        """The lease a new run starts under (taken, and its thread started, on first use)."""
        self.lease_keeper.start()
        self.deadlines.start()
        return self.lease.require()

    def keep_lease(self) -> None:
        """The lease thread's step: renew, then stop the runs of a lost lease."""
        renewal = self.lease.renew()
        if renewal.lost is not None:
            self._stop_lease_runs(renewal.lost)
        if renewal.redis_reset:
            self.heartbeat.wake()  # take the start locks again now, not at the next beat

    def reap_dead(self) -> None:
        """The reaper thread's step: abandon dead workers' runs and start their matches again at once."""
        if self.reap is None or self.shutting_down:
            return
        try:
            freed = self.reap()
            if freed and self.redispatch is not None:
                logger.warning("restarting %d matches of dead listener workers: %s", len(freed), freed)
                self.redispatch(freed)
        except KickoffError as exc:  # a service down: the next step (or the next dispatch) retries
            logger.warning("reaping dead listener workers failed: %s", exc)
        finally:
            release_connection()  # back to the process's pool until the next step

    def _stop_lease_runs(self, lease_id: str) -> None:
        for reg in self.heartbeat.snapshot():
            if reg.lease_id == lease_id:
                reg.fenced = True
                reg.on_lost(LEASE_EXPIRED)

    def hand_off(self, match_id: str) -> None:
        """Start a match again at once (its run here ended by a shutdown, or lost the feed: 12)."""
        if self.redispatch is None:
            return
        try:
            self.redispatch([match_id])
        except Exception:
            logger.exception("match %s: restarting it elsewhere failed (the next dispatch will)", match_id)

    def add(self, handle: RunHandle) -> None:
        self._runs.add(handle)

    def remove(self, handle: RunHandle) -> None:
        self._runs.discard(handle)

    def running(self) -> list[RunHandle]:
        return self._runs.snapshot()

    def stop(self, handle: RunHandle, cause: StopCause) -> bool:
        return handle.request_stop(cause, grace_seconds=self.stop_grace_seconds)

    def enforce_deadlines(self) -> None:
        """The deadline thread's step: the lease fence, lock/row deadlines of every run, then
        interrupts of ignored stops (no I/O: nothing here can hang on a service)."""
        now = time.monotonic()
        lost = self.lease.fenced_lease(now)
        if lost is not None:
            self._stop_lease_runs(lost)
        self.heartbeat.enforce_deadlines(now)
        for handle in self.running():
            handle.enforce_deadline(now)

    def shutdown_all(self) -> int:
        """Graceful worker shutdown: end every running listener (exit 14); return how many.

        With ``hand_over`` and LISTENER_HANDOFF_SECONDS above 0, a thread of its own first queues
        each match's successor start, then stops each run as soon as its successor waits for the
        start lock (which it takes the moment this run releases it), and every other run once the
        bound passes: never two streams at once, and a gap of the stop, the row's close and one
        poll. Without, every run is asked to stop at once and hands its match off after.
        """
        self.shutting_down = True
        runs = self.running()
        bound = self.settings.listener_handoff_seconds
        if self.hand_over is None or bound <= 0 or not runs:
            for handle in runs:
                self.stop(handle, worker_shutdown())
            logger.info("worker shutdown: asked %d listeners to stop", len(runs))
            return len(runs)
        threading.Thread(
            target=self._hand_over_all,
            args=(self.hand_over, runs, bound),
            name="kickoff-handover",
            daemon=True,
        ).start()
        logger.info("worker shutdown: handing %d listeners over to other workers", len(runs))
        return len(runs)

    def _hand_over_all(self, hand_over: HandOver, runs: list[RunHandle], bound: float) -> None:
        """Queue the successors, stop each run whose successor waits, the rest once ``bound`` passed.

        A run already told to stop (an operator stop, a lost lock) gets no successor, nor does a
        live match's run in develop (test clones only, ``AppEnv.automatic_is_test``): that one is
        stopped at once, and its hand-off's dispatch skips it too.
        """
        clones_only = self.settings.app_env.automatic_is_test is True
        waiting: dict[str, RunHandle] = {}
        for handle in runs:
            if handle.cause is not None:
                continue
            if clones_only and not handle.ctx.is_test:
                self.stop(handle, worker_shutdown())
                continue
            waiting[handle.ctx.match_id] = handle
        deadline = time.monotonic() + bound
        try:
            if waiting:
                self.barriers.clear_handovers(list(waiting))
                hand_over(sorted(waiting))
        except Exception:
            logger.exception("handing %d listeners over failed: stopping them now", len(waiting))
            deadline = 0.0
        finally:
            release_connection()
        poll = self.settings.listener_handoff_poll_seconds
        while waiting and time.monotonic() < deadline:
            try:
                ready = self.barriers.handovers_ready(list(waiting))
            except KickoffError as exc:
                logger.warning("hand-off: reading the waiting successors failed: %s", exc)
                ready = set()
            for match_id in ready:
                logger.info("match %s: its successor waits: stopping here", match_id)
                self.stop(waiting.pop(match_id), worker_shutdown(successor_waiting=True))
            if waiting:
                time.sleep(poll)
        for match_id, handle in waiting.items():
            logger.warning(
                "match %s: no successor waited within %g s: stopping, then handing off", match_id, bound
            )
            self.stop(handle, worker_shutdown())

    def close(self) -> None:
        """Stop the threads (tests)."""
        self.heartbeat.stop()
        self.stop_watch.stop()
        self.deadlines.stop()
        self.lease_keeper.stop()
        self.reaper.stop()
