"""A feed message's JSON, parsed by orjson, with the standard library's answer wherever the two differ.

The listener parses every stream line with it, and srsim every message it answers a play-by-play with.

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
from typing import Any

import orjson

#: Every digit as ``0``, every other byte as ``.``: a run of 19 digits is then a run of 19 ``0``.
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256))
#: 19 digits in a row: maybe an integer orjson cannot hold exactly (past -2**63 .. 2**64 - 1).
_LONG_NUMBER = b"0" * 19


def has_long_number(raw: bytes) -> bool:
    """Whether ``raw`` holds 19 digits in a row (anywhere, strings included: a conservative look).

    ``bytes.translate`` and a substring search, about ten times cheaper than the regular expression
    ``[0-9]{19}`` they replace (about 10 us for a 930-byte message, more than its JSON parsing).
    """
    return _LONG_NUMBER in raw.translate(_DIGITS_AS_ZEROS)


def loads(raw: bytes) -> Any:
    """``json.loads(raw)``: the same value, or the same error (ValueError: JSONDecodeError, or
    UnicodeDecodeError for bytes that are not UTF-8)."""
    if not has_long_number(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)
