"""The chaos run's story of a slow recovery (harness/chaos/story.py) from worker logs on disk."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.chaos.checker import Connection
from harness.chaos.story import MAX_LOG_LINES, story

MATCH = "355f9368-5f13-46e0-85a7-e2c0476c063b"
OTHER = "0479b21d-bc2c-4e27-abf0-f36d4f8f28e4"
SR_ID = "sr:match:240e8f34-f768-4892-9bf8-71a1f5dbb308"
WALL_T0 = datetime(2026, 12, 6, 11, 54, 0, tzinfo=UTC)
#: The monotonic clock's reading when the nemesis started (any value: the story subtracts it).
T0 = 1000.0


def _line(seconds: float, level: str, logger: str, message: str, *, context: bool = True) -> str:
    at = (WALL_T0 + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")
    ctx = f" (start_match_listener msg=start-match-listener.{MATCH}.x match={MATCH})" if context else ""
    return f"{at} {level} {logger} [21377 Thread-8]{ctx}: {message}\n"


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(lines))


def test_a_story_holds_the_matchs_connections_and_its_log_lines_inside_the_window_in_time_order(
    tmp_path: Path,
):
    _write(
        tmp_path / "h2w1g0.log",
        [
            "[2026-12-06 11:54:18,408] [PID 21370] [MainThread] [dramatiq.MainProcess] [INFO] booting up.\n",
            _line(1.0, "INFO", "lifecycle.listener_run", f"match {MATCH}: listener started (early)"),
            _line(30.0, "WARNING", "listener.match_listener", f"match {MATCH} stream silent; reconnecting"),
            _line(31.0, "INFO", "lifecycle.cleanup", f"match {OTHER}: restarting it", context=False),
            _line(45.0, "WARNING", "lifecycle.guarded_start", f"match {MATCH}: the feed was lost"),
        ],
    )
    _write(
        tmp_path / "h1w0g0.log",
        [
            _line(
                40.0,
                "WARNING",
                "lifecycle.runtime",
                f"restarting 2 matches of dead listener workers: ['{MATCH}']",
                context=False,
            ),
            _line(96.0, "INFO", "lifecycle.listener_run", f"match {MATCH}: listener started (row r2)"),
            _line(200.0, "INFO", "lifecycle.listener_run", f"match {MATCH}: long after"),
        ],
    )
    connections = [
        Connection(SR_ID, "h2w1g0", 2, T0 - 1.0, T0 + 41.8, T0 - 0.5, T0 + 27.3),
        Connection(SR_ID, "h1w0g0", 1, T0 + 95.9, None, T0 + 96.0, None),
        Connection("sr:match:other", "h1w0g0", 1, T0 + 5.0, None, T0 + 5.1, None),
    ]
    violation = {"kind": "slow-recovery", "sr_id": SR_ID, "from": T0 + 27.3, "to": T0 + 96.0}

    lines = story(
        violation,
        match_id=MATCH,
        connections=connections,
        logdir=tmp_path,
        t0=T0,
        wall_t0=WALL_T0.timestamp(),
    )

    assert lines[0] == f"match {MATCH} ({SR_ID}): no stream from 27.3 s to 96.0 s after the nemesis started"
    assert lines[1:3] == [
        "conn h2w1g0 opened -1.0 live -0.5..27.3 closed 41.8",
        "conn h1w0g0 opened 95.9 live 96.0..- closed -",
    ]
    assert lines[3:] == [
        f"  30.0 h2w1g0 WARNING match {MATCH} stream silent; reconnecting",
        f"  40.0 h1w0g0 WARNING restarting 2 matches of dead listener workers: ['{MATCH}']",
        f"  45.0 h2w1g0 WARNING match {MATCH}: the feed was lost",
        f"  96.0 h1w0g0 INFO match {MATCH}: listener started (row r2)",
    ]


def test_a_long_story_keeps_its_first_and_last_lines_and_says_how_many_it_left_out(tmp_path: Path):
    _write(
        tmp_path / "h0w0g0.log",
        [
            _line(10.0 + n * 0.1, "INFO", "listener.match_listener", f"match {MATCH} line {n}")
            for n in range(100)
        ],
    )
    violation = {"kind": "not-recovered", "sr_id": SR_ID, "from": T0 + 10.0, "to": T0 + 30.0}

    lines = story(
        violation, match_id=MATCH, connections=[], logdir=tmp_path, t0=T0, wall_t0=WALL_T0.timestamp()
    )

    logged = lines[1:]
    assert len(logged) == MAX_LOG_LINES + 1
    assert logged[0].endswith("line 0") and logged[-1].endswith("line 99")
    assert f"... {100 - MAX_LOG_LINES} lines ..." in logged
