"""The match card's timeline of its stream: each run's time with a stream, and the gaps without one.

Two kinds of gap are drawn: a gap inside a run (the stream dropped, fell silent, or a takeover
began where an earlier run's record ends: each run writes a ``gap`` marker to the event log as the
gap closes, models.event_log.gap_markers), and the time between one run's end and the next run's
start (no listener at all). A run that ended with gaps still unrecovered has its newest gaps shown
as not recovered (the pending gaps are always the newest ones), and its missing events are named
on its band. Positions are percentages of the timeline's width, so the page draws it without script.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

#: A band narrower than this (percent of the width) is drawn this wide, so a short gap stays visible.
MIN_WIDTH = 0.5
#: Between two runs, a pause shorter than this is no gap (a takeover's marker covers a handover).
BETWEEN_RUNS_SECONDS = 1.0


@dataclass(frozen=True)
class Band:
    """One stretch of the timeline: where it is drawn (percent), what it is, when."""

    left: float
    width: float
    began: datetime
    ended: datetime
    kind: str  # "run", "stream gap", "no listener"
    label: str
    record_id: str | None = None
    recovered: bool = True

    @property
    def seconds(self) -> float:
        return max((self.ended - self.began).total_seconds(), 0.0)


@dataclass(frozen=True)
class GapTimeline:
    start: datetime
    end: datetime
    runs: list[Band]
    gaps: list[Band]

    @property
    def ticks(self) -> list[tuple[float, datetime]]:
        """Five evenly spaced times along the axis: (percent, time)."""
        span = self.end - self.start
        return [(i * 25.0, self.start + span * (i / 4)) for i in range(5)]


def _at(value: datetime | str | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def gap_timeline(
    runs: list[dict[str, Any]], markers: list[tuple[str | None, dict[str, Any]]], *, now: datetime
) -> GapTimeline | None:
    """The timeline of ``runs`` (match_detail's, any order) and their gap ``markers`` (oldest first);
    None when there is no run and no gap to draw."""
    spans: list[tuple[dict[str, Any], datetime, datetime]] = []
    for run in runs:
        began = _at(run.get("started_at"))
        if began is None:
            continue
        ended = _at(run.get("ended_at")) or max(now, began)
        spans.append((run, began, ended))
    spans.sort(key=lambda item: item[1])
    unrecovered = {run["record_id"]: int(run.get("gaps_unrecovered") or 0) for run, _, _ in spans}
    raw_gaps: list[tuple[datetime, datetime, str, str, str | None, bool]] = []
    by_run: dict[str | None, list[int]] = {}
    for record_id, fields in markers:
        began, ended = _at(fields.get("began")), _at(fields.get("ended"))
        if began is None or ended is None:
            continue
        by_run.setdefault(record_id, []).append(len(raw_gaps))
        what = f"{fields.get('cause', 'gap')}: {fields.get('how', '')}".rstrip(": ")
        raw_gaps.append((began, ended, "stream gap", what, record_id, True))
    for record_id, indexes in by_run.items():  # a run's newest pending gaps are its unrecovered ones
        pending = unrecovered.get(record_id or "", 0)
        for i in indexes[len(indexes) - pending :] if pending else []:
            began, ended, kind, what, rid, _ = raw_gaps[i]
            raw_gaps[i] = (began, ended, kind, what + " (not recovered)", rid, False)
    for (before, _, ended), (after, began, _) in itertools.pairwise(spans):
        if (began - ended).total_seconds() >= BETWEEN_RUNS_SECONDS:
            what = f"no listener between run {before['record_id'][:8]} and run {after['record_id'][:8]}"
            raw_gaps.append((ended, began, "no listener", what, None, True))
    if not spans and not raw_gaps:
        return None
    times = [t for _, b, e in spans for t in (b, e)] + [t for g in raw_gaps for t in g[:2]]
    start, end = min(times), max(times)
    if end <= start:
        end = start + timedelta(seconds=1)
    total = (end - start).total_seconds()

    def place(began: datetime, ended: datetime) -> tuple[float, float]:
        left = (began - start).total_seconds() / total * 100
        width = max((ended - began).total_seconds() / total * 100, MIN_WIDTH)
        return round(min(left, 100 - MIN_WIDTH), 3), round(width, 3)

    run_bands = []
    for run, began, ended in spans:
        label = f"run {run['record_id'][:8]}" + ("" if run.get("ended_at") else " (open)")
        if run.get("events_unrecovered"):
            label += f", {run['events_unrecovered']} events missing"
        run_bands.append(Band(*place(began, ended), began, ended, "run", label, run["record_id"]))
    gap_bands = [
        Band(*place(began, ended), began, ended, kind, what, rid, recovered)
        for began, ended, kind, what, rid, recovered in sorted(raw_gaps, key=lambda g: g[0])
    ]
    return GapTimeline(start, end, run_bands, gap_bands)
