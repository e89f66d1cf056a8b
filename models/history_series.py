"""The history series: one declaration each (name, what it counts, its unit, kind, keys and writer).

Every series is a set of per-minute points in ``history_points`` (models.history), one per key
and minute. A **counter** holds what happened in the minute (events, triggers, publishes): a
coarser bucket shows the mean per minute of its minutes (a minute without a point is 0). A
**gauge** holds a reading taken in the minute (open listener runs by badge, outbox rows waiting, a
job's mean run time): a coarser bucket shows the mean of the readings it has (none: no value).
The API (``GET /v1/history/{series}``), the console's History page and the rollup job all derive
from this table; ``RANGES`` says which spans may be asked for and at what step.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """How a series' minutes combine into a coarser bucket."""

    COUNTER = "counter"  # what happened in the minute: a bucket shows the mean per minute
    GAUGE = "gauge"  # a reading taken in the minute: a bucket shows the mean of its readings


class Writer(StrEnum):
    """Who writes a series' points."""

    ROLLUP = "rollup"  # the rollup job, every minute (snapshots and what it derives from PostgreSQL)
    PROCESS = "process"  # the processes that count it, added to the minute (models.history_recorder)


@dataclass(frozen=True)
class Series:
    """One history series."""

    name: str
    title: str  # what a chart is called
    unit: str  # the unit of a point, per minute for a counter
    kind: Kind
    writer: Writer
    keyed_by: str  # what its keys are ("" : one unkeyed line)
    source: str  # where its numbers come from, for the docs and the API's answer

    @property
    def match_keys(self) -> bool:
        """Whether its keys are match ids (shown with the match's title and league)."""
        return self.keyed_by == "match"


#: Keys of the listeners series: the badges of an open run.
OPEN_BADGES = ("Running", "Late", "Stale")
#: Keys of the listener_ends series: how a run ended (Failed: an exit outside 0, 10, 13, 14, 15).
END_OUTCOMES = ("Ended", "Failed", "Abandoned", "Stopped")

SERIES: dict[str, Series] = {
    s.name: s
    for s in (
        Series(
            "listeners",
            "Open listener runs by badge",
            "runs",
            Kind.GAUGE,
            Writer.ROLLUP,
            "badge",
            "the listener board's badges of every open run (lifecycle rows, worker leases), each minute",
        ),
        Series(
            "listener_ends",
            "Listener runs ended, by outcome",
            "runs/min",
            Kind.COUNTER,
            Writer.ROLLUP,
            "outcome",
            "lifecycle rows by end time and exit code (Failed: 9, 11, 12, 16 or another failure exit)",
        ),
        Series(
            "events",
            "Events recorded",
            "events/min",
            Kind.COUNTER,
            Writer.PROCESS,
            "match",
            "listener workers: each distinct message of a game once, counted when it arrives",
        ),
        Series(
            "takeovers",
            "Takeovers",
            "runs/min",
            Kind.COUNTER,
            Writer.ROLLUP,
            "",
            "lifecycle rows: a run started for a match whose previous run ended Abandoned (14)",
        ),
        Series(
            "gaps",
            "Stream gaps",
            "gaps/min",
            Kind.COUNTER,
            Writer.PROCESS,
            "match",
            "listener workers: a reconnect, a takeover or a silence, counted when the stream is back",
        ),
        Series(
            "gap_seconds",
            "Seconds without a stream",
            "s/min",
            Kind.COUNTER,
            Writer.PROCESS,
            "match",
            "listener workers: the length of each gap, counted when the stream is back",
        ),
        Series(
            "outbox_depth",
            "Outbox rows waiting, by queue",
            "rows",
            Kind.GAUGE,
            Writer.ROLLUP,
            "queue",
            "pending outbox rows by queue, each minute",
        ),
        Series(
            "outbox_published",
            "Outbox rows published, by queue",
            "rows/min",
            Kind.COUNTER,
            Writer.ROLLUP,
            "queue",
            "outbox rows by publish time (confirmed by the broker)",
        ),
        Series(
            "triggers",
            "Trigger answers, by queue and answer",
            "triggers/min",
            Kind.COUNTER,
            Writer.PROCESS,
            "queue answer",
            "the processes that answer triggers (API, CLI): queued, pending, duplicate, or a refusal's kind",
        ),
        Series(
            "job_runs",
            "Job runs ended, by job and outcome",
            "runs/min",
            Kind.COUNTER,
            Writer.ROLLUP,
            "job outcome",
            "run_log rows by end time and status",
        ),
        Series(
            "job_run_seconds",
            "Job run duration (mean), by job",
            "s",
            Kind.GAUGE,
            Writer.ROLLUP,
            "job",
            "run_log rows by end time: the mean duration of the runs that ended in the minute",
        ),
    )
}


@dataclass(frozen=True)
class Range:
    """A span a chart may show and the bucket it is drawn at."""

    name: str
    seconds: int
    step_seconds: int


RANGES: dict[str, Range] = {
    r.name: r for r in (Range("1h", 3600, 60), Range("24h", 86400, 300), Range("7d", 7 * 86400, 1800))
}
#: Keys a keyed series shows at most (the busiest over the range); the others count in "all".
MAX_TOP = 50
DEFAULT_TOP = 8
#: The key under which every key's sum is answered.
ALL = "all"
