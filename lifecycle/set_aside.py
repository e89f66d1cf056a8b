"""Poison items: what a loop (dispatch, schedule refresh) sets aside with its reason, counted and logged.

A loop handles each item on its own: an item it cannot handle is set aside here (one warning
line naming the loop, the item and the reason; one increment of the Prometheus counter
``kickoff_items_set_aside_total{loop}``) and the loop goes on with the next one.

The counter is created on first use, not at import: a Dramatiq worker with its Prometheus
middleware must import prometheus_client only after that middleware switched it to multiprocess
mode (the middleware's exposition server then serves this counter with Dramatiq's own).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

#: The counter's name as Prometheus exposes it (with ``_total``).
METRIC = "kickoff_items_set_aside_total"

_counter: Any = None
_counter_mu = threading.Lock()


@dataclass(frozen=True)
class SetAside:
    """One item a loop set aside."""

    loop: str  # the loop: "dispatch", "schedule refresh", "league refresh"
    item: str  # what was set aside: a match id, a schedule entry (its id or position)
    reason: str  # why it could not be handled, one line

    def as_dict(self) -> dict[str, str]:
        return {"item": self.item, "reason": self.reason}


def set_aside_counter() -> Any:
    """The process's Prometheus counter of set-aside items (registered in the default registry)."""
    global _counter
    with _counter_mu:
        if _counter is None:
            from prometheus_client import Counter

            _counter = Counter(
                METRIC.removesuffix("_total"),
                "Items a loop could not handle and set aside (dispatch: matches; refreshes: entries).",
                ["loop"],
            )
        return _counter


def set_aside(loop: str, item: str, reason: str) -> SetAside:
    """Set one item aside: one log line, one count; returns what was set aside."""
    logger.warning("%s: %s set aside: %s", loop, item, reason)
    set_aside_counter().labels(loop=loop).inc()
    return SetAside(loop=loop, item=item, reason=reason)


def set_aside_count(loop: str) -> float:
    """How many items ``loop`` set aside in this process so far (the counter's value)."""
    from prometheus_client import REGISTRY

    set_aside_counter()
    return float(REGISTRY.get_sample_value(METRIC, {"loop": loop}) or 0.0)
