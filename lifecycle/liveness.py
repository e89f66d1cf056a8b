"""The liveness signal: a Redis connection each listener worker holds open, that ends with its process.

A lease (lifecycle.lease) lapses seconds after its process stopped renewing it, whatever the
reason; most deaths are not silent, though: when a process ends (SIGKILL, the OOM killer, a crash,
a stopped container) the kernel closes its sockets at once and Redis frees the connection within
milliseconds. So each listener worker also holds CONNECTIONS (two) connections subscribed to its
lease's own channel (``listener_worker_alive_{lease id}``, nothing is ever published on it), each
kept by a thread of its own, and the reaper of
every other worker reads ``PUBSUB NUMSUB`` for the leases of open rows and of every worker that
held its signal (``Locks.leases_to_judge``: the subscription adds the lease;
``Locks.judge_worker_leases``): a lease that is fresh but whose signal stayed gone for
LISTENER_LIVENESS_GRACE_SECONDS is a dead process, taken over at once (``cleanup.reap_workers_seen_dead``
from the reaper's watch, ``cleanup.reap_dead_workers`` from its full step).

Why a subscription rather than a named client and ``CLIENT LIST``, or a PostgreSQL session-level
advisory lock: ``PUBSUB NUMSUB`` needs no ``@admin`` permission (``CLIENT LIST`` does), costs
O(leases asked) inside the same Lua script that reads the leases (``CLIENT LIST`` is O(every
client) and cannot run in a script), lives in the same service as the lease, so a Redis partition
ends both alike, and takes no PostgreSQL connection (a backend per worker, and a session lock
breaks behind pgbouncer in transaction mode). Its cost: two idle connections per worker process and
nothing per listener (docs/scaling.md).

A dropped connection is not a death: the other one keeps the signal held, and its thread subscribes
again at once (``hold`` reads EOF the moment Redis closes it); only both gone for the grace,
measured from the first reaper that saw the signal gone, is. A reaper whose own signal dropped less
than UNSTEADY_GRACE_SECONDS ago (Redis dropped every connection: a restart) judges with that longer
grace (actors.listeners). A worker that is alive but cannot re-establish its signal within the grace while
Redis answers its lease renewals (so peers can see it gone) fences itself (``must_fence``), as a
late lease renewal does. A paused process, a frozen host or a black-holed network keeps its
connection looking open: those end with the lease, as before.

A worker refused by Redis (connections reset) loses the signal at once and peers take its matches
over within the grace, while Redis answers it nothing, so it cannot fence itself (a Redis restart
looks the same and must stop nobody). Its runs learn it from PostgreSQL instead: while the signal
is not held (``LivenessSignal.held``), the fence watch (lifecycle.fence_watch) reads their rows every
0.05 s, one query per process, and stops each run whose row a reaper closed or whose fencing token a
successor took (docs/reliability.md finding 10). Nothing is read while the signal is held.
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
#: Pause after a failed attempt to subscribe, doubling with each failure in a row up to
#: RETRY_MAX_SECONDS: several fit in the grace (0.05 s by default), and a Redis that is down gets
#: no more than RETRY_MAX_SECONDS of attempts from each connection.
RETRY_SECONDS = 0.01
RETRY_MAX_SECONDS = 0.05
#: Pause before looking again for a lease to hold the signal of (none held yet, or fenced).
LEASE_WAIT_SECONDS = 0.05
#: Connections holding the signal, each on its own thread: Redis dropping one (a ``CLIENT KILL``) leaves
#: the signal held, so peers may judge a signal gone on every connection at once (the process ended)
#: within a short grace.
CONNECTIONS = 2
#: The grace a reaper judges with while its own signal was re-established less than this ago: Redis
#: dropped every connection at once (a restart), and every worker is subscribing again.
UNSTEADY_GRACE_SECONDS = 1.0


class _Holder:
    """One connection holding the signal, kept by a thread of its own."""

    def __init__(self, signal: LivenessSignal, index: int) -> None:
        self.signal = signal
        self.index = index
        self.held: str | None = None  # the lease id whose signal this connection holds now
        self.lost_since: float | None = time.monotonic()  # not held since (monotonic); None: held
        self.dropped: str | None = None  # the lease id whose held signal dropped here (None: none did)
        self.dropped_at: float | None = None  # when its held connection last dropped (None: never)

    def lost(self, why: str, exc: BaseException | None = None) -> None:
        with self.signal._mu:
            was_held = self.held
            self.held = None
            if was_held is not None:
                self.dropped_at = time.monotonic()
            if self.lost_since is None:
                self.lost_since = time.monotonic()
            if was_held is not None:
                self.dropped = was_held
        if was_held is not None:
            logger.warning(
                "worker lease %s: liveness signal %s (connection %d): re-establishing it: %s",
                was_held,
                why,
                self.index,
                exc,
            )

    def run(self) -> None:
        signal = self.signal
        pubsub: Any = None
        subscribed_to: str | None = None
        failures = 0  # failed attempts to subscribe in a row
        while not signal._stop.is_set():
            want = signal.lease.held_id()
            if want is None:
                signal._stop.wait(LEASE_WAIT_SECONDS)
                continue
            if pubsub is None or subscribed_to != want:
                try:
                    fresh = signal.coordination.locks.liveness_subscription(want, index=self.index)
                except KickoffError as exc:
                    self.lost("could not be subscribed", exc)
                    signal._stop.wait(min(RETRY_SECONDS * 2**failures, RETRY_MAX_SECONDS))
                    failures = min(failures + 1, 8)
                    continue
                failures = 0
                _close(pubsub)
                pubsub, subscribed_to = fresh, want
                with signal._mu:
                    self.held, self.lost_since, self.dropped = want, None, None
                    signal._reachable_seen = None
                continue
            try:
                signal.coordination.locks.hold_liveness(pubsub, timeout=HOLD_SECONDS)
            except Exception as exc:  # a driver error is translated; anything else: subscribe anew too
                self.lost("dropped", exc)
                _close(pubsub)
                pubsub = None
                if not isinstance(exc, KickoffError):
                    logger.exception("liveness signal: unexpected error")
                    signal._stop.wait(RETRY_SECONDS)
        _close(pubsub)


class LivenessSignal:
    """The threads that keep this process's liveness signal held for its current lease id, on
    CONNECTIONS connections: the signal is held while one of them is, gone once all are."""

    def __init__(
        self,
        *,
        coordination: CoordinationStore,
        lease: WorkerLease,
        grace_seconds: float,
        connections: int = CONNECTIONS,
    ) -> None:
        self.coordination = coordination
        self.lease = lease
        self.grace_seconds = grace_seconds
        self._mu = threading.Lock()
        self._holders = [_Holder(self, i) for i in range(max(1, connections))]
        self._reachable_seen: float | None = None  # when must_fence first saw Redis answer after the drop
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        with self._mu:
            if self._threads:
                return
            self._threads = [
                threading.Thread(target=h.run, name=f"kickoff-liveness-{h.index}", daemon=True)
                for h in self._holders
            ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Ask the threads to end (each closes its connection within HOLD_SECONDS; not waited for)."""
        self._stop.set()

    def held(self) -> bool:
        """Whether the signal of the lease this process holds now is held (runs may start under it)."""
        want = self.lease.held_id()
        with self._mu:
            return want is not None and any(h.held == want for h in self._holders)

    def steady_for(self, now: float | None = None) -> float:
        """Seconds since one of this process's connections last dropped, every one held now (0: one is
        not held now; infinite: none ever dropped, a worker that just booted included).

        A reaper whose own signal is not steady judges others' with UNSTEADY_GRACE_SECONDS: Redis
        may have dropped every connection at once (a restart), its peers' too.
        """
        now = time.monotonic() if now is None else now
        with self._mu:
            if any(h.held is None for h in self._holders):
                return 0.0
            drops = [h.dropped_at for h in self._holders if h.dropped_at is not None]
        return now - max(drops) if drops else float("inf")

    def must_fence(self, now: float) -> bool:
        """Whether the signal has stayed gone on every connection for the grace since Redis was seen
        answering the lease's renewals again (peers then judge this process dead): it must stop its
        runs (no I/O here: the deadline thread asks, every LISTENER_STOP_POLL_SECONDS). A Redis that
        answers nobody (a restart) fences nothing here: the lease's own fence covers it.
        """
        held_id = self.lease.held_id()
        with self._mu:
            if any(h.lost_since is None for h in self._holders):
                return False  # held on one connection at least
            if held_id is None or any(h.dropped != held_id for h in self._holders):
                return False  # never held under this lease on every connection (its starts wait for it)
            since = max(h.lost_since for h in self._holders if h.lost_since is not None)
            renewed = self.lease.renewed_at
            if renewed is None or renewed <= since:
                return False  # Redis has not answered since: peers cannot judge either (a Redis restart)
            # Redis answers: from the first time that was seen here, the threads have the grace to
            # subscribe again (they retry within RETRY_MAX_SECONDS) before this process fences itself.
            if self._reachable_seen is None:
                self._reachable_seen = now
            return now - max(since, self._reachable_seen) >= self.grace_seconds


def _close(pubsub: Any) -> None:
    if pubsub is not None:
        with contextlib.suppress(Exception):
            pubsub.close()
