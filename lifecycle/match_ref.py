"""The one resolver of a match reference (CLI argument, API path, console link): internal id, then sr_id.

Provider ids are often UUIDs themselves, so a UUID is not taken for the internal id on sight:
the reference is looked up as ``Match.id`` first and, when no match has that id, as
``Match.sr_id``. Every surface that takes a match calls ``resolve_match`` or
``resolve_match_id``; nothing else turns a reference into a match.
"""

from __future__ import annotations

from models.errors import MatchNotFound
from models.match import Match, match_by_reference


def match_not_found(ref: str) -> MatchNotFound:
    """The error of a reference no match has: also what a key limited to leagues is answered for another
    league's match (the same words, so the answer does not tell that the match exists)."""
    return MatchNotFound(f"no match with id or sr_id {str(ref).strip()!r}")


def resolve_match(ref: str) -> Match:
    """The Match (with its league) whose internal id, else whose sr_id, is ``ref``; MatchNotFound if none."""
    text = str(ref).strip()
    if not text:
        raise MatchNotFound("a match id or sr_id is required")
    found = match_by_reference(text)
    if found is None:
        raise match_not_found(text)
    return found


def resolve_match_id(ref: str) -> str:
    """The internal id (text) of the match ``ref`` names (see ``resolve_match``)."""
    return str(resolve_match(ref).id)
