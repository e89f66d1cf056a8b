"""srsim's view of a listener takeover (bench/recovery.py): when live data reached each stream
connection, and which events a match's archive holds.

srsim records, per stream connection, when it opened and closed and when live data (a live event
or a heartbeat, not a replay) was first and last sent on it (``/_srsim/connections``, the
machine's ``time.monotonic()``). A takeover lasts from the stop to the next live byte on a new
connection; a hand-off is without live data from the old connection's last live byte to the new
one's first; a negative gap is an overlap.
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


def last_live_of_old(sim_url: str, sr_ids: list[str], before: float, *, timeout: float) -> dict[str, float]:
    """Once every connection of ``sr_ids`` opened before ``before`` has closed: the last live byte
    per match on those connections (the old stream's end as srsim saw it)."""
    deadline = time.monotonic() + timeout
    while True:
        old = [c for c in connections(sim_url) if c["sr_id"] in sr_ids and c["opened"] < before]
        if all(c["closed"] is not None for c in old) or time.monotonic() > deadline:
            last: dict[str, float] = {}
            for c in old:
                if c["last_live"] is not None:
                    last[c["sr_id"]] = max(last.get(c["sr_id"], c["last_live"]), c["last_live"])
            return last
        time.sleep(0.1)


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
