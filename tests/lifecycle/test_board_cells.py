"""The board's cells: gaps and archive verification in one short text each (pure functions)."""

from __future__ import annotations

from typing import Any

import pytest

from cli.board import render_board
from lifecycle import takeover
from lifecycle.board import BoardEntry, archive_cell, gaps_cell, verification_counts


@pytest.mark.parametrize(
    ("args", "cell"),
    [
        ((None, None, None), "-"),
        ((0, 0.0, 0), "0"),
        ((2, 3.456, 10), "2 (3.5s, 10 back)"),
        ((1, None, None), "1 (0.0s, 0 back)"),
        ((3, 1.0, 4, 2), "3 (1.0s, 4 back, 2 unrecovered)"),
        ((3, 1.0, 4, 0, 5), "3 (1.0s, 4 back, 5 lost)"),
        ((0, 0.0, 7), "0 (0.0s, 7 back)"),
        ((0, 0.0, 0, 0, 1), "0 (0.0s, 0 back, 1 lost)"),
    ],
)
def test_the_gaps_cell(args: tuple[Any, ...], cell: str) -> None:
    assert gaps_cell(*args) == cell


@pytest.mark.parametrize(
    ("args", "cell"),
    [
        ((None, None, None, None), "-"),
        ((True, 0, 0, 0), "ok"),
        ((False, 3, 0, 1), "3 missing, 1 differing"),
        ((False, 0, 2, 0), "2 extra"),
        ((False, 0, 0, 0), "not ok"),
    ],
)
def test_the_archive_cell(args: tuple[Any, ...], cell: str) -> None:
    assert archive_cell(*args) == cell


@pytest.mark.parametrize(
    ("stored", "counts"),
    [
        (None, (None, None, None, None)),
        ({"ok": "yes"}, (None, None, None, None)),
        ({"ok": True}, (True, 0, 0, 0)),
        ({"ok": False, "missing": ["a", "b"], "extra": ["c"]}, (False, 2, 1, 0)),
        ({"ok": False, "missing_count": 500, "missing": ["a"]}, (False, 500, 0, 0)),
    ],
)
def test_verification_counts_read_a_stored_verification(stored: Any, counts: tuple[Any, ...]) -> None:
    assert verification_counts(stored) == counts


@pytest.mark.parametrize(
    ("reason", "path"),
    [
        ("worker died (its liveness signal ended)", "death_seen"),
        ("worker lease expired", "lease_lapsed"),
        ("worker liveness signal lost", "lease_lapsed"),
        ("worker shutdown", "handoff"),
        ("heartbeat stale", None),
        (None, None),
    ],
)
def test_a_predecessors_closing_reason_names_the_takeover_path(reason: str | None, path: str | None) -> None:
    assert takeover.path_of(reason) == path


def test_the_cli_board_says_which_path_a_running_takeover_took() -> None:
    fields = {name: None for name in BoardEntry.__dataclass_fields__}
    common = {**fields, "match_id": "m", "league": "mlb", "sr_id": "sr:1", "match_status": "inprogress"}
    common |= {"attempts": 0, "exhausted": False, "pending": False, "auto_dispatch": True, "badge": "Running"}
    taken = BoardEntry(**{**common, "record_id": "r", "heartbeat_age_s": 1.0, "takeover": "death_seen"})
    plain = BoardEntry(**{**common, "record_id": "r2", "heartbeat_age_s": 1.0})
    lines = render_board([taken, plain])
    assert lines[1].rstrip().endswith("took over: death_seen")
    assert "took over" not in lines[2]
