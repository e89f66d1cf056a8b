"""Calls on other threads (the concurrency tests): one call raced on many threads released at the
same instant, or one call on a thread of its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from models.db import database


def race(
    call: Callable[[Callable[[], Any]], Any], *, callers: int, timeout: float = 60.0
) -> tuple[list[Any], list[Exception]]:
    """Run ``call(go)`` on ``callers`` threads; each calls ``go()`` once it is ready to race, which
    lets them all go at once. Returns the results and the exceptions raised; every thread's
    database connection is closed when its call ends."""
    barrier = threading.Barrier(callers)
    results: list[Any] = []
    errors: list[Exception] = []

    def one() -> None:
        try:
            results.append(call(barrier.wait))
        except Exception as exc:  # returned to the test
            errors.append(exc)
        finally:
            database.close()

    threads = [threading.Thread(target=one) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return results, errors


def on_own_thread(call: Callable[[], Any], *, limit: float) -> tuple[Any, float]:
    """Run ``call`` on a daemon thread of its own: (its result or the exception it raised, seconds
    taken); the test fails if it outlives ``limit``. The thread's database connection is left as
    it is (the pool tests count it)."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # handed back to the test
            box.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():  # a hung call keeps its connections: closing them here could block
        pytest.fail(f"still waiting after {limit:g}s")
    return box[0], time.monotonic() - started
