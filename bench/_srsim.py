"""Benchmark scaffolding: an srsim game script and a ``kickoff sim serve --no-db`` subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path


def write_games(
    path: Path,
    sr_ids: list[str],
    *,
    start_after: float,
    event_interval: float,
    event_count: int,
    is_test: bool = False,
    spread: float = 1.0,
    league: str = "mlb",
) -> Path:
    """Write an srsim script: one ``league`` game per id, kick-offs spread over ``spread`` s from
    ``start_after``."""
    n = len(sr_ids)
    games = [
        {
            "sr_id": sr_id,
            "league": league,
            "is_test": is_test,
            "start_after": start_after + spread * k / n,
            "event_interval": event_interval,
            "event_count": event_count,
        }
        for k, sr_id in enumerate(sr_ids)
    ]
    path.write_text(json.dumps({"games": games}))
    return path


def start_sim(
    script: Path, *, heartbeat_seconds: float, stamp_sends: bool = False
) -> tuple[subprocess.Popen[str], str]:
    """Start srsim without a database (``stamp_sends``: each event frame says when it was sent);
    return the process (the caller kills it) and its base URL."""
    kickoff = str(Path(sys.executable).with_name("kickoff"))
    proc = subprocess.Popen(
        [
            kickoff,
            "sim",
            "serve",
            "--no-db",
            "--port",
            "0",
            "--script",
            str(script),
            "--heartbeat-seconds",
            str(heartbeat_seconds),
            *(["--stamp-sends"] if stamp_sends else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        proc.wait(5)
        raise SystemExit(f"srsim did not start: {line!r}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep the pipe drained
    return proc, line.rsplit(" ", 1)[1].strip()
