"""Takeover paths: how a match came to stream on a new run after its last one ended without a game's end.

Three paths, each named by the closing reason its predecessor's row records: the predecessor's
process died and its liveness signal said so (``death_seen``), its worker lease lapsed (a pause, a
frozen host, a partition, or a worker that fenced itself: ``lease_lapsed``), or its worker shut down
gracefully and handed the match over (``handoff``). A successor that takes a match over records the
path and the seconds from its predecessor's close to its own first live byte on its row
(``takeover_path``, ``takeover_seconds``); the board shows the path, and /metrics has them as the
``kickoff_listener_takeover_seconds`` histogram by path.
"""

from __future__ import annotations

import logging
from enum import StrEnum

from config.errors import KickoffError
from lifecycle.lease import LEASE_EXPIRED
from lifecycle.sql import rows

logger = logging.getLogger(__name__)

#: The closing reason of a row whose worker's liveness signal ended (the reaper abandoned it).
WORKER_DIED = "worker died (its liveness signal ended)"
#: The closing reason of a row whose worker shut down gracefully (lifecycle.runtime.worker_shutdown).
WORKER_SHUTDOWN = "worker shutdown"
#: The closing reason of a run that stopped itself because its liveness signal could not be re-established.
SIGNAL_LOST = "worker liveness signal lost"

#: A successor more than this many seconds after its predecessor's close is a plain restart.
TAKEOVER_WINDOW_SECONDS = 120.0

#: Histogram buckets of ``kickoff_listener_takeover_seconds``.
BUCKETS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 30.0, 60.0)


class TakeoverPath(StrEnum):
    """How a successor run came to take a match over."""

    DEATH_SEEN = "death_seen"  # the predecessor's process ended: its liveness signal went at once
    LEASE_LAPSED = "lease_lapsed"  # its lease ran out: paused, frozen, cut off, or fenced itself
    HANDOFF = "handoff"  # its worker shut down gracefully and handed the match over


_BY_REASON = {
    WORKER_DIED: TakeoverPath.DEATH_SEEN,
    LEASE_EXPIRED: TakeoverPath.LEASE_LAPSED,
    SIGNAL_LOST: TakeoverPath.LEASE_LAPSED,
    WORKER_SHUTDOWN: TakeoverPath.HANDOFF,
}


def path_of(reason: str | None) -> TakeoverPath | None:
    """The takeover path a predecessor's closing reason names (None: not a takeover)."""
    return _BY_REASON.get(reason or "")


def record_at_first_live_byte(record_id: str, match_id: str) -> tuple[str, float] | None:
    """At a run's first live byte: record on its row how it took its match over (None: it did not).

    Never raises: a database error is logged and the run goes on.
    """
    try:
        taken = rows.record_takeover(
            record_id,
            match_id,
            paths={reason: str(path) for reason, path in _BY_REASON.items()},
            within_seconds=TAKEOVER_WINDOW_SECONDS,
        )
    except KickoffError as exc:
        logger.warning("match %s: recording its takeover failed: %s", match_id, exc)
        return None
    if taken is not None:
        logger.info("match %s: took over (%s): live again %.2f s after its last run closed", match_id, *taken)
    return taken
