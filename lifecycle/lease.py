"""The worker lease: a short Redis key a listener worker process renews to prove it is alive.

Every lifecycle row records the lease of the process that runs it. The process renews its
lease every ``ttl / 4`` and fences itself: once ``ttl - margin`` has passed since the last
renewal it sent (``time.monotonic``, which keeps counting while the process is paused), every
run under that lease must stop and may write nothing more. A lease key that is gone therefore
proves its process stopped streaming, and the reaper (lifecycle.cleanup, run by every listener
worker every LISTENER_REAPER_POLL_SECONDS on a thread of its own) abandons its rows and starts
their matches again within a second of the lapse, instead of waiting out the heartbeat's stale
threshold. At the default lease (8 s) a healthy worker is fenced only after 5 s without one
successful renewal (a renewal is due every 2 s), and a killed worker's key is gone 6 to 8 s
after the kill.

An expired lease is never renewed: the process takes a new lease id for its next runs. When
Redis lost its data (restarted empty), the epoch key tells the renewal, which then re-creates
the lease instead of fencing a process that was never late; the reaper judges nothing until
every live process has had time to do so.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from config.errors import KickoffError
from lifecycle.errors import WorkerLeaseUnavailable
from lifecycle.poller import RegistryPoller
from models.coordination import Locks

logger = logging.getLogger(__name__)

#: Reason recorded by a run whose worker lease ran out (the process was paused, or Redis was
#: unreachable for the whole lease).
LEASE_EXPIRED = "worker lease expired"


@dataclass(frozen=True)
class LeaseRenewal:
    """What one renewal found."""

    lease_id: str | None  # the lease this process holds now (None: Redis did not answer)
    lost: str | None  # a lease id that ran out: every run under it must stop
    redis_reset: bool  # Redis lost its data since the last renewal: the lease was re-created


class WorkerLease:
    """This process's lease; thread-safe."""

    def __init__(self, *, locks: Locks, ttl_seconds: float, fence_margin_seconds: float) -> None:
        self.locks = locks
        self.ttl_seconds = ttl_seconds
        self.fence_margin_seconds = fence_margin_seconds
        self._mu = threading.Lock()
        self._renewing = threading.Lock()  # one renewal at a time (the keeper, or a start's require)
        self._lease_id: str | None = None
        self._epoch = ""
        self._fence_at = 0.0
        self.renewed_at: float | None = None  # monotonic time the last successful renewal was sent

    @property
    def renew_seconds(self) -> float:
        """How often the lease is renewed."""
        return self.ttl_seconds / 4

    def current(self, now: float | None = None) -> str | None:
        """The lease id runs may start under now, or None when the lease is not held."""
        now = time.monotonic() if now is None else now
        with self._mu:
            return self._lease_id if self._lease_id is not None and now < self._fence_at else None

    def holds(self, lease_id: str | None, now: float | None = None) -> bool:
        """Whether a run under ``lease_id`` may still write (a run without a lease always may)."""
        return lease_id is None or self.current(now) == lease_id

    def held_id(self) -> str | None:
        """The lease id this process holds (fenced or not), None between a fence and the next renewal."""
        with self._mu:
            return self._lease_id

    def fence_now(self) -> str | None:
        """Drop the lease at once (its runs must stop); the lease id dropped, None when none was held."""
        with self._mu:
            lost, self._lease_id = self._lease_id, None
        return lost

    def fenced_lease(self, now: float | None = None) -> str | None:
        """The lease id whose fence time has passed without a renewal, if any (it is dropped)."""
        now = time.monotonic() if now is None else now
        with self._mu:
            if self._lease_id is not None and now >= self._fence_at:
                lost, self._lease_id = self._lease_id, None
                return lost
        return None

    def renew(self) -> LeaseRenewal:
        """Renew the lease (or take a new one); see the module docstring. Never raises."""
        with self._renewing:
            return self._renew()

    def _renew(self) -> LeaseRenewal:
        lost = self.fenced_lease()
        with self._mu:
            lease_id = self._lease_id or str(uuid.uuid4())
            known_epoch = self._epoch if self._lease_id is not None else ""
        sent_at = time.monotonic()  # before the command: the key lives at least ttl from here
        try:
            state, epoch = self.locks.renew_worker_lease(
                lease_id, known_epoch=known_epoch, new_epoch_id=uuid.uuid4().hex, ttl_seconds=self.ttl_seconds
            )
        except KickoffError as exc:
            logger.warning("worker lease %s: renewal failed: %s", lease_id, exc)
            return LeaseRenewal(lease_id=None, lost=lost, redis_reset=False)
        with self._mu:
            if state == 0:
                # Expired under an unchanged epoch: this process was too slow (paused); fence it.
                self._lease_id = None
                logger.warning("worker lease %s expired before its renewal", lease_id)
                return LeaseRenewal(lease_id=None, lost=lease_id, redis_reset=False)
            self._lease_id = lease_id
            self._epoch = epoch
            self._fence_at = sent_at + self.ttl_seconds - self.fence_margin_seconds
            self.renewed_at = sent_at
        reset = state == 2 and known_epoch != ""
        if reset:
            logger.warning("worker lease %s re-created: Redis lost its data", lease_id)
        return LeaseRenewal(lease_id=lease_id, lost=lost, redis_reset=reset)

    def require(self) -> str:
        """The current lease id, renewing once if needed; raises LeaseUnavailable without one."""
        lease_id = self.current()
        if lease_id is None:
            lease_id = self.renew().lease_id
        if lease_id is None:
            raise WorkerLeaseUnavailable("no worker lease: Redis did not answer (REDIS_URL)")
        return lease_id


class LeaseKeeper(RegistryPoller[object]):
    """The thread that renews the lease every ``lease.renew_seconds`` (and does nothing else)."""

    def __init__(self, *, lease: WorkerLease, step: Callable[[], None]) -> None:
        super().__init__(thread_name="kickoff-worker-lease", step_name="worker lease renewal")
        self.lease = lease
        self._step = step

    def period_seconds(self) -> float:
        return self.lease.renew_seconds

    def step(self) -> None:
        self._step()


class PeriodicStep(RegistryPoller[object]):
    """A named thread that runs ``step`` every ``period_seconds`` (and does nothing else)."""

    THREAD_NAME = "kickoff-periodic"
    STEP_NAME = "periodic step"

    def __init__(self, *, period_seconds: float, step: Callable[[], None]) -> None:
        super().__init__(thread_name=self.THREAD_NAME, step_name=self.STEP_NAME)
        self._period = period_seconds
        self._step = step

    def period_seconds(self) -> float:
        return self._period

    def step(self) -> None:
        self._step()


#: Workers a reaper's watch reads before it watches less often (``Reaper.watching``).
WATCH_SPREAD = 10


class Reaper(PeriodicStep):
    """The thread that runs ``step`` (the reaper of other processes' dead runs) every ``watch`` s (a
    full step every ``period`` s, ``full_step_due``; a watch between), or sooner once after ``soon`` (a
    liveness signal seen gone: judged again every few milliseconds until its grace ends)."""

    THREAD_NAME = "kickoff-worker-reaper"
    STEP_NAME = "dead worker reaper"

    def __init__(
        self, *, period_seconds: float, step: Callable[[], None], watch_seconds: float | None = None
    ) -> None:
        super().__init__(period_seconds=period_seconds, step=step)
        self.full_period_seconds = period_seconds
        self.watch_seconds = watch_seconds
        self._watching = 0  # workers (leases) the watch reads
        self._full_due = 0.0
        self._soon: float | None = None

    def watching(self, leases: int) -> None:
        """The watch reads ``leases`` leases: with more than WATCH_SPREAD, each worker watches that much
        less often, so the fleet's watches per second (and Redis's CPU for them) stay flat while one of
        its reapers still looks every ``watch`` s on average (the first to see a signal gone marks it
        for all, and judges again the moment its grace ends)."""
        self._watching = leases

    def full_step_due(self, now: float | None = None) -> bool:
        """Whether this step is a full one (one every ``period``): then the next is due a period on."""
        now = time.monotonic() if now is None else now
        if now < self._full_due:
            return False
        self._full_due = now + self.full_period_seconds
        return True

    def soon(self, seconds: float) -> None:
        """Run the next step ``seconds`` after this one (when shorter than the period)."""
        self._soon = seconds if self._soon is None else min(self._soon, seconds)

    def period_seconds(self) -> float:
        soon, self._soon = self._soon, None
        every = self._period
        if self.watch_seconds is not None:
            every = min(every, self.watch_seconds * max(1.0, self._watching / WATCH_SPREAD))
        return every if soon is None else min(every, soon)


class DeadlineWatch(PeriodicStep):
    """The thread that enforces the runs' deadlines (lease fence, lock, row, ignored stops).

    It does no I/O: a Redis or PostgreSQL call that hangs (a black-holed network, up to the
    client's socket timeout) on the heartbeat, stop-flag or lease thread can never keep a fenced
    run streaming past its lease.
    """

    THREAD_NAME = "kickoff-deadlines"
    STEP_NAME = "run deadlines"
