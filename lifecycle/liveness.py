"""The liveness signal: a Redis connection each listener worker holds open, that ends with its process.

A lease (lifecycle.lease) lapses seconds after its process stopped renewing it, whatever the
reason; most deaths are not silent, though: when a process ends (SIGKILL, the OOM killer, a crash,
a stopped container) the kernel closes its sockets at once and Redis frees the connection within
milliseconds. So each listener worker also holds one connection subscribed to its lease's own
channel (``listener_worker_alive_{lease id}``, nothing is ever published on it), and the reaper of
every other worker reads ``PUBSUB NUMSUB`` for the leases of open rows
(``CoordinationStore.judge_worker_leases``): a lease that is fresh but whose signal stayed gone for
LISTENER_LIVENESS_GRACE_SECONDS is a dead process, taken over at once (``cleanup.reap_dead_workers``).

Why a subscription rather than a named client and ``CLIENT LIST``, or a PostgreSQL session-level
advisory lock: ``PUBSUB NUMSUB`` needs no ``@admin`` permission (``CLIENT LIST`` does), costs
O(leases asked) inside the same Lua script that reads the leases (``CLIENT LIST`` is O(every
client) and cannot run in a script), lives in the same service as the lease, so a Redis partition
ends both alike, and takes no PostgreSQL connection (a backend per worker, and a session lock
breaks behind pgbouncer in transaction mode). Its cost: one idle connection per worker process and
nothing per listener (docs/scaling.md).

A dropped connection is not a death: this thread subscribes again at once (``hold`` reads EOF the
moment Redis closes it); the reaper waits the grace, measured from the first reaper that saw the
signal gone. A worker that is alive but cannot re-establish its signal within the grace while
Redis answers its lease renewals (so peers can see it gone) fences itself (``must_fence``), as a
late lease renewal does. A paused process, a frozen host or a black-holed network keeps its
connection looking open: those end with the lease, as before.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from config.errors import KickoffError
from lifecycle.lease import WorkerLease
from models.coordination import CoordinationStore

logger = logging.getLogger(__name__)

#: How long one wait on the held connection lasts (it returns at once when the connection drops).
HOLD_SECONDS = 0.5
#: Pause between two failed attempts to subscribe.
RETRY_SECONDS = 0.05


class LivenessSignal:
    """The thread that keeps this process's liveness signal held for its current lease id."""

    def __init__(self, *, barriers: CoordinationStore, lease: WorkerLease, grace_seconds: float) -> None:
        self.barriers = barriers
        self.lease = lease
        self.grace_seconds = grace_seconds
        self._mu = threading.Lock()
        self._held: str | None = None  # the lease id whose signal is held now
        self._lost_since: float | None = time.monotonic()  # not held since (monotonic); None: held
        self._dropped: str | None = None  # the lease id whose held signal dropped (None: none did)
        self._reachable_seen: float | None = None  # when must_fence first saw Redis answer after the drop
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._mu:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="kickoff-liveness", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end (it closes its connection within HOLD_SECONDS; not waited for)."""
        self._stop.set()

    def held(self) -> bool:
        """Whether the signal of the lease this process holds now is held (runs may start under it)."""
        with self._mu:
            return self._held is not None and self._held == self.lease.held_id()

    def must_fence(self, now: float) -> bool:
        """Whether the signal has stayed gone for the grace since Redis was seen answering the lease's
        renewals again (peers then judge this process dead): it must stop its runs (no I/O here: the
        deadline thread asks, every LISTENER_STOP_POLL_SECONDS). A Redis that answers nobody (a
        restart) fences nothing here: the lease's own fence covers it.
        """
        with self._mu:
            since, dropped = self._lost_since, self._dropped
            if since is None or dropped is None or dropped != self.lease.held_id():
                return False  # held, or never held under this lease (its starts wait for it: no run to fence)
            renewed = self.lease.renewed_at
            if renewed is None or renewed <= since:
                return False  # Redis has not answered since: peers cannot judge either (a Redis restart)
            # Redis answers: from the first time that was seen here, the thread has the grace to
            # subscribe again (it retries every RETRY_SECONDS) before this process fences itself.
            if self._reachable_seen is None:
                self._reachable_seen = now
            return now - max(since, self._reachable_seen) >= self.grace_seconds

    def _lost(self, why: str, exc: BaseException | None = None) -> None:
        with self._mu:
            was_held = self._held
            self._held = None
            if self._lost_since is None:
                self._lost_since = time.monotonic()
            if was_held is not None:
                self._dropped = was_held
        if was_held is not None:
            logger.warning("worker lease %s: liveness signal %s: re-establishing it: %s", was_held, why, exc)

    def _run(self) -> None:
        pubsub: Any = None
        subscribed_to: str | None = None
        while not self._stop.is_set():
            want = self.lease.held_id()
            if want is None:
                self._stop.wait(RETRY_SECONDS)
                continue
            if pubsub is None or subscribed_to != want:
                try:
                    fresh = self.barriers.liveness_subscription(want)
                except KickoffError as exc:
                    self._lost("could not be subscribed", exc)
                    self._stop.wait(RETRY_SECONDS)
                    continue
                _close(pubsub)
                pubsub, subscribed_to = fresh, want
                with self._mu:
                    self._held, self._lost_since, self._dropped, self._reachable_seen = want, None, None, None
                continue
            try:
                self.barriers.hold_liveness(pubsub, timeout=HOLD_SECONDS)
            except Exception as exc:  # a driver error is translated; anything else: subscribe anew too
                self._lost("dropped", exc)
                _close(pubsub)
                pubsub = None
                if not isinstance(exc, KickoffError):
                    logger.exception("liveness signal: unexpected error")
                    self._stop.wait(RETRY_SECONDS)
        _close(pubsub)


def _close(pubsub: Any) -> None:
    if pubsub is not None:
        with contextlib.suppress(Exception):
            pubsub.close()
