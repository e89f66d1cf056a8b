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
#: A poll that fails is tried again this often, RETRY_SECONDS apart, before it counts as lost: the
#: suite's PostgreSQL is shared, and a moment at its connection limit ("too many clients") is not
#: a hole in the history (two polls further apart than the checker's MAX_POLL_GAP_SECONDS still are).
POLL_TRIES = 3
RETRY_SECONDS = 0.1
#: The last poll (the runs' final states) is tried this often, a second apart.
STOP_TRIES = 10


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
        """Stop polling, then poll once more (the last states; tried up to STOP_TRIES times, a second
        apart, before its error ends the run)."""
        self.halt()
        for attempt in range(1, STOP_TRIES + 1):
            try:
                self.poll()
                database.close()
                return
            except Exception as exc:
                if attempt == STOP_TRIES:
                    raise
                print(f"  recorder: last poll: {exc!r}", file=sys.stderr, flush=True)
                time.sleep(1.0)

    def halt(self) -> None:
        """Stop polling."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def _loop(self) -> None:
        try:
            self._polls()
        finally:
            database.close()  # the thread's kept connection

    def _polls(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            for attempt in range(1, POLL_TRIES + 1):
                try:
                    self.poll()
                    break
                except Exception as exc:  # counted: a history with lost polls fails the check
                    print(f"  recorder: {exc!r}", file=sys.stderr, flush=True)
                    if attempt == POLL_TRIES:
                        self.lost_polls += 1
                    elif self._stop.wait(RETRY_SECONDS):
                        return

    def poll(self) -> None:
        """One poll of the rows and event logs, on the calling thread's connection, kept open between
        polls: at the shared PostgreSQL's connection limit ("too many clients") a poll that had to
        connect anew was refused (seed 7's 10-minute run lost 5 polls so); a failed poll closes it."""
        try:
            self._poll()
        except Exception:
            database.close()
            raise

    def _poll(self) -> None:
        now = time.monotonic()
        rows = database.execute_sql(
            "SELECT r.id::text, m.sr_id, extract(epoch FROM r.created_at), "
            "extract(epoch FROM r.heartbeat_at), extract(epoch FROM r.ended_at), r.fence_token, "
            "r.exit_code FROM match_listener_records r JOIN matches m ON m.id = r.match_id "
            "WHERE r.match_id = ANY(%s::uuid[])",
            (list(self.matches),),
        ).fetchall()
        for row_id, sr_id, created, beat, ended, token, code in rows:
            key = (created, beat, ended, token, code)
            if self._last_row.get(row_id) != key:
                self._last_row[row_id] = key
                self.rows.append(
                    RowState(row_id, sr_id, float(created), _epoch(beat), _epoch(ended), token, code, now)
                )
        # Each match's event log: its newest row's fencing token (a stale run's row after a newer
        # run's is a token going down) and its row count. Counted once per match (a count in the
        # select list of a DISTINCT ON ran once per event: polls took 5-15 s late in a game).
        logged = database.execute_sql(
            "SELECT m.sr_id, e.fence_token, c.n FROM "
            "(SELECT match_id, count(*) AS n, max(seq) AS top FROM match_events "
            "WHERE match_id = ANY(%s::uuid[]) GROUP BY match_id) c "
            "JOIN match_events e ON e.match_id = c.match_id AND e.seq = c.top "
            "JOIN matches m ON m.id = c.match_id",
            (list(self.matches),),
        ).fetchall()
        self.polls.append(now)
        for sr_id, token, size in logged:
            if self._last_sample.get(sr_id) != (token, size):
                self._last_sample[sr_id] = (token, size)
                self.samples.append(ArchiveSample(sr_id, now, token, size))

    def open_rows(self) -> set[str]:
        return {r for r, (_, _, ended, _, _) in self._last_row.items() if ended is None}
