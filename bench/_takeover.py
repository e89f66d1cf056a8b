"""srsim's view of a listener takeover (bench/recovery.py): when live data reached each stream
connection, and which events a match's archive holds.

srsim records, per stream connection, when it opened and closed and when live data (a live event
or a heartbeat, not a replay) was first and last sent on it (``/_srsim/connections``, the
machine's ``time.monotonic()``). A takeover lasts from the stop to the next live byte on a new
connection; a hand-off is without live data from the old connection's last live byte to the new
one's first (none when the old one was still open at the new one's first live byte: a negative
gap is the overlap of both streams, by design in a hand-off, a failure after a kill).
"""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

#: Longest wait for the archives to hold every event sent (a backfill after the last stop).
ARCHIVE_WAIT_SECONDS = 60.0


@dataclass
class Takeover:
    """One stop of a worker: seconds from the stop to every match's next live byte on a new
    connection, and per match the seconds without live data (negative: an overlap)."""

    kind: str  # "kill" or "sigterm"
    matches: int
    seconds: float
    gaps: list[float] = field(default_factory=list)
    each: list[float] = field(default_factory=list)  # per match: seconds from the stop to its next live byte
    segments: list[dict[str, float]] = field(default_factory=list)  # per match: ``takeover_segments``

    @property
    def overlaps(self) -> int:
        return sum(gap < 0 for gap in self.gaps)


def connections(sim_url: str) -> list[dict]:
    """srsim's stream connections, oldest first (``opened``, ``closed``, ``first_live``, ``last_live``)."""
    with urllib.request.urlopen(f"{sim_url}/_srsim/connections", timeout=10) as answer:
        return json.load(answer)["connections"]


def sim_sessions(url: str) -> dict[str, dict]:
    """srsim's sessions by sr_id (position: the index of the next event not yet sent)."""
    with urllib.request.urlopen(f"{url}/_srsim/sessions", timeout=10) as answer:
        return {session["sr_id"]: session for session in json.load(answer)["sessions"]}


def new_connections(sim_url: str, sr_ids: list[str], after: float) -> dict[str, dict]:
    """Per match in ``sr_ids``: its first connection opened after ``after`` that sent live data."""
    first: dict[str, dict] = {}
    for c in connections(sim_url):
        if c["sr_id"] not in sr_ids or c["opened"] < after or c["first_live"] is None:
            continue
        if c["sr_id"] not in first or c["first_live"] < first[c["sr_id"]]["first_live"]:
            first[c["sr_id"]] = c
    return first


#: The segments of a takeover after a kill, in order (``takeover_segments``).
SEGMENTS = ("death_seen", "restarted", "connected", "feed_next_live")


def takeover_segments(
    *, killed_at: float, killed_wall: float, old_closed_wall: float, new_created_wall: float, connection: dict
) -> dict[str, float]:
    """One match's takeover after a kill, in seconds, cut where it can be seen from outside: from the
    kill to its old row closed by a reaper (``death_seen``: the death judged, rows closed), from there to
    the successor's row written (``restarted``: the start sent, taken from the queue, its checks and
    start lock), from there to srsim's new connection opened (``connected``: the run's set-up and the
    feed's connect), and from there to its first live byte (``feed_next_live``: the feed's own wait for
    its next event or heartbeat; a resumed connection's replay is sent at once but is no live data).

    ``killed_at`` and the connection's times are ``time.monotonic()``; ``killed_wall`` (taken with it)
    and the rows' times are wall-clock seconds (PostgreSQL's ``now()`` on the same machine).
    """
    opened_wall = killed_wall + (connection["opened"] - killed_at)
    return {
        "death_seen": old_closed_wall - killed_wall,
        "restarted": new_created_wall - old_closed_wall,
        "connected": opened_wall - new_created_wall,
        "feed_next_live": connection["first_live"] - connection["opened"],
    }


def live_since(sim_url: str, sr_ids: list[str], after: float, *, timeout: float) -> dict[str, float]:
    """Wait until every match in ``sr_ids`` got live data on a connection opened after ``after``
    (``time.monotonic()``); the first such live byte per match."""
    deadline = time.monotonic() + timeout
    while True:
        first: dict[str, float] = {}
        for c in connections(sim_url):
            if c["sr_id"] in sr_ids and c["opened"] >= after and c["first_live"] is not None:
                first[c["sr_id"]] = min(first.get(c["sr_id"], c["first_live"]), c["first_live"])
        if len(first) == len(sr_ids):
            return first
        if time.monotonic() > deadline:
            missing = sorted(set(sr_ids) - set(first))
            raise RuntimeError(f"no live data on a new connection within {timeout:g} s: {missing}")
        time.sleep(0.1)


def old_streams_end(
    sim_url: str, sr_ids: list[str], before: float, *, timeout: float
) -> dict[str, tuple[float, float]]:
    """Once every connection of ``sr_ids`` opened before ``before`` has closed: per match, the last
    live byte on those connections and when the last of them closed."""
    deadline = time.monotonic() + timeout
    while True:
        old = [c for c in connections(sim_url) if c["sr_id"] in sr_ids and c["opened"] < before]
        if all(c["closed"] is not None for c in old) or time.monotonic() > deadline:
            end: dict[str, tuple[float, float]] = {}
            for c in old:
                if c["last_live"] is None:
                    continue
                closed = c["closed"] if c["closed"] is not None else float("inf")
                last, was = end.get(c["sr_id"], (c["last_live"], closed))
                end[c["sr_id"]] = (max(last, c["last_live"]), max(was, closed))
            return end
        time.sleep(0.1)


def handoff_gap(first_live_of_new: float, last_live_of_old: float, old_closed: float) -> float:
    """Seconds without live data across a hand-off: from the old stream's last live byte to the new
    one's first when the old one closed before it; when the old one was still open then (it received
    whatever the feed sent until the new one was live) none, and the negative overlap of the two."""
    if old_closed >= first_live_of_new:
        return first_live_of_new - old_closed
    return first_live_of_new - last_live_of_old


def recording_overlaps(match_ids: list[str]) -> int:
    """Events of the matches' event logs logged (in ``seq`` order) under an older fencing token than
    one logged before them: a run that recorded after its successor did (two recording streams)."""
    from models.db import database

    try:
        (n,) = database.execute_sql(
            "SELECT count(*) FROM (SELECT fence_token, max(fence_token) OVER (PARTITION BY match_id ORDER BY"
            " seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM match_events"
            " WHERE match_id = ANY(%s::uuid[])) t WHERE fence_token < before",
            (match_ids,),
        ).fetchone()
    finally:
        database.close()
    return int(n)


def events_lost(script: Path, data_dir: Path, first: dict[str, int], end: dict[str, int]) -> tuple[int, int]:
    """(lost, sent): event ids srsim sent between ``first`` and ``end`` (positions per sr_id) that
    the match's event log does not hold once it holds them all or ARCHIVE_WAIT_SECONDS passed."""
    from models.event_log import messages_of
    from models.match import match_by_sr_id
    from srsim.script import load_script

    scheduled = datetime.now(UTC)  # event ids do not depend on it
    expected: dict[str, set[str]] = {}
    for game in load_script(script):
        sent = game.envelopes(scheduled)[first.get(game.sr_id, 0) : end.get(game.sr_id, 0)]
        expected[game.sr_id] = {_event_id(e) for e in sent} - {None}  # type: ignore[misc]
    deadline = time.monotonic() + ARCHIVE_WAIT_SECONDS
    while True:
        missing = 0
        for sr_id, ids in expected.items():
            match = match_by_sr_id(sr_id)
            kept = {_event_id(e) for e in messages_of(match.id)} if match is not None else set()
            missing += len(ids - kept)
        if not missing or time.monotonic() > deadline:
            return missing, sum(len(ids) for ids in expected.values())
        time.sleep(1)


def _event_id(item: object) -> str | None:
    """The provider's event id of an envelope or an archived event (None: not an event)."""
    if not isinstance(item, dict):
        return None
    for holder in (
        item.get("payload", {}).get("event") if isinstance(item.get("payload"), dict) else None,
        item.get("event"),
        item,
    ):
        if isinstance(holder, dict) and isinstance(holder.get("id"), str) and "type" in holder:
            return holder["id"]
    return None
