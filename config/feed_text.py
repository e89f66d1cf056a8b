"""The one check of a feed's text: a string PostgreSQL can store, or MalformedFeedEntry saying why not.

A provider document (schedule, league, players) is JSON: a text field may come as another type
(a number, an object), or as a string PostgreSQL refuses (a NUL character; a lone surrogate,
``"\\ud800"``, which JSON allows and UTF-8 cannot encode). Each is the entry's fault: checked here,
before the entry is written, so a loop sets that entry aside and stores the others, instead of
the write failing (and with it every entry after it). MalformedFeedEntry is a ValueError too.
"""

from __future__ import annotations

from typing import Any

from config.errors import MalformedFeedEntry


def storable_text(value: str, field: str) -> str:
    """``value`` when PostgreSQL can store it; MalformedFeedEntry naming ``field`` when it cannot."""
    if "\x00" in value:
        raise MalformedFeedEntry(f"{field} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MalformedFeedEntry(f"{field} is not valid UTF-8 text ({exc.reason})") from None
    return value


def feed_text(value: Any, field: str) -> str | None:
    """A text field of a feed entry: None when absent or empty, else a storable string.

    MalformedFeedEntry naming ``field`` when it is another JSON type, or a string PostgreSQL
    cannot store.
    """
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise MalformedFeedEntry(f"{field} is a JSON {type(value).__name__}, not a string")
    return storable_text(value, field)


def feed_id(value: Any, field: str = "id") -> str:
    """A feed entry's id (a string or an integer) as text; MalformedFeedEntry when missing or unusable."""
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise MalformedFeedEntry(f"no {field}")
    return storable_text(str(value), field)
