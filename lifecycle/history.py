"""The history rollup (every minute): the minute's snapshots, the derived minutes, and the retention.

Run by the ``rollup_history`` actor the scheduler sends every minute in every app_env. Each run
writes the snapshots of its minute (open listener runs by badge, judged as the board judges
them; pending outbox rows by queue, 0 for a declared queue without one), (re)derives every
minute since the previous run's (at least the last ``REDERIVE_MINUTES``, at most a day back) from
the tables that are their honest source (models.history_rollup), and deletes the points older
than HISTORY_RETENTION_DAYS. Running twice in a minute writes the same points.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from config.settings import KickoffSettings
from lifecycle.board import board_badge
from lifecycle.sql.board import open_runs
from listener.exit_codes import SUCCESS_CODES
from models.boundary import connection
from models.coordination import CoordinationStore
from models.history import minute_of, prune_history, put_points
from models.history_rollup import derive_minutes, last_rollup_minute, outbox_depth_by_queue
from models.history_series import OPEN_BADGES

logger = logging.getLogger(__name__)

#: Minutes before the previous run's that every run derives again (late rows: a run's end written
#: after the minute passed, an old run's takeover whose predecessor closed since).
REDERIVE_MINUTES = 10
#: The furthest back a run derives (a scheduler that was down longer leaves older minutes as they were).
MAX_CATCH_UP = timedelta(days=1)


@dataclass(frozen=True)
class RollupResult:
    """What one rollup wrote."""

    minute: str  # the minute it ran in (ISO 8601)
    derived_from: str  # the first minute it derived again
    derived_points: int
    snapshot_points: int
    pruned: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def open_runs_by_badge(*, settings: KickoffSettings, coordination: CoordinationStore) -> dict[str, int]:
    """Open lifecycle rows by badge (Running, Late, Stale; 0 for a badge without one), judged as the
    board judges them: PostgreSQL's clock, two heartbeat intervals for Late, a lost worker lease."""
    now, runs = open_runs()
    leases = {lease for _, lease in runs if lease}
    alive = coordination.locks.live_worker_leases(leases)[0] if leases else set()
    counts = Counter(
        board_badge(
            ended_at=None,
            exit_code=None,
            heartbeat_at=heartbeat_at,
            lease=lease,
            now=now,
            alive=alive,
            settings=settings,
        )
        for heartbeat_at, lease in runs
    )
    return {badge: counts.get(badge, 0) for badge in OPEN_BADGES}


def rollup_history(
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    queues: Sequence[str],
    now: datetime,
) -> RollupResult:
    """Write the history of the minute ``now`` falls in (see the module docstring).

    ``queues``: the declared outbox queues (each gets an outbox_depth point, 0 when empty).
    """
    minute = minute_of(now)
    with connection():
        badges = open_runs_by_badge(settings=settings, coordination=coordination)
        depth = outbox_depth_by_queue()
        snapshot = {("listeners", badge, minute): float(n) for badge, n in badges.items()}
        for queue in sorted({*queues, *depth}):
            snapshot[("outbox_depth", queue, minute)] = float(depth.get(queue, 0))
        put_points(snapshot)
        last = last_rollup_minute()
        start = minute - timedelta(minutes=REDERIVE_MINUTES)
        if last is not None:
            start = min(start, last - timedelta(minutes=REDERIVE_MINUTES))
        start = max(start, minute - MAX_CATCH_UP)
        derived = derive_minutes(start, now, success_codes=sorted(SUCCESS_CODES), at=minute)
        pruned = prune_history(days=settings.history_retention_days, now=now)
    logger.info(
        "history rollup %s: %d snapshot points, %d derived since %s, %d pruned",
        minute.isoformat(),
        len(snapshot),
        derived,
        start.isoformat(),
        pruned,
    )
    return RollupResult(
        minute=minute.isoformat(),
        derived_from=start.isoformat(),
        derived_points=derived,
        snapshot_points=len(snapshot),
        pruned=pruned,
    )
