"""The fence watch: while this worker's liveness signal is gone, its runs ask PostgreSQL every
POLL_SECONDS whether they were taken over, and stop at once when they were.

A host refused by Redis (connections reset, not black-holed) loses its liveness subscriptions at
once; the other workers' reapers see the signal gone for LISTENER_LIVENESS_GRACE_SECONDS, abandon
its rows (``death_seen``) and start its matches elsewhere, while its runs still stream: without
this watch they stopped only at the fence (their next write refused by the successor's token) or
at the lease's deadline, and the feed saw two streams of one match for up to half a second
(docs/reliability.md finding 10). The worker cannot fence itself on a lost Redis alone (a Redis
restart would stop every listener; lifecycle.liveness), but PostgreSQL says whether a run was
taken over: so while the signal is not held (``signal_lost``), one query for all of this process's
runs (``rows.superseded_rows``) reads which rows someone else closed (a reaper's abandon, which
comes before the successor's start) or whose fencing token a newer run took, and each such run is
told to stop with the heartbeat's reasons (``ROW_CLOSED_ELSEWHERE``; ``FENCED``: exit 16, as when a
beat or a write is refused by the fence), which closes its feed connection at once. It stops only
runs the next heartbeat would stop anyway: it acts on PostgreSQL's proof alone, never on Redis's
silence.

Cost: nothing while the signal is held (the thread reads a flag every POLL_SECONDS, no I/O), and
while it is gone one query by primary key every POLL_SECONDS per worker process (not per run: 4 ms
for 1,000 runs on a loaded 2-core box), only
while the process has runs with rows (a query that fails waits FAILURE_PAUSE_SECONDS before the
next: a host cut from PostgreSQL too stops its runs at their row deadline, as before). A Redis
restart loses every worker's signal at once: the fleet then makes 20 such queries a second per
worker process until its signals are held again (milliseconds after Redis answers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from lifecycle.heartbeat import FENCED, ROW_CLOSED_ELSEWHERE, HeartbeatRegistration
from lifecycle.lease import PeriodicStep
from lifecycle.sql import rows
from models.db import release_connection

logger = logging.getLogger(__name__)

#: How often the runs' rows are read while the liveness signal is gone (a peer's reaper judges a
#: signal gone after LISTENER_LIVENESS_GRACE_SECONDS, 0.05 s, and its successor connects tenths of
#: a second later).
POLL_SECONDS = 0.05

#: After a query that failed (PostgreSQL cut too), the next one waits this long: a PostgreSQL that
#: refuses gets two attempts a second from each worker, not twenty.
FAILURE_PAUSE_SECONDS = 0.5

#: Reads which of these rows must stop: id -> fenced (True) or closed elsewhere (False).
ReadSuperseded = Callable[[Sequence[str]], dict[str, bool]]


class FenceWatch(PeriodicStep):
    """The thread that checks this process's runs' rows in PostgreSQL while its liveness signal is gone."""

    THREAD_NAME = "kickoff-fence-watch"
    STEP_NAME = "fence watch"

    def __init__(
        self,
        *,
        signal_lost: Callable[[], bool],
        runs: Callable[[], list[HeartbeatRegistration]],
        read: ReadSuperseded = rows.superseded_rows,
        period_seconds: float = POLL_SECONDS,
    ) -> None:
        """``signal_lost``: whether this process's liveness signal is gone now (no I/O); ``runs``: the
        runs the heartbeat keeps (their ``on_lost`` is how they are told to stop)."""
        super().__init__(period_seconds=period_seconds, step=self.poll_once)
        self._signal_lost = signal_lost
        self._runs = runs
        self._read = read
        self.steps = 0  # steps taken, polling or not (tests)
        self.polls = 0  # queries made (tests, logs)
        self._watching = False  # the last step polled (the signal was gone)
        self._failing = False  # the last query failed (logged once per streak)
        self._next_after_failure = 0.0  # no query before this (monotonic) after a failed one
        self._told: set[str] = set()  # rows whose runs were told to stop (not read again)

    def poll_once(self) -> list[str]:
        """One step: when the signal is gone, read the runs' rows once and stop those taken over;
        return their match ids."""
        self.steps += 1
        if not self._signal_lost():
            if self._watching:
                logger.info("liveness signal held again: no more fence checks")
                self._watching = False
            return []
        runs = {r.record_id: r for r in self._runs() if r.record_id is not None}
        self._told &= runs.keys()  # a run that ended is forgotten
        regs = {record_id: r for record_id, r in runs.items() if record_id not in self._told}
        if not regs or time.monotonic() < self._next_after_failure:
            return []
        if not self._watching:
            logger.warning(
                "liveness signal gone: checking the fencing of %d runs in PostgreSQL every %g s",
                len(regs),
                self.period_seconds(),
            )
            self._watching = True
        self.polls += 1
        try:
            found = self._read(list(regs))
        except Exception as exc:  # a service error: the next step asks again
            if not self._failing:
                logger.warning("fence watch: reading %d rows failed: %s", len(regs), exc)
            self._failing = True
            self._next_after_failure = time.monotonic() + FAILURE_PAUSE_SECONDS
            return []
        finally:
            release_connection()
        self._failing = False
        stopped: list[str] = []
        for record_id, fenced in found.items():
            reg = regs.get(record_id)
            if reg is None:
                continue
            self._told.add(record_id)
            reason = FENCED if fenced else ROW_CLOSED_ELSEWHERE
            logger.warning(
                "match %s: taken over while this worker's liveness signal is gone: listener must stop: %s",
                reg.match_id,
                reason,
            )
            try:
                reg.on_lost(reason)
            except Exception:
                logger.exception("match %s: stop callback failed", reg.match_id)
            stopped.append(reg.match_id)
        return stopped
