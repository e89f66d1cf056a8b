"""The chaos harness's eyes on PostgreSQL: a ``Recorder`` thread polls every lifecycle row of the
run's matches and each match's event log (its newest row's fencing token and its row count), and
keeps when each poll ran and how many failed (``harness.chaos.checker`` judges a history with
lost polls)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.chaos.checker import ArchiveSample, RowState
from models.db import database

POLL_SECONDS = 0.5


def _epoch(value: Any) -> float | None:
    return None if value is None else float(value)


class Recorder:
    """Polls every lifecycle row of the run's matches and each one's event log (newest token, rows)."""

    def __init__(self, matches: dict[str, str], data_dir: Path | None = None) -> None:
        self.matches = matches  # match id -> sr_id
        self.rows: list[RowState] = []
        self.samples: list[ArchiveSample] = []
        self.polls: list[float] = []  # when each poll that succeeded ran
        self.lost_polls = 0
        self._last_row: dict[str, tuple] = {}
        self._last_sample: dict[str, tuple] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="recorder", daemon=True)

    def start(self) -> Recorder:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling, then poll once more (the last states)."""
        self.halt()
        self.poll()

    def halt(self) -> None:
        """Stop polling."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self.poll()
            except Exception as exc:  # counted: a history with lost polls fails the check
                self.lost_polls += 1
                print(f"  recorder: {exc!r}", file=sys.stderr, flush=True)

    def poll(self) -> None:
        now = time.monotonic()
        try:
            rows = database.execute_sql(
                "SELECT r.id::text, m.sr_id, extract(epoch FROM r.created_at), "
                "extract(epoch FROM r.heartbeat_at), extract(epoch FROM r.ended_at), r.fence_token, "
                "r.exit_code FROM match_listener_records r JOIN matches m ON m.id = r.match_id "
                "WHERE r.match_id = ANY(%s::uuid[])",
                (list(self.matches),),
            ).fetchall()
        finally:
            database.close()
        for row_id, sr_id, created, beat, ended, token, code in rows:
            key = (created, beat, ended, token, code)
            if self._last_row.get(row_id) != key:
                self._last_row[row_id] = key
                self.rows.append(
                    RowState(row_id, sr_id, float(created), _epoch(beat), _epoch(ended), token, code, now)
                )
        # Each match's event log: its newest row's fencing token (a stale run's row after a newer
        # run's is a token going down) and its row count.
        try:
            logged = database.execute_sql(
                "SELECT DISTINCT ON (e.match_id) m.sr_id, e.fence_token, "
                "(SELECT count(*) FROM match_events c WHERE c.match_id = e.match_id) "
                "FROM match_events e JOIN matches m ON m.id = e.match_id "
                "WHERE e.match_id = ANY(%s::uuid[]) ORDER BY e.match_id, e.seq DESC",
                (list(self.matches),),
            ).fetchall()
        finally:
            database.close()
        self.polls.append(now)
        for sr_id, token, size in logged:
            if self._last_sample.get(sr_id) != (token, size):
                self._last_sample[sr_id] = (token, size)
                self.samples.append(ArchiveSample(sr_id, now, token, size))

    def open_rows(self) -> set[str]:
        return {r for r, (_, _, ended, _, _) in self._last_row.items() if ended is None}
