"""A feed line's JSON (listener.feed_json): orjson's speed, json.loads's answer for every input."""

from __future__ import annotations

import json

import pytest

from listener import feed_json

pytestmark = pytest.mark.unit

LINES = [
    b'{"payload":{"event":{"id":"e1","type":"atbat","count":3,"x":1.5e-3}},"metadata":{"operation":"create"}}',
    b'{"a":1,"a":2}',  # a repeated key: the last one
    b'"a\\u0000b"',  # a NUL
    b'{"t":"\xc3\xa9\xe2\x82\xac"}',  # UTF-8
    b"18446744073709551615",  # the largest integer orjson holds
    b"123456789012345678901234567890",  # past 64 bits: orjson would read a float
    b"-9223372036854775809",
    b'{"id":"x","n":12345678901234567890123}',
    b"1e400",  # past a float's range: inf
    b"NaN",
    b'"\\ud800"',  # a lone surrogate
    b"\xef\xbb\xbf{}",  # a byte order mark
    b"\xff\xfe{",  # not UTF-8
    b"{not json",
    b"[1,2",
    b"",
]


def _answer(fn, raw: bytes) -> tuple[str, str]:
    try:
        return ("value", repr(fn(raw)))
    except ValueError as exc:
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("raw", LINES)
def test_a_line_parses_to_what_json_loads_gives_value_or_error(raw: bytes) -> None:
    assert _answer(feed_json.loads, raw) == _answer(json.loads, raw)
