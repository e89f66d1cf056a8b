"""Items a lifecycle cleanup loop cannot handle: set aside with their reason, counted and logged once.

A cleanup loop (the sweep, the barrier clean-up after an abandon or a stop) handles each row or
match on its own inside ``setting_aside``: an item whose handling raises is left as it is, its
reason is kept (``SetAside``, in the loop's result), counted (``set_aside_counter``) and logged in one
line, and the loop goes on with the next item. A service that does not answer is not an item's
fault: ServiceUnavailable propagates and the loop fails as a whole (its next tick tries again).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from config.errors import ServiceUnavailable

if TYPE_CHECKING:
    from prometheus_client import Counter

logger = logging.getLogger(__name__)

#: Longest reason kept (a driver's message can be long).
REASON_CHARS = 500


@functools.cache
def set_aside_counter() -> Counter:
    """``kickoff_lifecycle_items_set_aside_total{step}`` in prometheus_client's default registry.

    Made (and prometheus_client imported) on first use, not at import: a Dramatiq worker with
    DRAMATIQ_PROMETHEUS imports this module before its Prometheus middleware switches
    prometheus_client to multiprocess mode, and an earlier import would keep every metric of the
    worker out of its exposition server. The API's /metrics serves it too, for the sweeps the
    API runs.
    """
    from prometheus_client import Counter

    return Counter(
        "kickoff_lifecycle_items_set_aside_total",
        "Rows and matches a lifecycle cleanup loop could not handle and left as they are, by step.",
        ["step"],
    )


@dataclass(frozen=True)
class SetAside:
    """One item a cleanup loop left as it is, and why."""

    step: str  # what was being done: release_start_lock, clear_start_barriers, judge_worker_leases, ...
    match_id: str | None  # internal Match.id (None: a step about no single match)
    record_id: str | None  # the lifecycle row, when the item is a row
    reason: str  # the error, as "ErrorClass: message"


@contextmanager
def setting_aside(
    aside: list[SetAside] | None,
    *,
    step: str,
    match_id: str | None = None,
    record_id: str | None = None,
) -> Iterator[None]:
    """Handle one item inside: an error (other than an outage) sets it aside and is not raised.

    The set-aside item is appended to ``aside`` (when given), counted and logged.
    """
    try:
        yield
    except ServiceUnavailable:
        raise
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"[:REASON_CHARS]
        set_aside_counter().labels(step=step).inc()
        logger.warning(
            "match %s: row %s set aside at %s, left as it is: %s",
            match_id or "-",
            record_id or "-",
            step,
            reason,
        )
        if aside is not None:
            aside.append(SetAside(step=step, match_id=match_id, record_id=record_id, reason=reason))
