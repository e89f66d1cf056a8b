"""The board's cells: gaps and archive verification in one short text each (pure functions)."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.board import archive_cell, gaps_cell, verification_counts


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
