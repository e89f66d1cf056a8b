"""A match's story around a recovery violation, for the chaos run's report.

A slow recovery in the suite's chaos run is seen by the checker as two numbers (when the match
lost its stream, when it streamed again); why it took that long is in the workers' logs, which a
CI run does not keep. ``story`` puts the match's own lines of every worker log inside the
violation's window (from a little before the stream was lost to just after it streamed again),
and srsim's connections of the match, beside the violation, as seconds since the nemesis started.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from harness.chaos.checker import Connection

#: Seconds of log before the stream was lost that belong to the story (the fault's start, a hand-off).
LEAD_SECONDS = 20.0
#: Lines of log kept per story: the first and the last halves of what matched, the middle elided.
MAX_LOG_LINES = 40
#: Characters kept of each log line's message.
MAX_LINE_CHARS = 240
#: A kickoff log line: its ISO time, its level and logger, its thread and context, its message.
_LINE = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+[+-]\d\d:\d\d) (?P<level>[A-Z]+) (?P<logger>\S+) "
    r"\[[^\]]*\](?: \([^)]*\))?: (?P<message>.*)$"
)


def _seconds(at: str, wall_t0: float) -> float:
    return datetime.fromisoformat(at).timestamp() - wall_t0


def log_lines(logdir: Path, match_id: str, *, wall_t0: float, since: float, until: float) -> list[str]:
    """Every worker log's lines about ``match_id`` between ``since`` and ``until`` (seconds since the
    nemesis started, ``wall_t0`` its wall clock), in time order: ``"  41.3 h2w1g0 WARNING ..."``."""
    found: list[tuple[float, str]] = []
    for path in sorted(logdir.glob("h*w*g*.log")):
        with path.open(errors="replace") as lines:
            for line in lines:
                if match_id not in line:
                    continue
                parsed = _LINE.match(line.rstrip("\n"))
                if parsed is None:
                    continue
                at = _seconds(parsed["at"], wall_t0)
                if since <= at <= until:
                    message = parsed["message"][:MAX_LINE_CHARS]
                    found.append((at, f"{at:6.1f} {path.stem} {parsed['level']} {message}"))
    found.sort(key=lambda item: item[0])
    return _elide([text for _, text in found], MAX_LOG_LINES)


def _elide(lines: list[str], keep: int) -> list[str]:
    if len(lines) <= keep:
        return lines
    head = keep // 2
    tail = keep - head
    return [*lines[:head], f"... {len(lines) - keep} lines ...", *lines[-tail:]]


def connection_lines(connections: Iterable[Connection], sr_id: str, *, t0: float) -> list[str]:
    """srsim's connections of ``sr_id``, one line each: the worker, opened, first live, closed."""

    def at(value: float | None) -> str:
        return "-" if value is None else f"{value - t0:.1f}"

    mine = sorted((c for c in connections if c.sr_id == sr_id), key=lambda c: c.opened)
    return [
        f"conn {c.via or '?'} opened {at(c.opened)} live {at(c.first_live)}..{at(c.last_live)} "
        f"closed {at(c.closed)}"
        for c in mine
    ]


def story(
    violation: dict,
    *,
    match_id: str,
    connections: Iterable[Connection],
    logdir: Path,
    t0: float,
    wall_t0: float,
) -> list[str]:
    """The lines that tell why ``violation`` (a recovery one: ``from``/``to`` on the monotonic clock
    of ``t0``) took as long as it did."""
    since = violation["from"] - t0 - LEAD_SECONDS
    until = violation["to"] - t0 + 2.0
    header = (
        f"match {match_id} ({violation['sr_id']}): no stream from {violation['from'] - t0:.1f} s "
        f"to {violation['to'] - t0:.1f} s after the nemesis started"
    )
    return [
        header,
        *connection_lines(connections, violation["sr_id"], t0=t0),
        *log_lines(logdir, match_id, wall_t0=wall_t0, since=since, until=until),
    ]
