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
import importlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dramatiq.threading import raise_thread_exception

from config.errors import ConfigurationError, KickoffError
from config.settings import MatchListenerEnvironment
from lifecycle.db_reach import DatabaseReach
from lifecycle.feed_reach import FeedReach
from lifecycle.fence_watch import FenceWatch
from lifecycle.heartbeat import HeartbeatService
from lifecycle.lease import LEASE_EXPIRED, DeadlineWatch, LeaseKeeper, Reaper, WorkerLease
from lifecycle.liveness import LivenessSignal
from lifecycle.poller import LockedSet
from lifecycle.stop_watch import StopWatcher
from lifecycle.takeover import SIGNAL_LOST, WORKER_SHUTDOWN
from listener.body import ListenerBody, ListenerContext
from listener.db_gate import db_gate
from listener.exit_codes import ExitCode
from models.coordination import CoordinationStore
from models.db import check_connection, release_connection

logger = logging.getLogger(__name__)


def _probe_database() -> None:
    """One ``SELECT 1`` on this thread's pooled connection, handed back after (lifecycle.db_reach)."""
    try:
        check_connection()
    finally:
        release_connection()


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
    return StopCause(int(ExitCode.ABANDONED), WORKER_SHUTDOWN, hand_off=not successor_waiting)


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
    #: Hands the run's row and start lock to a waiting successor, its stream kept open (None: a run
    #: without a row); raises KickoffError (lifecycle.listener_run ``_handing_over``).
    hand_over: Callable[[], None] | None = None
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
        coordination: CoordinationStore,
        reap: ReapStep | None = None,
        redispatch: Redispatcher | None = None,
        hand_over: HandOver | None = None,
    ) -> None:
        margin = settings.listener_heartbeat_interval_seconds + settings.listener_lock_loss_grace_seconds
        if margin >= coordination.stale_seconds:
            raise ConfigurationError(
                "LISTENER_HEARTBEAT_INTERVAL_SECONDS + LISTENER_LOCK_LOSS_GRACE_SECONDS "
                f"({margin:g}) must be below LISTENER_HEARTBEAT_STALE_SECONDS "
                f"({coordination.stale_seconds:g}): "
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
        self.coordination = coordination
        self.stop_grace_seconds = max(1.0, settings.listener_lock_loss_grace_seconds)
        self.stop_watch = StopWatcher(
            stops=coordination.stops, poll_seconds=settings.listener_stop_poll_seconds
        )
        # The deadlines on a thread of their own: the stop watcher's poll may hang in Redis.
        self.deadlines = DeadlineWatch(
            period_seconds=settings.listener_stop_poll_seconds, step=self.enforce_deadlines
        )
        self.lease = WorkerLease(
            locks=coordination.locks, ttl_seconds=lease_ttl, fence_margin_seconds=lease_margin
        )
        self.heartbeat = HeartbeatService(
            coordination=coordination,
            interval_seconds=settings.listener_heartbeat_interval_seconds,
            lock_ttl_seconds=coordination.stale_seconds,
            grace_seconds=settings.listener_lock_loss_grace_seconds,
            lease=self.lease,
        )
        self.lease_keeper = LeaseKeeper(lease=self.lease, step=self.keep_lease)
        self.liveness = LivenessSignal(
            coordination=coordination,
            lease=self.lease,
            grace_seconds=settings.listener_liveness_grace_seconds,
        )
        # Every watch interval: the reap step itself runs its full (PostgreSQL) pass every reaper poll
        # and only watches the leases it read in between (actors.listeners).
        self.reaper = Reaper(
            period_seconds=settings.listener_reaper_poll_seconds,
            watch_seconds=settings.listener_liveness_watch_seconds,
            step=self.reap_dead,
        )
        self.database = DatabaseReach(probe=_probe_database)
        # While the liveness signal is gone (peers may take this process's matches over at once), its
        # runs learn from PostgreSQL within a poll that they were (docs/reliability.md finding 10).
        self.fence_watch = FenceWatch(
            signal_lost=lambda: not self.liveness.held(),
            runs=self.heartbeat.snapshot,
        )
        self.feed = FeedReach.of_url(settings.sportradar_base_url)
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
        self.liveness.start()
        self.fence_watch.start()
        self.deadlines.start()
        self.stop_watch.start()
        self.database.start()
        self.feed.start()
        if self.reap is not None:
            self.reaper.start()

    def import_listener_body(self) -> None:
        """Import the module of the listener body (LISTENER_BODY) now, at a worker's boot: its first
        start (often a takeover of a dead worker's matches) then does not spend a tenth of a second
        importing it before it connects. A module that cannot be imported is only logged here: the
        start that needs it fails and says so."""
        module_name = self.settings.listener_body.partition(":")[0]
        try:
            importlib.import_module(module_name)
        except Exception as exc:  # any import failure: the worker runs on
            logger.warning("listener body %s not imported at boot: %s", module_name, exc)

    # -- the worker lease --------------------------------------------------------------

    def lease_for_run(self) -> str:
        """The lease a new run starts under (taken, and its thread started, on first use)."""
        self.lease_keeper.start()
        self.liveness.start()
        self.fence_watch.start()
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

    def ready_for_starts(self) -> bool:
        """Whether a start may run here now: the lease is held and so is its liveness signal, and
        PostgreSQL answers (lifecycle.db_reach: a start taken by a worker cut from it would hold
        the match until the connection's deadline), and so does the feed (lifecycle.feed_reach: a
        match given back by a run that lost its feed goes to a worker that reaches it)."""
        return (
            self.lease.current() is not None
            and self.liveness.held()
            and self.database.reachable()
            and self.feed.reachable()
        )

    def _stop_lease_runs(self, lease_id: str, reason: str = LEASE_EXPIRED) -> None:
        for reg in self.heartbeat.snapshot():
            if reg.lease_id == lease_id:
                reg.fenced = True
                reg.on_lost(reason)

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
        if self.liveness.must_fence(now):
            lost = self.lease.fence_now()
            if lost is not None:
                logger.warning("worker lease %s: liveness signal not re-established: fencing its runs", lost)
                self._stop_lease_runs(lost, SIGNAL_LOST)
        self.heartbeat.enforce_deadlines(now)
        for handle in self.running():
            handle.enforce_deadline(now)

    def shutdown_all(self) -> int:
        """Graceful worker shutdown: end every running listener (exit 14); return how many.

        With ``hand_over`` and LISTENER_HANDOFF_SECONDS above 0, a thread of its own first queues
        each match's successor start; as soon as a successor waits for the start lock, the run hands
        it its row and lock and keeps streaming until the successor's first live byte, then stops
        (``_hand_over_all``): no second without live data; every run whose successor did not wait
        stops once the bound passes and hands its match off after. Without, every run is asked to
        stop at once and hands its match off after.
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
        """Queue the successors; hand each run whose successor waits its row and start lock while its
        stream stays open, and stop it at the successor's first live byte; the rest once ``bound`` passed.

        The overlap (both streams open, from the successor's connect to its first live byte plus one
        poll) is what makes a deploy leave no second without live data; the successor's fencing token
        decides which run records (the event log's key de-duplicates the overlap), and a handed-over
        run is stopped ``bound`` after its hand-off whether or not its successor went live (if not,
        its match is dispatched again after: the dispatch skips it while the successor runs).

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
                self.coordination.stops.clear_handovers(list(waiting), live_too=True)
                hand_over(sorted(waiting))
        except Exception:
            logger.exception("handing %d listeners over failed: stopping them now", len(waiting))
            deadline = 0.0
        finally:
            release_connection()
        poll = self.settings.listener_handoff_poll_seconds
        handed: dict[str, tuple[RunHandle, float]] = {}  # handed over, streaming until the successor is live
        while (waiting and time.monotonic() < deadline) or handed:
            ready = self._read_handovers(self.coordination.stops.handovers_ready, waiting)
            for match_id in ready:
                handle = waiting.pop(match_id)
                if self._hand_over_run(handle):
                    handed[match_id] = (handle, time.monotonic() + bound)
                else:
                    self.stop(handle, worker_shutdown(successor_waiting=True))
            live = self._read_handovers(self.coordination.stops.handovers_live, handed)
            now = time.monotonic()
            for match_id, (handle, until) in list(handed.items()):
                if match_id in live or now >= until or handle.cause is not None:
                    cause = worker_shutdown(successor_waiting=True)
                    if match_id not in live and handle.cause is None:
                        # Its successor may never come: a worker that died between saying it waits and
                        # writing its row leaves nothing a reaper restarts. So the match is dispatched
                        # again once this run ends; the dispatch skips it while a successor runs or is
                        # pending (its row, its start lock, its pending key).
                        logger.warning(
                            "match %s: its successor was not live within %g s: stopping, then starting "
                            "it again unless the successor runs",
                            match_id,
                            bound,
                        )
                        cause = worker_shutdown()
                    else:
                        logger.info("match %s: its successor is live: stopping here", match_id)
                    del handed[match_id]
                    self.stop(handle, cause)
            if (waiting and time.monotonic() < deadline) or handed:
                time.sleep(poll)
        for match_id, handle in waiting.items():
            logger.warning(
                "match %s: no successor waited within %g s: stopping, then handing off", match_id, bound
            )
            self.stop(handle, worker_shutdown())

    @staticmethod
    def _read_handovers(read: Callable[[list[str]], set[str]], among: dict[str, Any]) -> set[str]:
        """One hand-off mark family among ``among``'s matches (none when Redis cannot tell now)."""
        if not among:
            return set()
        try:
            return read(list(among))
        except KickoffError as exc:
            logger.warning("hand-off: reading the successors' marks failed: %s", exc)
            return set()

    def _hand_over_run(self, handle: RunHandle) -> bool:
        """Hand a run whose successor waits its row and start lock, its stream kept open; False: not
        done (a run without a row, a service error): it is stopped as before."""
        if handle.hand_over is None or handle.cause is not None:
            return False
        try:
            handle.hand_over()
        except KickoffError as exc:
            logger.warning(
                "match %s: handing its run over failed (stopping it instead): %s", handle.ctx.match_id, exc
            )
            return False
        finally:
            release_connection()
        logger.info(
            "match %s: its successor waits: handed over, streaming until it is live", handle.ctx.match_id
        )
        return True

    def close(self) -> None:
        """Stop the threads (tests)."""
        self.heartbeat.stop()
        self.stop_watch.stop()
        self.deadlines.stop()
        self.lease_keeper.stop()
        self.liveness.stop()
        self.fence_watch.stop()
        self.reaper.stop()
        self.database.stop()
        self.feed.stop()
