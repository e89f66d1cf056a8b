"""config.feed_text: the one check of a feed's text fields (service-free)."""

from __future__ import annotations

import pytest

from config.errors import MalformedFeedEntry
from config.feed_text import feed_id, feed_text


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"en": "Bills"}, "name is a JSON dict, not a string"),
        (12, "name is a JSON int, not a string"),
        ("Bi\x00lls", "name contains a NUL character"),
        ("\ud800x", "name is not valid UTF-8 text"),
    ],
)
def test_a_text_field_postgresql_cannot_store_is_malformed_naming_the_field(value, reason):
    with pytest.raises(MalformedFeedEntry, match=reason):
        feed_text(value, "name")


def test_an_absent_or_empty_text_is_none_and_a_storable_one_is_kept():
    assert feed_text(None, "name") is None and feed_text("", "name") is None
    assert feed_text("Bills é", "name") == "Bills é"


@pytest.mark.parametrize("value", [None, "", True, 1.5, {"id": 1}])
def test_an_id_that_is_neither_text_nor_an_integer_is_no_id(value):
    with pytest.raises(MalformedFeedEntry, match="no id"):
        feed_id(value)


def test_an_integer_id_is_text_and_one_with_a_lone_surrogate_is_refused():
    assert feed_id(42) == "42"
    with pytest.raises(MalformedFeedEntry, match="id is not valid UTF-8"):
        feed_id("sr:\udc00")
