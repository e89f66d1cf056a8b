"""The one way tests wait for a condition: poll until it holds, fail with what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.05, what: str | None = None
) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or predicate}: not reached within {timeout} s")
        time.sleep(interval)
