"""The one check of text PostgreSQL can store (unstorable_text), and of a feed entry's text fields.

A provider document (schedule, league, players) is JSON: a text field may come as another type
(a number, an object), or as a string PostgreSQL refuses (a NUL character; a lone surrogate,
``"\\ud800"``, which JSON allows and UTF-8 cannot encode). Each is the entry's fault: checked here,
before the entry is written, so a loop sets that entry aside and stores the others, instead of
the write failing (and with it every entry after it). MalformedFeedEntry is a ValueError too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from config.errors import MalformedFeedEntry


def unstorable_text(value: Any) -> str | None:
    """Why ``value`` (a string, or JSON made of them, keys included) cannot be stored, or None.

    PostgreSQL stores no NUL in text or jsonb, and UTF-8 has no lone surrogate (``"\\ud800"`` is
    valid JSON but no text). The one check of both, for feed entries here and for requests
    (publisher.validation, run params, per-run settings), so bad text is refused naming its field
    instead of failing the write.
    """
    if isinstance(value, str):
        if "\x00" in value:
            return "contains a NUL character (\\u0000)"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "is not valid UTF-8 text (a lone surrogate, \\ud800-\\udfff)"
    elif isinstance(value, Mapping):
        for key, item in value.items():
            reason = unstorable_text(key) or unstorable_text(item)
            if reason:
                return reason
    elif isinstance(value, list | tuple):
        for item in value:
            reason = unstorable_text(item)
            if reason:
                return reason
    return None


def storable_text(value: str, field: str) -> str:
    """``value`` when PostgreSQL can store it; MalformedFeedEntry naming ``field`` when it cannot."""
    reason = unstorable_text(value)
    if reason:
        raise MalformedFeedEntry(f"{field} {reason}")
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
