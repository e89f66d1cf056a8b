"""The history store: per-minute points of the series of models.history_series, written, read and pruned.

``add_points`` adds counts to their minutes (what the processes that count things flush),
``put_points`` writes a minute's value (the rollup's snapshots and derived minutes), ``history``
answers one series over a range, bucketed (the API's and the console's charts), ``prune_history``
deletes what is older than the retention. The rollup's derivations are models.history_rollup.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from config.clock import utcnow
from config.errors import InvalidQuery
from models.boundary import translate_database_errors
from models.db import database
from models.history_series import ALL, DEFAULT_TOP, MAX_TOP, RANGES, SERIES, Kind, Series
from models.match import match_labels

#: A point's identity: (series, key, minute) with the minute a UTC datetime at :00 seconds.
PointKey = tuple[str, str, datetime]
#: Rows one INSERT writes at most.
_CHUNK = 1000

_ADD = """
INSERT INTO history_points (series, key, minute, value)
SELECT * FROM unnest(%s::text[], %s::text[], %s::timestamptz[], %s::float8[])
ON CONFLICT (series, minute, key) DO UPDATE SET value = history_points.value + EXCLUDED.value
"""
_PUT = """
INSERT INTO history_points (series, key, minute, value)
SELECT * FROM unnest(%s::text[], %s::text[], %s::timestamptz[], %s::float8[])
ON CONFLICT (series, minute, key) DO UPDATE SET value = EXCLUDED.value
"""
_BUCKETS = """
SELECT extract(epoch FROM date_bin(make_interval(secs => %s), minute, TIMESTAMPTZ '2000-01-01'))::bigint,
       key, sum(value), count(*)
  FROM history_points
 WHERE series = %s AND minute >= %s AND minute < %s {key}
 GROUP BY 1, 2
"""


def minute_of(at: datetime) -> datetime:
    """The minute ``at`` falls in (seconds and microseconds dropped)."""
    return at.replace(second=0, microsecond=0)


def _write(statement: str, points: Mapping[PointKey, float]) -> int:
    items = sorted(points.items(), key=lambda item: (item[0][0], item[0][2], item[0][1]))
    for start in range(0, len(items), _CHUNK):
        chunk = items[start : start + _CHUNK]
        columns = (
            [k[0] for k, _ in chunk],
            [k[1] for k, _ in chunk],
            [k[2] for k, _ in chunk],
            [float(v) for _, v in chunk],
        )
        database.execute_sql(statement, columns)
    return len(items)


@translate_database_errors
def add_points(points: Mapping[PointKey, float]) -> int:
    """Add each value to its point (created at 0 when new); the number of points written. Sorted, so
    two processes adding to the same minutes take their row locks in one order."""
    with database.atomic():
        return _write(_ADD, points)


@translate_database_errors
def put_points(points: Mapping[PointKey, float]) -> int:
    """Set each point to its value; the number of points written."""
    with database.atomic():
        return _write(_PUT, points)


@translate_database_errors
def prune_history(*, days: int, now: datetime | None = None) -> int:
    """Delete the points older than ``days`` days; how many."""
    cut = (now or utcnow()) - timedelta(days=days)
    return database.execute_sql("DELETE FROM history_points WHERE minute < %s", (cut,)).rowcount


@translate_database_errors
def _buckets(
    series: str, start: datetime, end: datetime, step: int, key: str | None
) -> list[tuple[int, str, float, int]]:
    where = "AND key = %s" if key is not None else ""
    params: tuple[Any, ...] = (step, series, start, end) + ((key,) if key is not None else ())
    return database.execute_sql(_BUCKETS.format(key=where), params).fetchall()


@dataclass(frozen=True)
class HistoryAnswer:
    """One series over a range: bucket start times and, per line, one value per bucket (None: no reading)."""

    series: str
    title: str
    unit: str
    kind: str
    keyed_by: str
    source: str
    range: str
    step_seconds: int
    start: str  # ISO 8601, the first bucket's start
    end: str  # ISO 8601, the end of the range (now)
    times: list[int]  # each bucket's start, Unix seconds
    values: dict[str, list[float | None]]  # "all" (every key summed) and the busiest keys
    labels: dict[str, str]  # key -> how a person names it (a match: "HOU @ KC (mlb)")
    keys: int  # keys with a point in the range (only the busiest have a line of their own)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def series_named(name: str) -> Series:
    """The declared series ``name``; InvalidQuery (422) naming the known ones."""
    found = SERIES.get(name)
    if found is None:
        raise InvalidQuery(f"no history series {name[:60]!r} (one of {', '.join(SERIES)})", field="series")
    return found


def history(
    name: str,
    *,
    range_name: str = "1h",
    key: str | None = None,
    top: int = DEFAULT_TOP,
    now: datetime | None = None,
) -> HistoryAnswer:
    """Series ``name`` over ``range_name`` (1h, 24h, 7d), bucketed at the range's step.

    ``key`` answers that key's line alone (e.g. one match's events); otherwise the ``top`` keys
    with the largest sum over the range get a line each, beside "all". A counter's bucket is its mean per
    minute (missing minutes are 0), a gauge's the mean of its readings (None without any).
    InvalidQuery (422) for an unknown series or range, or a ``top`` out of 1..MAX_TOP.
    """
    series = series_named(name)
    span = RANGES.get(range_name)
    if span is None:
        raise InvalidQuery(f"range is one of {', '.join(RANGES)}, not {range_name[:20]!r}", field="range")
    if not 1 <= top <= MAX_TOP:
        raise InvalidQuery(f"top is from 1 to {MAX_TOP}, not {top}", field="top")
    end = now or utcnow()
    step = span.step_seconds
    first = int((end.timestamp() - span.seconds) // step + 1) * step
    times = list(range(first, int(end.timestamp()) + 1, step))
    start = datetime.fromtimestamp(first, tz=end.tzinfo)
    rows = _buckets(series.name, start, end, step, key)
    per_key: dict[str, dict[int, tuple[float, int]]] = defaultdict(dict)
    for at, k, total, n in rows:
        per_key[k][int(at)] = (float(total), int(n))
    minutes = step / 60

    def line(points: dict[int, tuple[float, int]]) -> list[float | None]:
        if series.kind is Kind.COUNTER:
            return [round(points.get(t, (0.0, 0))[0] / minutes, 3) for t in times]
        return [round(points[t][0] / points[t][1], 3) if t in points else None for t in times]

    busiest = sorted(per_key, key=lambda k: (-sum(v for v, _ in per_key[k].values()), k))[:top]
    keys = len(per_key)
    values: dict[str, list[float | None]] = {}
    if key is not None:  # one key asked for: its line alone
        busiest = [key]
        per_key.setdefault(key, {})
    elif series.keyed_by or not per_key:
        merged: dict[int, tuple[float, int]] = {}
        for points in per_key.values():
            for t, (total, n) in points.items():
                old = merged.get(t, (0.0, 0))
                # a gauge's "all": the sum of each key's mean reading in the bucket
                add = total if series.kind is Kind.COUNTER else total / n
                merged[t] = (old[0] + add, 1 if series.kind is Kind.GAUGE else old[1] + n)
        values[ALL] = line(merged)
    for k in busiest:
        values[k or ALL] = line(per_key[k])
    labels = {k: k for k in values}
    if ALL in values:
        labels[ALL] = "all" if series.keyed_by else series.title
    if series.match_keys:
        for mid, label in match_labels([k for k in busiest if k]).items():
            labels[mid] = label
    return HistoryAnswer(
        series=series.name,
        title=series.title,
        unit=series.unit,
        kind=series.kind.value,
        keyed_by=series.keyed_by,
        source=series.source,
        range=span.name,
        step_seconds=step,
        start=start.isoformat(),
        end=end.isoformat(),
        times=times,
        values=values,
        labels=labels,
        keys=keys,
    )
