"""A live board's rows: an entry the board's cache kept keeps its row object (the feed then knows the row
unchanged without comparing or rendering it again)."""

from __future__ import annotations

from types import SimpleNamespace

from api.console.board_view import rows_of
from lifecycle.board import BoardCache


def test_a_kept_entry_keeps_its_row_and_a_new_entry_gets_a_new_one() -> None:
    cache = BoardCache()
    one, two = SimpleNamespace(match_id="m1"), SimpleNamespace(match_id="m2")
    first = rows_of([one, two], cache)
    two_again = SimpleNamespace(match_id="m2")  # rebuilt by the reading (an open run's entry)
    second = rows_of([one, two_again], cache)
    assert second[0] is first[0] and second[1] is not first[1] and second[1].entry is two_again
    assert rows_of([two_again], cache)[0] is second[1] and set(cache.rows) == {"m2"}  # gone ones forgotten
    assert rows_of([one], None)[0] is not first[0]  # no cache (a page): new rows
