"""Poison items: what a loop sets aside with its reason, counted in one metric and logged in one line.

A loop that reads messages or rows (dispatch, the sweep, schedule and league refreshes, ...)
handles each item on its own: an item it cannot handle is set aside here (one log line naming
the loop, the item and the reason, a warning unless the loop says it is an error; one increment
of ``kickoff_items_set_aside_total{loop,kind}``, ``kind`` a short fixed name of the problem or of
the loop's step) and the loop goes on with the next one. A service that does not answer is not
an item's fault: ``setting_aside`` lets ServiceUnavailable through, so the loop fails as a whole
and its next run tries again.

The counter is made (and prometheus_client imported) on first use, not at import: a Dramatiq
worker with its Prometheus middleware must import prometheus_client only after that middleware
switched it to multiprocess mode (its exposition server then serves this counter with Dramatiq's
own); an earlier import would keep every metric of the worker out of it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from config.errors import ServiceUnavailable

if TYPE_CHECKING:
    from prometheus_client import Counter

logger = logging.getLogger(__name__)

#: The counter's name as Prometheus exposes it (with ``_total``).
METRIC = "kickoff_items_set_aside_total"

#: Longest reason kept (a driver's message can be long).
REASON_CHARS = 500


@dataclass(frozen=True)
class SetAside:
    """One item a loop set aside, and why."""

    loop: str  # the loop: "dispatch", "sweep", "schedule refresh", "league refresh", ...
    item: str  # what was set aside: a match id, a lifecycle row, a schedule entry (its id or position)
    reason: str  # why it could not be handled, one line
    step: str | None = None  # what was being done to it, where a loop has several steps (the sweep's)
    match_id: str | None = None  # the internal Match.id the item concerns, if any
    record_id: str | None = None  # the lifecycle row the item is, if any

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: the fields that are set."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


@functools.cache
def set_aside_counter() -> Counter:
    """The process's ``kickoff_items_set_aside_total{loop,kind}`` (in the default registry)."""
    # prometheus_client picks its (multiprocess) value class when first imported: a worker sets
    # PROMETHEUS_MULTIPROC_DIR first (actors.prometheus), so the import waits for the first count
    from prometheus_client import Counter  # noqa: PLC0415

    return Counter(
        METRIC.removesuffix("_total"),
        "Items a loop could not handle and set aside with its reason, by loop and kind of problem.",
        ["loop", "kind"],
    )


def set_aside(
    loop: str,
    item: str,
    reason: str,
    *,
    kind: str | None = None,
    step: str | None = None,
    match_id: str | None = None,
    record_id: str | None = None,
    level: int = logging.WARNING,
) -> SetAside:
    """Set one item aside: one log line, one count; returns what was set aside.

    ``kind`` labels the count (default: the step, else "unhandled"); ``level`` is the line's (ERROR
    where the item is lost without an operator, e.g. a dead outbox row).
    """
    reason = reason[:REASON_CHARS]
    at = f" at {step}" if step else ""
    logger.log(level, "%s: %s set aside%s: %s", loop, item, at, reason)
    set_aside_counter().labels(loop=loop, kind=kind or step or "unhandled").inc()
    return SetAside(loop=loop, item=item, reason=reason, step=step, match_id=match_id, record_id=record_id)


def set_aside_count(loop: str, kind: str | None = None) -> float:
    """How many items ``loop`` set aside (as ``kind``, or of every kind) in this process so far."""
    return sum(
        sample.value
        for metric in set_aside_counter().collect()
        for sample in metric.samples
        if sample.name == METRIC
        and sample.labels["loop"] == loop
        and (kind is None or sample.labels["kind"] == kind)
    )


@contextmanager
def setting_aside(
    aside: list[SetAside] | None,
    *,
    loop: str,
    item: str,
    step: str | None = None,
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
        entry = set_aside(
            loop,
            item,
            f"{type(exc).__name__}: {exc}",
            step=step,
            match_id=match_id,
            record_id=record_id,
        )
        if aside is not None:
            aside.append(entry)
