"""Dedupe keys of job runs by trigger: job@slot, job@chain_root, job@key@debounce_window, the run id."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime

from config.clock import ensure_utc
from models.run_log import Trigger
from runs.catalog import Job
from runs.errors import InvalidTrigger

#: Triggers whose dedupe key is the fresh run id.
FRESH_KEY_TRIGGERS = frozenset({Trigger.MANUAL, Trigger.CLI, Trigger.MCP})


def _iso_slot(value: datetime) -> str:
    return ensure_utc(value, what="slot").replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


#: The longest event key and debounce window a caller may ask for (api/schemas.py states them).
EVENT_KEY_MAX_LENGTH = 200
DEBOUNCE_MAX_SECONDS = 31 * 86400.0
DEBOUNCE_MIN_SECONDS = 0.001  # a window index of a shorter one no longer fits a float's precision


def event_debounce_seconds(job: Job, requested: float | None, *, default: float = 60.0) -> float:
    """The window of an event run: the caller's ``requested`` seconds, else the job's, else ``default``."""
    if requested is None:
        return job.debounce_seconds or default
    if isinstance(requested, bool) or not (DEBOUNCE_MIN_SECONDS <= requested <= DEBOUNCE_MAX_SECONDS):
        raise InvalidTrigger(
            f"job {job.name}: debounce_seconds must be >= {DEBOUNCE_MIN_SECONDS:g}"
            f" and <= {DEBOUNCE_MAX_SECONDS:g}, got {requested!r}",
            field="debounce_seconds",
        )
    return float(requested)


def debounce_window(now: datetime, seconds: float) -> str:
    """The start of the ``seconds``-long window holding ``now`` (UTC, aligned to the epoch)."""
    epoch = ensure_utc(now, what="event time").timestamp()
    start = math.floor(epoch / seconds) * seconds
    return _iso_slot(datetime.fromtimestamp(start, tz=UTC))


def dedupe_key_for(
    job: Job,
    trigger: Trigger,
    *,
    run_id: uuid.UUID,
    now: datetime,
    slot: datetime | None = None,
    chain_root: uuid.UUID | str | None = None,
    event_key: str | None = None,
    debounce_seconds: float | None = None,
    default_debounce_seconds: float = 60.0,
) -> str:
    """The run's dedupe key by trigger (schedule job@slot, chain job@chain_root, event
    job@key@window, manual/cli/mcp the run id).

    An event's window is ``debounce_seconds`` long when given, else the job's
    ``debounce_seconds``, else ``default_debounce_seconds``; windows are aligned to the epoch.
    """
    if trigger is not Trigger.EVENT and (event_key is not None or debounce_seconds is not None):
        raise InvalidTrigger(
            f"job {job.name}: event_key and debounce_seconds are for event runs, not {trigger.value}",
            field="trigger",
        )
    if trigger is Trigger.SCHEDULE:
        if slot is None:
            raise InvalidTrigger(f"job {job.name}: a schedule run needs its slot")
        return f"{job.name}@{_iso_slot(slot)}"
    if trigger is Trigger.CHAIN:
        if chain_root is None:
            raise InvalidTrigger(f"job {job.name}: a chain run needs its chain root")
        return f"{job.name}@{chain_root}"
    if trigger is Trigger.EVENT:
        if not isinstance(event_key, str) or not event_key.strip():
            raise InvalidTrigger(f"job {job.name}: an event run needs an event key", field="event_key")
        if len(event_key) > EVENT_KEY_MAX_LENGTH:
            raise InvalidTrigger(
                f"job {job.name}: the event key is longer than {EVENT_KEY_MAX_LENGTH} characters",
                field="event_key",
            )
        seconds = event_debounce_seconds(job, debounce_seconds, default=default_debounce_seconds)
        return f"{job.name}@{event_key}@{debounce_window(now, seconds)}"
    if trigger in FRESH_KEY_TRIGGERS:
        return str(run_id)
    raise InvalidTrigger(f"job {job.name}: trigger {trigger.value!r} cannot be published")
