"""A match's event log as the spec's ``{shortcode}.json`` document, written a page at a time.

The document is the file archive's format: a JSON array, one message per line, every distinct
message once, in arrival order (kickoff's markers and its note on recovered messages as the
archive wrote them). A message jsonb could not hold is written from the bytes kept for it; a line
that was no readable message as its note (with the bytes in base64). ``export_lines`` is what
``kickoff matches export`` writes and ``GET /v1/matches/{id}/archive`` streams.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from lifecycle.match_ref import resolve_match
from listener.archive import shortcode_for
from models.event_log import LoggedRow, annotated, pages_of
from models.match import Match


def document_name(match: Match) -> str:
    """The document's file name: ``{shortcode}.json``."""
    return f"{shortcode_for(match.sr_id)}.json"


def _line(row: LoggedRow) -> bytes:
    if row.kind in ("resumed", "backfilled"):
        return json.dumps(annotated(row), separators=(",", ":"), ensure_ascii=False).encode()
    return row.text.encode("utf-8", "surrogatepass")


def export_lines(match_id: str) -> Iterator[bytes]:
    """The document of match ``match_id`` (an internal id), one chunk per line."""
    yield b"[\n"
    first = True
    for page in pages_of(match_id):
        for row in page:
            yield (b"" if first else b",") + _line(row) + b"\n"
            first = False
    yield b"]\n"


def export_match(match_ref: str, *, out: Path | None = None) -> tuple[Match, Path, int]:
    """Write the document of the match ``match_ref`` names to ``out`` (default ``./{shortcode}.json``);
    returns the match, the path and how many messages it holds. MatchNotFound for an unknown match."""
    match = resolve_match(match_ref)
    path = out or Path(document_name(match))
    count = 0
    tmp = path.with_name(path.name + ".part")
    with tmp.open("wb") as fh:
        for chunk in export_lines(str(match.id)):
            fh.write(chunk)
            count += 1
    tmp.replace(path)
    return match, path, count - 2
