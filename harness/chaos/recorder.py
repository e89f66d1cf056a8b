"""The chaos harness's eyes on PostgreSQL and the archives: a ``Recorder`` thread polls every
lifecycle row of the run's matches and every archive's fence and size, and keeps when each poll
ran and how many failed (``harness.chaos.checker`` judges a history with lost polls)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.chaos.checker import ArchiveSample, RowState
from listener.archive import archive_path, fence_path, shortcode_for
from models.db import database

POLL_SECONDS = 0.5


def _epoch(value: Any) -> float | None:
    return None if value is None else float(value)


class Recorder:
    """Polls every lifecycle row of the run's matches and every archive's fence and size."""

    def __init__(self, matches: dict[str, str], data_dir: Path, *, league: str = "mlb") -> None:
        self.matches = matches  # match id -> sr_id
        self.paths = {sr: archive_path(data_dir, league, shortcode_for(sr)) for sr in matches.values()}
        self.fences = {sr: fence_path(p) for sr, p in self.paths.items()}
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
        self.polls.append(now)
        for sr_id, path in self.paths.items():
            try:
                size = path.stat().st_size
                text = self.fences[sr_id].read_text().strip()
            except OSError:
                continue
            token = int(text) if text.isdigit() else None
            if self._last_sample.get(sr_id) != (token, size):
                self._last_sample[sr_id] = (token, size)
                self.samples.append(ArchiveSample(sr_id, now, token, size))

    def open_rows(self) -> set[str]:
        return {r for r, (_, _, ended, _, _) in self._last_row.items() if ended is None}
