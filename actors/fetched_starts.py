"""Starts a dead listener worker had fetched from the Redis broker and not begun, back on the queue at once.

Dramatiq's Redis consumer moves each start it fetches into its process's ack set (up to its prefetch,
one per free thread) before the worker runs it. A worker killed between the fetch and the run (a
SIGKILL, an OOM kill, a host lost) leaves those starts there: Dramatiq puts them back only once that
process's heartbeat is older than the broker's heartbeat timeout (60 s) and a maintenance pass (one
fetch in a thousand) happens to run, and their matches' pending keys keep the dispatch from sending
them again meanwhile. Chaos seed 62 met it: a host's runs gave their matches back as another host's
worker was killed, which had just fetched ten of those starts; they waited 90 s
(docs/reliability.md finding 15).

kickoff's reaper sees a dead listener worker within a second or two (its lease or liveness signal,
lifecycle.cleanup). So every listener worker records, in the broker's Redis, which Dramatiq consumer
its lease belongs to (``record``, from its reaper thread: a slow broker never delays its lease), and
a reaper that finds dead leases requeues what their consumers had fetched and not acked
(``requeue_of``, actors.dramatiq_compat ``requeue_fetched_by_leases``). The dead worker's running
starts go back too: the starts a reaper sends for their matches supersede them, and a superseded or
consumed start is skipped (lifecycle.guarded_start). RabbitMQ needs none of this: it requeues a
closed channel's deliveries itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import dramatiq

from actors import dramatiq_compat
from actors.broker import QUEUE_MATCH_LISTENERS, broker_errors
from config.errors import KickoffError

logger = logging.getLogger(__name__)

#: How long a lease's consumer record lives in the broker's Redis without being written again.
RECORD_TTL_SECONDS = 600.0
#: How often a worker writes its record again while it holds the same lease.
RECORD_EVERY_SECONDS = 60.0


class FetchedStarts:
    """One listener worker process's side of it: its consumer record, and the requeue of dead ones'."""

    def __init__(self, broker: dramatiq.Broker) -> None:
        self.broker = broker
        self.consumer_id = dramatiq_compat.consumer_id(broker)  # None: not a Redis broker
        self._recorded: tuple[str, float] | None = None  # (lease id, monotonic time written)

    def record(self, lease_id: str | None, now: float | None = None) -> None:
        """Record that ``lease_id`` (this process's lease) fetches as this process's consumer: when the
        lease is new, and again every RECORD_EVERY_SECONDS. A broker that does not answer is logged;
        the next call tries again."""
        if self.consumer_id is None or lease_id is None:
            return
        now = time.monotonic() if now is None else now
        last = self._recorded
        if last is not None and last[0] == lease_id and now - last[1] < RECORD_EVERY_SECONDS:
            return
        try:
            with broker_errors(self.broker):
                dramatiq_compat.record_consumer_of_lease(
                    self.broker, lease_id, ttl_seconds=RECORD_TTL_SECONDS
                )
        except KickoffError as exc:
            logger.warning("worker lease %s: recording its broker consumer failed: %s", lease_id, exc)
            return
        self._recorded = (lease_id, now)

    def requeue_of(self, lease_ids: Iterable[str]) -> int:
        """Requeue the starts the consumers of these dead workers' leases had fetched and not acked;
        how many. A broker that does not answer is logged (Dramatiq's own maintenance remains)."""
        leases = sorted(set(lease_ids))
        if self.consumer_id is None or not leases:
            return 0
        try:
            with broker_errors(self.broker):
                n = dramatiq_compat.requeue_fetched_by_leases(self.broker, QUEUE_MATCH_LISTENERS, leases)
        except KickoffError as exc:
            logger.warning("requeueing the starts dead listener workers had fetched failed: %s", exc)
            return 0
        if n:
            logger.warning("requeued %d starts that dead listener workers %s had fetched", n, leases)
        return n
