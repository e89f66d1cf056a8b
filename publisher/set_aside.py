"""Items a publisher loop sets aside instead of stopping: one counter sample and one log line each.

The action verification, the outbox drain and player sync handle every item on its own; an item
that cannot be handled (a late result, an outbox row that cannot be published, a malformed
player record) is recorded with its reason where the loop keeps it (``execution_log.late``, a
dead outbox row, ``SyncReport.skipped``), counted in ``kickoff_publisher_set_aside_total`` of the
process that ran the loop, and logged once; the loop goes on with the next item.

The counter is made on first use, not at import: a Dramatiq worker with DRAMATIQ_PROMETHEUS sets
up prometheus_client's multiprocess mode at process boot, after our modules are imported, and
only metrics made after that reach its exposition server.
"""

from __future__ import annotations

import logging
import threading
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import Counter

logger = logging.getLogger(__name__)
METRIC = "kickoff_publisher_set_aside"


class Loop(StrEnum):
    """The publisher loops that set items aside."""

    ACTION_VERIFICATION = "action_verification"  # verify_results: reported results and unreported actions
    OUTBOX = "activity_outbox"  # the activity outbox's publishes (the drain, a trigger's own): its rows
    PLAYER_SYNC = "player_sync"  # sync_players: the records of the players map


_made: list[Counter] = []
_making = threading.Lock()


def _counter() -> Counter:
    """The process's set-aside counter (in prometheus_client's default registry), made once."""
    with _making:
        if not _made:
            from prometheus_client import Counter

            _made.append(
                Counter(
                    METRIC,
                    "Items a publisher loop set aside with their reason and went on, by loop and kind.",
                    ["loop", "kind"],
                )
            )
        return _made[0]


def set_aside(*, loop: Loop, kind: str, item: str, reason: str) -> None:
    """Count ``item`` as set aside by ``loop`` (``kind``: a short, fixed name of the problem) and log it."""
    _counter().labels(loop=loop.value, kind=kind).inc()
    logger.warning("%s set aside %s (%s): %s", loop.value, item, kind, reason)


def set_aside_count(loop: Loop, kind: str) -> float:
    """How many items ``loop`` set aside as ``kind`` in this process (tests, diagnostics)."""
    from prometheus_client import REGISTRY

    _counter()
    value = REGISTRY.get_sample_value(f"{METRIC}_total", {"loop": loop.value, "kind": kind})
    return value or 0.0
