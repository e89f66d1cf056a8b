"""A feed line's JSON, parsed by orjson, with the standard library's answer wherever the two differ.

``json.loads`` of a provider message was a third of the stream loop's CPU per event
(bench/stream_ingest.py); orjson parses it about three times faster. ``loads`` gives exactly what
``json.loads`` gives, value or error, for every input: orjson parses strict RFC 8259 JSON in UTF-8,
and refuses what the standard library accepts (NaN and Infinity, a number past a float's range, a
lone surrogate escape, a byte order mark, UTF-16 or UTF-32 text), which then goes to ``json.loads``;
an integer past 64 bits, which orjson would read as a float, never reaches it (a line with 19 digits
in a row goes to ``json.loads`` at once).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

#: 19 digits in a row: maybe an integer orjson cannot hold exactly (past -2**63 .. 2**64 - 1).
_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def loads(raw: bytes) -> Any:
    """``json.loads(raw)``: the same value, or the same error (ValueError: JSONDecodeError, or
    UnicodeDecodeError for bytes that are not UTF-8)."""
    if _LONG_NUMBER.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)
