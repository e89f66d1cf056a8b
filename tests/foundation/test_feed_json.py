"""A feed line's JSON (config.feed_json): orjson's speed, json.loads's answer for every input."""

from __future__ import annotations

import json

import pytest

from config import feed_json

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


@pytest.mark.parametrize(
    ("raw", "long"),
    [
        (b"1234567890123456789", True),  # 19 digits
        (b'{"n":123456789012345678}', False),  # 18
        (b'{"n":-12345678901234567890}', True),
        (b'{"s":"x1234567890123456789y"}', True),  # in a string too: a conservative look
        (b"123456789.0123456789", False),  # two runs of 9 and 10
        (b"", False),
    ],
)
def test_a_long_number_is_19_digits_in_a_row(raw: bytes, long: bool) -> None:
    assert feed_json.has_long_number(raw) is long
