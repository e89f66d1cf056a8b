"""``KEY=VALUE`` settings as operators type them (CLI options, console forms): values are JSON or text."""

from __future__ import annotations

import json
from typing import Any


def split_assignment(pair: str) -> tuple[str, Any] | None:
    """``(key, value)`` of ``KEY=VALUE`` (the value parsed as JSON when it is JSON), None when malformed."""
    key, sep, raw = pair.partition("=")
    if not sep or not key.strip():
        return None
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip(), value
