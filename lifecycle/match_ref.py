"""The one resolver of a match reference (CLI argument, API path, console link): internal id, then sr_id.

Provider ids are often UUIDs themselves, so a UUID is not taken for the internal id on sight:
the reference is looked up as ``Match.id`` first and, when no match has that id, as
``Match.sr_id``. Every surface that takes a match calls ``resolve_match`` or
``resolve_match_id``; nothing else turns a reference into a match.
"""

from __future__ import annotations

from models.errors import MatchNotFound
from models.match import Match, match_by_reference


def resolve_match(ref: str) -> Match:
    """The Match (with its league) whose internal id, else whose sr_id, is ``ref``; MatchNotFound if none."""
    text = str(ref).strip()
    if not text:
        raise MatchNotFound("a match id or sr_id is required")
    found = match_by_reference(text)
    if found is None:
        raise MatchNotFound(f"no match with id or sr_id {text!r}")
    return found


def resolve_match_id(ref: str) -> str:
    """The internal id (text) of the match ``ref`` names (see ``resolve_match``)."""
    return str(resolve_match(ref).id)
